from decimal import Decimal
from typing import cast

from django import forms

from evalhub.models import Project
from judges.models import Channel, Monitor
from judges.monitoring.delivery import CHANNEL_ENV_PREFIX
from labeling.models import Dataset, Rubric


class MonitorForm(forms.Form):
    """A new monitor: the rubric and dataset are the project's own; shares are typed as percentages."""

    slug = forms.SlugField(max_length=60)
    rubric = forms.ModelChoiceField(queryset=Rubric.objects.none(), to_field_name="slug")
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.none(), to_field_name="slug")
    sample_percent = forms.DecimalField(min_value=Decimal("0.01"), max_value=Decimal(100), initial=100,
                                       label="Sample (% of new cases judged)")
    window = forms.ChoiceField(choices=Monitor.Window.choices)
    spend_cap_usd = forms.DecimalField(required=False, min_value=Decimal("0.0001"), max_digits=10, decimal_places=4,
                                       label="Daily spend cap ($)")
    concurrency = forms.IntegerField(min_value=1, max_value=64, initial=4)
    labels_per_window = forms.IntegerField(min_value=1, max_value=100_000, initial=150, label="Audit labels per window")
    expected_cases = forms.IntegerField(min_value=1, max_value=100_000_000, initial=1000,
                                        label="Cases expected in the first window")
    digest = forms.BooleanField(required=False, label="Weekly digest")

    def __init__(self, *args, project: Project, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ModelChoiceField, self.fields["rubric"]).queryset = project.rubrics.order_by("slug")
        cast(forms.ModelChoiceField, self.fields["dataset"]).queryset = project.datasets.order_by("slug")


class MonitorSettingsForm(forms.Form):
    sample_percent = forms.DecimalField(min_value=Decimal("0.01"), max_value=Decimal(100),
                                       label="Sample (% of new cases judged)")
    spend_cap_usd = forms.DecimalField(required=False, min_value=Decimal("0.0001"), max_digits=10, decimal_places=4,
                                       label="Daily spend cap ($)")
    concurrency = forms.IntegerField(min_value=1, max_value=64)
    labels_per_window = forms.IntegerField(min_value=1, max_value=100_000, label="Audit labels per window")
    digest = forms.BooleanField(required=False, label="Weekly digest")
    enabled = forms.BooleanField(required=False, label="Judging on")


class BaselineForm(forms.Form):
    starts = forms.MultipleChoiceField(required=False, label="Baseline windows")

    def __init__(self, *args, monitor: Monitor, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        cast(forms.ChoiceField, self.fields["starts"]).choices = [(d.date().isoformat(), d.date().isoformat())
                                         for d in monitor.windows.values_list("start", flat=True)]


class ChannelForm(forms.Form):
    """A channel names where its address and secret live (environment variables on the server), never holds them."""

    name = forms.CharField(max_length=100)
    kind = forms.ChoiceField(choices=Channel.Kind.choices)
    addresses = forms.CharField(required=False, max_length=2000, label="E-mail addresses (comma-separated)")
    url_env = forms.CharField(required=False, max_length=100, label="Variable holding the webhook URL",
                              help_text=f"A variable of the server whose name starts {CHANNEL_ENV_PREFIX}.")
    secret_env = forms.CharField(required=False, max_length=100, label="Variable holding the signing secret")
