"""The judge config: one immutable, JSON-able version of how a rubric is judged.

The app stores it whole, the gate config ships it whole and CI runs it. `config_hash` covers
everything that can change a verdict and the NAMES of the environment variables that hold the
endpoint and the key (`base_url_env`, `api_key_env`; never their values): a config whose only
change is its key variable is a new version. Fields at their default are left out of what is
hashed, so a field added later does not change the hash of configs that do not use it.
"""

import copy
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import jsonschema

from . import fields
from .cache import cache_scope
from .canonical import canonical_json, sha256_hex
from .credentials import compile_secret_pattern, contract_rules
from .escalation import JudgeSpec, SecondOpinion
from .families import model_family
from .prompt import DEFAULT_PROMPT_TEMPLATE, PROMPT_TEMPLATE_V1, check_prompt_template
from .secondary import PROVIDERS, SECONDARY_MODES, SECONDARY_ROLES, SecondaryJudge
from .semantic import SemanticLayer

LAYERS: tuple[str, ...] = ("contract", "semantic", "behavioral")
CONTRACT_CHECKS: tuple[str, ...] = (
    "answer_present",
    "expected_tool",
    "expected_tool_argument",
    "no_tool_when_none_expected",
    "expected_source",
    "must_match",
    "must_not_match",
    "json_schema",
    "allowed_tools",
    "forbidden_tools",
    "max_tool_calls",
    "no_secrets",
)
OUTPUT_KINDS: tuple[str, ...] = ("verdict", "scores")
# Left out of the hash while at their default: configs that do not use them keep their hash.
# (The env names were once left out whatever their value; migration 0004 rewrote the stored hashes.)
HASHED_ONLY_WHEN_SET: dict[str, Any] = {
    "base_url_env": None,
    "api_key_env": None,
    "allowed_tools": [],
    "forbidden_tools": [],
    "max_tool_calls": None,
    "secret_patterns": [],
    "semantic": None,
    "policy_ref": None,
    "policy_sha256": None,
    "fallback": None,
    "second_opinion": None,
    "adjudicator": None,
    "guidance": "",
    "examples": [],
}
# Written out (to_dict, so the gate config) only when set: a config without them keeps its old shape.
ESCALATION_FIELDS: tuple[str, ...] = ("fallback", "second_opinion", "adjudicator")
# A proposal's additions to the judge (docs/improving.md): a few labeled dev cases at most, short guidance.
MAX_EXAMPLES = 8
MAX_GUIDANCE_CHARS = 4000
EXAMPLE_FIELDS: tuple[str, ...] = ("external_id", "input", "output", "verdict", "reason")

_FIELDS = (
    "rubric",
    "criteria",
    "layers",
    "contract_checks",
    "must_match",
    "must_not_match",
    "json_schema",
    "allowed_tools",
    "forbidden_tools",
    "max_tool_calls",
    "secret_patterns",
    "provider",
    "model",
    "model_family",
    "prompt_template",
    "policy",
    "policy_ref",
    "policy_sha256",
    "params",
    "output_kind",
    "pass_score",
    "timeout_s",
    "max_attempts",
    "base_url_env",
    "api_key_env",
    "secondary",
    "semantic",
    "fallback",
    "second_opinion",
    "adjudicator",
    "guidance",
    "examples",
)

# Re-exported: the config's words, wherever they are defined.
__all__ = [
    "CONTRACT_CHECKS",
    "HASHED_ONLY_WHEN_SET",
    "LAYERS",
    "OUTPUT_KINDS",
    "PROVIDERS",
    "SECONDARY_MODES",
    "SECONDARY_ROLES",
    "JudgeConfig",
    "SecondaryJudge",
    "JudgeSpec",
    "SecondOpinion",
    "config_hash",
]


def _policy_ref(d: dict, policy: str) -> tuple[dict[str, Any] | None, str | None]:
    """The policy document reference and the sha256 of its text, both or neither; the hash must be the
    text's, so CI judges with exactly the policy the config was calibrated on."""
    ref, sha = d.get("policy_ref"), d.get("policy_sha256")
    if ref is None and sha is None:
        return None, None
    if ref is None:
        raise ValueError("policy_sha256: given without policy_ref")
    if not isinstance(ref, dict):
        raise ValueError("policy_ref: expected an object {slug, version} or null")
    fields.reject_unknown(ref, ("slug", "version"), where="policy_ref.")
    slug = fields.nonempty_string(ref, "slug", where="policy_ref.")
    if not fields.SLUG_RE.match(slug):
        raise ValueError(f"policy_ref.slug: must be a slug, got {slug!r}")
    version = ref.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError("policy_ref.version: must be a whole number, 1 or more")
    if sha != sha256_hex(policy):
        raise ValueError("policy_sha256: does not match the sha256 of the policy text")
    return {"slug": slug, "version": version}, sha


