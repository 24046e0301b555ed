"""The CI command from a pipeline's point of view: where the budget went and a cap on it,
rubrics side by side, recalibration announced, cases and outputs as separate files, camelCase names,
hostile JSON, and no text of anyone else's ever starting an output line.

In-process through `judges.gate.cli.main`, against the fake provider (a scripted stand-in over real
HTTP) that passes an answer containing "30 days". The end-to-end test drives the installed command.
"""

import json
import re
import threading
import xml.etree.ElementTree as ET
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

import pytest

from judges.gate import cli as gate_cli
from tests.judges.gate.test_cli import BAD, GOOD, MODEL, PASS_RULE, case, gate_rubric, run, write_config, write_outputs

# Only output tokens cost, at $1,000 a million: a call reserves 200 max_tokens ($0.20) and then costs
# what the stand-in's answer used (~$0.03), so a $0.25 cap lets exactly two calls through one by one.
DEAR = {MODEL: {"input_per_mtok": 0.0, "output_per_mtok": 1000.0}}


@pytest.fixture
def workdir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("GITHUB_STEP_SUMMARY", raising=False)
    monkeypatch.delenv("EVALHUB_TOKEN", raising=False)
    return tmp_path


@pytest.fixture
def judge(fake_provider):
    fake_provider.control(rule=PASS_RULE)
    return fake_provider


def priced(rubric: dict, prices: dict) -> dict:
    return {**rubric, "prices": prices}


def cases_of(n: int, prefix: str = "c") -> list[dict]:
    return [case(f"{prefix}-{i}", "Yes, returns are accepted within 30 days.") for i in range(n)]


# ---- where the budget went ------------------------------------------------------------------------------


def test_it_reports_the_budget_per_rubric_in_the_summary_json_and_junit(workdir, judge, capsys):
    code = run(workdir, [gate_rubric(), gate_rubric("tone", stage="warn")], [*GOOD, BAD],
               "--json", "results.json", "--junit", "junit.xml")
    assert code == 1
    out = capsys.readouterr().out
    # The summary ends with the budget table, its totals and the exit line.
    lines = out.splitlines()
    assert lines[-1] == "evalhub-gate: exit 1 (fail)"
    assert lines[-2].split()[:3] == ["total", "8", "0"]  # 8 calls, 0 cache hits

    payload = json.loads((workdir / "results.json").read_text())
    by_slug = {r["slug"]: r for r in payload["rubrics"]}
    for slug in ("return-policy", "tone"):
        spent = by_slug[slug]
        assert (spent["calls"], spent["cache_hits"], spent["contested"]) == (4, 0, 0)
        assert spent["input_tokens"] > 0 and spent["output_tokens"] > 0
        # The gate config's prices: $0.15 and $0.60 a million tokens.
        assert spent["cost_usd"] == pytest.approx(
            (spent["input_tokens"] * 0.15 + spent["output_tokens"] * 0.6) / 1e6, abs=1e-6)
        assert 0 <= spent["latency_ms_p50"] <= spent["latency_ms_p95"]
    assert payload["totals"]["calls"] == 8
    assert payload["totals"]["input_tokens"] == sum(r["input_tokens"] for r in payload["rubrics"])

    suite = next(s for s in ET.parse(workdir / "junit.xml").iter("testsuite") if s.get("name") == "evalhub.tone")
    properties = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert properties["calls"] == "4" and properties["cache_hits"] == "0" and properties["contested"] == "0"
    assert float(properties["cost_usd"]) == pytest.approx(by_slug["tone"]["cost_usd"])
    assert {"input_tokens", "output_tokens", "latency_ms_p50", "latency_ms_p95"} <= set(properties)


def test_it_counts_cache_hits_and_no_calls_the_second_time(workdir, judge, capsys):
    config = write_config(workdir / "gates.json", gate_rubric())
    outputs = write_outputs(workdir / "outputs.jsonl", GOOD)
    args = ["check", "--config", config, "--outputs", outputs, "--cache-dir", "cache", "--json", "r.json"]
    assert gate_cli.main(args) == 0
    assert gate_cli.main(args) == 0
    [spent] = json.loads((workdir / "r.json").read_text())["rubrics"]
    assert (spent["calls"], spent["cache_hits"], spent["cost_usd"]) == (0, 3, 0.0)
    assert spent["latency_ms_p50"] is None  # nothing called a provider


