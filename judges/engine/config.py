"""The judge config: one immutable, JSON-able version of how a rubric is judged.

The app stores it whole, the gate config ships it whole and CI runs it. `config_hash` covers
everything that can change a verdict and the NAMES of the environment variables that hold the
endpoint and the key (`base_url_env`, `api_key_env`; never their values): a config whose only
change is its key variable is a new version. Fields at their default are left out of what is
hashed, so a field added later does not change the hash of configs that do not use it.
"""

import copy
import hashlib
import json
import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

import jsonschema

from .families import model_family
from .prompt import DEFAULT_PROMPT_TEMPLATE, PROMPT_TEMPLATE_V1, check_prompt_template
from .semantic import SEMANTIC_FIELDS, SEMANTIC_PROVIDERS, SemanticLayer, threshold

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
PROVIDERS: tuple[str, ...] = ("openai", "anthropic", "openai-compatible")
OUTPUT_KINDS: tuple[str, ...] = ("verdict", "scores")
SECONDARY_ROLES: tuple[str, ...] = ("fallback", "second_opinion")
SECONDARY_MODES: tuple[str, ...] = ("always", "categories", "borderline", "sample")
# The engine sets these request fields itself; a config may not override them through params.
RESERVED_PARAMS: frozenset[str] = frozenset(
    {"model", "messages", "system", "response_format", "tools", "tool_choice", "stream", "n"}
)
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
}

_SLUG_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]*$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")

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
)
_SECONDARY_FIELDS = (
    "role",
    "provider",
    "model",
    "model_family",
    "base_url_env",
    "api_key_env",
    "params",
    "when",
)


def _canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


# ---- small validators: each names the field it rejects -------------------------------------------


def _str(d: dict, name: str, *, where: str = "", required: bool = True, default: str | None = None) -> Any:
    value = d.get(name, default)
    if value is None and not required:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{where}{name}: expected a string, got {type(value).__name__}")
    return value


def _nonempty_str(d: dict, name: str, *, where: str = "") -> str:
    value = _str(d, name, where=where)
    if not value.strip():
        raise ValueError(f"{where}{name}: must not be empty")
    return value


def _int(d: dict, name: str, default: int, lo: int, hi: int) -> int:
    value = d.get(name, default)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name}: expected an integer, got {type(value).__name__}")
    if not lo <= value <= hi:
        raise ValueError(f"{name}: must be between {lo} and {hi}, got {value}")
    return value


def _str_list(d: dict, name: str, *, where: str = "") -> tuple[str, ...]:
    value = d.get(name) or []
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{where}{name}: expected a list of strings")
    return tuple(value)


def _env_name(d: dict, name: str, *, where: str = "") -> str | None:
    value = d.get(name)
    if value is None:
        return None
    # Never echo the value: a key pasted here by mistake must not reach an error message or a log.
    if not isinstance(value, str) or not _ENV_NAME_RE.match(value):
        raise ValueError(
            f"{where}{name}: must be the NAME of an environment variable (like EVALHUB_JUDGE_API_KEY), "
            "not a URL or a key"
        )
    return value


def _choice(d: dict, name: str, choices: tuple[str, ...], *, where: str = "", default: Any = None) -> Any:
    value = d.get(name, default)
    if value not in choices:
        raise ValueError(f"{where}{name}: must be one of {', '.join(choices)}; got {value!r}")
    return value


def _params(d: dict, *, where: str = "") -> dict[str, Any]:
    value = d.get("params") or {}
    if not isinstance(value, dict):
        raise ValueError(f"{where}params: expected an object")
    try:
        value = json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{where}params: must be JSON ({exc})") from None
    reserved = sorted(RESERVED_PARAMS & set(value))
    if reserved:
        raise ValueError(f"{where}params: {', '.join(reserved)} are set by the engine and may not be given")
    if "temperature" in value:
        t = value["temperature"]
        if isinstance(t, bool) or not isinstance(t, int | float) or not 0 <= t <= 2:
            raise ValueError(f"{where}params.temperature: must be a number from 0 to 2")
    if "max_tokens" in value:
        m = value["max_tokens"]
        if isinstance(m, bool) or not isinstance(m, int) or m < 1:
            raise ValueError(f"{where}params.max_tokens: must be a positive integer")
    return value