@dataclass(frozen=True)
class JudgeConfig:
    """How one rubric is judged. Build it with `from_dict`, which validates every field."""

    rubric: str
    criteria: str
    layers: tuple[str, ...]
    contract_checks: tuple[str, ...] = ()
    must_match: tuple[str, ...] = ()
    must_not_match: tuple[str, ...] = ()
    json_schema: dict[str, Any] | None = None
    allowed_tools: tuple[str, ...] = ()
    forbidden_tools: tuple[str, ...] = ()
    max_tool_calls: int | None = None
    secret_patterns: tuple[str, ...] = ()
    provider: str | None = None
    model: str | None = None
    model_family: str | None = None
    prompt_template: str = DEFAULT_PROMPT_TEMPLATE
    policy: str = ""
    # A policy document version (docs/words.md): `policy` is its text and `policy_sha256` that text's hash.
    policy_ref: dict[str, Any] | None = None
    policy_sha256: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    output_kind: str = "verdict"
    pass_score: int = 4
    timeout_s: float = 30.0
    max_attempts: int = 3
    base_url_env: str | None = None
    api_key_env: str | None = None
    secondary: SecondaryJudge | None = None
    semantic: SemanticLayer | None = None
    fallback: JudgeSpec | None = None
    second_opinion: SecondOpinion | None = None
    adjudicator: JudgeSpec | None = None
    # Added to the judge's instructions, and labeled cases shown to it, by a kept or proposed improvement
    # (docs/improving.md); the examples' cases never count in the figures of the config's runs.
    guidance: str = ""
    examples: tuple[dict[str, Any], ...] = ()

    @classmethod
    def from_dict(cls, d: Any) -> "JudgeConfig":
        """Validate a config dict; a ValueError names the field at fault.

        A `config_hash` key may ride along (the gate config carries one): it must match the content.
        """
        if isinstance(d, JudgeConfig):
            return d
        if not isinstance(d, dict):
            raise ValueError("config: expected an object")
        fields.reject_unknown(d, (*_FIELDS, "config_hash"))
        rubric = fields.nonempty_string(d, "rubric")
        if not fields.SLUG_RE.match(rubric):
            raise ValueError(f"rubric: must be a slug (letters, digits, - and _), got {rubric!r}")
        layers = _layers(d)
        # In this order, so a config with several faults is told the first one it always was.
        semantic = _semantic(d, layers)
        contract = _contract(d, layers)
        behavioral = _behavioral(d, layers)
        policy = fields.string(d, "policy", default="")
        policy_ref, policy_sha256 = _policy_ref(d, policy)
        cfg = cls(
            rubric=rubric,
            criteria=fields.string(d, "criteria"),
            layers=layers,
            **contract,
            **behavioral,
            model_family=fields.string(d, "model_family", required=False),
            policy=policy,
            policy_ref=policy_ref,
            policy_sha256=policy_sha256,
            params=fields.params(d),
            output_kind=fields.choice(d, "output_kind", OUTPUT_KINDS, default="verdict"),
            pass_score=fields.integer(d, "pass_score", 4, 1, 5),
            max_attempts=fields.integer(d, "max_attempts", 3, 1, 10),
            api_key_env=fields.env_name(d, "api_key_env"),
            semantic=semantic,
            **_improvements(d, layers),
        )
        claimed = d.get("config_hash")
        if claimed is not None and claimed != cfg.config_hash:
            raise ValueError("config_hash: does not match the config's content (was it edited after hashing?)")
        return cfg

    def to_dict(self, *, include_hash: bool = False) -> dict[str, Any]:
        """Every field, defaults filled in (fallback, second_opinion, adjudicator, guidance and examples only
        when set, so a config without them keeps the shape older CI commands read); `include_hash` adds
        `config_hash`, as the gate config ships it."""
        d: dict[str, Any] = {
            "rubric": self.rubric,
            "criteria": self.criteria,
            "layers": list(self.layers),
            "contract_checks": list(self.contract_checks),
            "must_match": list(self.must_match),
            "must_not_match": list(self.must_not_match),
            "json_schema": copy.deepcopy(self.json_schema),
            "allowed_tools": list(self.allowed_tools),
            "forbidden_tools": list(self.forbidden_tools),
            "max_tool_calls": self.max_tool_calls,
            "secret_patterns": list(self.secret_patterns),
            "provider": self.provider,
            "model": self.model,
            "model_family": self.model_family,
            "prompt_template": self.prompt_template,
            "policy": self.policy,
            "policy_ref": copy.deepcopy(self.policy_ref),
            "policy_sha256": self.policy_sha256,
            "params": copy.deepcopy(self.params),
            "output_kind": self.output_kind,
            "pass_score": self.pass_score,
            "timeout_s": self.timeout_s,
            "max_attempts": self.max_attempts,
            "base_url_env": self.base_url_env,
            "api_key_env": self.api_key_env,
            "secondary": self.secondary.to_dict() if self.secondary else None,
            "semantic": self.semantic.to_dict() if self.semantic else None,
        }
        for name in ESCALATION_FIELDS:
            judge = getattr(self, name)
            if judge is not None:
                d[name] = judge.to_dict()
        # Only when set: a stored spec and the gate config of a config without them read as they always did,
        # and an evalhub-gate older than these fields still reads it.
        if self.guidance:
            d["guidance"] = self.guidance
        if self.examples:
            d["examples"] = copy.deepcopy(list(self.examples))
        if include_hash:
            d["config_hash"] = self.config_hash
        return d

    @cached_property
    def config_hash(self) -> str:
        payload = _hashed(self.to_dict())
        for name in ("secondary", *ESCALATION_FIELDS):
            if payload.get(name) is not None:
                payload[name] = _hashed(payload[name])
        return sha256_hex(canonical_json(payload))

    @cached_property
    def cache_scope(self) -> str:
        """What this config's judgments are cached under (cache.cache_scope): its hash and, when it runs
        `no_secrets`, the identity of that check's rules, so a verdict of older rules is never reused."""
        return cache_scope(self.config_hash, contract_rules() if "no_secrets" in self.contract_checks else "")

    @property
    def family(self) -> str:
        return model_family(self.model, self.model_family)

    @cached_property
    def fallback_judge(self) -> JudgeSpec | None:
        """The judge that answers when the primary cannot: `fallback`, or a legacy `secondary` fallback."""
        s = self.secondary
        if s is not None and s.role == "fallback":
            return JudgeSpec(s.provider, s.model, s.model_family, s.base_url_env, s.api_key_env, s.params)
        return self.fallback

    @cached_property
    def second_opinion_judge(self) -> SecondOpinion | None:
        """The judge that also judges: `second_opinion`, or a legacy `secondary` second opinion (its rules kept)."""
        s = self.secondary
        if s is not None and s.role == "second_opinion":
            return SecondOpinion.from_secondary(s)
        return self.second_opinion


