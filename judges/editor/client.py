"""Asking an editor model for one strict-JSON answer, through the same SDK calls the judges make.

An editor is a judge spec like a config's primary (provider, pinned model, family, the NAMES of the
variables holding its endpoint and key, checked by the engine's one allowed-names function); it writes
text instead of verdicts. Its answer must be JSON valid against the schema the caller gives (sent to
the provider as its structured-output schema, and checked again here: a provider may ignore it). What
the call cost is counted by the price table, whether it succeeded or not, so a failed proposal's spend
is still audited. Failures are three kinds the caller can tell apart: a malformed answer
(MalformedEditorAnswer), no answer in time (EditorTimeout), anything else (EditorUnavailable).
"""

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from judges.engine.chain import FailureChain, RetryPolicy
from judges.engine.config import JudgeConfig
from judges.engine.envnames import env_name_refusals
from judges.engine.escalation import JudgeSpec
from judges.engine.providers import ClientPool, ProviderFailure, call_model, resolve_endpoint
from judges.engine.spend import Prices, SpendTracker, Tally, estimate_cost
from judges.engine.validation import InvalidOutput, load_json_object

EDITOR_TOOL_NAME = "record_answer"
# An editor writes several proposals or cases in one answer: more room than a verdict needs.
EDITOR_MAX_TOKENS = 4096


class EditorError(Exception):
    """The editor gave no usable answer. `category` is the engine's failure category; `cost_usd`,
    `input_tokens` and `output_tokens` what the attempts used (cost None when a price is unknown)."""

    def __init__(self, message: str, *, category: str, tally: Tally | None = None) -> None:
        super().__init__(message)
        self.category = category
        tally = tally or Tally()
        self.calls = tally.calls
        self.cost_usd = tally.cost
        self.input_tokens = tally.input_tokens
        self.output_tokens = tally.output_tokens


class MalformedEditorAnswer(EditorError):
    """The editor answered, but not JSON valid against the schema asked for."""


class EditorTimeout(EditorError):
    """The editor did not answer within its timeout."""


class EditorUnavailable(EditorError):
    """No answer for another reason: a refused key, a bad endpoint variable, the spend cap, an outage."""


@dataclass(frozen=True)
class EditorSpec:
    """Which model edits, and how it is reached. Build it with `from_dict` (validates) or `from_config`."""

    provider: str
    model: str
    model_family: str | None = None
    base_url_env: str | None = None
    api_key_env: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    timeout_s: float = 120.0
    max_attempts: int = 2

    @classmethod
    def from_dict(cls, d: Any, *, extra_allowed: Iterable[str] = ()) -> "EditorSpec":
        """A validated spec; ValueError names the field at fault, env names refused like a config's."""
        if not isinstance(d, dict):
            raise ValueError("editor: expected an object")
        # The fields a judge has are checked as a judge's are; the editor's own two here.
        judge = JudgeSpec.validated_fields(d, "editor", ("timeout_s", "max_attempts"))
        timeout = d.get("timeout_s", 120.0)
        if isinstance(timeout, bool) or not isinstance(timeout, int | float) or not 0 < timeout <= 600:
            raise ValueError("editor.timeout_s: must be a number of seconds in (0, 600]")
        attempts = d.get("max_attempts", 2)
        if isinstance(attempts, bool) or not isinstance(attempts, int) or not 1 <= attempts <= 5:
            raise ValueError("editor.max_attempts: must be an integer from 1 to 5")
        spec = cls(**{**judge, "model": judge["model"].strip()}, timeout_s=float(timeout), max_attempts=attempts)
        refusals = spec.env_refusals(extra_allowed=extra_allowed)
        if refusals:
            raise ValueError(refusals[0])
        return spec

    @classmethod
    def from_config(
        cls, config: JudgeConfig | dict[str, Any], *, extra_allowed: Iterable[str] = (), **overrides: Any
    ) -> "EditorSpec":
        """The config's own primary as an editor (the default editor), with any field replaced."""
        cfg = JudgeConfig.from_dict(config)
        if cfg.provider is None or cfg.model is None:
            raise ValueError("editor: the config has no behavioral judge to edit with; name an editor model")
        d: dict[str, Any] = {
            "provider": cfg.provider,
            "model": cfg.model,
            "model_family": cfg.model_family,
            "base_url_env": cfg.base_url_env,
            "api_key_env": cfg.api_key_env,
            # The judge's sampling settings, not its token bound: an editor writes more than a verdict.
            "params": {k: v for k, v in cfg.params.items() if k != "max_tokens"},
        }
        d.update(overrides)
        return cls.from_dict(d, extra_allowed=extra_allowed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "provider": self.provider,
            "model": self.model,
            "model_family": self.model_family,
            "base_url_env": self.base_url_env,
            "api_key_env": self.api_key_env,
            "params": dict(self.params),
            "timeout_s": self.timeout_s,
            "max_attempts": self.max_attempts,
        }

    def env_refusals(self, *, extra_allowed: Iterable[str] = ()) -> list[str]:
        """The engine's one allowed-names check, on the editor's variables (messages say `editor.`)."""
        as_config = {
            "rubric": "editor",
            "criteria": "",
            "layers": ["behavioral"],
            "provider": self.provider,
            "model": self.model,
            "base_url_env": self.base_url_env,
            "api_key_env": self.api_key_env,
        }
        return [f"editor.{message}" for message in env_name_refusals(as_config, extra_allowed=extra_allowed)]

    @property
    def max_tokens(self) -> int:
        return int(self.params.get("max_tokens", EDITOR_MAX_TOKENS))