def _reject_unknown(d: dict, known: tuple[str, ...], *, where: str = "") -> None:
    unknown = sorted(set(d) - set(known))
    if unknown:
        raise ValueError(f"{where}{', '.join(unknown)}: unknown field(s)")


@dataclass(frozen=True)
class SecondaryJudge:
    """A second judge: `fallback` answers when the primary cannot; `second_opinion` also judges."""

    role: str
    provider: str
    model: str
    model_family: str | None = None
    base_url_env: str | None = None
    api_key_env: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    when: dict[str, Any] | None = None

    @classmethod
    def from_dict(cls, d: Any) -> "SecondaryJudge":
        w = "secondary."
        if not isinstance(d, dict):
            raise ValueError("secondary: expected an object or null")
        _reject_unknown(d, _SECONDARY_FIELDS, where=w)
        role = _choice(d, "role", SECONDARY_ROLES, where=w)
        provider = _choice(d, "provider", PROVIDERS, where=w)
        base_url_env = _env_name(d, "base_url_env", where=w)
        if provider == "openai-compatible" and base_url_env is None:
            raise ValueError("secondary.base_url_env: an openai-compatible provider needs its endpoint's variable")
        when = None
        if role == "second_opinion":
            when = _when(d.get("when") or {"mode": "always"})
        return cls(
            role=role,
            provider=provider,
            model=_nonempty_str(d, "model", where=w),
            model_family=_str(d, "model_family", where=w, required=False),
            base_url_env=base_url_env,
            api_key_env=_env_name(d, "api_key_env", where=w),
            params=_params(d, where=w),
            # A fallback answers whenever the primary cannot: a `when` has nothing to decide there.
            when=when,
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "provider": self.provider,
            "model": self.model,
            "model_family": self.model_family,
            "base_url_env": self.base_url_env,
            "api_key_env": self.api_key_env,
            "params": copy.deepcopy(self.params),
            "when": copy.deepcopy(self.when),
        }

    @property
    def family(self) -> str:
        return model_family(self.model, self.model_family)


def _when(d: Any) -> dict[str, Any]:
    w = "secondary.when."
    if not isinstance(d, dict):
        raise ValueError("secondary.when: expected an object")
    _reject_unknown(d, ("mode", "categories", "share"), where=w)
    mode = _choice(d, "mode", SECONDARY_MODES, where=w)
    out: dict[str, Any] = {"mode": mode}
    if mode == "categories":
        categories = list(_str_list(d, "categories", where=w))
        if not categories:
            raise ValueError("secondary.when.categories: name at least one category")
        out["categories"] = categories
    if mode == "sample":
        share = d.get("share")
        if isinstance(share, bool) or not isinstance(share, int | float) or not 0 < share <= 1:
            raise ValueError("secondary.when.share: must be a number in (0, 1]")
        out["share"] = float(share)
    return out


