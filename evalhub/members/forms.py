from django import forms
from django.contrib.auth.forms import UserCreationForm
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.validators import validate_email
from django.utils import timezone

from evalhub.models import Invitation, Membership, Project, Role, Scope, User


class ProjectCreateForm(forms.ModelForm):
    """A new project and its first lead (the instance admin's form: naming an existing account here reveals
    nothing the admin cannot see anyway)."""

    lead = forms.CharField(
        label="First lead", max_length=150,
        help_text="The username of an existing account: they manage the project's members and tokens.",
    )

    class Meta:
        model = Project
        fields = ["name", "slug", "description"]
        widgets = {"description": forms.Textarea(attrs={"rows": 3})}
        help_texts = {
            "name": "What the team calls the agent or product it judges.",
            "slug": "Letters, digits, - and _; in every page's address (/p/<slug>/), commands and CI: it cannot "
                    "change later.",
        }

    def clean_slug(self) -> str:
        slug = self.cleaned_data["slug"]
        if Project.objects.filter(slug__iexact=slug).exists():
            raise forms.ValidationError(f"A project {slug!r} exists already: choose another slug.")
        return slug

    def clean_lead(self) -> User:
        username = self.cleaned_data["lead"].strip()
        user = User.objects.filter(username=username, is_active=True).first()
        if user is None:
            raise forms.ValidationError(f"No active account is named {username!r}: create it in the admin first.")
        return user


class InviteForm(forms.Form):
    invitee = forms.CharField(
        label="Username or e-mail address", max_length=254,
        help_text="A username for someone with an account here; an e-mail address sends a link to join, "
                  "which also works for someone without an account.",
    )
    role = forms.ChoiceField(choices=Role.choices, initial=Role.REVIEWER)

    def __init__(self, *args, project: Project, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.project = project

    def clean_invitee(self) -> str:
        """What was typed, checked for shape and against THIS project only (its members, its open invitations):
        never against other accounts, so the answer cannot tell whether one exists."""
        invitee = self.cleaned_data["invitee"].strip()
        if "@" in invitee:
            validate_email(invitee)
        else:
            UnicodeUsernameValidator()(invitee)
            if len(invitee) > 150:
                raise forms.ValidationError("A username has at most 150 characters.")
        members = Membership.objects.filter(project=self.project)
        if members.filter(user__username__iexact=invitee).exists() or (
            "@" in invitee and members.filter(user__email__iexact=invitee).exists()
        ):
            raise forms.ValidationError(f"{invitee} is a member of this project already.")
        waiting = Invitation.objects.filter(project=self.project, invitee__iexact=invitee, accepted_at__isnull=True,
                                            withdrawn_at__isnull=True, expires_at__gt=timezone.now())
        if waiting.exists():
            raise forms.ValidationError(f"An invitation of {invitee} is waiting already: withdraw it to send "
                                        "another.")
        return invitee


class RoleForm(forms.Form):
    role = forms.ChoiceField(choices=Role.choices)


class AssignmentsForm(forms.Form):
    datasets = forms.ModelMultipleChoiceField(
        queryset=None, required=False, widget=forms.CheckboxSelectMultiple, label="Datasets they label",
    )

    def __init__(self, *args, project: Project, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["datasets"].queryset = project.datasets.order_by("slug")
        self.fields["datasets"].label_from_instance = lambda dataset: dataset.slug


class TokenCreateForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What uses it, e.g. “CI of the support agent”.")
    # Each scope described without its name, which the page shows beside it.
    scopes = forms.MultipleChoiceField(
        choices=[(value, label.partition(" — ")[2] or label) for value, label in Scope.choices],
        widget=forms.CheckboxSelectMultiple, help_text="Give a token only what its job needs.",
    )


class JoinForm(UserCreationForm):
    """A new account that joins the invitation's project: Django's password validators apply. No e-mail address
    is asked for: an account's address makes the e-mail invitations to it acceptable from its projects page, so it
    is only ever one the account was sent a link at (the view sets it) or one the instance admin set."""

    class Meta(UserCreationForm.Meta):
        model = User
        fields = ("username",)