def test_an_unpriced_model_shows_its_cost_as_unknown(workdir, judge, capsys):
    assert run(workdir, [priced(gate_rubric(), {})], GOOD, "--json", "r.json") == 0
    assert json.loads((workdir / "r.json").read_text())["rubrics"][0]["cost_usd"] is None
    assert "unpriced" in capsys.readouterr().out


# ---- the spend cap -------------------------------------------------------------------------------------------


def test_a_spend_cap_runs_out_part_way_and_gate_rubrics_spend_first(workdir, judge, capsys):
    rubrics = [priced(gate_rubric("tone", stage="warn"), DEAR), priced(gate_rubric(), DEAR)]
    code = run(workdir, rubrics, cases_of(4), "--max-cost-usd", "0.25", "--concurrency", "1", "--json", "r.json")
    assert code == 3  # nothing failed, but some gate-stage case could not be judged
    by_slug = {r["slug"]: r for r in json.loads((workdir / "r.json").read_text())["rubrics"]}
    gate, warn = by_slug["return-policy"], by_slug["tone"]
    assert (gate["passed"], gate["not_evaluated"]) == (2, 2)
    assert (warn["passed"], warn["not_evaluated"], warn["calls"]) == (0, 4, 0)  # listed first, spent nothing
    assert judge.stats()["total"] == 2
    assert "NOT EVALUATED return-policy c-3: spend cap" in capsys.readouterr().out


def test_a_spend_cap_under_fail_closed_fails(workdir, judge):
    rubric = priced(gate_rubric(fail_closed=True), DEAR)
    assert run(workdir, [rubric], cases_of(4), "--max-cost-usd", "0.25", "--concurrency", "1") == 1


def test_a_spend_cap_with_an_unpriced_model_is_a_config_error(workdir, judge, capsys):
    assert run(workdir, [priced(gate_rubric(stage="observe"), {})], GOOD, "--max-cost-usd", "5") == 2
    assert f"has none for return-policy: {MODEL}" in capsys.readouterr().err
    assert judge.stats()["total"] == 0


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "cheap"])
def test_a_spend_cap_must_be_a_finite_amount(workdir, judge, value):
    assert run(workdir, [gate_rubric()], GOOD, "--max-cost-usd", value) == 2


# ---- side by side ---------------------------------------------------------------------------------------------


def test_rubrics_are_judged_side_by_side_under_one_cap(workdir, judge):
    # One case, two rubrics: one after the other, a single call would ever be in flight.
    judge.control(latency_ms=300)
    assert run(workdir, [gate_rubric(), gate_rubric("tone")], GOOD[:1], "--concurrency", "4") == 0
    assert judge.stats()["max_in_flight"] == 2


def test_the_concurrency_cap_covers_all_rubrics_together(workdir, judge):
    judge.control(latency_ms=50)
    rubrics = [gate_rubric(), gate_rubric("tone"), gate_rubric("facts")]
    assert run(workdir, rubrics, cases_of(6), "--concurrency", "2") == 0
    assert judge.stats()["max_in_flight"] == 2


# ---- recalibration ---------------------------------------------------------------------------------------------


def stale(rubric: dict) -> dict:
    return {**rubric, "recalibration_needed": True,
            "recalibration_reasons": ["evidence stale: a case changed", "agreement 0.76 < floor 0.80"]}