@dataclass(frozen=True)
class EditorAnswer:
    """The editor's parsed answer, its raw text, and what it cost (None when the model has no price)."""

    answer: dict[str, Any]
    raw: str
    model: str
    calls: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None


def estimate_editor_cost(spec: EditorSpec, *, prompt_chars: int, prices: Prices) -> float | None:
    """An upper estimate of one editor call (the prompt, and every token it may write); None: no price."""
    price = prices.get(spec.model)
    return None if price is None else estimate_cost(price, prompt_chars, spec.max_tokens)


# What a refusal quotes of the answer: jsonschema's message repeats the offending value, which may be megabytes.
MAX_REFUSAL_CHARS = 300


def check_answer(answer: dict[str, Any], schema: dict[str, Any]) -> None:
    """InvalidOutput naming where the answer breaks the schema (the first place, by path), in a bounded message."""
    validator = jsonschema.validators.validator_for(schema)(schema)
    errors = sorted(validator.iter_errors(answer), key=lambda e: list(e.absolute_path))
    if errors:
        where = "/".join(str(p) for p in errors[0].absolute_path)[:MAX_REFUSAL_CHARS] or "(the answer)"
        error = errors[0]
        if error.validator == "maxLength":
            message = f"longer than {error.validator_value} characters"
        elif error.validator == "maxItems":
            message = f"more than {error.validator_value} items"
        else:
            message = error.message if len(error.message) <= MAX_REFUSAL_CHARS else \
                error.message[:MAX_REFUSAL_CHARS] + "…"
        raise InvalidOutput(f"{where}: {message}")


def storable(value: Any) -> Any:
    """The answer as text the database can store (keys too): every NUL character dropped (PostgreSQL stores
    none, in text or JSON) and every lone surrogate (JSON's "\\ud800", which no UTF-8 can encode) replaced by
    U+FFFD. No field of an answer needs either."""
    if isinstance(value, str):
        return value.replace("\x00", "").encode("utf-16", "surrogatepass").decode("utf-16", "replace")
    if isinstance(value, dict):
        return {storable(k): storable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [storable(v) for v in value]
    return value


def ask_editor(
    spec: EditorSpec,
    *,
    system: str,
    user: str,
    schema: dict[str, Any],
    prices: Prices,
    spend: SpendTracker | None = None,
    env: Mapping[str, str] = os.environ,
    extra_allowed: Iterable[str] = (),
    retry: RetryPolicy | None = None,
) -> EditorAnswer:
    """Ask the editor once (retrying what the engine retries) for a JSON answer valid against `schema`.

    The variables the spec names are checked again before the call, as a judge's are before each call.
    `spend` is the caller's cap (a proposal job's own); the call reserves its estimate first.
    """
    refusals = spec.env_refusals(extra_allowed=extra_allowed)
    if refusals:
        raise EditorUnavailable(refusals[0], category="config error")
    tally = Tally()
    try:
        endpoint = resolve_endpoint(
            provider=spec.provider,
            base_url_env=spec.base_url_env,
            api_key_env=spec.api_key_env,
            env=env,
            timeout_s=spec.timeout_s,
        )
    except ProviderFailure as exc:  # an unset or unusable variable, named, never its value
        raise EditorUnavailable(f"editor: {exc.detail}", category=exc.category) from None
    chain = FailureChain(
        max_attempts=spec.max_attempts, spend=spend or SpendTracker(), prices=prices, retry=retry or RetryPolicy()
    )
    clients = ClientPool()
    params = {**spec.params, "max_tokens": spec.max_tokens}

    def accept(reply: Any) -> dict[str, Any]:
        answer = storable(reply.answer if reply.answer is not None else load_json_object(reply.text))
        check_answer(answer, schema)
        return answer

    try:
        done = chain.ask(
            endpoint,
            model=spec.model,
            estimate=lambda price: estimate_cost(price, len(system) + len(user), spec.max_tokens),
            tally=tally,
            call=lambda: call_model(
                clients.get(endpoint),
                endpoint,
                model=spec.model,
                system=system,
                user=user,
                output_kind="verdict",
                params=params,
                schema=schema,
                tool_name=EDITOR_TOOL_NAME,
            ),
            accept=accept,
        )
    finally:
        clients.close()
    if done.failure is None:
        return EditorAnswer(
            answer=done.value,
            raw=done.reply.text,
            model=spec.model,
            calls=tally.calls,
            input_tokens=tally.input_tokens,
            output_tokens=tally.output_tokens,
            cost_usd=tally.cost,
        )
    failure = done.failure
    tries = f" (after {done.attempts} attempts)" if done.attempts > 1 else ""
    message = f"the editor {spec.model}: {failure.category}: {failure.detail}{tries}"
    if failure.category == "invalid output":
        raise MalformedEditorAnswer(message, category=failure.category, tally=tally)
    if failure.category == "timeout":
        raise EditorTimeout(message, category=failure.category, tally=tally)
    raise EditorUnavailable(message, category=failure.category, tally=tally)
