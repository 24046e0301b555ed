"""A project's people and tokens (its leads' pages), the instance admin's new-project page, and the invitation
pages an invitee opens (docs/projects.md)."""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_not_required
from django.db import transaction
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import urlencode
from django.views.decorators.http import require_http_methods, require_POST

from evalhub.access import admin_required, lead_required
from evalhub.http import HtmxHttpRequest
from evalhub.members import services
from evalhub.members.forms import (
    AssignmentsForm,
    InviteForm,
    JoinForm,
    ProjectCreateForm,
    RoleForm,
    TokenCreateForm,
)
from evalhub.members.selectors import (
    invitation_by_token,
    invitations_for,
    members_of,
    membership_in,
    open_invitations,
    recent_changes,
    tokens_of,
)
from evalhub.models import ApiToken, Project, Role

# The account a joining invitee is logged in with: the one backend that checks passwords (the throttling backend
# refuses, it never authenticates).
_LOGIN_BACKEND = "django.contrib.auth.backends.ModelBackend"


# --- the instance admin: new projects -------------------------------------------------------------------------


@admin_required
@require_http_methods(["GET", "POST"])
def project_create(request: HttpRequest) -> HttpResponse:
    form = ProjectCreateForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        project = services.project_create(slug=data["slug"], name=data["name"], description=data["description"],
                                          lead=data["lead"], by=request.user)
        messages.success(request, f"Project {project.name} created, with {data['lead'].username} as its lead.")
        return redirect("members:members", project=project.slug)
    return render(request, "evalhub/project_create.html", {"form": form})


# --- a project's members --------------------------------------------------------------------------------------


def _members_page(request: HtmxHttpRequest, project: Project, *, invite_form: InviteForm | None = None,
                  invited=None, invite_link: str = "", mail: str = "") -> HttpResponse:
    members = members_of(project=project)
    leads = sum(1 for member in members if member.role == Role.LEAD)
    for member in members:
        # The page offers no demotion or removal the service would refuse: it says why instead.
        member.only_lead = member.role == Role.LEAD and leads == 1
    context = {
        "members": members,
        "datasets": list(project.datasets.order_by("slug").only("pk", "slug", "name")),
        "invitations": open_invitations(project=project),
        "events": recent_changes(project=project),
        "invite_form": invite_form or InviteForm(project=project),
        "roles": Role.choices,
        "invited": invited,
        "invite_link": invite_link,
        "mail": mail,
        "invitation_days": settings.EVALHUB_INVITATION_DAYS,
    }
    return render(request, "evalhub/members.html", context)


