import io
import json
from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db.models import JSONNull
from django.utils import timezone

from labeling.disputes.selectors import counting_labels
from labeling.importing import Format, ImportRejected, format_for, reading
from labeling.importing import cases as importing
from labeling.importing.cases import cases_import
from labeling.models import Case, Dataset, Label, case_split, labeled_content_hash

pytestmark = pytest.mark.django_db

GOOD = {
    "external_id": "ret-001",
    "input": "Can I return shoes after 40 days?",
    "output": "No: returns are accepted within 30 days.",
    "trace": {
        "retrievedSources": ["policy-returns"],
        "toolCalls": [{"name": "lookup_order", "argument": {"order": 42}, "result": {"days": 40}}],
        "context": "Returns: 30 days.",
    },
    "golden_answer": "Returns are accepted within 30 days of delivery.",
    "expected_behaviour": "Decline politely and cite the 30-day window.",
    "expected_tool": "lookup_order",
    "expected_tool_argument": {"order": 42},
    "expected_source": "policy-returns",
    "category": "policy",
    "metadata": {"agent_model": "gpt-4o-mini-2024-07-18"},
}


def case(**changes) -> dict:
    data = {**GOOD, **changes}
    return {k: v for k, v in data.items() if v is not ...}  # `...` drops a field


def jsonl(*objects) -> bytes:
    return "".join((o if isinstance(o, str) else json.dumps(o)) + "\n" for o in objects).encode()


def run(dataset, content: bytes, fmt: Format = Format.JSONL, **kwargs):
    return cases_import(dataset=dataset, stream=io.BytesIO(content), fmt=fmt, **kwargs)


def rejected(dataset, content: bytes, fmt: Format = Format.JSONL, **kwargs) -> list[tuple]:
    with pytest.raises(ImportRejected) as info:
        run(dataset, content, fmt, **kwargs)
    return [(e.row, e.field, e.message) for e in info.value.errors]


def test_it_creates_cases_with_their_split_and_content_hash(dataset):
    result = run(dataset, jsonl(case(), case(external_id="ret-002", trace=..., metadata=...)))

    assert (result.created, result.updated, result.unchanged) == (2, 0, 0)
    first, second = Case.objects.order_by("external_id")
    assert first.trace == GOOD["trace"] and first.expected_tool_argument == {"order": 42}
    assert first.metadata == {"agent_model": "gpt-4o-mini-2024-07-18"}
    assert first.split == case_split("ret-001") and second.split == case_split("ret-002")
    assert first.content_hash == labeled_content_hash(input=GOOD["input"], output=GOOD["output"], trace=GOOD["trace"])
    assert second.trace == {} and second.metadata == {}


def test_it_ignores_blank_lines_and_a_byte_order_mark(dataset):
    content = b"\xef\xbb\xbf" + jsonl(case()) + b"\n   \n" + jsonl(case(external_id="b"))
    assert run(dataset, content).created == 2


def test_it_defaults_absent_optional_fields(dataset):
    run(dataset, jsonl({"external_id": "bare", "input": "hi", "output": ""}))
    bare = Case.objects.get()
    assert (bare.trace, bare.metadata, bare.golden_answer, bare.category) == ({}, {}, "", "")
    assert bare.expected_tool is None and bare.expected_source is None
    assert Case.objects.filter(expected_tool_argument__isnull=True).count() == 1  # not checked


def test_it_keeps_a_json_null_argument_apart_from_an_unchecked_one(dataset):
    run(dataset, jsonl(case(external_id="null-arg", expected_tool_argument=None),
                       case(external_id="no-arg", expected_tool_argument=...)))
    assert list(Case.objects.filter(expected_tool_argument__isnull=True).values_list("external_id", flat=True)) == [
        "no-arg"
    ]
    assert Case.objects.filter(expected_tool_argument=JSONNull()).get().external_id == "null-arg"


