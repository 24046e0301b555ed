"""Forms of the judges pages. The engine validates a config (judges.engine.JudgeConfig.from_dict); these
forms only turn fields into its dict and back, and put its ValueError on the field it names.
"""

import json
from typing import Any

from django import forms

from evalhub.models import Project
from evalhub.params import has_nul
from judges.engine import CONTRACT_CHECKS, DEFAULT_PROMPT_TEMPLATE
from judges.engine.config import LAYERS, OUTPUT_KINDS, PROVIDERS, parse_examples
from judges.engine.escalation import ESCALATION_ROLES, SECOND_OPINION_MODES
from judges.engine.semantic import SEMANTIC_FIELDS, SEMANTIC_PROVIDERS
from judges.models import ModelPrice, Tier
from labeling.importing.reading import json_error, parse_json
from labeling.models import Dataset, PolicyDocument

DEFAULT_PARAMS = {"temperature": 0, "max_tokens": 400}
# The judges beside the primary: (field, title, what it does), in the editor's order.
OTHER_JUDGES = (
    ("fallback", "Fallback", "Answers only when the judge cannot (down, timing out, answering nonsense)."),
    ("second_opinion", "Second opinion",
     "Judges too, from another model family, when any of the modes below asks; where the two disagree the "
     "judgment is contested."),
    ("adjudicator", "Adjudicator",
     "Decides where the judge and the second opinion disagree: its verdict is the case's (the judgment stays "
     "contested, keeping all three). Any family; usually a stronger model. Without one, humans decide."),
)
WHEN_LABELS = {
    "always": "always: on every judgment",
    "sample": "on a rotating sample: a share of the cases each run, every case within ⌈1 / share⌉ runs",
    "borderline": "on borderline verdicts: scores within one point of the pass score, or a similarity within "
                  "0.05 under pass at",
    "safety": "on safety-critical categories",
}
# An other judge's fields and the `when` fields, by the name the engine gives them in its errors.
JUDGE_FIELDS = ("provider", "model", "model_family", "base_url_env", "api_key_env", "params")
WHEN_FIELDS = ("mode", "categories", "share")


def _judge_fields(role: str) -> dict[str, forms.Field]:
    """The editor's fields of one judge beside the primary (`fallback_model`, …): set when its model is."""
    return {
        f"{role}_provider": forms.ChoiceField(
            choices=[("", "—"), *((p, p) for p in PROVIDERS)], required=False, label="Provider"),
        f"{role}_model": forms.CharField(
            max_length=200, required=False, label="Model",
            help_text="Blank: none." + (
                " Of another model family than the judge (gpt-… is openai, claude-… anthropic, gemini-… google, "
                "llama… meta): a second deployment of the same family is no second opinion."
                if role == "second_opinion" else "")),
        f"{role}_model_family": forms.CharField(
            max_length=50, required=False, label="Model family",
            help_text="Only where the model's name says nothing (a local model)."),
        f"{role}_base_url_env": forms.CharField(
            max_length=100, required=False, label="Base URL variable",
            help_text="The NAME of the variable holding its endpoint (openai-compatible), never the URL."),
        f"{role}_api_key_env": forms.CharField(
            max_length=100, required=False, label="API key variable",
            help_text="The NAME of the variable holding its key, never the key."),
        f"{role}_params": JsonText(
            rows=2, label="Parameters",
            help_text="Blank: the judge's temperature and max_tokens (its other parameters may be vendor-specific)."),
    }


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
            value = parse_json(text)
        except ValueError as exc:
            raise forms.ValidationError(f"This is not valid JSON: {json_error(exc)}") from None
        if has_nul(value):  # the text field refuses a NUL character; a \u0000 escape decodes to one
            raise forms.ValidationError("A string in this JSON holds a NUL character (\\u0000): it cannot be stored.")
        return value

    def prepare_value(self, value: Any) -> Any:
        if value is None or isinstance(value, str):
            return value
        return json.dumps(value, indent=2, ensure_ascii=False)


