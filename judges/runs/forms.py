"""The form that starts a run."""

from decimal import Decimal
from typing import Any

from django import forms

from evalhub.models import Project
from labeling.models import Dataset


class RunStartForm(forms.Form):
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.none(), to_field_name="slug")
    repeats = forms.IntegerField(
        min_value=1, max_value=20, initial=2,
        help_text="Each case is judged this many times (K); promotion needs K ≥ 2 to measure flips.",
    )
    concurrency = forms.IntegerField(min_value=1, max_value=64, initial=4, help_text="Calls in flight at once.")
    # Made when the form is shown: posting the same form twice (a double click, a resubmit) starts one run.
    start_token = forms.UUIDField(
        widget=forms.HiddenInput,
        error_messages={
            "required": "This form has no start token: reload the page and start the run again.",
            "invalid": "This form's start token is not valid: reload the page and start the run again.",
        },
    )
    spend_cap_usd = forms.DecimalField(
        min_value=Decimal("0.01"), max_digits=10, decimal_places=4, required=False, label="Spend cap (USD)",
        help_text="Optional. Once reached, the rest is not evaluated (“spend cap”).",
    )
    fresh = forms.BooleanField(
        required=False, label="Judge again, ignoring cached verdicts",
        help_text="A fresh run: every judgment is asked anew and kept apart from the cache, so it shows the judge's "
        "run-to-run noise, or a model changed behind its pinned name. Nothing cached is reused or overwritten.",
    )

    def __init__(self, *args: Any, project: Project, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The project's datasets only: a rubric judges its own project's (another's slug is no choice here).
        self.fields["dataset"].queryset = project.datasets.order_by("slug")