@pytest.mark.parametrize(
    ("line", "field", "message"),
    [
        ('{"external_id": "x", "input": "a"', None, "is not valid JSON"),
        ('["not", "an", "object"]', None, "must be a JSON object, not a list"),
        (json.dumps(case(external_id=...)), "external_id", "is required"),
        (json.dumps(case(external_id="  ")), "external_id", "must not be empty"),
        (json.dumps(case(external_id=7)), "external_id", "must be a string, not a number"),
        (json.dumps(case(input=...)), "input", "is required"),
        (json.dumps(case(output=["a"])), "output", "must be a string, not a list"),
        (json.dumps(case(trace="calls: none")), "trace", "must be an object, not a string"),
        (json.dumps(case(trace={"toolCalls": {"name": "x"}})), "trace.toolCalls", "must be a list of objects"),
        (json.dumps(case(trace={"toolCalls": ["lookup"]})), "trace.toolCalls[0]", "must be an object"),
        (json.dumps(case(trace={"toolCalls": [{"argument": 1}]})), "trace.toolCalls[0].name", "is required"),
        (json.dumps(case(trace={"toolCalls": [{"name": "", "argument": 1}]})), "trace.toolCalls[0].name",
         "is required"),
        (json.dumps(case(trace={"toolCalls": [{"name": None}]})), "trace.toolCalls[0].name", "is required"),
        # the column holds 200: one more is a line error, never a database error
        (json.dumps(case(external_id="x" * 201)), "external_id", "is 201 characters long; the limit is 200"),
        (json.dumps(case(expected_tool="t" * 201)), "expected_tool", "the limit is 200"),
        (json.dumps(case(expected_source="s" * 501)), "expected_source", "the limit is 500"),
        (json.dumps(case(trace={"retrievedSources": ["a", 2]})), "trace.retrievedSources", "list of strings"),
        (json.dumps(case(trace={"context": ["a"]})), "trace.context", "must be a string"),
        (json.dumps(case(expected_tool=3)), "expected_tool", "must be a string, not a number"),
        (json.dumps(case(expected_source={"id": 1})), "expected_source", "must be a string, not an object"),
        (json.dumps(case(metadata=["gpt"])), "metadata", "must be an object, not a list"),
        (json.dumps(case(category="x" * 101)), "category", "the limit is 100"),
        (json.dumps(case(ouput="typo")), "ouput", "is not a case field"),
        (json.dumps(case(output="a\x00b")), "output", "NUL character"),
        (json.dumps(case(trace={"extra": {"k\x00": 1}})), "trace", "NUL character"),
        (json.dumps(case(metadata={"note": ["\\\x00"]})), "metadata", "NUL character"),
        ('{"external_id": "x", "input": "a", "output": "b", "metadata": {"score": NaN}}', None, "NaN"),
    ],
)
def test_it_rejects_a_bad_line_with_its_number_and_field(dataset, line, field, message):
    content = jsonl(case(external_id="good-1")) + line.encode() + b"\n" + jsonl(case(external_id="good-2"))

    errors = rejected(dataset, content)

    assert [(row, f) for row, f, _ in errors] == [(2, field)]
    assert message in errors[0][2]
    assert not Case.objects.exists()  # all or nothing: the good lines are not written either


def test_an_external_id_of_exactly_200_characters_is_stored_whole(dataset):
    longest = "x" * 199 + "é"  # characters, not bytes, are what the column counts
    run(dataset, jsonl(case(external_id=longest)))
    assert Case.objects.get().external_id == longest


def test_it_lists_every_error_of_the_file(dataset):
    content = jsonl(
        case(external_id="a"),
        case(external_id="b", input=...),
        "{not json",
        case(external_id="a"),
        case(external_id="c", trace=[], metadata=1),
    )
    errors = rejected(dataset, content)
    assert [(row, field) for row, field, _ in errors] == [
        (2, "input"), (3, None), (4, "external_id"), (5, "trace"), (5, "metadata"),
    ]
    assert "appears twice" in errors[2][2] and "first at 1" in errors[2][2]
    assert not Case.objects.exists()


def test_it_accepts_text_that_only_looks_like_an_escape(dataset):
    run(dataset, jsonl(case(trace={"context": "\\u0000 and NaN"}, metadata={"Infinity": "\\\\u0000"})))
    assert Case.objects.get().trace["context"] == "\\u0000 and NaN"


def test_it_rejects_a_line_that_is_not_utf8(dataset):
    content = jsonl(case(external_id="a")) + '{"external_id": "é"}\n'.encode("latin-1")
    errors = rejected(dataset, content)
    assert errors == [(2, None, "is not UTF-8 text (byte 0xe9 at column 18); save the file as UTF-8")]