def test_it_announces_a_rubric_that_needs_recalibration(workdir, judge, capsys, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    assert run(workdir, [stale(gate_rubric()), gate_rubric("tone")], GOOD) == 0
    lines = capsys.readouterr().out.splitlines()
    assert ("evalhub-gate: warning: recalibration needed for return-policy: evidence stale: a case changed; "
            "agreement 0.76 < floor 0.80") in lines
    warnings = [line for line in lines if line.startswith("::warning")]
    assert warnings == ["::warning title=evalhub recalibration needed return-policy::evidence stale: a case changed; "
                        "agreement 0.76 < floor 0.80"]


def test_require_calibrated_makes_it_a_config_error(workdir, judge, capsys):
    assert run(workdir, [stale(gate_rubric(stage="observe"))], GOOD, "--require-calibrated") == 2
    assert "--require-calibrated: recalibration needed for return-policy (evidence stale" in capsys.readouterr().err
    assert judge.stats()["total"] == 0
    assert run(workdir, [gate_rubric()], GOOD, "--require-calibrated") == 0  # absent means calibrated


@pytest.mark.parametrize(("field", "value"), [("recalibration_needed", "yes"), ("recalibration_reasons", "stale")])
def test_it_checks_the_recalibration_fields(workdir, judge, capsys, field, value):
    assert run(workdir, [{**gate_rubric(), field: value}], GOOD) == 2
    assert field in capsys.readouterr().err


# ---- cases and outputs as two files ------------------------------------------------------------------------------


def write_jsonl(path, lines) -> str:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return str(path)


TOOL_RUBRIC = gate_rubric("tools", layers=["contract"], contract_checks=["expected_tool"], provider=None,
                          model=None, base_url_env=None, api_key_env=None, params={})
CASES = [
    {"external_id": "a", "input": "Cancel order 7", "expected_tool": "cancel_order", "category": "tools",
     "kind": "good", "metadata": {"agent_model": "old"}},
    {"external_id": "b", "input": "Cancel order 8", "expected_tool": "cancel_order", "category": "tools"},
]


def called(tool: str | None) -> dict:
    return {"toolCalls": [{"name": tool, "argument": {}, "result": "ok"}]} if tool else {}


def check(workdir, cases, outputs, *extra, rubrics=(TOOL_RUBRIC,)) -> int:
    config = write_config(workdir / "gates.json", *rubrics)
    return gate_cli.main(["check", "--config", config, "--cases", write_jsonl(workdir / "cases.jsonl", cases),
                          "--outputs", write_jsonl(workdir / "outputs.jsonl", outputs), "--no-cache", *extra])


def test_the_expectations_come_from_the_cases_file(workdir, capsys):
    outputs = [
        {"external_id": "b", "output": "Done.", "trace": called("refund_order")},  # in any order
        {"external_id": "a", "output": "Done.", "trace": called("cancel_order"), "metadata": {"agent_model": "new"}},
    ]
    assert check(workdir, CASES, outputs, "--json", "r.json") == 1
    out = capsys.readouterr().out
    assert "FAIL tools b: contract failed: expected_tool: cancel_order was not called" in out
    assert "tools a" not in out
    assert json.loads((workdir / "r.json").read_text())["rubrics"][0]["failed_cases"] == ["b"]


def test_the_agents_trace_replaces_the_recorded_one(workdir):
    recorded = [{**c, "trace": called("cancel_order")} for c in CASES]
    assert check(workdir, recorded, [{"external_id": "a", "output": "Done."},
                                     {"external_id": "b", "output": "Done."}]) == 1


@pytest.mark.parametrize(
    ("cases", "outputs", "message"),
    [
        (CASES, [{"external_id": "a", "output": "x"}, {"external_id": "b", "output": "x"},
                 {"external_id": "zz", "output": "x"}],
         "line 3: external_id 'zz' is not among the cases"),
        (CASES, [{"external_id": "a", "output": "x"}], "has no output for 1 case(s):\n  'b' (cases line 2)"),
        (CASES, [{"external_id": "a", "output": "x", "expected_tool": None}, {"external_id": "b", "output": "x"}],
         "line 1: expected_tool: not allowed in an outputs line with --cases"),
        (CASES, [{"external_id": "a", "output": "x", "input": "changed"}, {"external_id": "b", "output": "x"}],
         "line 1: input: not allowed in an outputs line with --cases"),
        (CASES, [{"external_id": "a", "output": 7}, {"external_id": "b", "output": "x"}], "line 1: output:"),
        (CASES, [{"external_id": "a", "output": "x"}, {"external_id": "a", "output": "x"}],
         "line 2: external_id 'a' repeats line 1"),
        ([], [{"external_id": "a", "output": "x"}], "cases.jsonl has no cases"),
        (CASES, [], "outputs.jsonl has no outputs"),
        ([{**CASES[0], "output": "an old answer"}], [{"external_id": "a", "output": "x"}],
         "line 1: output: a cases line carries no output"),
        ([{**CASES[0], "kind": "great"}], [{"external_id": "a", "output": "x"}], "line 1: kind: must be one of"),
        ([{**CASES[0], "label": "pass"}], [{"external_id": "a", "output": "x"}], "line 1: label: is not a case field"),
    ],
)
def test_it_exits_2_naming_what_does_not_match(workdir, capsys, cases, outputs, message):
    assert check(workdir, cases, outputs) == 2
    assert message in capsys.readouterr().err


# ---- camelCase golden-dataset names --------------------------------------------------------------------------


def test_it_accepts_the_camel_case_golden_dataset_names(workdir, judge):
    golden = [{"id": "g-1", "question": "Can I return shoes?", "answer": "Yes, within 30 days.",
               "goldenAnswer": "Within 30 days.", "expectedBehavior": "States the window.", "expectedTool": None}]
    assert run(workdir, [gate_rubric()], golden) == 0
    cases = [{"id": "a", "question": "Cancel order 7", "expectedTool": "cancel_order"}]
    assert check(workdir, cases, [{"id": "a", "answer": "Done.", "trace": called("cancel_order")}]) == 0


def test_a_field_named_both_ways_is_an_error_on_its_line(workdir, judge, capsys):
    both = {"id": "g-1", "external_id": "g-1", "input": "q", "output": "a"}
    assert run(workdir, [gate_rubric()], [GOOD[0], both]) == 2
    assert "line 2: external_id is given twice" in capsys.readouterr().err


# ---- hostile JSON ------------------------------------------------------------------------------------------------

HAZARDS = {
    "too deep": '{"external_id": "d", "input": "q", "output": "a", "metadata": ' + "[" * 70 + "]" * 70 + "}",
    "NaN": '{"external_id": "n", "input": "q", "output": "a", "metadata": {"score": NaN}}',
    "Infinity": '{"external_id": "n", "input": "q", "output": "a", "metadata": {"score": -Infinity}}',
    "overflow": '{"external_id": "o", "input": "q", "output": "a", "metadata": {"score": 1e999}}',
    "lone surrogate": '{"external_id": "s", "input": "q", "output": "a\\ud800"}',
    "duplicate key": '{"external_id": "k", "input": "q", "output": "a", "output": "b"}',
}


@pytest.mark.parametrize("hazard", HAZARDS)
def test_hostile_json_in_the_outputs_is_an_error_on_its_line(workdir, judge, capsys, hazard):
    config = write_config(workdir / "gates.json", gate_rubric())
    outputs = write_jsonl(workdir / "outputs.jsonl", [GOOD[0], HAZARDS[hazard]])
    assert gate_cli.main(["check", "--config", config, "--outputs", outputs]) == 2
    err = capsys.readouterr().err
    assert "line 2:" in err and "Traceback" not in err
    assert judge.stats()["total"] == 0


CASE_HAZARDS = {
    "too deep": '{"external_id": "d", "input": "q", "metadata": ' + "[" * 70 + "]" * 70 + "}",
    "NaN": '{"external_id": "n", "input": "q", "metadata": {"score": NaN}}',
    "overflow": '{"external_id": "o", "input": "q", "expected_tool_argument": -1e999}',
    "lone surrogate": '{"external_id": "s", "input": "q\\udc00"}',
    "duplicate key": '{"external_id": "k", "input": "q", "input": "b"}',
}


@pytest.mark.parametrize("hazard", CASE_HAZARDS)
def test_hostile_json_in_the_cases_is_an_error_on_its_line(workdir, capsys, hazard):
    assert check(workdir, [CASES[0], CASE_HAZARDS[hazard]], [{"external_id": "a", "output": "x"}]) == 2
    err = capsys.readouterr().err
    assert "line 2:" in err and "Traceback" not in err


@pytest.mark.parametrize(
    "text",
    [
        '{"schema": "evalhub.gates/v1", "rubrics": []' + ', "x": ' + "[" * 70 + "]" * 70 + "}",
        '{"schema": "evalhub.gates/v1", "rubrics": [], "generated_at": NaN}',
        '{"schema": "evalhub.gates/v1", "rubrics": [], "generated_at": 1e999}',
        '{"schema": "evalhub.gates/v1", "rubrics": [], "generated_at": "\\udfff"}',
        '{"schema": "evalhub.gates/v1",\n "rubrics": [],\n "schema": "evalhub.gates/v1"}',
    ],
)
def test_hostile_json_in_the_gate_config_is_a_config_error(workdir, judge, capsys, text):
    (workdir / "gates.json").write_text(text)
    outputs = write_outputs(workdir / "outputs.jsonl", GOOD)
    assert gate_cli.main(["check", "--config", "gates.json", "--outputs", outputs]) == 2
    err = capsys.readouterr().err
    assert "the gate config is not JSON" in err and "Traceback" not in err


# ---- no text of anyone else's starts an output line ------------------------------------------------------------

EVIL = "x\r\n::error::forged\n##[error]v1\u2028::add-mask::y\x1b[2J"
OUR_ANNOTATION = re.compile(r"^::(warning|error) title=[^:,]*::")


def assert_no_injection(*texts: str) -> None:
    """No line starts a workflow command (`::` after spaces, GitHub's rule) or holds a v1 one (`##[`)
    but the annotations the command writes itself, whose title and message hold no `::`."""
    for text in texts:
        for line in re.split(r"\r\n|\r|\n", text):
            assert "##[" not in line, line
            assert "\x1b" not in line, line
            if line.lstrip().startswith("::"):
                match = OUR_ANNOTATION.match(line)
                assert match and "::" not in line[match.end():], line


def evil_slug(**extra) -> dict:
    # A judge's rubric must be a slug, so a config naming this one is refused, naming it.
    return {**gate_rubric(), "slug": EVIL, **extra}


def stale_because(reason: str) -> dict:
    return {**gate_rubric(), "recalibration_needed": True, "recalibration_reasons": [reason]}


@pytest.fixture
def github(monkeypatch, workdir):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(workdir / "summary.md"))


