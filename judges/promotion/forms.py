"""Forms of the promotion page: observe, promote, renew, demote, thresholds. They validate; judges.promotion.services
writes."""

from django import forms

from judges.models import JudgeConfig, Run
from judges.promotion.services import (
    COUNT_THRESHOLDS,
    OPTIONAL_COUNT_THRESHOLDS,
    OPTIONAL_RATE_THRESHOLDS,
    RATE_THRESHOLDS,
    earlier_stages,
    threshold_errors,
)
from labeling.models import Rubric

REASON_HELP = "Kept in the audit log with who, when and the figures."


class _ReasonForm(forms.Form):
    reason = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), max_length=2000, help_text=REASON_HELP,
        error_messages={"required": "Type the reason for this change: the audit log keeps it."},
    )


class EvidenceChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, run: Run) -> str:
        external = " (external)" if run.config.external else ""
        finished = f"{run.finished_at:%Y-%m-%d %H:%M}" if run.finished_at else "—"
        return f"run {run.pk} · v{run.config.version}{external} on {run.dataset.slug} · K={run.repeats} · {finished}"


class ConfigChoiceField(forms.ModelChoiceField):
    def label_from_instance(self, config: JudgeConfig) -> str:
        note = f" · {config.note}" if config.note else ""
        return f"v{config.version} · saved {config.created_at:%Y-%m-%d %H:%M}{note}"


