"""Calls to the judge models through the official SDKs, and what their failures mean.

The SDK clients run with their own retries off (`max_retries=0`) and an explicit timeout: the
engine owns retrying, so it can honour Retry-After, count every HTTP call and stop at a spend cap.
`timeout_s` bounds a whole call (judges.engine.deadline), not each read. Keys and endpoints come
from the environment variables a config names; neither a key nor any fragment of it appears in a
failure's detail. A refused key (401/403) is its own category, KEY_REFUSED: a configuration error
to fix, never retried, never taken for an outage.
"""

import binascii
import dataclasses
import email.utils
import json
import threading
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

import httpx2
import numpy as np

from .credentials import redact_key
from .deadline import bound_by_deadline, deadline
from .prompt import output_schema

DEFAULT_MAX_TOKENS = 1024
DEFAULT_BASE_URLS = {"openai": "https://api.openai.com/v1", "anthropic": "https://api.anthropic.com"}
DEFAULT_KEY_ENVS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
# The providers' own key variables, each the pipeline's key for that provider: it goes only to that provider's
# own endpoint, the base URL its SDK pairs with it, or one the pipeline pairs with it in KEY_PAIRS_ENV, never to a
# URL variable a config chooses (docs/gate.md, "Keys and endpoints").
PROVIDER_KEY_ENVS = {"OPENAI_API_KEY": "openai", "ANTHROPIC_API_KEY": "anthropic"}
SDK_URL_ENVS = {"OPENAI_API_KEY": "OPENAI_BASE_URL", "ANTHROPIC_API_KEY": "ANTHROPIC_BASE_URL"}
# "KEY_ENV=URL_ENV,…": the pairs the pipeline (or the server's operator) makes. A key named here goes only to the
# URL variables it is paired with.
KEY_PAIRS_ENV = "EVALHUB_JUDGE_KEY_PAIRS"
# Local OpenAI-compatible servers (Ollama, vLLM, llama.cpp) often need no key, but the SDK wants one.
PLACEHOLDER_KEY = "no-key-configured"
# The failure category (and Judgment.error) of a key the provider refused: a config error, not an outage.
KEY_REFUSED = "key refused"
TOOL_NAME = "record_judgment"
# The header the scripted stand-in (judges.testing.fake_provider) puts on every answer: a stand-in is told by
# where its answers come from, never by a model's or a variable's name. No real provider sends it.
STAND_IN_HEADER = "x-evalhub-stand-in"
# Request fields each SDK takes by name; any other param goes through `extra_body` unchanged.
_OPENAI_NAMED = {
    "temperature",
    "top_p",
    "seed",
    "frequency_penalty",
    "presence_penalty",
    "stop",
    "reasoning_effort",
}
_ANTHROPIC_NAMED = {"stop_sequences", "metadata"}


class ProviderFailure(Exception):
    """A call that produced no judge answer: why (an `ERRORS` category), and whether to try again."""

    def __init__(self, category: str, detail: str, *, retryable: bool, retry_after: float | None = None):
        super().__init__(f"{category}: {detail}")
        self.category = category
        self.detail = detail
        self.retryable = retryable
        self.retry_after = retry_after


@dataclass(frozen=True)
class Endpoint:
    provider: str
    base_url: str
    api_key: str = field(repr=False)
    timeout_s: float
    key_env: str | None = None  # the variable the key came from, to name in a refusal


@dataclass(frozen=True)
class Reply:
    """What a model said: its raw text, the object it gave (tool input) if any, and its token counts."""

    text: str
    answer: dict[str, Any] | None
    input_tokens: int | None
    output_tokens: int | None
    stand_in: bool = False  # the answer came from the scripted stand-in (STAND_IN_HEADER), not a model


def from_stand_in(headers: Any) -> bool:
    """Whether a response's headers say it came from the scripted stand-in."""
    return bool(headers is not None and headers.get(STAND_IN_HEADER))


