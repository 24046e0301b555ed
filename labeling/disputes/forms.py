"""The disputes' form: a lead's decision."""

from django import forms

from labeling.models import Verdict


class AdjudicateForm(forms.Form):
    verdict = forms.ChoiceField(choices=Verdict.choices)
    note = forms.CharField(required=False, max_length=5000)
