"""The synthetic-cases form: on the dataset page (through its template tag) and on its own page."""

from django import forms

from judges.models import JudgeConfig
from judges.synthetic.selectors import editor_configs
from judges.synthetic.writing import MAX_CASES, MAX_SEED, SYNTHETIC_TYPES
from labeling.models import Dataset

TYPE_LABELS = {
    "adversarial": "adversarial: injected instructions, pressure, edge dates and amounts",
    "near_miss": "near misses: one condition short of what the policy allows (or refuses)",
    "ordinary": "ordinary requests",
}


class SynthesisForm(forms.Form):
    n = forms.IntegerField(min_value=1, max_value=MAX_CASES, initial=10, label="How many cases")
    types = forms.MultipleChoiceField(choices=[(kind, TYPE_LABELS[kind]) for kind in SYNTHETIC_TYPES],
                                      initial=list(SYNTHETIC_TYPES), widget=forms.CheckboxSelectMultiple)
    policies = forms.MultipleChoiceField(widget=forms.CheckboxSelectMultiple, required=False,
                                         label="Policy documents",
                                         help_text="The dataset's own are ticked; tick others to write from them too.")
    from_failed_dev = forms.BooleanField(required=False, label="Also show the editor the dev cases the reviewers "
                                                               "failed (never holdout)")
    seed = forms.IntegerField(required=False, min_value=0, max_value=MAX_SEED,
                              help_text="Varies the cases; empty: a fresh one, recorded on each case.")
    editor_config = forms.TypedChoiceField(coerce=int, label="Editor: the primary of",
                                           help_text="A judge config's model writes the cases.")
    editor_model = forms.CharField(required=False, max_length=200, label="or another pinned model",
                                   help_text="Leave empty to use the config's own.")

    def __init__(self, *args, dataset: Dataset, **kwargs) -> None:
        kwargs.setdefault("initial", {})
        kwargs["initial"].setdefault("policies", dataset.policies)
        super().__init__(*args, **kwargs)
        # The dataset's own project's policy documents and judge configs only (docs/projects.md).
        slugs = dataset.project.policies.order_by("slug").values_list("slug", flat=True).distinct()
        self.fields["policies"].choices = [(slug, slug) for slug in slugs]
        self.configs = {config.pk: config for config in editor_configs(project=dataset.project)}
        self.fields["editor_config"].choices = [
            (config.pk, f"{config.rubric.slug} v{config.version} · {config.spec.get('model')}")
            for config in self.configs.values()
        ]

    def editor(self) -> JudgeConfig:
        return self.configs[self.cleaned_data["editor_config"]]
