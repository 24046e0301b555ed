"""A small ShopNest support agent on the real `openai` SDK, instrumented by a real OpenTelemetry
instrumentation and exported with the official OTLP/HTTP exporters: what a team points at evalhub.

Run as its own process (an instrumentation patches the `openai` module for the whole process):

    python -m tests.labeling.otlp.agent --instrumentation openinference --openai-url URL/v1 \
        --traces-url URL/api/otlp/v1/traces --logs-url URL/api/otlp/v1/logs --token T --dataset SLUG --runs 3

It prints one JSON line: the trace ids it made, in order. Its model is the scripted stand-in
(judges/testing/fake_provider.py); the test scripts each turn (`SCRIPT`): the first asks for two tool calls,
the second answers in text. Instrumentations:

- `openinference` / `openinference-tools`: openinference-instrumentation-openai; with `-tools` each tool runs
  under OpenInference's `@tracer.tool` decorator; the retrieval step is a RETRIEVER span with its documents;
- `openai-v2`: opentelemetry-instrumentation-openai-v2 with the latest conventions, messages on the spans
  (OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental, capture SPAN_ONLY); `openai-v2-events`: the same
  package's event form (2.3b0 with OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true), messages as
  log records; the retrieval step is a GenAI `retrieval` span;
- `openllmetry`: Traceloop's opentelemetry-instrumentation-openai; `openllmetry-0.47`: the same, its 0.47.5
  release on the OpenTelemetry stack of its day (the test puts that stack first on the path).
"""

import argparse
import json
import os
import sys

MODEL = "gpt-4o-mini"
QUESTION = "Where is my order A-{n}? If it has not shipped, cancel it please."
ANSWER = "Order A-{n} had not shipped, so I cancelled it; the refund reaches your card in 3-5 days."
DOCUMENTS = [("policy-cancel", "Orders that have not shipped can be cancelled free of charge."),
             ("policy-refund", "Refunds reach the card in 3-5 business days.")]