def _hashed(d: dict[str, Any]) -> dict[str, Any]:
    return {
        k: v
        for k, v in d.items()
        if k != "config_hash" and not (k in HASHED_ONLY_WHEN_SET and v == HASHED_ONLY_WHEN_SET[k])
    }


def config_hash(d_or_cfg: "dict[str, Any] | JudgeConfig") -> str:
    """sha256 hex of the canonical JSON of the config, without config_hash and unused optional fields.

    A dict is validated and its defaults filled first, so a dict and its `to_dict()` hash alike.
    """
    return JudgeConfig.from_dict(d_or_cfg).config_hash


# ---- the steps of JudgeConfig.from_dict: each validates a group of fields that depend on one another ----


def _layers(d: dict) -> tuple[str, ...]:
    layers_in = d.get("layers")
    if not isinstance(layers_in, list | tuple) or not layers_in:
        raise ValueError("layers: expected a non-empty list drawn from contract, semantic, behavioral")
    bad = [x for x in layers_in if x not in LAYERS]
    if bad or len(set(layers_in)) != len(layers_in):
        raise ValueError(f"layers: each of contract, semantic, behavioral at most once; got {list(layers_in)!r}")
    return tuple(x for x in LAYERS if x in layers_in)  # the cheaper layers always run first


def _semantic(d: dict, layers: tuple[str, ...]) -> SemanticLayer | None:
    if "semantic" not in layers:
        if d.get("semantic") is not None:
            raise ValueError("semantic: given, but the semantic layer is not in layers")
        return None
    if d.get("semantic") is None:
        raise ValueError("semantic: the semantic layer needs its embeddings model and pass_at")
    semantic = SemanticLayer.from_dict(d["semantic"])
    if semantic.fail_below is not None and "behavioral" not in layers:
        raise ValueError(
            "semantic.fail_below: without the behavioral layer every case below pass_at fails; leave it empty"
        )
    return semantic