def test_it_rejects_a_file_over_the_size_limit(dataset, settings):
    content = jsonl(*(case(external_id=f"c{i}") for i in range(20)))
    settings.EVALHUB_IMPORT_MAX_BYTES = len(content) - 1
    errors = rejected(dataset, content)
    assert errors[0][0] is None and "larger than the limit" in errors[0][2]
    assert not Case.objects.exists()
    settings.EVALHUB_IMPORT_MAX_BYTES = len(content)
    assert run(dataset, content).created == 20


def test_it_limits_each_text_field(dataset, monkeypatch):
    monkeypatch.setattr(reading, "MAX_TEXT_CHARS", 10)
    errors = rejected(dataset, jsonl({"external_id": "a", "input": "x" * 11, "output": "y" * 10}))
    assert errors == [(1, "input", "is 11 characters long; the limit is 10")]


def test_it_rejects_an_empty_file(dataset):
    assert rejected(dataset, b"\n\n") == [(None, None, "the file has no cases")]


def test_it_refuses_existing_external_ids_without_the_update_flag(dataset):
    run(dataset, jsonl(case(external_id="a")))
    errors = rejected(dataset, jsonl(case(external_id="new"), case(external_id="a", output="changed")))
    assert [(row, field) for row, field, _ in errors] == [(2, "external_id")]
    assert "already exists" in errors[0][2]
    assert list(Case.objects.values_list("external_id", "output")) == [("a", GOOD["output"])]


def test_it_updates_changed_cases_with_the_update_flag(dataset, rubric, reviewer):
    run(dataset, jsonl(case(external_id="same"), case(external_id="changed"), case(external_id="recat")))
    long_ago = timezone.now() - timedelta(days=3)
    Case.objects.update(content_changed_at=long_ago)
    before = {c.external_id: c for c in Case.objects.all()}
    for c in before.values():
        Label.objects.create(case=c, rubric=rubric, reviewer=reviewer, verdict="pass", content_hash=c.content_hash)

    result = run(
        dataset,
        jsonl(
            case(external_id="same"),
            case(external_id="changed", output="Sure, any time."),
            case(external_id="recat", category="edge", metadata={"agent_model": "other"}),
            case(external_id="added"),
        ),
        update=True,
    )

    assert (result.created, result.updated, result.unchanged) == (1, 2, 1)
    after = {c.external_id: c for c in Case.objects.all()}
    assert after["changed"].output == "Sure, any time."
    assert after["changed"].content_hash != before["changed"].content_hash
    assert after["changed"].content_changed_at > long_ago  # runs judged the old answer: stale
    # Category and metadata do not change what a judge sees or what reviewers judged.
    assert after["recat"].category == "edge" and after["recat"].content_hash == before["recat"].content_hash
    assert after["recat"].content_changed_at == long_ago
    assert after["same"].content_changed_at == long_ago
    counting = set(counting_labels(rubric=rubric).values_list("case__external_id", flat=True))
    assert counting == {"same", "recat"}  # the label on the changed answer stopped counting


def test_it_marks_a_changed_expectation_as_new_content_without_touching_labels(dataset):
    run(dataset, jsonl(case(external_id="a")))
    Case.objects.update(content_changed_at=timezone.now() - timedelta(days=1))
    before = Case.objects.get()
    run(dataset, jsonl(case(external_id="a", expected_tool_argument=None)), update=True)
    after = Case.objects.get()
    assert after.content_changed_at > before.content_changed_at
    assert after.content_hash == before.content_hash  # reviewers judged input, output and trace only
    assert Case.objects.filter(expected_tool_argument=JSONNull()).exists()


def test_it_treats_a_reimport_of_the_same_file_as_unchanged(dataset):
    content = jsonl(case(external_id="a", expected_tool_argument=None), case(external_id="b", trace=...))
    run(dataset, content)
    result = run(dataset, content, update=True)
    assert (result.created, result.updated, result.unchanged) == (0, 0, 2)


# --- CSV ------------------------------------------------------------------------------------------


def csv_text(*rows: str, header="external_id,input,output,trace,metadata,expected_tool_argument") -> bytes:
    return ("\r\n".join([header, *rows]) + "\r\n").encode()