TOOLS = [
    {"type": "function", "function": {
        "name": "getOrderStatus", "description": "The status of an order.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}}},
    {"type": "function", "function": {
        "name": "cancelOrder", "description": "Cancel an order that has not shipped.",
        "parameters": {"type": "object", "properties": {"order_id": {"type": "string"}, "reason": {"type": "string"}},
                       "required": ["order_id"]}}},
]


def script(n: int) -> list[dict]:
    """The stand-in's answers for run n: two tool calls, then the answer."""
    order = f"A-{n}"
    return [{"agent_turn": {"content": None, "tool_calls": [
        {"name": "getOrderStatus", "arguments": {"order_id": order}},
        {"name": "cancelOrder", "arguments": {"order_id": order, "reason": "customer asked"}}]}},
        {"agent_turn": {"content": ANSWER.format(n=n)}}]


def expected_calls(n: int) -> list[dict]:
    """The tool calls run n makes, as a case's trace.toolCalls."""
    order = f"A-{n}"
    return [{"name": "getOrderStatus", "argument": {"order_id": order},
             "result": {"order_id": order, "status": "processing"}},
            {"name": "cancelOrder", "argument": {"order_id": order, "reason": "customer asked"},
             "result": {"order_id": order, "cancelled": True}}]


def get_order_status(order_id: str) -> dict:
    return {"order_id": order_id, "status": "processing"}


def cancel_order(order_id: str, reason: str = "") -> dict:
    return {"order_id": order_id, "cancelled": True}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--instrumentation", required=True)
    parser.add_argument("--openai-url", required=True)
    parser.add_argument("--traces-url", required=True)
    parser.add_argument("--logs-url", default="")
    parser.add_argument("--token", required=True)
    parser.add_argument("--dataset", required=True)
    parser.add_argument("--first", type=int, default=1001)
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()
    kind = args.instrumentation
    if kind == "openai-v2":
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
    elif kind == "openai-v2-events":
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"

    import openai
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    headers = {"Authorization": f"Bearer {args.token}", "X-Evalhub-Dataset": args.dataset}
    resource = Resource.create({"service.name": "shopnest-support"})
    provider = TracerProvider(resource=resource)
    provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter(endpoint=args.traces_url, headers=headers)))
    trace.set_tracer_provider(provider)
    logger_provider = None
    if kind == "openai-v2-events":
        from opentelemetry._logs import set_logger_provider
        from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
        from opentelemetry.sdk._logs import LoggerProvider
        from opentelemetry.sdk._logs.export import BatchLogRecordProcessor

        logger_provider = LoggerProvider(resource=resource)
        logger_provider.add_log_record_processor(
            BatchLogRecordProcessor(OTLPLogExporter(endpoint=args.logs_url, headers=headers)))
        set_logger_provider(logger_provider)

    tools = {"getOrderStatus": get_order_status, "cancelOrder": cancel_order}
    if kind.startswith("openinference"):
        from openinference.instrumentation import OITracer, TraceConfig
        from openinference.instrumentation.openai import OpenAIInstrumentor

        OpenAIInstrumentor().instrument(tracer_provider=provider)
        tracer = OITracer(provider.get_tracer("shopnest"), config=TraceConfig())
        if kind == "openinference-tools":
            tools = {spec["function"]["name"]: tracer.tool(
                name=spec["function"]["name"], description=spec["function"]["description"],
                parameters=spec["function"]["parameters"])(tools[spec["function"]["name"]]) for spec in TOOLS}
    elif kind.startswith("openai-v2"):
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor as OpenAIV2Instrumentor

        OpenAIV2Instrumentor().instrument(tracer_provider=provider, logger_provider=logger_provider)
        tracer = provider.get_tracer("shopnest")
    elif kind.startswith("openllmetry"):
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor as OpenLLMetryInstrumentor

        OpenLLMetryInstrumentor().instrument(tracer_provider=provider)
        tracer = provider.get_tracer("shopnest")
    else:
        raise SystemExit(f"unknown instrumentation {kind!r}")

    client = openai.OpenAI(base_url=args.openai_url, api_key="sk-test-not-a-real-key", max_retries=0)
    trace_ids = []
    for n in range(args.first, args.first + args.runs):
        trace_ids.append(run(client, tracer, kind, tools, n))
    assert provider.force_flush(20_000)
    if logger_provider is not None:
        assert logger_provider.force_flush(20_000)
        logger_provider.shutdown()
    provider.shutdown()
    print(json.dumps(trace_ids))


def run(client, tracer, kind: str, tools: dict, n: int) -> str:
    """One conversation: retrieve, ask the model (it asks for two tools), run them, ask again (it answers)."""
    openinference = kind.startswith("openinference")
    with tracer.start_as_current_span("shopnest.support") as root:
        if openinference:
            root.set_attribute("openinference.span.kind", "AGENT")
        else:
            root.set_attribute("gen_ai.operation.name", "invoke_agent")
        with tracer.start_as_current_span("retrieve policies") as retrieval:
            if openinference:
                retrieval.set_attribute("openinference.span.kind", "RETRIEVER")
                for i, (doc_id, text) in enumerate(DOCUMENTS):
                    retrieval.set_attribute(f"retrieval.documents.{i}.document.id", doc_id)
                    retrieval.set_attribute(f"retrieval.documents.{i}.document.content", text)
            else:
                retrieval.set_attribute("gen_ai.operation.name", "retrieval")
                retrieval.set_attribute("gen_ai.retrieval.documents", json.dumps(
                    [{"id": doc_id, "content": text} for doc_id, text in DOCUMENTS]))
        context = "\n".join(text for _, text in DOCUMENTS)
        messages: list[dict] = [{"role": "system", "content": f"You are ShopNest's support agent.\n{context}"},
                                {"role": "user", "content": QUESTION.format(n=n)}]
        first = client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
        asked = first.choices[0].message
        messages.append(asked.model_dump(exclude_none=True))
        for call in asked.tool_calls or []:
            result = tools[call.function.name](**json.loads(call.function.arguments))
            messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
        client.chat.completions.create(model=MODEL, messages=messages, tools=TOOLS)
    return format(root.get_span_context().trace_id, "032x")


if __name__ == "__main__":
    sys.exit(main())