def _needs(checks: tuple[str, ...], name: str, given: bool, *, what: str, needs: str) -> None:
    """A check and its setting come together: the check needs it, and it is given only for the check."""
    if name in checks and not given:
        raise ValueError(f"{name}: the {name} check needs {needs}")
    if given and name not in checks:
        raise ValueError(f"{name}: {what} given, but {name} is not in contract_checks")


def _contract(d: dict, layers: tuple[str, ...]) -> dict[str, Any]:
    """The contract layer's checks and what each needs (patterns, a schema, tool names, a number)."""
    checks = fields.string_list(d, "contract_checks")
    bad = [c for c in checks if c not in CONTRACT_CHECKS]
    if bad:
        raise ValueError(f"contract_checks: unknown check(s) {', '.join(bad)}")
    if len(set(checks)) != len(checks):
        raise ValueError("contract_checks: a check is listed twice")
    if "contract" in layers and not checks:
        raise ValueError("contract_checks: the contract layer needs at least one check")
    if checks and "contract" not in layers:
        raise ValueError("contract_checks: given, but the contract layer is not in layers")
    out: dict[str, Any] = {"contract_checks": tuple(c for c in CONTRACT_CHECKS if c in checks)}

    for name in ("must_match", "must_not_match"):
        out[name] = fields.linear_regexes(d, name)
        _needs(checks, name, bool(out[name]), what="patterns", needs="at least one pattern")

    schema = d.get("json_schema")
    if schema is not None:
        if not isinstance(schema, dict):
            raise ValueError("json_schema: expected an object or null")
        fields.refuse_outside_references(schema)
        try:
            jsonschema.validators.validator_for(schema).check_schema(schema)
        except jsonschema.SchemaError as exc:
            raise ValueError(f"json_schema: not a valid JSON Schema: {exc.message}") from None
        fields.check_local_references(schema)
        schema = copy.deepcopy(schema)
    _needs(checks, "json_schema", schema is not None, what="a schema", needs="a schema")
    out["json_schema"] = schema

    for name in ("allowed_tools", "forbidden_tools"):
        out[name] = fields.string_list(d, name)
        if any(not t.strip() for t in out[name]):
            raise ValueError(f"{name}: a tool name must not be empty")
        _needs(checks, name, bool(out[name]), what="tool names", needs="at least one tool name")
    both = sorted(set(out["allowed_tools"]) & set(out["forbidden_tools"]))
    if both:
        raise ValueError(f"forbidden_tools: {', '.join(both)} also listed in allowed_tools")

    max_tool_calls = d.get("max_tool_calls")
    if max_tool_calls is not None:
        max_tool_calls = fields.integer(d, "max_tool_calls", 0, 0, 10_000)
    _needs(checks, "max_tool_calls", max_tool_calls is not None, what="a number", needs="a number")
    out["max_tool_calls"] = max_tool_calls

    out["secret_patterns"] = fields.string_list(d, "secret_patterns")
    for pattern in out["secret_patterns"]:
        compile_secret_pattern(pattern)  # RE2 runs them (credentials.py): one it cannot is named here
    if out["secret_patterns"] and "no_secrets" not in checks:
        raise ValueError("secret_patterns: patterns given, but no_secrets is not in contract_checks")
    return out


def _behavioral(d: dict, layers: tuple[str, ...]) -> dict[str, Any]:
    """The behavioral judge: provider, model, prompt, timeout, endpoint, and a secondary judge."""
    behavioral = "behavioral" in layers
    provider = d.get("provider")
    model = d.get("model")
    if behavioral:
        provider = fields.choice(d, "provider", PROVIDERS)
        model = fields.nonempty_string(d, "model")
    elif provider is not None or model is not None:
        raise ValueError("provider: a config without the behavioral layer calls no provider; set it to null")

    # A config that sends no prompt keeps the earlier default, so its hash stays what it was.
    default_template = DEFAULT_PROMPT_TEMPLATE if behavioral else PROMPT_TEMPLATE_V1
    template = fields.string(d, "prompt_template", default=default_template)
    check_prompt_template(template, behavioral=behavioral)

    timeout = d.get("timeout_s", 30.0)
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 600:
        raise ValueError("timeout_s: must be a number of seconds in (0, 600]")

    base_url_env = fields.env_name(d, "base_url_env")
    if provider == "openai-compatible" and base_url_env is None:
        raise ValueError("base_url_env: an openai-compatible provider needs the variable naming its endpoint")

    secondary = None
    if d.get("secondary") is not None:
        if not behavioral:
            raise ValueError("secondary: only a config with the behavioral layer can have a secondary judge")
        secondary = SecondaryJudge.from_dict(d["secondary"])
        primary_family = model_family(model, d.get("model_family"))
        if secondary.role == "second_opinion":
            if secondary.family == primary_family:
                raise ValueError(
                    f"secondary: a second_opinion must come from another model family than the primary "
                    f"(both are {primary_family!r}: {model} and {secondary.model}): a second deployment of "
                    f"the same family is no second opinion; set model_family where the name says nothing"
                )
            if secondary.when and secondary.when["mode"] == "borderline" and d.get("output_kind") != "scores":
                raise ValueError("secondary.when.mode: borderline needs output_kind scores")
    return {
        "provider": provider,
        "model": model,
        "prompt_template": template,
        "timeout_s": float(timeout),
        "base_url_env": base_url_env,
        "secondary": secondary,
        **_escalation(d, behavioral, model),
    }


