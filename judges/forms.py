"""Forms of the judges pages. The engine validates a config (judges.engine.JudgeConfig.from_dict); these
forms only turn fields into its dict and back, and put its ValueError on the field it names.
"""

import json
from decimal import Decimal
from typing import Any

from django import forms

from judges.engine import CONTRACT_CHECKS, DEFAULT_PROMPT_TEMPLATE
from judges.engine.config import LAYERS, OUTPUT_KINDS, PROVIDERS
from judges.models import ModelPrice
from labeling.models import Dataset

DEFAULT_PARAMS = {"temperature": 0, "max_tokens": 400}


def _unix_newlines(text: str) -> str:
    # Browsers send textareas with \r\n: left alone, a re-saved template would hash differently.
    return text.replace("\r\n", "\n").replace("\r", "\n")


class TextArea(forms.CharField):
    """Multi-line text kept exactly as typed, but with \\n line ends."""

    def __init__(self, *, rows: int = 4, **kwargs: Any) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("strip", False)
        super().__init__(widget=forms.Textarea(attrs={"rows": rows, "spellcheck": "false"}), **kwargs)

    def to_python(self, value: Any) -> str:
        return _unix_newlines(super().to_python(value))


class JsonText(TextArea):
    """JSON typed in a textarea; blank means null."""

    def to_python(self, value: Any) -> Any:
        text = super().to_python(value).strip()
        if not text:
            return None
        try:
            return json.loads(text)
        except ValueError as exc:
            raise forms.ValidationError(f"This is not valid JSON: {exc}") from None

    def prepare_value(self, value: Any) -> Any:
        if value is None or isinstance(value, str):
            return value
        return json.dumps(value, indent=2, ensure_ascii=False)


class LinesField(TextArea):
    """One entry (a regular expression) per line; blank lines are dropped."""

    def to_python(self, value: Any) -> list[str]:
        return [line for line in super().to_python(value).split("\n") if line.strip()]

    def prepare_value(self, value: Any) -> Any:
        return "\n".join(value) if isinstance(value, list | tuple) else value


def _blank_to_none(value: str) -> str | None:
    value = (value or "").strip()
    return value or None


