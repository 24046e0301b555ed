from django import forms

from evalhub.models import Project
from labeling.models import Dataset


class TrafficJudgingForm(forms.Form):
    """Turn traffic judging of a dataset on or off for the rubric whose page this is; the reason is audited. The
    datasets are the project's own: a rubric judges its project's traffic only."""

    dataset = forms.ModelChoiceField(queryset=Dataset.objects.none(), to_field_name="slug")
    enabled = forms.TypedChoiceField(choices=[("on", "on"), ("off", "off")], coerce=lambda value: value == "on",
                                     label="Traffic judging")
    reason = forms.CharField(max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))

    def __init__(self, *args, project: Project, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["dataset"].queryset = project.datasets.order_by("slug")