def _escalation(d: dict, behavioral: bool, model: str | None) -> dict[str, Any]:
    """`fallback`, `second_opinion` and `adjudicator`: each a judge like the primary (escalation.py)."""
    given = [name for name in ESCALATION_FIELDS if d.get(name) is not None]
    if not given:
        return {}
    if not behavioral:
        raise ValueError(f"{given[0]}: only a config with the behavioral layer can have more judges")
    if d.get("secondary") is not None:
        raise ValueError(
            f"{given[0]}: a config has either the older `secondary` or fallback / second_opinion / adjudicator, "
            "not both"
        )
    out: dict[str, Any] = {}
    if d.get("fallback") is not None:
        out["fallback"] = JudgeSpec.from_dict(d["fallback"], "fallback")
    if d.get("second_opinion") is not None:
        second = SecondOpinion.from_dict(d["second_opinion"])
        primary_family = model_family(model, d.get("model_family"))
        if second.family == primary_family:
            raise ValueError(
                f"second_opinion: must come from another model family than the primary (both are "
                f"{primary_family!r}: {model} and {second.model}): a second deployment of the same family is no "
                f"second opinion; set model_family where the name says nothing"
            )
        if "borderline" in second.modes() and d.get("output_kind") != "scores" and d.get("semantic") is None:
            raise ValueError("second_opinion.when: borderline needs output_kind scores or the semantic layer")
        out["second_opinion"] = second
    if d.get("adjudicator") is not None:
        if d.get("second_opinion") is None:
            raise ValueError("adjudicator: decides where the second opinion disagrees; set a second_opinion first")
        out["adjudicator"] = JudgeSpec.from_dict(d["adjudicator"], "adjudicator")
    return out


def _improvements(d: dict, layers: tuple[str, ...]) -> dict[str, Any]:
    """`guidance` (text for the judge's instructions) and `examples` (labeled cases for its prompt): only a
    behavioral judge reads a prompt, so only it may have them."""
    guidance = fields.string(d, "guidance", default="")
    if len(guidance) > MAX_GUIDANCE_CHARS:
        raise ValueError(f"guidance: at most {MAX_GUIDANCE_CHARS} characters, got {len(guidance)}")
    examples = parse_examples(d.get("examples"))
    if (guidance.strip() or examples) and "behavioral" not in layers:
        raise ValueError("guidance: only a config with the behavioral layer reads a prompt to add to")
    return {"guidance": guidance, "examples": examples}


def parse_examples(value: Any) -> tuple[dict[str, Any], ...]:
    """A config's `examples` checked and normalised (None: none); ValueError says what is wrong."""
    examples_in = value or []
    if not isinstance(examples_in, list | tuple):
        raise ValueError("examples: expected a list of {external_id, input, output, verdict, reason}")
    if len(examples_in) > MAX_EXAMPLES:
        raise ValueError(f"examples: at most {MAX_EXAMPLES}, got {len(examples_in)}")
    examples = []
    for i, example in enumerate(examples_in):
        where = f"examples[{i}]."
        if not isinstance(example, dict):
            raise ValueError(f"examples[{i}]: expected an object {{{', '.join(EXAMPLE_FIELDS)}}}")
        fields.reject_unknown(example, EXAMPLE_FIELDS, where=where)
        examples.append({
            "external_id": fields.nonempty_string(example, "external_id", where=where),
            "input": fields.string(example, "input", where=where),
            "output": fields.string(example, "output", where=where),
            "verdict": fields.choice(example, "verdict", ("pass", "fail"), where=where),
            "reason": fields.string(example, "reason", where=where, default=""),
        })
    if len({e["external_id"] for e in examples}) != len(examples):
        raise ValueError("examples: a case is given twice")
    return tuple(examples)