class JudgeConfigForm(forms.Form):
    """Every field of a judge config but the rubric and its criteria, which the service copies in."""

    layers = forms.MultipleChoiceField(
        choices=[(x, x) for x in LAYERS], widget=forms.CheckboxSelectMultiple,
        help_text="Contract checks run first; a failed one decides fail without calling a model.",
    )
    contract_checks = forms.MultipleChoiceField(
        choices=[(c, c) for c in CONTRACT_CHECKS], widget=forms.CheckboxSelectMultiple, required=False,
    )
    must_match = LinesField(rows=2, help_text="Regular expressions the answer must match, one per line.")
    must_not_match = LinesField(rows=2, help_text="Regular expressions the answer must not match, one per line.")
    json_schema = JsonText(rows=3, label="JSON Schema",
                           help_text="A JSON Schema the answer must validate against (for json_schema).")
    provider = forms.ChoiceField(
        choices=[("", "— none (no behavioral layer) —"), *((p, p) for p in PROVIDERS)], required=False,
    )
    model = forms.CharField(
        max_length=200, required=False,
        help_text="A pinned snapshot (gpt-4o-mini-2024-07-18, claude-haiku-4-5-20251001): an alias can change "
        "under the gate.",
    )
    model_family = forms.CharField(
        max_length=50, required=False, help_text="Only where the model's name says nothing (a local model).",
    )
    prompt_template = TextArea(rows=14, initial=DEFAULT_PROMPT_TEMPLATE)
    policy = TextArea(rows=4, help_text="The policy or context text the judge grades against.")
    params = JsonText(rows=2, initial=json.dumps(DEFAULT_PARAMS), help_text="Model parameters, a JSON object.")
    output_kind = forms.ChoiceField(choices=[(k, k) for k in OUTPUT_KINDS], initial="verdict")
    pass_score = forms.IntegerField(min_value=1, max_value=5, initial=4,
                                    help_text="For scores: every score must reach it.")
    timeout_s = forms.FloatField(min_value=0.1, max_value=600, initial=30.0, label="Timeout (s)")
    max_attempts = forms.IntegerField(min_value=1, max_value=10, initial=3)
    base_url_env = forms.CharField(
        max_length=100, required=False, label="Base URL variable",
        help_text="The NAME of the environment variable holding the endpoint (openai-compatible), never the URL.",
    )
    api_key_env = forms.CharField(
        max_length=100, required=False, label="API key variable",
        help_text="The NAME of the environment variable holding the key, never the key.",
    )
    secondary = JsonText(
        rows=4,
        help_text='Optional: {"role": "fallback" | "second_opinion", "provider": …, "model": …, '
        '"when": {"mode": "always"}}. Blank: none.',
    )
    note = forms.CharField(max_length=300, required=False, help_text="What this version changes, for the list.")

    @classmethod
    def initial_from_spec(cls, spec: dict) -> dict:
        initial = {name: spec.get(name) for name in cls.base_fields if name in spec}
        for name in ("provider", "model", "model_family", "base_url_env", "api_key_env"):
            initial[name] = initial.get(name) or ""
        return initial

    def to_spec(self) -> dict:
        """The engine's config dict (without rubric and criteria) from the cleaned fields."""
        data = self.cleaned_data
        return {
            "layers": data["layers"],
            "contract_checks": data["contract_checks"],
            "must_match": data["must_match"],
            "must_not_match": data["must_not_match"],
            "json_schema": data["json_schema"],
            "provider": _blank_to_none(data["provider"]),
            "model": _blank_to_none(data["model"]),
            "model_family": _blank_to_none(data["model_family"]),
            "prompt_template": data["prompt_template"] or DEFAULT_PROMPT_TEMPLATE,
            "policy": data["policy"],
            "params": data["params"] if data["params"] is not None else {},
            "output_kind": data["output_kind"],
            "pass_score": data["pass_score"],
            "timeout_s": data["timeout_s"],
            "max_attempts": data["max_attempts"],
            "base_url_env": _blank_to_none(data["base_url_env"]),
            "api_key_env": _blank_to_none(data["api_key_env"]),
            "secondary": data["secondary"],
        }

    def add_engine_error(self, error: ValueError) -> None:
        """The engine names the field first ("params.temperature: …"): show its message on that field."""
        message = str(error)
        name = message.split(":", 1)[0].split(".", 1)[0].strip()
        self.add_error(name if name in self.fields else None, message)


class PreviewForm(forms.Form):
    """Which case the prompt preview is filled in from: a dataset and one of its external_ids."""

    preview_dataset = forms.ModelChoiceField(
        queryset=Dataset.objects.order_by("slug"), required=False, label="Dataset", to_field_name="slug",
    )
    preview_case = forms.CharField(
        max_length=200, required=False, label="Case external_id",
        help_text="Blank: the dataset's first case.",
    )


class RunStartForm(forms.Form):
    dataset = forms.ModelChoiceField(queryset=Dataset.objects.order_by("slug"), to_field_name="slug")
    repeats = forms.IntegerField(
        min_value=1, max_value=20, initial=2,
        help_text="Each case is judged this many times (K); promotion needs K ≥ 2 to measure flips.",
    )
    concurrency = forms.IntegerField(min_value=1, max_value=64, initial=4, help_text="Calls in flight at once.")
    spend_cap_usd = forms.DecimalField(
        min_value=Decimal("0.01"), max_digits=10, decimal_places=4, required=False, label="Spend cap (USD)",
        help_text="Optional. Once reached, the rest is not evaluated (“spend cap”).",
    )


class ModelPriceForm(forms.ModelForm):
    class Meta:
        model = ModelPrice
        fields = ["model", "input_per_mtok", "output_per_mtok"]
        labels = {
            "input_per_mtok": "Input (USD per million tokens)",
            "output_per_mtok": "Output (USD per million tokens)",
        }

    def clean_model(self) -> str:
        return self.cleaned_data["model"].strip()