def test_it_imports_csv_with_json_text_cells(dataset):
    content = csv_text(
        'a,"Hi, there","Line one\nline two","{""toolCalls"": [{""name"": ""t""}]}","{""k"": 1}",null',
        "b,hi,ok,,,",
    )
    assert run(dataset, content, Format.CSV).created == 2
    a, b = Case.objects.order_by("external_id")
    assert (a.input, a.output, a.trace, a.metadata) == ("Hi, there", "Line one\nline two",
                                                        {"toolCalls": [{"name": "t"}]}, {"k": 1})
    assert Case.objects.filter(expected_tool_argument=JSONNull()).get() == a
    assert (b.trace, b.metadata, b.expected_tool_argument) == ({}, {}, None)


def test_it_reports_csv_errors_with_the_line_each_row_starts_on(dataset):
    content = csv_text(
        'a,"multi\nline",ok,,,',
        'b,hi,ok,"{not json}",,',
        "c,hi",
        'd,hi,ok,"[1]",,',
    )
    errors = rejected(dataset, content, Format.CSV)
    assert [(row, field) for row, field, _ in errors] == [(4, "trace"), (5, None), (6, "trace")]
    assert "JSON text" in errors[0][2] and "has 2 cells" in errors[1][2]


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("external_id,output", "lacks the required column(s) input"),
        ("external_id,input,output,reply", "unknown column(s) reply"),
        ("external_id,input,output,input", "repeats the column(s) input"),
        # `answer` is the camelCase golden-dataset name of output (docs/cases.md)
        ("external_id,input,output,answer", "repeats the column(s) output (as answer and output)"),
    ],
)
def test_it_rejects_a_bad_csv_header_once(dataset, header, message):
    errors = rejected(dataset, csv_text("a,b,c", "d,e,f", header=header), Format.CSV)
    assert len(errors) == 1 and errors[0][0] == 1 and message in errors[0][2]


def test_it_chooses_the_format_from_the_extension_unless_told():
    assert format_for("cases.JSONL") == Format.JSONL
    assert format_for("cases.csv") == Format.CSV
    assert format_for("cases.txt", "csv") == Format.CSV
    with pytest.raises(ValueError, match="extension"):
        format_for("cases.txt")


# --- the command ----------------------------------------------------------------------------------


def test_the_command_creates_the_dataset_and_reports_counts(project, tmp_path, capsys):
    path = tmp_path / "cases.jsonl"
    path.write_bytes(jsonl(case(external_id="a"), case(external_id="b")))

    call_command("import_cases", "new-set", str(path))  # the instance's one project is implied

    assert project.datasets.get(slug="new-set").cases.count() == 2
    assert "2 created, 0 updated, 0 unchanged" in capsys.readouterr().out
    call_command("import_cases", "new-set", str(path), "--update")
    assert "0 created, 0 updated, 2 unchanged" in capsys.readouterr().out


def test_the_command_lists_every_error_and_creates_nothing(project, tmp_path, capsys):
    path = tmp_path / "cases.data"
    path.write_bytes(jsonl(case(external_id="a", input=...), "nope"))

    with pytest.raises(CommandError, match="rejected with 2 error"):
        call_command("import_cases", "new-set", str(path), "--format", "jsonl")

    err = capsys.readouterr().err
    assert "line 1: input: is required" in err and "line 2: is not valid JSON" in err
    assert not Dataset.objects.filter(slug="new-set").exists()


def test_the_command_refuses_an_unknown_extension(project, tmp_path):
    path = tmp_path / "cases.data"
    path.write_bytes(jsonl(case()))
    with pytest.raises(CommandError, match="--format"):
        call_command("import_cases", "new-set", str(path))


# --- the two write paths --------------------------------------------------------------------------


def test_postgresql_imports_take_the_copy_path():
    # Fails when Case gains a column: add it to importing.COPY_INSERT_COLUMNS (and the update list).
    assert importing.copy_path_available()


def snapshot(dataset) -> list[dict]:
    return [
        {**{name: getattr(c, name) for name in reading.CASE_FIELDS},
         "checked": Case.objects.filter(pk=c.pk, expected_tool_argument__isnull=False).exists(),
         "split": c.split, "hash": c.content_hash, "changed": c.content_changed_at > c.created_at}
        for c in Case.objects.filter(dataset=dataset).order_by("external_id")
    ]