def endpoint_env_problems(
    *, provider: str, base_url_env: str | None, api_key_env: str | None, env: Mapping[str, str]
) -> list[tuple[str, str]]:
    """(variable, what is wrong) for each variable of an endpoint that is unset or unusable, the URL's
    first; the value itself is never described. A key or URL the HTTP library cannot send would
    otherwise fail inside each call, as if the provider were down."""
    problems = []
    if base_url_env is not None:
        base_url = env.get(base_url_env, "").strip()
        if not base_url:
            problems.append((base_url_env, "is not set"))
        elif not (base_url.isascii() and base_url.startswith(("http://", "https://")) and " " not in base_url):
            problems.append((base_url_env, "is not an http:// or https:// URL"))
    key_env = api_key_env or DEFAULT_KEY_ENVS.get(provider)
    if key_env is not None:
        api_key = env.get(key_env, "").strip()
        if not api_key:
            problems.append((key_env, "is not set"))
        elif not (api_key.isascii() and api_key.isprintable() and " " not in api_key):
            problems.append((key_env, "holds a space, a line break or a non-ASCII character, which no API key has"))
    return problems


def key_pairs(env: Mapping[str, str]) -> dict[str, set[str]]:
    """{key variable: the URL variables the pipeline pairs it with} from $EVALHUB_JUDGE_KEY_PAIRS; an entry that
    is not NAME=NAME pairs nothing."""
    pairs: dict[str, set[str]] = {}
    for entry in env.get(KEY_PAIRS_ENV, "").split(","):
        key, _, url = (part.strip() for part in entry.partition("="))
        if key and url:
            pairs.setdefault(key, set()).add(url)
    return pairs


def key_pairing_problem(
    *, provider: str, base_url_env: str | None, api_key_env: str | None, env: Mapping[str, str]
) -> str | None:
    """Why the key a judge would send may not go to the endpoint it names, or None when it may.

    A key goes to a config's base URL variable only when the pipeline paired the two: a provider's own key
    (OPENAI_API_KEY, ANTHROPIC_API_KEY) with its SDK's URL variable (OPENAI_BASE_URL, ANTHROPIC_BASE_URL) or a
    pair of $EVALHUB_JUDGE_KEY_PAIRS; any key listed there, only with its listed URL variables. Without a URL
    variable a provider's own key goes to its own provider only. Other keys (EVALHUB_JUDGE_*, names the
    operator allows) were given for the judges and go where the config says, unless listed.
    """
    key_env = api_key_env or DEFAULT_KEY_ENVS.get(provider)
    if key_env is None:
        return None  # no key: nothing to send
    pinned = key_pairs(env).get(key_env)
    own = PROVIDER_KEY_ENVS.get(key_env)
    if base_url_env is None:
        if own is not None and own != provider:
            return f"{key_env} is {own}'s key and goes only to {own}'s endpoint, not to {provider}'s"
        if pinned is not None and own is None:
            return f"{key_env} is paired in ${KEY_PAIRS_ENV} with {', '.join(sorted(pinned))} only"
        return None
    allowed = set(pinned or ())
    if own is not None:
        allowed.add(SDK_URL_ENVS[key_env])
    elif pinned is None:
        return None
    if base_url_env in allowed:
        return None
    return (f"{key_env} goes only to its provider's own endpoint or a base URL the pipeline pairs with it "
            f"({', '.join(sorted(allowed))}, or a pair KEY=URL_VARIABLE in ${KEY_PAIRS_ENV}), not to {base_url_env}, "
            "which the config chose")


def resolve_endpoint(
    *,
    provider: str,
    base_url_env: str | None,
    api_key_env: str | None,
    env: Mapping[str, str],
    timeout_s: float,
) -> Endpoint:
    """Read the endpoint and key from the variables the config names; ProviderFailure if one is unset
    or unusable."""
    unpaired = key_pairing_problem(provider=provider, base_url_env=base_url_env, api_key_env=api_key_env, env=env)
    if unpaired is not None:  # before the key is read, let alone sent
        raise ProviderFailure("config error", unpaired, retryable=False)
    problems = endpoint_env_problems(provider=provider, base_url_env=base_url_env, api_key_env=api_key_env, env=env)
    if problems:
        name, problem = problems[0]
        raise ProviderFailure("config error", f"environment variable {name} {problem}", retryable=False)
    base_url = env[base_url_env].strip() if base_url_env is not None else DEFAULT_BASE_URLS[provider]
    key_env = api_key_env or DEFAULT_KEY_ENVS.get(provider)
    api_key = env[key_env].strip() if key_env is not None else PLACEHOLDER_KEY
    return Endpoint(provider=provider, base_url=base_url, api_key=api_key, timeout_s=timeout_s, key_env=key_env)


