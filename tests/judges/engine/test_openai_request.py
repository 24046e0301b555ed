"""call_model sends OpenAI's chat request through the client's `post`, not the typed method: the request must
be the one the typed method sends, byte for byte in its JSON, with the same bearer key."""

import json

import httpx2
import openai
import pytest

from judges.engine.prompt import output_schema
from judges.engine.providers import Endpoint, ProviderFailure, call_model

from .conftest import FAKE_KEY

ANSWER = {"outcome": "pass", "reason": "It cites the 30-day window."}


def captured_client(seen: list[httpx2.Request]) -> openai.OpenAI:
    """A real SDK client whose transport keeps each request and answers like the chat API."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        seen.append(request)
        message = {"role": "assistant", "content": json.dumps(ANSWER)}
        return httpx2.Response(200, json={
            "id": "chatcmpl-1", "object": "chat.completion", "created": 0, "model": "m",
            "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
        })  # fmt: skip

    return openai.OpenAI(base_url="http://judge.test/v1", api_key=FAKE_KEY, max_retries=0,
                         http_client=httpx2.Client(transport=httpx2.MockTransport(answer)))  # fmt: skip


@pytest.mark.parametrize("provider", ["openai", "openai-compatible"])
def test_the_chat_request_is_the_one_the_sdks_typed_method_sends(provider):
    params = {"temperature": 0, "seed": 7, "stop": ["\n\n"], "max_tokens": 200, "top_k": 40}
    schema = output_schema("binary")
    limit = "max_completion_tokens" if provider == "openai" else "max_tokens"
    seen: list[httpx2.Request] = []
    client = captured_client(seen)
    client.chat.completions.create(
        model="gpt-4o-mini",
        messages=[{"role": "system", "content": "You judge."}, {"role": "user", "content": "## Answer\nYes."}],
        response_format={"type": "json_schema", "json_schema": {"name": "judgment", "schema": schema, "strict": True}},
        temperature=0,
        seed=7,
        stop=["\n\n"],
        extra_body={"top_k": 40},
        **{limit: 200},
    )
    endpoint = Endpoint(provider=provider, base_url="http://judge.test/v1", api_key=FAKE_KEY, timeout_s=5)
    reply = call_model(client, endpoint, model="gpt-4o-mini", system="You judge.", user="## Answer\nYes.",
                       output_kind="binary", params=params)  # fmt: skip
    client.close()
    typed, ours = seen
    assert json.loads(ours.content) == json.loads(typed.content)
    assert (ours.method, ours.url) == (typed.method, typed.url) == ("POST", "http://judge.test/v1/chat/completions")
    assert ours.headers["Authorization"] == typed.headers["Authorization"] == f"Bearer {FAKE_KEY}"
    assert ours.headers["Content-Type"] == typed.headers["Content-Type"]
    assert (json.loads(reply.text), reply.input_tokens, reply.output_tokens) == (ANSWER, 11, 7)


def replying(status: int, content: bytes, content_type: str) -> openai.OpenAI:
    reply = httpx2.Response(status, content=content, headers={"content-type": content_type})
    return openai.OpenAI(base_url="http://judge.test/v1", api_key=FAKE_KEY, max_retries=0,
                         http_client=httpx2.Client(transport=httpx2.MockTransport(lambda request: reply)))  # fmt: skip


REFUSED = json.dumps(
    {"choices": [{"message": {"content": None, "refusal": "I can't."}}], "usage": {"prompt_tokens": 3}}
)


@pytest.mark.parametrize(("content", "content_type", "text", "tokens_in"), [
    (REFUSED.encode(), "application/json", "(no content; refusal: I can't.)", 3),
    (b'{"choices": [], "usage": null}', "application/json", "(no content)", None),
    (b"[1, 2]", "application/json", "(no content)", None),
    (b"upstream said no", "text/plain", "(no content)", None),  # the SDK gives the text, which holds no completion
])  # fmt: skip
def test_a_reply_is_read_as_leniently_as_the_sdk_reads_it(content, content_type, text, tokens_in):
    endpoint = Endpoint(provider="openai", base_url="http://judge.test/v1", api_key=FAKE_KEY, timeout_s=5)
    reply = call_model(replying(200, content, content_type), endpoint, model="gpt-4o-mini", system="s", user="u",
                       output_kind="binary", params={})  # fmt: skip
    assert (reply.text, reply.input_tokens, reply.output_tokens) == (text, tokens_in, None)


def test_json_that_does_not_parse_is_an_unreadable_reply_asked_again():
    endpoint = Endpoint(provider="openai", base_url="http://judge.test/v1", api_key=FAKE_KEY, timeout_s=5)
    with pytest.raises(ProviderFailure) as failure:
        call_model(replying(200, b"{not json", "application/json"), endpoint, model="gpt-4o-mini", system="s",
                   user="u", output_kind="binary", params={})  # fmt: skip
    assert (failure.value.category, failure.value.retryable) == ("server error", True)
    assert "unreadable response: JSONDecodeError" in failure.value.detail