@pytest.mark.parametrize(
    ("rubrics", "outputs", "extra", "code"),
    [
        # a slug in the config errors
        ([evil_slug()], GOOD, (), 2),
        ([evil_slug(stage="draft")], GOOD, (), 2),
        ([evil_slug(fail_closed="yes")], GOOD, (), 2),
        ([gate_rubric(), evil_slug(), evil_slug()], GOOD, (), 2),
        # recalibration reasons: announced (with a GitHub warning), and refused under --require-calibrated
        ([stale_because(EVIL)], GOOD, (), 0),
        ([stale_because(EVIL)], GOOD, ("--require-calibrated",), 2),
        # the gate config's other text: its schema, a judge's fields, a price's model
        ([{**gate_rubric(), "judge": {**gate_rubric()["judge"], "provider": EVIL}}], GOOD, (), 2),
        ([{**gate_rubric(), "judge": {**gate_rubric()["judge"], EVIL: 1}}], GOOD, (), 2),
        ([{**gate_rubric(), "prices": {EVIL: {"input_per_mtok": "x"}}}], GOOD, (), 2),
        # case ids: in the case lines and annotations, and in the outputs file's errors
        ([gate_rubric()], [case(EVIL, "No returns.")], (), 1),
        ([gate_rubric()], [case(EVIL, "x"), case(EVIL, "x")], (), 2),
        ([gate_rubric()], [{**GOOD[0], EVIL: 1}], (), 2),
        # arguments quoted back by the argument parser
        ([gate_rubric()], GOOD, ("--concurrency", EVIL), 2),
    ],
)
def test_no_text_from_a_config_a_file_or_a_judge_starts_an_output_line(
    workdir, judge, github, capsys, rubrics, outputs, extra, code
):
    assert run(workdir, rubrics, outputs, *extra) == code
    captured = capsys.readouterr()
    assert_no_injection(captured.out, captured.err)
    assert "forged" in captured.out + captured.err  # the text is shown, made harmless
    if (workdir / "summary.md").exists():
        assert_no_injection((workdir / "summary.md").read_text())