def test_the_copy_path_and_the_orm_path_write_the_same_rows(dataset, other_dataset, monkeypatch):
    first = jsonl(case(external_id="a", expected_tool_argument=None), case(external_id="b", trace=...),
                  case(external_id="c", output="line\r\nbreak\ttab \\ backslash é"), case(external_id="d"))
    second = jsonl(case(external_id="a", expected_tool_argument=None), case(external_id="b", output="new"),
                   case(external_id="c", output="line\r\nbreak\ttab \\ backslash é", category="edge"),
                   case(external_id="d", expected_tool_argument=...), case(external_id="e"))

    copy_results = [run(dataset, first), run(dataset, second, update=True)]
    monkeypatch.setattr(importing, "copy_path_available", lambda: False)
    orm_results = [run(other_dataset, first), run(other_dataset, second, update=True)]

    assert copy_results == orm_results
    assert str(copy_results[1]) == "1 created, 3 updated, 1 unchanged"
    assert snapshot(dataset) == snapshot(other_dataset)
    # b's answer and d's argument changed what a judge sees; c only moved category.
    assert [row["changed"] for row in snapshot(dataset)] == [False, True, False, True, False]


@pytest.mark.parametrize("content", [
    json.dumps([case(external_id="a"), case(external_id="b")], indent=2).encode(),
    json.dumps([case(external_id="a"), case(external_id="b")]).encode(),
])
def test_a_json_array_is_one_clear_error_saying_how_to_convert_it(dataset, content):
    # Before: "line 1: is not valid JSON" on every line of an indented golden.json, or "Cannot tell the format".
    assert format_for("golden.json") == Format.JSONL
    errors = rejected(dataset, content)
    assert len(errors) == 1 and errors[0][:2] == (None, None)
    assert "the file is one JSON array, not JSON Lines" in errors[0][2] and "jq -c '.[]'" in errors[0][2]
    assert not Case.objects.exists()


def test_the_import_pages_required_line_is_what_the_import_requires(lead_client, dataset):
    # Before: "Required: external_id, input, output", though a golden set with no answer imports fine.
    from django.urls import reverse

    from labeling.importing.reading import CASE_REQUIRED
    from tests.conftest import TEST_PROJECT

    page = lead_client.get(reverse("labeling:dataset_import", args=[TEST_PROJECT, dataset.slug])).content.decode()
    required = page.split("Required:")[1].split("</p>")[0]
    assert [name for name in ("external_id", "input", "output") if f"<code>{name}</code>" in required.split(";")[0]] \
        == list(CASE_REQUIRED)
    assert "<code>output</code> (or <code>answer</code>) is optional" in required
    run(dataset, jsonl(case(external_id="no-answer", output=...)))  # and indeed it imports
    assert Case.objects.get(external_id="no-answer").output is None


def test_answers_attach_to_an_existing_golden_set_with_update(dataset):
    # Before: {id, answer} lines with --update were refused, "input: is required".
    run(dataset, jsonl(case(external_id="a", output=...), case(external_id="b", output=...)))
    result = run(dataset, jsonl({"id": "a", "answer": "Within 30 days."}), update=True)
    assert (result.created, result.updated) == (0, 1)
    a = Case.objects.get(external_id="a")
    assert (a.input, a.output, a.golden_answer) == (GOOD["input"], "Within 30 days.", GOOD["golden_answer"])
    assert a.expected_tool_argument == GOOD["expected_tool_argument"] and a.trace == GOOD["trace"]
    assert Case.objects.get(external_id="b").output is None
    # A new case still needs its question, and the error names the file's own fields.
    errors = rejected(dataset, jsonl({"id": "new", "answer": "x"}), update=True)
    assert [(row, field) for row, field, _ in errors] == [(1, "input")]


def test_errors_name_the_files_own_fields(dataset):
    # Before: a file that said id and question read errors about external_id and input.
    errors = rejected(dataset, jsonl({"id": "q1", "question": 5}))
    assert [field for _, field, _ in errors] == ["question"]
    errors = rejected(dataset, jsonl({"id": "q1", "question": "Hi?"}, {"id": "q1", "question": "Again?"}))
    assert [field for _, field, _ in errors] == ["id"]