@lead_required
def members(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    return _members_page(request, project)


@lead_required
@require_POST
def member_invite(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    """Invite by username or e-mail. The answer is the same whatever the text matches, account or none, member
    of another project or not: the page is rendered here (not redirected) only so that an e-mail invitation's
    link can be shown this once, and never kept."""
    form = InviteForm(request.POST, project=project)
    if not form.is_valid():
        return _members_page(request, project, invite_form=form)
    invitation, raw = services.invitation_create(project=project, invitee=form.cleaned_data["invitee"],
                                                 role=form.cleaned_data["role"], by=request.user)
    link, mail = "", ""
    if invitation.by_email:
        link = request.build_absolute_uri(reverse("members:invitation", args=[raw]))
        mail = services.invitation_send(invitation=invitation, link=link)
    return _members_page(request, project, invited=invitation, invite_link=link, mail=mail)


def _membership_or_404(project: Project, membership_id: int):
    membership = membership_in(project=project, membership_id=membership_id)
    if membership is None:
        raise Http404("No such member.")
    return membership


@lead_required
@require_POST
def member_role(request: HtmxHttpRequest, project: Project, membership_id: int) -> HttpResponse:
    membership = _membership_or_404(project, membership_id)
    form = RoleForm(request.POST)
    if not form.is_valid():
        messages.error(request, "Choose a role among those shown.")
        return redirect("members:members", project=project.slug)
    role = form.cleaned_data["role"]
    try:
        changed = services.membership_set_role(membership=membership, role=role, by=request.user)
    except services.MembersRefused as refused:
        messages.error(request, str(refused))
        return redirect("members:members", project=project.slug)
    if changed:
        messages.success(request, f"{membership.user.username} is now a {role} of {project.name}.")
    if membership.user == request.user and role != Role.LEAD and not request.user.is_superuser:
        return redirect("project_home", project=project.slug)  # no longer a lead: this page is closed to them
    return redirect("members:members", project=project.slug)


@lead_required
@require_POST
def member_remove(request: HtmxHttpRequest, project: Project, membership_id: int) -> HttpResponse:
    membership = _membership_or_404(project, membership_id)
    try:
        services.membership_remove(membership=membership, by=request.user)
    except services.MembersRefused as refused:
        messages.error(request, str(refused))
        return redirect("members:members", project=project.slug)
    messages.success(request, f"{membership.user.username} is no longer a member of {project.name}; their labels "
                              "stay and keep counting.")
    if membership.user == request.user and not request.user.is_superuser:
        return redirect("home")
    return redirect("members:members", project=project.slug)


@lead_required
@require_POST
def member_datasets(request: HtmxHttpRequest, project: Project, membership_id: int) -> HttpResponse:
    membership = _membership_or_404(project, membership_id)
    form = AssignmentsForm(request.POST, project=project)
    if not form.is_valid():
        messages.error(request, "Choose among this project's datasets.")
        return redirect("members:members", project=project.slug)
    try:
        changed = services.assignments_set(membership=membership, datasets=list(form.cleaned_data["datasets"]),
                                           by=request.user)
    except services.MembersRefused as refused:
        messages.error(request, str(refused))
        return redirect("members:members", project=project.slug)
    if changed:
        count = len(form.cleaned_data["datasets"])
        messages.success(request, f"{membership.user.username} labels {count} dataset{'s' if count != 1 else ''} "
                                  f"of {project.name}.")
    return redirect(reverse("members:members", args=[project.slug]) + f"#member-{membership.pk}")


@lead_required
@require_POST
def invitation_withdraw(request: HtmxHttpRequest, project: Project, invitation_id: int) -> HttpResponse:
    invitation = get_object_or_404(project.invitations, pk=invitation_id)
    if services.invitation_withdraw(invitation=invitation, by=request.user):
        messages.success(request, f"The invitation of {invitation.invitee} is withdrawn: its link no longer works.")
    else:
        messages.info(request, f"The invitation of {invitation.invitee} was no longer open.")
    return redirect("members:members", project=project.slug)


# --- a project's API tokens -----------------------------------------------------------------------------------


def _tokens_page(request: HtmxHttpRequest, project: Project, *, form: TokenCreateForm | None = None,
                 created: ApiToken | None = None, plain_token: str = "") -> HttpResponse:
    context = {
        "tokens": tokens_of(project=project),
        "form": form or TokenCreateForm(),
        "created": created,
        "plain_token": plain_token,
    }
    return render(request, "evalhub/tokens.html", context)


@lead_required
def tokens(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    return _tokens_page(request, project)


@lead_required
@require_POST
def token_create(request: HtmxHttpRequest, project: Project) -> HttpResponse:
    """A new token of this project, shown in this response only: it is never stored (a redirect would have to keep
    it somewhere to show it)."""
    form = TokenCreateForm(request.POST)
    if not form.is_valid():
        return _tokens_page(request, project, form=form)
    token, raw = services.token_create(project=project, name=form.cleaned_data["name"],
                                       scopes=form.cleaned_data["scopes"], by=request.user)
    response = _tokens_page(request, project, created=token, plain_token=raw)
    response["Cache-Control"] = "no-store"  # nor in the browser's cache
    return response


@lead_required
@require_POST
def token_revoke(request: HtmxHttpRequest, project: Project, token_id: int) -> HttpResponse:
    token = get_object_or_404(ApiToken.objects.filter(project=project), pk=token_id)
    if services.token_revoke(token=token, by=request.user):
        messages.success(request, f"Token {token.name} ({token.prefix}…) is revoked: the API refuses it from now on.")
    else:
        messages.info(request, f"Token {token.name} was revoked already.")
    return redirect("members:tokens", project=project.slug)


# --- invitations, from the invitee's side ---------------------------------------------------------------------


def _waiting_for(request: HttpRequest, invitation_id: int):
    """An open invitation naming the signed-in user (their username or e-mail address); 404 for any other."""
    for invitation in invitations_for(request.user):
        if invitation.pk == invitation_id:
            return invitation
    raise Http404("No such invitation.")


@require_POST
def invitation_accept(request: HttpRequest, invitation_id: int) -> HttpResponse:
    invitation = _waiting_for(request, invitation_id)
    try:
        services.invitation_accept(invitation=invitation, user=request.user)
    except services.InvitationClosed:
        raise Http404("No such invitation.") from None
    except services.MembersRefused as refused:
        messages.info(request, str(refused))
        return redirect("home")
    messages.success(request, f"Welcome to {invitation.project.name}: you joined as {invitation.role}.")
    return redirect("project_home", project=invitation.project.slug)


@require_POST
def invitation_decline(request: HttpRequest, invitation_id: int) -> HttpResponse:
    invitation = _waiting_for(request, invitation_id)
    services.invitation_withdraw(invitation=invitation, by=request.user, declined=True)
    messages.info(request, f"You declined the invitation to {invitation.project.name}.")
    return redirect("home")


def _closed_invitation(request: HttpRequest) -> HttpResponse:
    # One answer for an unknown, used, withdrawn or expired link: the link tells nothing about which.
    return render(request, "evalhub/invitation_closed.html", status=404)


@login_not_required
@require_http_methods(["GET", "POST"])
def invitation(request: HttpRequest, token: str) -> HttpResponse:
    """An invitation's link: join as the signed-in user, or create an account that joins. Works once."""
    found = invitation_by_token(token)
    if found is None:
        return _closed_invitation(request)
    signed_in = request.user.is_authenticated
    member = signed_in and found.project.memberships.filter(user=request.user).exists()
    form = None if signed_in else JoinForm(request.POST or None)
    if request.method == "POST" and not member:
        if signed_in:
            user = request.user
        elif form.is_valid():
            user = None
        else:
            return _invitation_page(request, found, token=token, form=form, member=member)
        try:
            with transaction.atomic():  # an account made for an invitation that closed meanwhile is not kept
                if user is None:
                    user = form.save(commit=False)
                    # The address the link was sent to: whoever holds the link answers for that mailbox.
                    user.email = found.invitee if found.by_email else ""
                    user.save()
                services.invitation_accept(invitation=found, user=user)
        except services.InvitationClosed:
            return _closed_invitation(request)
        except services.MembersRefused:  # joined meanwhile, from another tab: the invitation is still open
            return redirect("project_home", project=found.project.slug)
        if not signed_in:
            login(request, user, backend=_LOGIN_BACKEND)
        messages.success(request, f"Welcome to {found.project.name}: you joined as {found.role}.")
        return redirect("project_home", project=found.project.slug)
    return _invitation_page(request, found, token=token, form=form, member=member)


def _invitation_page(request: HttpRequest, invitation, *, token: str, form, member: bool) -> HttpResponse:
    context = {"invitation": invitation, "form": form, "member": member,
               "login_url": f"{reverse('login')}?{urlencode({'next': reverse('members:invitation', args=[token])})}"}
    response = render(request, "evalhub/invitation.html", context)
    response["Cache-Control"] = "no-store"
    return response