def test_the_config_schema_never_starts_an_output_line(workdir, judge, capsys):
    (workdir / "gates.json").write_text(json.dumps({"schema": EVIL, "rubrics": []}))
    outputs = write_outputs(workdir / "o.jsonl", GOOD)
    assert gate_cli.main(["check", "--config", "gates.json", "--outputs", outputs]) == 2
    captured = capsys.readouterr()
    assert_no_injection(captured.out, captured.err)
    assert "forged" in captured.err


def test_a_judges_reason_never_starts_an_output_line(workdir, judge, github, capsys):
    judge.control(rule={"kind": "not", "rule": {"kind": "answer_contains", "text": EVIL}})
    assert run(workdir, [gate_rubric()], [case("c", f"It says {EVIL}")]) == 1
    captured = capsys.readouterr()
    assert_no_injection(captured.out, captured.err)
    assert "forged" in captured.out


def test_the_cases_file_and_the_outputs_with_cases_never_start_an_output_line(workdir, github, capsys):
    cases = [{**CASES[0], "external_id": EVIL}, CASES[1]]
    outputs = [{"external_id": EVIL, "output": "x", "trace": called("cancel_order")},
               {"external_id": "b", "output": "x"}, {"external_id": f"{EVIL}-2", "output": "x"}]
    assert check(workdir, cases, outputs) == 2  # not among the cases
    assert check(workdir, cases, outputs[:2]) == 1  # b failed; the evil id passed
    assert check(workdir, cases, outputs[1:2]) == 2  # the evil id has no output
    captured = capsys.readouterr()
    assert_no_injection(captured.out, captured.err)
    assert captured.err.count("forged") == 2


