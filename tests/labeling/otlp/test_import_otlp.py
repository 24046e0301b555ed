"""`import_cases --format otlp`: a file of OTLP/JSON lines, as the Collector's file exporter writes it."""

import pytest
from django.core.management import CommandError, call_command

from labeling.models import Case, Dataset
from tests.labeling.otlp.helpers import (
    ANSWER,
    QUESTION,
    genai_trace,
    json_body,
    openinference_trace,
    recording_tracer,
    silent_trace,
)

pytestmark = pytest.mark.django_db


def test_each_trace_of_the_file_becomes_a_case_even_split_over_lines(project, tmp_path, capsys):
    tracer, exporter = recording_tracer()
    genai_id, openinference_id = genai_trace(tracer), openinference_trace(tracer)
    spans = exporter.get_finished_spans()
    path = tmp_path / "traces.jsonl"
    # The genai trace's root span is on the second line, with the other trace: the lines are joined by trace.
    path.write_bytes(json_body(spans[:4]) + b"\n" + json_body(spans[4:]) + b"\n")

    call_command("import_cases", "from-collector", str(path), "--format", "otlp")

    cases = {case.external_id: case for case in project.datasets.get(slug="from-collector").cases.all()}
    assert set(cases) == {genai_id, openinference_id}
    assert (cases[genai_id].input, cases[genai_id].output) == (QUESTION, ANSWER)
    assert [call["name"] for call in cases[genai_id].trace["toolCalls"]] == ["lookup_order"]
    assert "2 created" in capsys.readouterr().out


def test_a_trace_that_cannot_be_a_case_rejects_the_file_naming_it(project, tmp_path, capsys):
    tracer, exporter = recording_tracer()
    genai_trace(tracer)
    silent_id = silent_trace(tracer)
    path = tmp_path / "traces.jsonl"
    path.write_bytes(json_body(exporter.get_finished_spans()) + b"\nnot json\n")

    with pytest.raises(CommandError, match="rejected with 2 error"):
        call_command("import_cases", "from-collector", str(path), "--format", "otlp")

    errors = capsys.readouterr().err
    assert f"line 1: trace {silent_id} has no messages" in errors and "line 2: is not valid JSON" in errors
    assert not Case.objects.exists() and not Dataset.objects.filter(slug="from-collector").exists()


def test_tool_calls_that_start_in_the_same_millisecond_keep_the_order_the_model_asked_for_them(project, tmp_path):
    # As the JS SDK stamps spans (millisecond clock): both tool spans start at the same instant, and the
    # batch lists the second call's span first. The model's message asked getOrderStatus, then cancelOrder.
    tracer, exporter = recording_tracer()
    start = 1_765_000_000_000_000_000
    with tracer.start_as_current_span("agent", start_time=start) as root:
        root.set_attribute("openinference.span.kind", "AGENT")
        with tracer.start_as_current_span("llm", start_time=start + 1_000_000) as llm:
            llm.set_attribute("openinference.span.kind", "LLM")
            llm.set_attribute("llm.input_messages.0.message.role", "user")
            llm.set_attribute("llm.input_messages.0.message.content", QUESTION)
            for index, (call_id, name) in enumerate([("call_a", "getOrderStatus"), ("call_b", "cancelOrder")]):
                prefix = f"llm.output_messages.0.message.tool_calls.{index}.tool_call"
                llm.set_attribute(f"{prefix}.id", call_id)
                llm.set_attribute(f"{prefix}.function.name", name)
                llm.set_attribute(f"{prefix}.function.arguments", '{"order_id": "A-1001"}')
        tools = []
        for name, result in [("cancelOrder", "cancelled"), ("getOrderStatus", "processing")]:
            tool = tracer.start_span(name, start_time=start + 5_000_000)
            tool.set_attribute("openinference.span.kind", "TOOL")
            tool.set_attribute("tool.name", name)
            tool.set_attribute("input.value", '{"order_id": "A-1001"}')
            tool.set_attribute("output.value", result)
            tools.append(tool)
        for tool in tools:
            tool.end(end_time=start + 6_000_000)
        root.set_attribute("output.value", ANSWER)
    path = tmp_path / "traces.jsonl"
    path.write_bytes(json_body(exporter.get_finished_spans()) + b"\n")

    call_command("import_cases", "from-collector", str(path), "--format", "otlp")

    case = project.datasets.get(slug="from-collector").cases.get()
    assert case.trace["toolCalls"] == [
        {"name": "getOrderStatus", "argument": {"order_id": "A-1001"}, "result": "processing"},
        {"name": "cancelOrder", "argument": {"order_id": "A-1001"}, "result": "cancelled"},
    ]
