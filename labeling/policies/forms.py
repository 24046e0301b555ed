"""The policy pages' forms: the next version's text, and a new policy's slug with its first text."""

from django import forms

from evalhub.models import Project
from labeling.datasets.forms import _clean_slug

MAX_POLICY_CHARS = 200_000


class PolicyForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 18, "spellcheck": "false"}), strip=False,
                           max_length=MAX_POLICY_CHARS)


class NewPolicyForm(PolicyForm):
    slug = forms.SlugField(max_length=100, help_text="Fixed once saved: configs and the agent name the policy by it.")
    field_order = ["slug", "text"]

    def __init__(self, *args, project: Project, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.project = project

    def clean_slug(self) -> str:
        """Unique within the project: another project's policy of the same slug is neither refused nor named."""
        slug = _clean_slug(self.cleaned_data["slug"])
        if self.project.policies.filter(slug=slug).exists():
            raise forms.ValidationError("This project has a policy with this slug: write its next version from "
                                        "its page.")
        return slug
