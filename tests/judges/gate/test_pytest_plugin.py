"""The pytest plugin, run by pytester on the documentation's example test file (examples/test_agent_with_evalhub.py) in each stage: the judge is the
stand-in provider over real HTTP (it passes an answer containing "30 days"), judged in-process by
evalhub-gate's code, with no server and no Django (`-p no:django`)."""

import functools
import json
import shutil
import threading
from contextlib import contextmanager
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import openai  # noqa: F401 - imported once here: pytester's in-process runs would import it afresh each time
import pytest

from tests.judges.gate.test_cli import PASS_RULE, gate_rubric

pytest_plugins = ["pytester"]

EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "test_agent_with_evalhub.py"
# No Django; and none of the environment's other plugins, which pytester's in-process runs would import afresh
# each time (hypothesis's summary alone took seconds a run).
ALONE = ("-p", "no:django", "-p", "no:cacheprovider", "-p", "no:hypothesispytest", "-p", "no:anyio")


@pytest.fixture
def example(pytester, fake_provider, monkeypatch):
    """The example in a fresh folder, a gate config beside it written by `write(stage, …)`."""
    monkeypatch.delenv("EVALHUB_GATE_CONFIG", raising=False)
    monkeypatch.delenv("EVALHUB_TOKEN", raising=False)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("EVALHUB_CACHE_KEY", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(pytester.path / "user-cache"))  # where the user's own cache key is made
    fake_provider.control(rule=PASS_RULE)
    shutil.copy(EXAMPLE, pytester.path / EXAMPLE.name)

    def write(*rubrics: dict) -> str:
        path = pytester.path / "gates.json"
        path.write_text(json.dumps({"schema": "evalhub.gates/v1", "generated_at": "now", "rubrics": list(rubrics)}))
        return str(path)

    return write


def run(pytester, config: str | None, *args: str):
    options = ["--evalhub-gate-config", config] if config else []
    return pytester.runpytest(*ALONE, "-rsw", *options, *args)


def test_at_gate_a_failing_case_fails_its_test_with_the_judges_reason(pytester, example, fake_provider):
    result = run(pytester, example(gate_rubric(stage="gate")))

    result.assert_outcomes(passed=2, failed=1)
    assert result.ret == 1
    out = result.stdout.str()
    assert "AssertionError: evalhub gate rubric return-policy, case jacket: fail:" in out
    assert "scripted stand-in" in out  # the judge's reason, in the failure message
    # The session ends with evalhub-gate's summary and budget: three calls, none cached.
    assert "= evalhub =" in out
    result.stdout.re_match_lines([r"return-policy\s+gate\s+2\s+1\s+0\s+fail", r"total\s+3\s+0\s+"])
    assert fake_provider.stats()["total"] == 3


def test_at_warn_a_failing_case_is_a_warning_and_the_tests_pass(pytester, example, monkeypatch):
    monkeypatch.setenv("EVALHUB_GATE_CONFIG", example(gate_rubric(stage="warn")))  # the config from the environment
    result = run(pytester, None)

    result.assert_outcomes(passed=3, warnings=1)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*EvalhubWarning: evalhub warn rubric return-policy, case jacket: fail:*"])
    result.stdout.re_match_lines([r"return-policy\s+warn\s+2\s+1\s+0\s+warning"])


@contextmanager
def serving(folder: Path):
    """The folder over HTTP, as a server serves /api/gates (the plugin reads a URL as evalhub-gate does)."""
    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def test_at_observe_nothing_fails_or_warns_and_the_cases_are_recorded(pytester, example):
    example(gate_rubric(stage="observe"))
    with serving(pytester.path) as url:
        pytester.makeini(f"[pytest]\nevalhub_gate_config = {url}/gates.json\n")  # the config from a URL, in the ini
        result = run(pytester, None)

    result.assert_outcomes(passed=3)
    assert result.ret == 0
    result.stdout.re_match_lines([r"return-policy\s+observe\s+2\s+1\s+0\s+recorded"])


def test_a_gate_case_not_evaluated_is_skipped_and_the_session_exits_3_or_fails_when_fail_closed(
    pytester, example, fake_provider
):
    fake_provider.control(fault="500")
    result = run(pytester, example(gate_rubric(stage="gate")), "--evalhub-no-cache")
    result.assert_outcomes(skipped=3)
    assert result.ret == 3  # evalhub-gate's "not evaluated", where pytest alone would say 0
    result.stdout.fnmatch_lines(["SKIPPED*evalhub gate rubric return-policy, case shoes: not evaluated:*"])

    closed = run(pytester, example(gate_rubric(stage="gate", fail_closed=True)), "--evalhub-no-cache")
    closed.assert_outcomes(failed=3)
    assert closed.ret == 1