class ClientPool:
    """SDK clients shared by the threads of a batch, one per endpoint, so connections are reused."""

    def __init__(self) -> None:
        self._clients: dict[Endpoint, Any] = {}
        self._lock = threading.Lock()

    def get(self, endpoint: Endpoint) -> Any:
        with self._lock:
            client = self._clients.get(endpoint)
            if client is None:
                client = _make_client(endpoint)
                self._clients[endpoint] = client
            return client

    def close(self) -> None:
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for client in clients:
            client.close()


def load_sdks(providers: Collection[str]) -> None:
    """Import the SDKs these providers need, once per process: the engine does it before it starts a case's clock,
    so no case's time carries the seconds an import takes (every case of a batch waited on it alike)."""
    for provider in providers:
        _sdk(provider)


def _sdk(provider: str) -> Any:
    # Imported on first use: the SDKs take seconds to import, and a contract-only run needs neither.
    if provider == "anthropic":
        import anthropic

        return anthropic
    import openai

    return openai


def _make_client(endpoint: Endpoint) -> Any:
    sdk = _sdk(endpoint.provider)
    client_cls = sdk.Anthropic if endpoint.provider == "anthropic" else sdk.OpenAI
    # The SDK's own default client (its limits, proxies, keep-alive), its connections bounded by call_model's deadline.
    http_client = bound_by_deadline(sdk.DefaultHttpxClient(timeout=endpoint.timeout_s))
    return client_cls(
        api_key=endpoint.api_key,
        base_url=endpoint.base_url,
        max_retries=0,
        timeout=endpoint.timeout_s,
        http_client=http_client,
    )


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait from `retry-after-ms` or `retry-after` (seconds or an HTTP date), if given."""
    if not headers:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _redact(text: str, endpoint: Endpoint) -> str:
    if endpoint.api_key != PLACEHOLDER_KEY:
        text = redact_key(text, endpoint.api_key)
    return text if len(text) <= 300 else text[:297] + "..."


def _error_message(exc: Any) -> str:
    body = getattr(exc, "body", None)
    if isinstance(body, dict):
        inner = cast(dict[str, Any], body.get("error")) if isinstance(body.get("error"), dict) else body
        if isinstance(inner.get("message"), str):
            return inner["message"]
    return str(getattr(exc, "message", "") or exc)


def _failure(exc: Exception, endpoint: Endpoint) -> ProviderFailure:
    """Map an SDK exception to the engine's categories. Both SDKs share one exception design."""
    sdk = _sdk(endpoint.provider)
    if isinstance(exc, sdk.APITimeoutError):
        return ProviderFailure("timeout", f"no answer within {endpoint.timeout_s:g} s", retryable=True)
    if isinstance(exc, sdk.APIConnectionError):
        return ProviderFailure("connection error", _redact(str(exc), endpoint), retryable=True)
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        retry_after = parse_retry_after(exc.response.headers)
        detail = _redact(f"HTTP {status}: {_error_message(exc)}", endpoint)
        if status == 429:
            return ProviderFailure("rate limit", detail, retryable=True, retry_after=retry_after)
        if status >= 500 or status in (408, 409):
            return ProviderFailure("server error", detail, retryable=True, retry_after=retry_after)
        if status in (401, 403):
            where = f" (the key in {endpoint.key_env})" if endpoint.key_env else ""
            return ProviderFailure(KEY_REFUSED, f"{detail}{where}", retryable=False)
        # 400/404/422: the model name or the request is wrong; asking again won't help.
        return ProviderFailure("config error", detail, retryable=False)
    return ProviderFailure(
        "server error", _redact(f"unreadable response: {type(exc).__name__}: {exc}", endpoint), retryable=True
    )