class ObserveForm(_ReasonForm):
    """The config version CI runs at observe, no evidence needed: entering observe, or switching at observe."""

    ENTER, SWITCH = "enter", "switch"
    # What the lead saw: if another lead moved the rubric meanwhile, the service refuses instead of
    # turning an entry into a switch (or the reverse).
    action = forms.ChoiceField(choices=[(ENTER, ENTER), (SWITCH, SWITCH)], widget=forms.HiddenInput)
    config = ConfigChoiceField(queryset=JudgeConfig.objects.none(), label="Judge config CI runs", empty_label=None)

    field_order = ["action", "config", "reason"]

    def __init__(self, *args, configs, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["config"].queryset = configs


class PromoteForm(_ReasonForm):
    # The stage the lead saw as next: if another lead moved the rubric meanwhile, the service refuses.
    to_stage = forms.ChoiceField(choices=Rubric.Stage.choices, widget=forms.HiddenInput)
    run = EvidenceChoiceField(queryset=Run.objects.none(), label="Evidence run", empty_label=None)

    field_order = ["to_stage", "run", "reason"]

    def __init__(self, *args, runs, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["run"].queryset = runs


class RenewForm(_ReasonForm):
    """New evidence at the current stage (docs/promotion.md: how recalibration clears without demotion)."""

    run = EvidenceChoiceField(queryset=Run.objects.none(), label="New evidence run", empty_label=None)

    field_order = ["run", "reason"]

    def __init__(self, *args, runs, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["run"].queryset = runs


class ReleaseForm(RenewForm):
    """The release tier's evidence (docs/promotion.md, "Tiers"): promoted, or renewed, at the rubric's stage."""


class WithdrawForm(_ReasonForm):
    """Withdraw the release tier: `--tier release` judges with the default judge again."""


class DemoteForm(_ReasonForm):
    to_stage = forms.ChoiceField(label="Demote to")

    field_order = ["to_stage", "reason"]

    def __init__(self, *args, rubric: Rubric, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["to_stage"].choices = [(stage, stage) for stage in reversed(earlier_stages(rubric.stage))]


_LABELS = {
    "min_cases": ("Cases with a human verdict, at least", 1),
    "min_repeats": ("Repeats K, at least", 1),
    "agreement_floor": ("Agreement floor (≥)", 0.1),
    "agreement_ceiling": ("Agreement ceiling (<)", 0.1),
    "min_true_pass_rate": ("True pass rate, at least", 0.1),
    "min_true_fail_rate": ("True fail rate, at least", 0.1),
    "max_flip_rate": ("Flip rate, at most", 0.1),
    "min_coverage": ("Coverage, at least", 0.1),
    "max_probe_moved": ("Verdicts moved by bias probes, at most", 0.1),
    "min_cases_per_kind": ("Cases of each calibration kind, at least", 1),
}


class PercentField(forms.FloatField):
    """A rate typed and shown in percent like the report (80 for 0.8); cleaned to the stored fraction."""

    def __init__(self, **kwargs) -> None:
        super().__init__(min_value=0, max_value=100, **kwargs)

    def prepare_value(self, value):
        # The stored fraction (initial) is shown as a percentage; typed text is shown as typed.
        if isinstance(value, int | float) and not isinstance(value, bool):
            return f"{value * 100:g}"
        return value

    def clean(self, value):
        percent = super().clean(value)
        return None if percent is None else round(percent / 100, 6)


class ThresholdsForm(_ReasonForm):
    fail_closed = forms.BooleanField(
        required=False, label="fail_closed: at gate stage, not evaluated counts as fail in CI",
    )
    # Asked the other way round from the rubric's `require_human_evidence`, so that a form posted
    # without the box (a script, an old page) keeps the safe default instead of relaxing the rule.
    without_human_evidence = forms.BooleanField(
        required=False,
        label="Without human evidence: a deterministic judge (contract checks only) may be promoted with no "
        "labels, its coverage counted over all its judgments (a judge with a model always needs them)",
    )

    # The same way round, for the same reason: a form posted without it keeps models pinned.
    allow_unpinned_models = forms.BooleanField(
        required=False,
        label="Allow unpinned models: the evidence config may name a model by an alias or a tag (a local model "
        "served under a tag), so the judge that gates could change under the rubric",
    )

    # The same way round again: a form posted without it keeps the rule.
    allow_judge_above_reviewers = forms.BooleanField(
        required=False,
        label="Allow a judge above the reviewers: do not refuse a judge that agrees with each reviewer's label "
        "more than the reviewers agree with each other (on purpose, say, when its prompt was written from "
        "the adjudications)",
    )

    # A form posted without it gates on every case, the safe default.
    gate_on = forms.ChoiceField(
        choices=Rubric.GateOn.choices, required=False, label="At gate stage, CI fails on",
        help_text="every case: any failing case fails the check; pass rate: the agent's pass rate corrected "
        "for the judge's errors (a non-deterministic judge only), failing cases still reported",
    )
    min_agent_pass_rate = PercentField(
        label="Agent's pass rate, at least (%)", required=False, widget=forms.NumberInput(attrs={"step": 0.1}),
        help_text="with pass rate: CI fails when the upper 95 % bound of the corrected rate is below it",
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for name in COUNT_THRESHOLDS:
            label, step = _LABELS[name]
            self.fields[name] = forms.IntegerField(
                label=label, min_value=1, widget=forms.NumberInput(attrs={"step": step})
            )
        for name in RATE_THRESHOLDS:
            label, step = _LABELS[name]
            self.fields[name] = PercentField(label=f"{label} (%)", widget=forms.NumberInput(attrs={"step": step}))
        for name in OPTIONAL_COUNT_THRESHOLDS:
            label, step = _LABELS[name]
            self.fields[name] = forms.IntegerField(
                label=label, min_value=1, required=False,
                help_text="good, bad, incomplete, injection and paraphrase each; blank: no such rule",
                widget=forms.NumberInput(attrs={"step": step}),
            )
        for name in OPTIONAL_RATE_THRESHOLDS:
            label, step = _LABELS[name]
            self.fields[name] = PercentField(
                label=f"{label} (%)", required=False, help_text="blank: no such rule",
                widget=forms.NumberInput(attrs={"step": step}),
            )
        self.order_fields([*COUNT_THRESHOLDS, *RATE_THRESHOLDS, *OPTIONAL_COUNT_THRESHOLDS, *OPTIONAL_RATE_THRESHOLDS,
                           "without_human_evidence", "allow_unpinned_models", "allow_judge_above_reviewers",
                           "fail_closed", "gate_on", "min_agent_pass_rate", "reason"])

    def clean(self) -> dict:
        data = super().clean()
        data["require_human_evidence"] = not data.pop("without_human_evidence", False)
        data["require_pinned_models"] = not data.pop("allow_unpinned_models", False)
        data["refuse_judge_above_reviewers"] = not data.pop("allow_judge_above_reviewers", False)
        data["gate_on"] = data.get("gate_on") or Rubric.GateOn.EVERY_CASE
        # A blank minimum is a value here: gating on the rate without one is refused beside the field.
        checked = {k: v for k, v in data.items() if v is not None or k == "min_agent_pass_rate"}
        for name, message in threshold_errors(checked).items():
            if name in self.fields and name not in self.errors:
                self.add_error(name, message)
        return data

    @staticmethod
    def initial_for(rubric: Rubric) -> dict:
        fields = (*COUNT_THRESHOLDS, *RATE_THRESHOLDS, *OPTIONAL_COUNT_THRESHOLDS, *OPTIONAL_RATE_THRESHOLDS,
                  "fail_closed", "gate_on", "min_agent_pass_rate")
        return {name: getattr(rubric, name) for name in fields} | {
            "without_human_evidence": not rubric.require_human_evidence,
            "allow_unpinned_models": not rubric.require_pinned_models,
            "allow_judge_above_reviewers": not rubric.refuse_judge_above_reviewers,
        }
