"""Agent traces made with the official OpenTelemetry SDK, in the three ways instrumentations write them, and
their bodies as the official OTLP/HTTP exporter encodes them (protobuf) and as OTLP/JSON."""

import base64
import json
from collections.abc import Sequence

from google.protobuf import json_format
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

QUESTION = "Can I return the shoes from order A-1001? Mail me at jane.doe@example.com"
ANSWER = "Yes: order A-1001 is within the 30-day window. A label is on its way to jane.doe@example.com."
MODEL = "gpt-4o-mini-2024-07-18"


def recording_tracer():
    """A tracer of its own provider (never the global one) and the exporter that keeps its ended spans."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "support-agent"}))
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider.get_tracer("tests.otlp"), exporter


def _text(role: str, text: str) -> dict:
    return {"role": role, "parts": [{"type": "text", "content": text}]}


def genai_trace(tracer, *, question: str = QUESTION, answer: str = ANSWER, model: str = MODEL) -> str:
    """An agent run as the current GenAI conventions write it: invoke_agent → chat (asks for a tool) →
    retrieval → execute_tool → chat (answers): five spans. Returns the trace id in hex."""
    arguments = {"order_id": "A-1001"}
    result = {"status": "delivered", "days_since_delivery": 12}
    with tracer.start_as_current_span("invoke_agent support") as root:
        root.set_attribute("gen_ai.operation.name", "invoke_agent")
        root.set_attribute("gen_ai.agent.name", "support")
        with tracer.start_as_current_span(f"chat {model}") as chat:
            chat.set_attribute("gen_ai.operation.name", "chat")
            chat.set_attribute("gen_ai.request.model", model)
            chat.set_attribute("gen_ai.input.messages", json.dumps(
                [_text("system", "You are the store's support agent."), _text("user", question)]))
            chat.set_attribute("gen_ai.output.messages", json.dumps([{
                "role": "assistant", "finish_reason": "tool_call",
                "parts": [{"type": "tool_call", "id": "call_1", "name": "lookup_order", "arguments": arguments}]}]))
        with tracer.start_as_current_span("retrieval policies") as retrieval:
            retrieval.set_attribute("gen_ai.operation.name", "retrieval")
            retrieval.set_attribute("gen_ai.retrieval.documents", json.dumps([{"id": "returns-policy", "score": 0.9}]))
        with tracer.start_as_current_span("execute_tool lookup_order") as tool:
            tool.set_attribute("gen_ai.operation.name", "execute_tool")
            tool.set_attribute("gen_ai.tool.name", "lookup_order")
            tool.set_attribute("gen_ai.tool.call.arguments", json.dumps(arguments))
            tool.set_attribute("gen_ai.tool.call.result", json.dumps(result))
        with tracer.start_as_current_span(f"chat {model}") as chat:
            chat.set_attribute("gen_ai.operation.name", "chat")
            chat.set_attribute("gen_ai.request.model", model)
            chat.set_attribute("gen_ai.input.messages", json.dumps([
                _text("user", question),
                {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_1", "response": result}]}]))
            chat.set_attribute("gen_ai.output.messages", json.dumps([_text("assistant", answer)]))
    return format(root.get_span_context().trace_id, "032x")


def event_trace(tracer, *, question: str = QUESTION, answer: str = ANSWER) -> str:
    """The older GenAI form: messages as gen_ai.*.message and gen_ai.choice span events."""
    with tracer.start_as_current_span("chat gpt-4o") as chat:
        chat.set_attribute("gen_ai.operation.name", "chat")
        chat.set_attribute("gen_ai.request.model", "gpt-4o")
        chat.add_event("gen_ai.system.message", {"content": "Be brief."})
        chat.add_event("gen_ai.user.message", {"content": question})
        chat.add_event("gen_ai.choice", {"index": 0, "finish_reason": "stop",
                                         "message": json.dumps({"role": "assistant", "content": answer})})
    return format(chat.get_span_context().trace_id, "032x")


def openinference_trace(tracer, *, question: str = QUESTION, answer: str = ANSWER) -> str:
    """OpenInference (Arize Phoenix): an AGENT span with a RETRIEVER, a TOOL and an LLM span under it."""
    with tracer.start_as_current_span("agent") as root:
        root.set_attribute("openinference.span.kind", "AGENT")
        # As LangChain's instrumentation writes the chain's input: the question is the LLM's user message.
        root.set_attribute("input.value", json.dumps({"input": question}))
        root.set_attribute("input.mime_type", "application/json")
        with tracer.start_as_current_span("retrieve") as retriever:
            retriever.set_attribute("openinference.span.kind", "RETRIEVER")
            retriever.set_attribute("retrieval.documents.0.document.id", "returns-policy")
            retriever.set_attribute("retrieval.documents.1.document.id", "shipping-faq")
        with tracer.start_as_current_span("tool_call") as tool:  # the name is in tool.name
            tool.set_attribute("openinference.span.kind", "TOOL")
            tool.set_attribute("tool.name", "lookup_order")
            # As its @tracer.tool decorator writes them: the call's arguments, and the tool's schema.
            tool.set_attribute("input.value", '{"order_id": "A-1001"}')
            tool.set_attribute("tool.parameters", '{"type": "object", "properties": {"order_id": {"type": "string"}}}')
            tool.set_attribute("output.value", "delivered")
        with tracer.start_as_current_span("llm") as llm:
            llm.set_attribute("openinference.span.kind", "LLM")
            llm.set_attribute("llm.model_name", "claude-sonnet-4-5")
            llm.set_attribute("llm.input_messages.0.message.role", "system")
            llm.set_attribute("llm.input_messages.0.message.content", "Be brief.")
            llm.set_attribute("llm.input_messages.1.message.role", "user")
            llm.set_attribute("llm.input_messages.1.message.content", question)
            llm.set_attribute("llm.output_messages.0.message.role", "assistant")
            llm.set_attribute("llm.output_messages.0.message.content", answer)
        root.set_attribute("output.value", json.dumps({"output": answer}))
    return format(root.get_span_context().trace_id, "032x")


def silent_trace(tracer) -> str:
    """A trace with no messages at all: an HTTP handler's span and a database call under it."""
    with tracer.start_as_current_span("GET /health") as root:
        root.set_attribute("http.request.method", "GET")
        with tracer.start_as_current_span("SELECT 1"):
            pass
    return format(root.get_span_context().trace_id, "032x")


def protobuf_body(spans: Sequence[ReadableSpan]) -> bytes:
    """The body the OTLP/HTTP exporter sends for these spans."""
    return encode_spans(spans).SerializePartialToString()


def json_body(spans: Sequence[ReadableSpan]) -> bytes:
    """The same request in OTLP/JSON: protobuf's JSON mapping with the ids as hex."""
    value = json_format.MessageToDict(encode_spans(spans))
    for resource_spans in value["resourceSpans"]:
        for scope_spans in resource_spans["scopeSpans"]:
            for span in scope_spans["spans"]:
                for key in ("traceId", "spanId", "parentSpanId"):
                    if key in span:
                        span[key] = base64.b64decode(span[key]).hex()
    return json.dumps(value).encode()