def preview_examples(value: Any) -> tuple[tuple[dict[str, Any], ...], str]:
    """The editor's examples for its live preview (the JSON typed, or the base version's list when prefilled):
    (the examples, "") when a save would take them, ((), why) when not: the preview then goes without them."""
    why = "The examples are left out of this preview"
    if isinstance(value, str):
        if not value.strip():
            return (), ""
        try:
            value = parse_json(value.replace("\r\n", "\n"))
        except ValueError as exc:
            return (), f"{why}: they are not valid JSON: {json_error(exc)}."
    try:
        return parse_examples(value), ""
    except ValueError as exc:
        return (), f"{why}: {exc}."


class LinesField(TextArea):
    """One entry (a regular expression) per line; blank lines are dropped."""

    def to_python(self, value: Any) -> list[str]:
        return [line for line in super().to_python(value).split("\n") if line.strip()]

    def prepare_value(self, value: Any) -> Any:
        return "\n".join(value) if isinstance(value, list | tuple) else value


def _policy_ref(choice: str) -> dict | None:
    """"returns@2" → {"slug": "returns", "version": 2}; blank → None."""
    if not choice:
        return None
    slug, _, version = choice.rpartition("@")
    return {"slug": slug, "version": int(version)}


def _blank_to_none(value: str) -> str | None:
    value = (value or "").strip()
    return value or None