def _split_params(params: dict[str, Any], named: set[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    kwargs = {k: v for k, v in params.items() if k in named}
    extra = {k: v for k, v in params.items() if k not in named and k != "max_tokens"}
    return kwargs, extra


def call_model(
    client: Any,
    endpoint: Endpoint,
    *,
    model: str,
    system: str,
    user: str,
    output_kind: str,
    params: dict[str, Any],
    schema: dict[str, Any] | None = None,
    tool_name: str = TOOL_NAME,
) -> Reply:
    """One HTTP call asking for a structured answer; ProviderFailure when no answer came back.

    The answer's JSON Schema is the judgment's of `output_kind` unless `schema` is given (an editor's
    answer, judges.editor), recorded through the tool `tool_name`."""
    max_tokens = params.get("max_tokens", DEFAULT_MAX_TOKENS)
    if schema is None:
        schema = output_schema(output_kind)
    description = "Record the judgment." if tool_name == TOOL_NAME else "Record the answer."
    sdk = _sdk(endpoint.provider)
    sdk_error = sdk.AnthropicError if endpoint.provider == "anthropic" else sdk.OpenAIError
    try:
        with deadline(endpoint.timeout_s):
            if endpoint.provider == "anthropic":
                kwargs, extra = _split_params(params, _ANTHROPIC_NAMED)
                raw = client.messages.with_raw_response.create(
                    model=model,
                    max_tokens=max_tokens,
                    system=system,
                    messages=[{"role": "user", "content": user}],
                    tools=[{"name": tool_name, "description": description, "input_schema": schema}],
                    tool_choice={"type": "tool", "name": tool_name},
                    extra_body=extra or None,
                    **kwargs,
                )
                message, stand_in = raw.parse(), from_stand_in(raw.headers)
            else:
                kwargs, extra = _split_params(params, _OPENAI_NAMED)
                # OpenAI's newer models refuse max_tokens; local OpenAI-compatible servers may only know it.
                limit = "max_completion_tokens" if endpoint.provider == "openai" else "max_tokens"
                kwargs[limit] = max_tokens
                # The request `client.chat.completions.create` sends, through the same client's `post` (as
                # call_embeddings does): the typed method walks the messages and the answer's schema through
                # the SDK's type-driven transform, which changes nothing in plain JSON and costs more CPU
                # than the rest of the call. Extra params go over the named ones, as its extra_body does.
                # The reply is read as JSON, not built into the SDK's ChatCompletion (a third of what is left).
                request: dict[str, Any] = {
                    "model": model,
                    "messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
                    "response_format": {
                        "type": "json_schema",
                        "json_schema": {"name": tool_name.removeprefix("record_"), "schema": schema, "strict": True},
                    },
                    **kwargs,
                    **extra,
                }
                response = client.post(
                    "/chat/completions", body=request, cast_to=httpx2.Response, options={"security": {"bearer_auth": True}}
                )
                completion = _json_as_the_sdk_reads_it(response)
                stand_in = from_stand_in(response.headers)
    except (sdk_error, ValueError) as exc:
        # Every failure of the call becomes a category; a bug of ours (TypeError…) still surfaces.
        raise _failure(exc, endpoint) from exc
    reply = _anthropic_reply(message, tool_name) if endpoint.provider == "anthropic" else _openai_reply(completion)
    return dataclasses.replace(reply, stand_in=True) if stand_in else reply


@dataclass(frozen=True)
class Embedded:
    """What an embeddings call gave back: one vector per input, in the inputs' order, and its tokens."""

    vectors: list[list[float]]
    input_tokens: int | None
    output_tokens: int | None = 0  # embeddings are billed on their input only
    stand_in: bool = False  # the vectors came from the scripted stand-in (STAND_IN_HEADER)


def call_embeddings(
    client: Any, endpoint: Endpoint, *, model: str, inputs: list[str], dimensions: int | None
) -> Embedded:
    """One HTTP call embedding several texts (the OpenAI embeddings API); ProviderFailure on no answer.

    The request is the one `client.embeddings.create` sends, made through the same client's `post` (its
    auth, base URL, timeout and errors): the typed method first walks every input through the SDK's
    type-driven transform, 2.4 ms of CPU for 128 texts, which leaves nothing to change in a list of
    strings and costs more than the call's share of the wait. Only the bearer key is sent, as that
    method sends it. The vectors come base64-encoded (the SDK's default) and are read straight into
    arrays: a float a Python object costs more CPU again. A server that sends floats anyway is read too.
    """
    sdk = _sdk(endpoint.provider)
    request: dict[str, Any] = {"model": model, "input": inputs, "encoding_format": "base64"}
    if dimensions is not None:
        request["dimensions"] = dimensions
    try:
        with deadline(endpoint.timeout_s):
            response = client.post(
                "/embeddings", body=request, cast_to=httpx2.Response, options={"security": {"bearer_auth": True}}
            )
            body = response.json()
            stand_in = from_stand_in(response.headers)
        data = sorted(body["data"], key=lambda item: item["index"])
        vectors = _vectors([item["embedding"] for item in data])
        tokens = (body.get("usage") or {}).get("prompt_tokens")
    except (sdk.OpenAIError, ValueError) as exc:
        raise _failure(exc, endpoint) from exc
    except (KeyError, TypeError, AttributeError) as exc:  # JSON, but not an embeddings response
        raise ProviderFailure(
            "server error", _redact(f"unreadable response: {type(exc).__name__}: {exc}", endpoint), retryable=True
        ) from exc
    return Embedded(vectors=vectors, input_tokens=tokens if isinstance(tokens, int) else None, stand_in=stand_in)


def _vectors(embeddings: list[Any]) -> Any:
    """One vector an embedding: base64 strings of equal length (the usual reply) decoded into the rows of
    one array at once, anything else vector by vector (the caller refuses what is not a vector)."""
    if embeddings and all(isinstance(e, str) for e in embeddings):
        raw = [binascii.a2b_base64(e) for e in embeddings]
        if len({len(r) for r in raw}) == 1:
            return np.frombuffer(b"".join(raw), dtype="<f4").reshape(len(raw), -1)
        return [np.frombuffer(r, dtype="<f4") for r in raw]
    return [np.asarray(e, dtype=np.float64) for e in embeddings]


def _json_as_the_sdk_reads_it(response: Any) -> Any:
    """The reply's JSON; None for a reply that is not JSON and not labelled so (the SDK gives its text, which
    holds no completion). JSON labelled so that does not parse raises ValueError, as the SDK's does."""
    try:
        return response.json()
    except ValueError:
        if response.headers.get("content-type", "*").split(";")[0].endswith("json"):
            raise
        return None


def _field(value: Any, name: str) -> Any:
    return value.get(name) if isinstance(value, dict) else None


def _openai_reply(completion: Any) -> Reply:
    """A chat completion's JSON, read as leniently as the SDK builds its ChatCompletion (without checking):
    what is missing or of another shape is None."""
    usage = _field(completion, "usage")
    tokens_in = _field(usage, "prompt_tokens")
    tokens_out = _field(usage, "completion_tokens")
    choices = _field(completion, "choices")
    message = _field(choices[0], "message") if isinstance(choices, list) and choices else None
    text = _field(message, "content")
    if text is None:
        refusal = _field(message, "refusal")
        text = f"(no content; refusal: {refusal})" if refusal else "(no content)"
    return Reply(text=text, answer=None, input_tokens=tokens_in, output_tokens=tokens_out)


def _anthropic_reply(message: Any, tool_name: str) -> Reply:
    usage = getattr(message, "usage", None)
    tokens_in = getattr(usage, "input_tokens", None)
    tokens_out = getattr(usage, "output_tokens", None)
    texts = []
    for block in getattr(message, "content", None) or []:
        if getattr(block, "type", None) == "tool_use" and getattr(block, "name", None) == tool_name:
            answer = block.input if isinstance(block.input, dict) else None
            text = json.dumps(block.input, ensure_ascii=False)
            return Reply(text=text, answer=answer, input_tokens=tokens_in, output_tokens=tokens_out)
        if getattr(block, "type", None) == "text":
            texts.append(block.text)
    return Reply(text="".join(texts) or "(no content)", answer=None, input_tokens=tokens_in, output_tokens=tokens_out)