def test_repeats_and_the_cache_folder_are_evalhub_gates(pytester, example, fake_provider):
    config = example(gate_rubric(stage="warn"))
    first = run(pytester, config, "--evalhub-repeats", "2")
    first.assert_outcomes(passed=3, warnings=1)
    assert fake_provider.stats()["total"] == 6

    again = run(pytester, config, "--evalhub-repeats", "2")  # the same work again: every judgment from the cache
    again.assert_outcomes(passed=3, warnings=1)
    assert fake_provider.stats()["total"] == 6
    again.stdout.re_match_lines([r"total\s+0\s+6\s+"])
    assert (pytester.path / ".evalhub-cache").is_dir()


def test_a_result_holds_every_repeat_and_the_case_is_named_after_its_test(pytester, example):
    pytester.makepyfile(test_repeats="""
        def test_it(evalhub_judge):
            result = evalhub_judge({"input": "Can I return shoes?", "output": "No returns."}, rubric="return-policy",
                                   repeats=2)
            assert result.external_id == "test_repeats.py::test_it"
            assert (result.verdict, result.flipped) == ("fail", False)
            assert result.reason.startswith("2 of 2 repeats: ") and "scripted stand-in" in result.reason
            assert [(r["repeat"], r["verdict"], r["layer"]) for r in result.repeats] == [
                (1, "fail", "behavioral"), (2, "fail", "behavioral")]
    """)
    run(pytester, example(gate_rubric(stage="gate")), "test_repeats.py").assert_outcomes(passed=1)


def test_a_rate_gate_decides_on_the_sessions_cases_at_its_end(pytester, example, fake_provider):
    fake_provider.control(rule={"kind": "always_fail"})
    counts = {"tp": 30, "fn": 0, "fp": 0, "tn": 30}
    rubric = {**gate_rubric(stage="gate"), "gate_on": "pass_rate", "min_agent_pass_rate": 0.5,
              "calibration": {"run": 1, "n": 60, "repeats": 1, "agreement": 1.0, "cases": counts,
                              "cases_single": counts}}
    result = run(pytester, example(rubric))

    result.assert_outcomes(passed=3, warnings=3)  # each failed case is reported, none fails its test alone
    # Three cases are too few for a rate (before: "0.0 % (95 % 0.0-0.0 %)" and a failed gate on it): the rate
    # gate abstains, not evaluated.
    assert result.ret == 3
    result.stdout.fnmatch_lines(["*rate gate: not evaluated: correction not made (too few cases (3 evaluated; "
                                 "the correction needs at least 10)), so the rate gate is not evaluated*"])
    assert "95 % 0.0-0.0 %" not in result.stdout.str()


@pytest.mark.parametrize(("rubrics", "unset", "message"), [
    (None, None, "no gate config: give --evalhub-gate-config"),
    ([gate_rubric(slug="other")], None, "the gate config has no rubric return-policy (it lists other)"),
    ([gate_rubric()], "EVALHUB_JUDGE_API_KEY", "the judges need environment variables that are not set or not "
                                                "usable: EVALHUB_JUDGE_API_KEY is not set (rubric return-policy)"),
    ([{**gate_rubric(), "stage": "shipped"}], None,
     "rubrics[0] (return-policy).stage: expected one of observe, warn, gate"),
])
def test_a_config_error_errors_the_tests_and_the_session_exits_2(pytester, example, monkeypatch, rubrics, unset,
                                                                 message):
    if unset:
        monkeypatch.delenv(unset)
    result = run(pytester, example(*rubrics) if rubrics is not None else None)
    outcomes = result.parseoutcomes()
    assert outcomes.get("passed", 0) == 0 and outcomes.get("failed", 0) + outcomes.get("errors", 0) == 3
    assert result.ret == 2
    assert f"evalhub config error: {message}" in result.stdout.str()


