"""A trace as a case, without a database: spans recorded by the official SDK in each convention, encoded as its
OTLP exporter encodes them, read back and made into the case."""

import json

import pytest

from labeling.otlp.traces import (
    OtlpBodyError,
    Span,
    TraceProblem,
    merged_pieces,
    request_from_json,
    request_from_protobuf,
    span_pieces,
    spans_of,
    trace_case,
)
from tests.labeling.otlp.helpers import (
    ANSWER,
    MODEL,
    QUESTION,
    event_trace,
    genai_trace,
    json_body,
    openinference_trace,
    protobuf_body,
    recording_tracer,
    silent_trace,
)


def _case(body_of, make) -> dict:
    tracer, exporter = recording_tracer()
    trace_id = make(tracer)
    body = body_of(exporter.get_finished_spans())
    request = request_from_protobuf(body) if body_of is protobuf_body else request_from_json(body.decode())
    spans = spans_of(request)
    assert {span.trace_id for span in spans} == {trace_id}
    return trace_case(trace_id, [span_pieces(span) for span in spans])


@pytest.mark.parametrize("body_of", [protobuf_body, json_body], ids=["protobuf", "otlp-json"])
def test_it_reads_the_current_genai_conventions(body_of):
    case = _case(body_of, genai_trace)

    assert len(case["external_id"]) == 32
    assert case["input"] == QUESTION  # the first user message, not the system prompt
    assert case["output"] == ANSWER  # the last assistant message with text, not the tool-call turn
    assert case["trace"] == {
        "toolCalls": [{"name": "lookup_order", "argument": {"order_id": "A-1001"},
                       "result": {"status": "delivered", "days_since_delivery": 12}}],
        "retrievedSources": ["returns-policy"],
    }
    root_span = case["metadata"]["otlp"].pop("root_span")
    assert len(root_span) == 16  # the root span's id: an exported verdict is parented to it
    assert case["metadata"] == {"agent_model": MODEL, "otlp": {"spans": 5, "service": "support-agent"}}


def test_it_reads_the_older_event_form():
    case = _case(protobuf_body, event_trace)

    assert (case["input"], case["output"]) == (QUESTION, ANSWER)
    assert case["trace"] == {}
    assert case["metadata"]["agent_model"] == "gpt-4o"


def test_it_reads_openinference():
    case = _case(protobuf_body, openinference_trace)

    assert (case["input"], case["output"]) == (QUESTION, ANSWER)
    assert case["trace"] == {
        "toolCalls": [{"name": "lookup_order", "argument": {"order_id": "A-1001"}, "result": "delivered"}],
        "retrievedSources": ["returns-policy", "shipping-faq"],
    }
    assert case["metadata"]["agent_model"] == "claude-sonnet-4-5"


def test_a_root_span_with_only_input_and_output_values_is_a_case():
    root = Span(trace_id="ab" * 16, span_id="01" * 8, parent_span_id="", name="chain", start=1, end=2,
                attributes={"openinference.span.kind": "CHAIN", "input.value": QUESTION, "output.value": ANSWER})

    case = trace_case(root.trace_id, [span_pieces(root)])

    assert (case["input"], case["output"], case["trace"]) == (QUESTION, ANSWER, {})