def _semantic(d: Any) -> SemanticLayer:
    w = "semantic."
    if not isinstance(d, dict):
        raise ValueError("semantic: expected an object")
    _reject_unknown(d, SEMANTIC_FIELDS, where=w)
    provider = _choice(d, "provider", SEMANTIC_PROVIDERS, where=w)
    base_url_env = _env_name(d, "base_url_env", where=w)
    if provider == "openai-compatible" and base_url_env is None:
        raise ValueError("semantic.base_url_env: an openai-compatible provider needs the variable naming its endpoint")
    dimensions = d.get("dimensions")
    if dimensions is not None and (isinstance(dimensions, bool) or not isinstance(dimensions, int) or dimensions < 1):
        raise ValueError("semantic.dimensions: must be a positive integer, or empty for the model's own")
    if "pass_at" not in d:
        raise ValueError("semantic.pass_at: required (the similarity from which a case passes)")
    pass_at = threshold(d["pass_at"], "pass_at")
    fail_below = None if d.get("fail_below") is None else threshold(d["fail_below"], "fail_below")
    if fail_below is not None and fail_below > pass_at:
        raise ValueError("semantic.fail_below: must not be above pass_at")
    return SemanticLayer(
        provider=provider,
        model=_nonempty_str(d, "model", where=w),
        pass_at=pass_at,
        fail_below=fail_below,
        model_family=_str(d, "model_family", where=w, required=False),
        base_url_env=base_url_env,
        api_key_env=_env_name(d, "api_key_env", where=w),
        dimensions=dimensions,
    )


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
    _reject_unknown(ref, ("slug", "version"), where="policy_ref.")
    slug = _nonempty_str(ref, "slug", where="policy_ref.")
    if not _SLUG_RE.match(slug):
        raise ValueError(f"policy_ref.slug: must be a slug, got {slug!r}")
    version = ref.get("version")
    if isinstance(version, bool) or not isinstance(version, int) or version < 1:
        raise ValueError("policy_ref.version: must be a whole number, 1 or more")
    if sha != _sha256(policy):
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

    @classmethod
    def from_dict(cls, d: Any) -> "JudgeConfig":
        """Validate a config dict; a ValueError names the field at fault.

        A `config_hash` key may ride along (the gate config carries one): it must match the content.
        """
        if isinstance(d, JudgeConfig):
            return d
        if not isinstance(d, dict):
            raise ValueError("config: expected an object")
        _reject_unknown(d, (*_FIELDS, "config_hash"))

        rubric = _nonempty_str(d, "rubric")
        if not _SLUG_RE.match(rubric):
            raise ValueError(f"rubric: must be a slug (letters, digits, - and _), got {rubric!r}")

        layers_in = d.get("layers")
        if not isinstance(layers_in, list | tuple) or not layers_in:
            raise ValueError("layers: expected a non-empty list drawn from contract, semantic, behavioral")
        bad = [x for x in layers_in if x not in LAYERS]
        if bad or len(set(layers_in)) != len(layers_in):
            raise ValueError(f"layers: each of contract, semantic, behavioral at most once; got {list(layers_in)!r}")
        layers = tuple(x for x in LAYERS if x in layers_in)  # the cheaper layers always run first

        semantic = None
        if "semantic" in layers:
            if d.get("semantic") is None:
                raise ValueError("semantic: the semantic layer needs its embeddings model and pass_at")
            semantic = _semantic(d["semantic"])
            if semantic.fail_below is not None and "behavioral" not in layers:
                raise ValueError(
                    "semantic.fail_below: without the behavioral layer every case below pass_at fails; leave it empty"
                )
        elif d.get("semantic") is not None:
            raise ValueError("semantic: given, but the semantic layer is not in layers")

        checks = _str_list(d, "contract_checks")
        bad = [c for c in checks if c not in CONTRACT_CHECKS]
        if bad:
            raise ValueError(f"contract_checks: unknown check(s) {', '.join(bad)}")
        if len(set(checks)) != len(checks):
            raise ValueError("contract_checks: a check is listed twice")
        if "contract" in layers and not checks:
            raise ValueError("contract_checks: the contract layer needs at least one check")
        if checks and "contract" not in layers:
            raise ValueError("contract_checks: given, but the contract layer is not in layers")

        patterns = {}
        for name in ("must_match", "must_not_match"):
            patterns[name] = _str_list(d, name)
            for p in patterns[name]:
                try:
                    re.compile(p)
                except re.error as exc:
                    raise ValueError(f"{name}: invalid regular expression {p!r}: {exc}") from None
            if name in checks and not patterns[name]:
                raise ValueError(f"{name}: the {name} check needs at least one pattern")
            if patterns[name] and name not in checks:
                raise ValueError(f"{name}: patterns given, but {name} is not in contract_checks")

        schema = d.get("json_schema")
        if schema is not None:
            if not isinstance(schema, dict):
                raise ValueError("json_schema: expected an object or null")
            try:
                jsonschema.validators.validator_for(schema).check_schema(schema)
            except jsonschema.SchemaError as exc:
                raise ValueError(f"json_schema: not a valid JSON Schema: {exc.message}") from None
            schema = copy.deepcopy(schema)
        if "json_schema" in checks and schema is None:
            raise ValueError("json_schema: the json_schema check needs a schema")
        if schema is not None and "json_schema" not in checks:
            raise ValueError("json_schema: a schema given, but json_schema is not in contract_checks")

        tools = {}
        for name in ("allowed_tools", "forbidden_tools"):
            tools[name] = _str_list(d, name)
            if any(not t.strip() for t in tools[name]):
                raise ValueError(f"{name}: a tool name must not be empty")
            if name in checks and not tools[name]:
                raise ValueError(f"{name}: the {name} check needs at least one tool name")
            if tools[name] and name not in checks:
                raise ValueError(f"{name}: tool names given, but {name} is not in contract_checks")
        both = sorted(set(tools["allowed_tools"]) & set(tools["forbidden_tools"]))
        if both:
            raise ValueError(f"forbidden_tools: {', '.join(both)} also listed in allowed_tools")

        max_tool_calls = d.get("max_tool_calls")
        if max_tool_calls is not None:
            max_tool_calls = _int(d, "max_tool_calls", 0, 0, 10_000)
        if "max_tool_calls" in checks and max_tool_calls is None:
            raise ValueError("max_tool_calls: the max_tool_calls check needs a number")
        if max_tool_calls is not None and "max_tool_calls" not in checks:
            raise ValueError("max_tool_calls: a number given, but max_tool_calls is not in contract_checks")

        secret_patterns = _str_list(d, "secret_patterns")
        for p in secret_patterns:
            try:
                re.compile(p)
            except re.error as exc:
                raise ValueError(f"secret_patterns: invalid regular expression {p!r}: {exc}") from None
        if secret_patterns and "no_secrets" not in checks:
            raise ValueError("secret_patterns: patterns given, but no_secrets is not in contract_checks")

        behavioral = "behavioral" in layers
        provider = d.get("provider")
        model = d.get("model")
        if behavioral:
            provider = _choice(d, "provider", PROVIDERS)
            model = _nonempty_str(d, "model")
        elif provider is not None or model is not None:
            raise ValueError("provider: a config without the behavioral layer calls no provider; set it to null")

        # A config that sends no prompt keeps the earlier default, so its hash stays what it was.
        default_template = DEFAULT_PROMPT_TEMPLATE if behavioral else PROMPT_TEMPLATE_V1
        template = _str(d, "prompt_template", default=default_template)
        check_prompt_template(template, behavioral=behavioral)

        timeout = d.get("timeout_s", 30.0)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 600:
            raise ValueError("timeout_s: must be a number of seconds in (0, 600]")

        base_url_env = _env_name(d, "base_url_env")
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

        policy = _str(d, "policy", default="")
        policy_ref, policy_sha256 = _policy_ref(d, policy)

        cfg = cls(
            rubric=rubric,
            criteria=_str(d, "criteria"),
            layers=layers,
            contract_checks=tuple(c for c in CONTRACT_CHECKS if c in checks),
            must_match=patterns["must_match"],
            must_not_match=patterns["must_not_match"],
            json_schema=schema,
            allowed_tools=tools["allowed_tools"],
            forbidden_tools=tools["forbidden_tools"],
            max_tool_calls=max_tool_calls,
            secret_patterns=secret_patterns,
            provider=provider,
            model=model,
            model_family=_str(d, "model_family", required=False),
            prompt_template=template,
            policy=policy,
            policy_ref=policy_ref,
            policy_sha256=policy_sha256,
            params=_params(d),
            output_kind=_choice(d, "output_kind", OUTPUT_KINDS, default="verdict"),
            pass_score=_int(d, "pass_score", 4, 1, 5),
            timeout_s=float(timeout),
            max_attempts=_int(d, "max_attempts", 3, 1, 10),
            base_url_env=base_url_env,
            api_key_env=_env_name(d, "api_key_env"),
            secondary=secondary,
            semantic=semantic,
        )
        claimed = d.get("config_hash")
        if claimed is not None and claimed != cfg.config_hash:
            raise ValueError("config_hash: does not match the config's content (was it edited after hashing?)")
        return cfg

    def to_dict(self, *, include_hash: bool = False) -> dict[str, Any]:
        """Every field, defaults filled in; `include_hash` adds `config_hash`, as the gate config ships it."""
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
        if include_hash:
            d["config_hash"] = self.config_hash
        return d

    @cached_property
    def config_hash(self) -> str:
        payload = _hashed(self.to_dict())
        if payload["secondary"] is not None:
            payload["secondary"] = _hashed(payload["secondary"])
        return _sha256(_canonical_json(payload))

    @property
    def family(self) -> str:
        return model_family(self.model, self.model_family)


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