def test_under_ci_the_plugin_keeps_no_cache_unless_told_and_says_why(pytester, example, fake_provider, monkeypatch):
    monkeypatch.setenv("CI", "true")
    config = example(gate_rubric(stage="warn"))
    first = run(pytester, config)
    again = run(pytester, config)

    assert fake_provider.stats()["total"] == 6  # every case asked twice: nothing was cached
    assert not (pytester.path / ".evalhub-cache").exists()
    again.stdout.fnmatch_lines(["evalhub-gate: no cache: under CI the plugin keeps no cache unless "
                                "--evalhub-cache-dir is given*"])
    told = run(pytester, config, "--evalhub-cache-dir", str(pytester.path / "told"))
    told_again = run(pytester, config, "--evalhub-cache-dir", str(pytester.path / "told"))
    assert first.ret == again.ret == told.ret == told_again.ret == 0
    assert fake_provider.stats()["total"] == 9  # told to: the second told run came from the cache


def test_the_user_key_signs_the_local_cache_and_a_folder_signed_otherwise_is_not_used(pytester, example,
                                                                                     fake_provider, monkeypatch):
    config = example(gate_rubric(stage="warn"))
    run(pytester, config)
    assert (pytester.path / "user-cache" / "evalhub" / "cache-key").stat().st_mode & 0o777 == 0o600
    monkeypatch.setenv("EVALHUB_CACHE_KEY", "another key of 32 bytes or more!")  # the folder's entries: not its own
    again = run(pytester, config)
    assert fake_provider.stats()["total"] == 6
    again.assert_outcomes(passed=3, warnings=2)  # the failed case, and the cache's one warning
    again.stdout.fnmatch_lines(["*do not verify under this cache key*"])


# The session's outcome with xdist: the same exit code as the serial run, whatever the number of workers.
XDIST_SESSIONS = {
    "a failed gate case": (lambda: [gate_rubric(stage="gate")], None, (), 1),
    "a gate case not evaluated": (lambda: [gate_rubric(stage="gate")], {"fault": "500"}, ("--evalhub-no-cache",), 3),
    # Three cases are too few to correct the pass rate (at least 10): the rate gate is not evaluated, exit 3, which
    # the controller can only say from the whole session's cases (each worker alone holds one or two).
    "a rate gate": (lambda: [{**gate_rubric(stage="gate"), "gate_on": "pass_rate", "min_agent_pass_rate": 0.5,
                                     "calibration": {"run": 1, "n": 60, "repeats": 1, "agreement": 1.0,
                                                     "cases": {"tp": 30, "fn": 0, "fp": 0, "tn": 30},
                                                     "cases_single": {"tp": 30, "fn": 0, "fp": 0, "tn": 30}}}],
                           {"rule": {"kind": "always_fail"}}, (), 3),
    "an unknown rubric": (lambda: [gate_rubric(slug="other")], None, (), 2),
    "no gate config": (None, None, (), 2),
}


@pytest.mark.parametrize("session", list(XDIST_SESSIONS), ids=list(XDIST_SESSIONS))
def test_under_xdist_the_session_exits_as_it_does_serially(pytester, example, fake_provider, session):
    rubrics, fault, options, serial = XDIST_SESSIONS[session]
    if fault:
        fake_provider.control(**fault)
    config = ["--evalhub-gate-config", example(*rubrics())] if rubrics else []

    alone = pytester.runpytest_subprocess(*ALONE, *config, *options)
    spread = pytester.runpytest_subprocess(*ALONE, *config, *options, "-n", "2")

    assert alone.ret == serial, alone.stdout.str()
    assert spread.ret == serial, spread.stdout.str()  # before: 0, 0, 0, 1, 1
    if rubrics:  # the controller prints the whole session's summary: all three cases, from both workers
        summary = (r".*evalhub-gate: config error: the gate config has no rubric return-policy"
                   if session == "an unknown rubric" else r"return-policy\s+gate\s+\d\s+\d\s+\d\s+\w+")
        spread.stdout.re_match_lines([summary])


def test_the_plugin_does_nothing_in_a_run_that_does_not_ask_for_it(pytester):
    # A fresh process with the plugin loaded from its entry point, as in the project's own test runs.
    pytester.makepyfile(test_plain="""
        import sys

        def test_plain(request):
            assert request.config.pluginmanager.has_plugin("evalhub")
            # Loading the plugin imported neither the engine nor Django.
            assert not [m for m in sys.modules if m.startswith(("judges.engine", "django"))]
    """)
    result = pytester.runpytest_subprocess(*ALONE)
    result.assert_outcomes(passed=1)
    assert result.ret == 0
    assert "= evalhub =" not in result.stdout.str()  # no summary: nothing was judged
