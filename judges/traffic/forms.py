from django import forms

from labeling.models import Dataset


class TrafficJudgingForm(forms.Form):
    """Turn traffic judging of a dataset on or off for the rubric whose page this is; the reason is audited."""

    dataset = forms.ModelChoiceField(queryset=Dataset.objects.order_by("slug"), to_field_name="slug")
    enabled = forms.TypedChoiceField(choices=[("on", "on"), ("off", "off")], coerce=lambda value: value == "on",
                                     label="Traffic judging")
    reason = forms.CharField(max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))