# ---- evalhub-gate cases: against a stand-in for the server's GET /api/datasets/<slug>/cases ------------------


class CasesServer:
    """Answers every GET with the status and body it is given, and remembers what was asked."""

    def __init__(self) -> None:
        self.status, self.body, self.requests = 200, b"", []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                server.requests.append({"path": self.path, "authorization": self.headers.get("Authorization")})
                self.send_response(server.status)
                self.send_header("Content-Type", "application/jsonl")
                self.send_header("Content-Length", str(len(server.body)))
                self.end_headers()
                self.wfile.write(server.body)

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def answer(self, status: int, lines) -> None:
        self.status = status
        self.body = "".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines).encode()


@pytest.fixture
def server():
    stand_in = CasesServer()
    yield stand_in
    stand_in.httpd.shutdown()
    stand_in.httpd.server_close()


def cases_command(server, *extra) -> int:
    return gate_cli.main(["cases", "--server", server.url + "/", "--dataset", "store support", "--out", "cases.jsonl",
                          *extra])


def test_it_writes_the_cases_the_server_sends(workdir, server, capsys, monkeypatch):
    monkeypatch.setenv("EVALHUB_TOKEN", "evh_cases-token")
    server.answer(200, CASES)
    code = cases_command(server, "--sample", "20", "--seed", "pr-stable", "--category", "tools", "--split", "dev",
                         "--kind", "good")
    assert code == 0
    [asked] = server.requests
    path, _, query = asked["path"].partition("?")
    assert path == "/api/datasets/store%20support/cases"
    assert parse_qs(query) == {"category": ["tools"], "split": ["dev"], "kind": ["good"], "sample": ["20"],
                               "seed": ["pr-stable"]}
    assert asked["authorization"] == "Bearer evh_cases-token"
    assert [json.loads(line) for line in (workdir / "cases.jsonl").read_text().splitlines()] == CASES
    assert "wrote 2 case(s) of dataset store support to cases.jsonl" in capsys.readouterr().out
    assert list(workdir.iterdir()) == [workdir / "cases.jsonl"]  # no partial file left behind


@pytest.mark.parametrize(
    ("status", "lines", "message"),
    [
        (200, [], "has no cases"),
        (200, [CASES[0], {**CASES[1], "output": "x"}], "line 2: output: a cases line carries no output"),
        (200, [CASES[0], '{"external_id": "z", "input": NaN}'], "line 2: is not valid JSON"),
        (403, ['{"error": "this token lacks the cases:read scope"}'],
         "HTTP 403, the token may not do this (a scope it lacks, or another project's): this token lacks the "
         "cases:read scope"),
        (404, ['{"error": "no dataset store support"}'], "HTTP 404"),
    ],
)
def test_it_exits_2_and_writes_nothing_when_the_cases_are_not_usable(workdir, server, capsys, status, lines, message):
    (workdir / "cases.jsonl").write_text("the previous file\n")
    server.answer(status, lines)
    assert cases_command(server) == 2
    assert message in capsys.readouterr().err
    assert (workdir / "cases.jsonl").read_text() == "the previous file\n"
    assert list(workdir.iterdir()) == [workdir / "cases.jsonl"]


def test_a_sample_and_its_seed_go_together_and_the_filters_are_checked(workdir, server, capsys):
    assert cases_command(server, "--seed", "x") == 2
    assert cases_command(server, "--sample", "3") == 2
    assert cases_command(server, "--kind", "great") == 2
    assert cases_command(server, "--split", "test") == 2
    assert server.requests == []


def test_the_servers_text_never_starts_an_output_line(workdir, server, github, capsys):
    server.answer(403, [json.dumps({"error": EVIL})])
    assert cases_command(server) == 2
    server.answer(200, [{**CASES[0], EVIL: 1}])
    assert cases_command(server) == 2
    assert gate_cli.main(["cases", "--server", server.url, "--dataset", EVIL, "--out", "c.jsonl"]) == 2
    captured = capsys.readouterr()
    assert_no_injection(captured.out, captured.err)
    assert captured.err.count("forged") == 3
