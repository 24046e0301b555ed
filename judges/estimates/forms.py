"""The run page's form that draws an audit sample."""

from django import forms

from judges.models import AuditDraw


class AuditSampleForm(forms.Form):
    size = forms.IntegerField(min_value=1, max_value=100_000, initial=200, label="Cases to label",
                              widget=forms.NumberInput(attrs={"class": "auto-width"}))
    method = forms.ChoiceField(
        widget=forms.Select(attrs={"class": "auto-width"}),
        choices=[(AuditDraw.Method.UNIFORM, "uniform: every case equally likely"),
                 (AuditDraw.Method.ACTIVE, "active: more of the cases the judge is unsure of")],
        initial=AuditDraw.Method.UNIFORM,
    )
