"""The policy pages' forms: the next version's text, and a new policy's slug with its first text."""

from django import forms

from labeling.datasets.forms import _clean_slug
from labeling.models import PolicyDocument

MAX_POLICY_CHARS = 200_000


class PolicyForm(forms.Form):
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 18, "spellcheck": "false"}), strip=False,
                           max_length=MAX_POLICY_CHARS)


class NewPolicyForm(PolicyForm):
    slug = forms.SlugField(max_length=100, help_text="Fixed once saved: configs and the agent name the policy by it.")
    field_order = ["slug", "text"]

    def clean_slug(self) -> str:
        slug = _clean_slug(self.cleaned_data["slug"])
        if PolicyDocument.objects.filter(slug=slug).exists():
            raise forms.ValidationError("A policy with this slug exists: write its next version from its page.")
        return slug