class JudgeConfigForm(forms.Form):
    """Every field of a judge config but the rubric and its criteria, which the service copies in."""

    layers = forms.MultipleChoiceField(
        choices=[(x, x) for x in LAYERS], widget=forms.CheckboxSelectMultiple,
        help_text="Cheapest first: a failed contract check decides fail without calling a model; a similarity "
        "beyond a threshold decides without calling the judge.",
    )
    contract_checks = forms.MultipleChoiceField(
        choices=[(c, c) for c in CONTRACT_CHECKS], widget=forms.CheckboxSelectMultiple, required=False,
    )
    must_match = LinesField(rows=2, help_text="Regular expressions the answer must match, one per line.")
    must_not_match = LinesField(rows=2, help_text="Regular expressions the answer must not match, one per line.")
    json_schema = JsonText(rows=3, label="JSON Schema",
                           help_text="A JSON Schema the answer must validate against (for json_schema).")
    # The safety contracts, each for its check of the same name.
    allowed_tools = LinesField(rows=2, help_text="Tools the agent may call, one per line (for allowed_tools): "
                               "any other call fails.")
    forbidden_tools = LinesField(rows=2, help_text="Tools the agent must never call, one per line "
                                 "(for forbidden_tools).")
    max_tool_calls = forms.IntegerField(
        min_value=0, max_value=10_000, required=False, label="Max tool calls",
        help_text="The most tool calls one answer may make (for max_tool_calls).",
    )
    secret_patterns = LinesField(
        rows=2, help_text="For no_secrets: regular expressions of your own credentials, one per line, added to the "
        "built-in shapes (API keys, cloud keys, private keys, JWTs, bearer tokens).",
    )
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
    policy_ref = forms.ChoiceField(
        required=False, label="Policy document",
        help_text="A policy document version: its text is copied into the config (with its sha256), and the "
        "text below is ignored. A newer version of the policy makes this config's runs stale.",
    )
    policy = TextArea(rows=4, help_text="The policy or context text the judge grades against (without a policy "
                      "document).")
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
        help_text="The NAME of the environment variable holding the key, never the key: OPENAI_API_KEY, "
        "ANTHROPIC_API_KEY, a name starting EVALHUB_JUDGE_, or one the operator allows (EVALHUB_JUDGE_ENV_ALLOW).",
    )
    # The semantic layer, field by field (the engine's `semantic` object).
    semantic_provider = forms.ChoiceField(
        choices=[("", "—"), *((p, p) for p in SEMANTIC_PROVIDERS)], required=False, label="Provider",
        help_text="An OpenAI-style embeddings endpoint: OpenAI, or Ollama, vLLM, TEI… as openai-compatible.",
    )
    semantic_model = forms.CharField(max_length=200, required=False, label="Embeddings model",
                                     help_text="text-embedding-3-small, nomic-embed-text, …")
    semantic_model_family = forms.CharField(max_length=50, required=False, label="Model family",
                                            help_text="Only where the model's name says nothing.")
    semantic_base_url_env = forms.CharField(
        max_length=100, required=False, label="Base URL variable",
        help_text="The NAME of the variable holding its endpoint (openai-compatible), never the URL.",
    )
    semantic_api_key_env = forms.CharField(
        max_length=100, required=False, label="API key variable",
        help_text="The NAME of the variable holding its key, never the key (blank: OPENAI_API_KEY for openai).",
    )
    semantic_dimensions = forms.IntegerField(
        min_value=1, required=False, label="Dimensions", help_text="Blank: the model's own length.",
    )
    semantic_pass_at = forms.FloatField(
        min_value=0, max_value=1, required=False, label="Pass at",
        help_text="A cosine similarity from 0 to 1: at or above it the case passes without the judge.",
    )
    semantic_fail_below = forms.FloatField(
        min_value=0, max_value=1, required=False, label="Fail below",
        help_text="Optional, with the behavioral layer: below it the case fails without the judge; between the "
        "two the judge decides. Without a judge, every case below “pass at” fails.",
    )
    # The second opinion's modes (the engine's `second_opinion.when`); the judges' own fields come in __init__.
    when_modes = forms.MultipleChoiceField(
        choices=[(m, WHEN_LABELS[m]) for m in SECOND_OPINION_MODES], required=False,
        widget=forms.CheckboxSelectMultiple, label="Asked", help_text="Any of these; none chosen: always.",
    )
    when_categories = forms.CharField(
        max_length=500, required=False, label="Categories",
        help_text="Comma-separated, for “safety-critical categories” (adversarial, policy, …).",
    )
    when_share = forms.FloatField(
        required=False, label="Share", min_value=0.0, max_value=1.0,
        help_text="For “a rotating sample”: 0.2 asks on a fifth of the cases each run, another fifth the next.",
    )
    # A judge improvement's additions (docs/improving.md), kept by an edit of a version that has them.
    guidance = TextArea(rows=3, help_text="Added to the judge's instructions (a kept proposal's, or your own).")
    examples = JsonText(rows=3, help_text="Labeled cases shown to the judge: a JSON list of {external_id, input, "
                        "output, verdict, reason}; their cases never count in this version's figures.")
    note = forms.CharField(max_length=300, required=False, help_text="What this version changes, for the list.")
    tier = forms.ChoiceField(
        choices=Tier.choices, initial=Tier.DEFAULT, required=False,
        help_text="default: the judge CI runs on pull requests. release: a stronger judge, promoted with its own "
        "evidence, that CI's release job runs (evalhub-gate check --tier release). An edit keeps its version's tier.",
    )

    def __init__(self, *args: Any, project: Project, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for role in ESCALATION_ROLES:
            self.fields.update(_judge_fields(role))
        # Every version of the project's policies, newest first within a slug: one query.
        versions = (PolicyDocument.objects.filter(project=project).order_by("slug", "-version")
                    .values_list("slug", "version"))
        self.fields["policy_ref"].choices = [("", "— none: the text below —"), *(
            (f"{slug}@{version}", f"{slug} v{version}") for slug, version in versions
        )]

    @classmethod
    def initial_from_spec(cls, spec: dict) -> dict:
        initial = {name: spec.get(name) for name in cls.base_fields if name in spec}
        ref = spec.get("policy_ref")
        initial["policy_ref"] = f"{ref['slug']}@{ref['version']}" if ref else ""
        for name in ("provider", "model", "model_family", "base_url_env", "api_key_env"):
            initial[name] = initial.get(name) or ""
        initial.update(_other_judges_initial(spec))
        for name, value in (spec.get("semantic") or {}).items():
            initial[f"semantic_{name}"] = "" if value is None and name not in ("dimensions", "fail_below") else value
        return initial

    def clean_tier(self) -> str:
        return self.cleaned_data["tier"] or Tier.DEFAULT  # a form posted without it (a script) saves the default tier

    def clean_json_schema(self) -> Any:
        schema = self.cleaned_data["json_schema"]
        # jsonschema picks its draft by looking the $schema value up: anything but a string breaks that.
        if isinstance(schema, dict) and not isinstance(schema.get("$schema", ""), str):
            raise forms.ValidationError("$schema must be a string: the URI of a JSON Schema draft.")
        return schema

    def _semantic_spec(self) -> dict | None:
        """The engine's `semantic` object from the fields, or None without the semantic layer."""
        data = self.cleaned_data
        if "semantic" not in data["layers"]:
            return None
        return {
            "provider": data["semantic_provider"] or None,  # the engine names a missing one
            "model": data["semantic_model"].strip(),
            "model_family": _blank_to_none(data["semantic_model_family"]),
            "base_url_env": _blank_to_none(data["semantic_base_url_env"]),
            "api_key_env": _blank_to_none(data["semantic_api_key_env"]),
            "dimensions": data["semantic_dimensions"],
            "pass_at": data["semantic_pass_at"],
            "fail_below": data["semantic_fail_below"],
        }

    def _judge_spec(self, role: str) -> dict | None:
        """The engine's object of one judge beside the primary from its fields, or None when no model is named."""
        data = self.cleaned_data
        if not data[f"{role}_model"].strip():
            return None
        judge = {
            "provider": data[f"{role}_provider"] or None,  # the engine names a missing one
            "model": data[f"{role}_model"].strip(),
            "model_family": _blank_to_none(data[f"{role}_model_family"]),
            "base_url_env": _blank_to_none(data[f"{role}_base_url_env"]),
            "api_key_env": _blank_to_none(data[f"{role}_api_key_env"]),
            "params": data[f"{role}_params"] if data[f"{role}_params"] is not None else {},
        }
        if role == "second_opinion":
            when: list[dict[str, Any]] = []
            for mode in data["when_modes"] or ["always"]:
                one: dict[str, Any] = {"mode": mode}
                if mode == "safety":
                    one["categories"] = [c.strip() for c in data["when_categories"].split(",") if c.strip()]
                if mode == "sample":
                    one["share"] = data["when_share"]
                when.append(one)
            judge["when"] = when
        return judge

    def judge_sections(self) -> list[tuple[str, str, str, list[forms.BoundField]]]:
        """(role, title, what it does, its bound fields) of each judge beside the primary, for the template."""
        return [
            (role, title, about, [self[f"{role}_{name}"] for name in JUDGE_FIELDS])
            for role, title, about in OTHER_JUDGES
        ]

    def to_spec(self) -> dict:
        """The engine's config dict (without rubric and criteria) from the cleaned fields."""
        data = self.cleaned_data
        return {
            "layers": data["layers"],
            "contract_checks": data["contract_checks"],
            "must_match": data["must_match"],
            "must_not_match": data["must_not_match"],
            "json_schema": data["json_schema"],
            "allowed_tools": data["allowed_tools"],
            "forbidden_tools": data["forbidden_tools"],
            "max_tool_calls": data["max_tool_calls"],
            "secret_patterns": data["secret_patterns"],
            "provider": _blank_to_none(data["provider"]),
            "model": _blank_to_none(data["model"]),
            "model_family": _blank_to_none(data["model_family"]),
            "prompt_template": data["prompt_template"] or DEFAULT_PROMPT_TEMPLATE,
            "policy": data["policy"],
            "policy_ref": _policy_ref(data["policy_ref"]),
            "params": data["params"] if data["params"] is not None else {},
            "output_kind": data["output_kind"],
            "pass_score": data["pass_score"],
            "timeout_s": data["timeout_s"],
            "max_attempts": data["max_attempts"],
            "base_url_env": _blank_to_none(data["base_url_env"]),
            "api_key_env": _blank_to_none(data["api_key_env"]),
            # The editor writes the new form: an older `secondary` saved again is a new version.
            "secondary": None,
            "semantic": self._semantic_spec(),
            **{role: self._judge_spec(role) for role in ESCALATION_ROLES},
            "guidance": data["guidance"],
            "examples": data["examples"] or [],
        }

    def add_engine_error(self, error: ValueError) -> None:
        """The engine names the field first ("params.temperature: …"): show its message on that field.

        Another judge's are "fallback.model: …" and "second_opinion.when[0].share: …"; its own checks
        ("second_opinion: …", the same-family refusal above all) go on its model. A refusal of environment
        variable names carries one message per variable, each put on its field.
        """
        for message in getattr(error, "messages", None) or [str(error)]:
            self._add_engine_message(message)

    def _add_engine_message(self, message: str) -> None:
        path = message.split(":", 1)[0].strip().split(".")
        name = path[0]
        if name == "semantic":
            name = f"semantic_{path[1]}" if len(path) >= 2 and path[1] in SEMANTIC_FIELDS else "semantic_model"
        elif name in ESCALATION_ROLES:
            inner = path[1].split("[")[0] if len(path) >= 2 else ""
            if inner == "when":
                last = path[-1] if len(path) >= 3 else ""
                name = f"when_{last}" if last in ("categories", "share") else "when_modes"
            elif inner in JUDGE_FIELDS:
                name = f"{name}_{inner}"
            else:
                name = f"{name}_model"
        self.add_error(name if name in self.fields else None, message)


def _other_judges_initial(spec: dict) -> dict[str, Any]:
    """The editor's fields of the judges beside the primary, from a spec: its fallback, second_opinion and
    adjudicator, or an older `secondary` read as the one it names (its `categories` mode as `safety`)."""
    judges = {role: spec.get(role) for role in ESCALATION_ROLES}
    secondary = spec.get("secondary")
    if secondary:
        judges[secondary.get("role", "fallback")] = secondary
        if secondary.get("role") == "second_opinion":
            when = dict(secondary.get("when") or {"mode": "always"})
            if when.get("mode") == "categories":
                when["mode"] = "safety"
            judges["second_opinion"] = {**secondary, "when": [when]}
    initial: dict[str, Any] = {}
    for role, judge in judges.items():
        if not judge:
            continue
        for name in JUDGE_FIELDS:
            initial[f"{role}_{name}"] = judge.get(name) or ("" if name != "params" else None)
    when_list = (judges.get("second_opinion") or {}).get("when") or []
    initial["when_modes"] = [w.get("mode") for w in when_list]
    initial["when_categories"] = ", ".join(c for w in when_list for c in (w.get("categories") or []))
    initial["when_share"] = next((w.get("share") for w in when_list if w.get("mode") == "sample"), None)
    return initial


class PreviewForm(forms.Form):
    """The prompt preview's case picker: a dataset and a search over its cases. The chosen case comes as
    `preview_case` (a Case pk, from the picker's list) and is read raw: judges.configs.selectors.preview_case
    says what is wrong with a bad one, in the preview."""

    preview_dataset = forms.ModelChoiceField(
        queryset=Dataset.objects.none(), required=False, label="Dataset", to_field_name="slug",
    )
    preview_q = forms.CharField(
        max_length=200, required=False, label="Find a case",
        widget=forms.TextInput(attrs={"type": "search", "placeholder": "id or words of the question",
                                      "autocomplete": "off"}),
    )

    def __init__(self, *args: Any, project: Project, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # The project's datasets only: another project's slug is no dataset here (the preview asks for one).
        self.fields["preview_dataset"].queryset = project.datasets.order_by("slug")

    def picked(self) -> tuple[Dataset | None, str, str]:
        """(dataset, search, chosen case id) as posted, else as the initial values say."""
        if not self.is_bound:
            return self.initial.get("preview_dataset"), "", ""
        self.is_valid()  # an unknown dataset leaves none (the preview asks for one); a too-long search, none
        return (self.cleaned_data.get("preview_dataset"), self.cleaned_data.get("preview_q", ""),
                self.data.get("preview_case", ""))


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