@pytest.mark.parametrize("attributes, events", [
    # The current conventions' messages on the inference event instead of the span.
    ({}, [("gen_ai.client.inference.operation.details", {
        "gen_ai.input.messages": json.dumps([{"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]),
        "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}]),
    })]),
    # Indexed attributes, as OpenLLMetry writes them.
    ({"gen_ai.prompt.0.role": "user", "gen_ai.prompt.0.content": QUESTION,
      "gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": ANSWER}, []),
    # The 1.28 events holding the message lists, with a provider's content blocks.
    ({}, [("gen_ai.content.prompt", {"gen_ai.prompt": json.dumps([{"role": "user", "content": QUESTION}])}),
          ("gen_ai.content.completion", {"gen_ai.completion": json.dumps(
              [{"role": "assistant", "content": [{"type": "text", "text": ANSWER}]}])})]),
], ids=["inference-event", "indexed", "content-events"])
def test_it_reads_the_other_places_messages_are_written(attributes, events):
    chat = Span(trace_id="ab" * 16, span_id="01" * 8, parent_span_id="", name="chat", start=1, end=2,
                attributes={"gen_ai.request.model": "m", **attributes}, events=events)

    case = trace_case(chat.trace_id, [span_pieces(chat)])

    assert (case["input"], case["output"], case["metadata"]["agent_model"]) == (QUESTION, ANSWER, "m")


def test_a_trace_with_no_messages_is_a_problem_saying_so():
    with pytest.raises(TraceProblem, match="has no messages"):
        _case(protobuf_body, silent_trace)


def test_pieces_sent_twice_count_once_and_the_case_waits_for_nothing_but_its_root():
    tracer, exporter = recording_tracer()
    trace_id = genai_trace(tracer)
    request = request_from_protobuf(protobuf_body(exporter.get_finished_spans()))
    pieces = [span_pieces(span) for span in spans_of(request)]
    children, root = pieces[:-1], pieces[-1:]

    assert trace_case(trace_id, merged_pieces(children, children, root))["metadata"]["otlp"]["spans"] == 5
    with pytest.raises(TraceProblem):
        trace_case(trace_id, root)  # the root span alone says nothing


@pytest.mark.parametrize("body", [b"\xff\x00garbage", b"\x0a\x05abc"])
def test_a_body_that_is_not_protobuf_is_a_body_error(body):
    with pytest.raises(OtlpBodyError, match="not an OTLP traces request"):
        request_from_protobuf(body)


@pytest.mark.parametrize("text, message", [
    ("{not json", "not JSON"),
    ("[1, 2]", "JSON object with resourceSpans"),
    ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"traceId": "zz"}]}]}]}', "traceId 'zz' is not hex"),
    ('{"resourceSpans": 3}', "not an OTLP traces request"),
    ('{"resourceSpans": [{"scopeSpans": [{"spans": [{"name": 5}]}]}]}', "not an OTLP traces request"),
])
def test_json_that_is_not_otlp_is_a_body_error(text, message):
    with pytest.raises(OtlpBodyError, match=message):
        request_from_json(text)


def _span(span_id: str, start: int, attributes: dict, parent: str = "root") -> dict:
    return span_pieces(Span(trace_id="ab" * 16, span_id=span_id, parent_span_id=parent, name=span_id, start=start,
                            end=start + 1, attributes=attributes))


_ASKING = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps([
    {"role": "user", "parts": [{"type": "text", "content": QUESTION}]}]),
    "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [
        {"type": "tool_call", "id": "c1", "name": "getOrderStatus", "arguments": {"order_id": "A-1"}},
        {"type": "tool_call", "id": "c2", "name": "cancelOrder", "arguments": {"order_id": "A-1"}}]}])}
_ANSWERING = {"gen_ai.operation.name": "chat", "gen_ai.input.messages": json.dumps([
    {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c2", "response": "cancelled"}]},
    {"role": "tool", "parts": [{"type": "tool_call_response", "id": "c1", "response": {"status": "open"}}]}]),
    "gen_ai.output.messages": json.dumps([{"role": "assistant", "parts": [{"type": "text", "content": ANSWER}]}])}


def test_tool_calls_come_from_the_model_messages_when_there_are_no_tool_spans():
    pieces = [_span("root", 0, {}, parent=""), _span("chat1", 1, _ASKING), _span("chat2", 5, _ANSWERING)]

    assert trace_case("ab" * 16, pieces)["trace"]["toolCalls"] == [
        {"name": "getOrderStatus", "argument": {"order_id": "A-1"}, "result": {"status": "open"}},
        {"name": "cancelOrder", "argument": {"order_id": "A-1"}, "result": "cancelled"}]


def test_a_call_asked_for_and_run_under_a_tool_span_counts_once():
    tool = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "getOrderStatus",
            "gen_ai.tool.call.id": "c1", "gen_ai.tool.call.arguments": '{"order_id": "A-1"}',
            "gen_ai.tool.call.result": '{"status": "open"}'}
    pieces = [_span("root", 0, {}, parent=""), _span("chat1", 1, _ASKING), _span("tool", 3, tool),
              _span("chat2", 5, _ANSWERING)]

    assert trace_case("ab" * 16, pieces)["trace"]["toolCalls"] == [
        {"name": "getOrderStatus", "argument": {"order_id": "A-1"}, "result": {"status": "open"}}]


def test_tool_spans_that_start_together_without_messages_keep_span_order():
    pieces = [_span("root", 0, {"input.value": QUESTION, "output.value": ANSWER}, parent="")] + [
        _span(name, 3, {"openinference.span.kind": "TOOL", "tool.name": name}) for name in ("b", "a", "c")]

    assert [call["name"] for call in trace_case("ab" * 16, pieces)["trace"]["toolCalls"]] == ["b", "a", "c"]
