"""The form that starts a judge improvement job."""

from decimal import Decimal

from django import forms

from judges.proposals.services import MAX_CANDIDATES


class ProposalForm(forms.Form):
    candidates = forms.IntegerField(min_value=1, max_value=MAX_CANDIDATES, initial=3, label="Candidates",
                                    widget=forms.NumberInput(attrs={"class": "auto-width"}))
    editor_model = forms.CharField(max_length=200, required=False, label="Editor model",
                                   help_text="A pinned model of the judge's provider; empty: the judge's own model.")
    seed = forms.IntegerField(min_value=0, max_value=2**31 - 1, initial=0, label="Seed",
                              widget=forms.NumberInput(attrs={"class": "auto-width"}))
    max_cost_usd = forms.DecimalField(min_value=Decimal("0.0001"), max_value=Decimal("100000"), max_digits=10,
                                      decimal_places=4, required=False, label="Spend cap (USD)",
                                      help_text="The editor and every candidate run together; empty: no cap.")


class DecisionForm(forms.Form):
    reason = forms.CharField(max_length=2000, required=False, widget=forms.Textarea(attrs={"rows": 2}))
