"""evalhub's pytest plugin: judge an agent's answer inside a test with a gate config's calibrated judge
(docs/gate.md, "The pytest plugin").

    pytest --evalhub-gate-config gates.json          (or the ini option evalhub_gate_config, or $EVALHUB_GATE_CONFIG)

    def test_returns(evalhub_judge):
        result = evalhub_judge({"input": question, "output": my_agent(question)}, rubric="return-policy")
        assert_judged(result)

The judging is evalhub-gate's, in-process: the same gate config checks, engine, cache folder, majority of
repeats and stage rules (judges.gate.judging), with no server and no database. `assert_judged` applies the
rubric's stage: observe records only, warn turns a failure into a pytest warning, gate fails the test with
the judge's reason (a case not evaluated is skipped, or fails under fail_closed; a rubric gated on the
agent's pass rate decides at the end of the session). The session ends with evalhub-gate's summary and
budget, and its exit code where pytest's would say less: 1 when a rate gate failed, 3 when a gate-stage
case could not be judged, 2 on a config error. Under pytest-xdist each worker judges its own tests and hands
what it judged (and its config errors) to the controller when it finishes, which sums them up: the summary and
the exit code are the same with any number of workers.

The cache folder: the plugin judges in the process of the code under test, which can read any key the
plugin holds and so sign a forged verdict. Under CI (`CI=true`) it keeps no cache unless `--evalhub-cache-dir`
is given; elsewhere it signs entries with $EVALHUB_CACHE_KEY, else with a key of the user's kept outside the
checkout (docs/gate.md, "The cache").

Registered through the `pytest11` entry point, so it is loaded in every pytest run of an environment
where evalhub is installed: it does nothing until a test asks for its fixtures, and imports nothing
heavy before that.
"""

from __future__ import annotations

import io
import os
import secrets
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import pytest

if TYPE_CHECKING:
    from judges.engine import FolderCache
    from judges.gate.config import GateRubric
    from judges.gate.judging import RubricResult

CONFIG_ENV = "EVALHUB_GATE_CONFIG"
CONFIG_INI = "evalhub_gate_config"
CACHE_KEY_ENV = "EVALHUB_CACHE_KEY"
# What a worker hands the controller under xdist (config.workeroutput), and what the controller reads back.
WORKER_OUTPUT = "evalhub"


class EvalhubWarning(UserWarning):
    """A warn-stage rubric failed a case (or a rate-gated rubric did): reported, never failing the test."""


@dataclass(frozen=True)
class Judged:
    """One case judged by one rubric: the case's verdict (the majority of its evaluated repeats; a tie is not
    evaluated), its reason, and each repeat as evalhub-gate's JSON shows it: {repeat, verdict, layer,
    failed_checks, scores, similarity, reason}."""

    rubric: str
    stage: str
    fail_closed: bool
    gates_on_rate: bool
    external_id: str
    verdict: str  # pass | fail | not_evaluated
    reason: str
    repeats: list[dict[str, Any]]
    flipped: bool

    @property
    def passed(self) -> bool:
        return self.verdict == "pass"

    def explain(self) -> str:
        """The verdict and the judge's reasons, every line safe to print (untrusted text on one line each)."""
        from judges.gate.messages import one_line

        closed = " (fail_closed)" if self.fail_closed and self.stage == "gate" else ""
        lines = [f"evalhub {self.stage}{closed} rubric {one_line(self.rubric, 80)}, case "
                 f"{one_line(self.external_id, 200)}: {self.verdict.replace('_', ' ')}: {one_line(self.reason)}"]
        if len(self.repeats) > 1 or self.repeats and self.repeats[0]["failed_checks"]:
            for r in self.repeats:
                checks = f" [failed checks: {one_line(', '.join(r['failed_checks']))}]" if r["failed_checks"] else ""
                lines.append(f"  repeat {r['repeat']}: {r['verdict']} ({r['layer'] or 'no layer'}){checks}: "
                             f"{one_line(r['reason'])}")
        return "\n".join(lines)


def assert_judged(result: Judged) -> None:
    """Apply the rubric's stage to a judged case, as evalhub-gate does to a check.

    observe: records only. warn: a failed case is an EvalhubWarning, the test passes. gate: a failed case
    fails the test with the judge's reason; a case not evaluated fails under fail_closed, else the test is
    skipped saying why (the session then exits 3, as evalhub-gate would). A rubric gated on the agent's pass
    rate is decided on the whole session's cases at its end: a failed case only warns here.
    """
    __tracebackhide__ = True
    if result.stage == "observe" or result.passed:
        return
    if result.stage == "warn" or result.gates_on_rate:
        if result.verdict == "fail":
            warnings.warn(EvalhubWarning(result.explain()), stacklevel=2)
        return
    if result.verdict == "fail" or result.fail_closed:
        raise AssertionError(result.explain())
    pytest.skip(result.explain())


@dataclass
class _Gate:
    """The session's gate config and everything judged with it, for the summary and the exit code."""

    rubrics: dict[str, GateRubric]
    cache: FolderCache | None
    repeats: int
    concurrency: int
    env: Mapping[str, str]
    allowed_env: tuple[str, ...]
    ready: set[str] = field(default_factory=set)  # rubrics whose judges' variables were checked
    no_cache_why: str | None = None  # why the session keeps no cache, said in the summary
    results: dict[str, RubricResult] = field(default_factory=dict)
    judged_ids: dict[str, int] = field(default_factory=dict)


@dataclass
class _State:
    gate: _Gate | None = None
    config_errors: list[str] = field(default_factory=list)


_STATE = pytest.StashKey[_State]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("evalhub", "evalhub: judge agent outputs with a gate config's calibrated judges")
    group.addoption("--evalhub-gate-config", metavar="URL_OR_FILE",
                    help=f"the gate config (a file, or https://…/api/gates with $EVALHUB_TOKEN); also the ini option "
                         f"{CONFIG_INI} or ${CONFIG_ENV}")
    group.addoption("--evalhub-repeats", type=int, default=1, metavar="K",
                    help="judge each case K times; its verdict is the majority, a tie is not evaluated (default 1)")
    group.addoption("--evalhub-cache-dir", metavar="DIR",
                    help="evalhub-gate's cache folder (default: .evalhub-cache in the rootdir; under CI=true no cache "
                         "unless this is given)")
    group.addoption("--evalhub-no-cache", action="store_true", help="ask the judges again even for cached work")
    group.addoption("--evalhub-concurrency", type=int, default=4, metavar="N",
                    help="judge calls in flight at once within one case's repeats (default 4)")
    parser.addini(CONFIG_INI, "evalhub's gate config for the evalhub_judge fixture (a file, relative to the ini "
                              "file, or a URL)")


def pytest_configure(config: pytest.Config) -> None:
    config.stash[_STATE] = _State()


def _config_source(config: pytest.Config) -> str | None:
    given = config.getoption("--evalhub-gate-config")
    if given:
        return str(given)
    ini = config.getini(CONFIG_INI)
    if ini:
        ini = str(ini)
        if not ini.startswith(("http://", "https://")) and config.inipath is not None:
            return str(config.inipath.parent / ini)
        return ini
    return os.environ.get(CONFIG_ENV) or None


def _config_error(config: pytest.Config, message: str) -> NoReturn:
    """Record a config error (the session exits 2, as evalhub-gate would) and fail the test (or the fixture's
    setup) with it."""
    errors = config.stash[_STATE].config_errors
    if message not in errors:  # each test that meets it fails; the summary says it once
        errors.append(message)
    pytest.fail(f"evalhub config error: {message}", pytrace=False)


def _error_text(error: Exception) -> str:
    from judges.gate.messages import ConfigError, one_line

    if isinstance(error, ConfigError):
        return "\n  ".join([one_line(error.message, None), *(one_line(d, None) for d in error.details)])
    return one_line(str(error), None)


def _load_gate(config: pytest.Config, *, with_cache: bool = True) -> _Gate:
    from judges.engine import FolderCache
    from judges.gate.config import allowed_env_names, load_gate_config, parse_gate_config
    from judges.gate.messages import ConfigError
    from judges.gate.server import TOKEN_ENV, checked_token

    source = _config_source(config)
    if source is None:
        raise ConfigError(f"no gate config: give --evalhub-gate-config URL_OR_FILE, the ini option {CONFIG_INI} or "
                          f"${CONFIG_ENV}")
    repeats, concurrency = config.getoption("--evalhub-repeats"), config.getoption("--evalhub-concurrency")
    if repeats < 1 or concurrency < 1:
        raise ConfigError("--evalhub-repeats and --evalhub-concurrency must be at least 1")
    env = os.environ
    token = checked_token(env.get(TOKEN_ENV) or None, given_as=f"${TOKEN_ENV}")
    rubrics = parse_gate_config(load_gate_config(source, token=token))
    cache, no_cache_why = None, None
    if with_cache and not config.getoption("--evalhub-no-cache"):
        given = config.getoption("--evalhub-cache-dir")
        key = env.get(CACHE_KEY_ENV) or None
        if env.get("CI", "").lower() == "true" and not given:
            no_cache_why = ("under CI the plugin keeps no cache unless --evalhub-cache-dir is given: it judges in the "
                            "process of the code under test, which could read its key and sign forged verdicts")
        elif key is None and (key := _user_cache_key()) is None:
            no_cache_why = f"no cache key: set ${CACHE_KEY_ENV}"
        else:
            folder = given or str(config.rootpath / ".evalhub-cache")
            try:
                cache = FolderCache(folder, key=key.encode(), warn=_cache_warning)
            except OSError as exc:
                raise ConfigError(f"--evalhub-cache-dir {folder}: {exc.strerror or exc}") from None
            except ValueError as exc:  # a key too short
                raise ConfigError(f"${CACHE_KEY_ENV}: {exc}") from None
    return _Gate(rubrics={r.slug: r for r in rubrics}, cache=cache, repeats=repeats, concurrency=concurrency,
                 env=env, allowed_env=allowed_env_names([], env), no_cache_why=no_cache_why)


def _user_cache_key() -> str | None:
    """The user's own cache key, made on first use in their cache folder, outside any checkout (so a committed
    cache folder cannot bring the key that signs it); None when it can be neither read nor made."""
    home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = Path(home) / "evalhub" / "cache-key"
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return path.read_text().strip() or None
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_hex(32))
        return path.read_text().strip()
    except OSError:
        return None


def _cache_warning(message: str) -> None:
    warnings.warn(EvalhubWarning(f"evalhub cache: {message}"), stacklevel=2)


@pytest.fixture(scope="session")
def evalhub_gate_config(pytestconfig: pytest.Config) -> dict[str, GateRubric]:
    """The gate config's rubrics by slug, read once and checked whole (as evalhub-gate checks it)."""
    from judges.gate.messages import ConfigError

    state = pytestconfig.stash[_STATE]
    if state.gate is None:
        try:
            state.gate = _load_gate(pytestconfig)
        except ConfigError as exc:
            _config_error(pytestconfig, _error_text(exc))
    return state.gate.rubrics


def _judge(config: pytest.Config, gate: _Gate, case: Any, *, rubric: str, repeats: int | None,
           test_id: str) -> Judged:
    from judges.gate.config import check_env_names, check_environment
    from judges.gate.judging import RubricResult, judge_all, refused_keys, repeat_summary
    from judges.gate.messages import ConfigError, one_line
    from judges.gate.outputs import check_case

    if rubric not in gate.rubrics:
        known = ", ".join(one_line(s, 80) for s in sorted(gate.rubrics)) or "none"
        _config_error(config, f"the gate config has no rubric {one_line(rubric, 80)} (it lists {known})")
    chosen = gate.rubrics[rubric]
    if repeats is not None and (isinstance(repeats, bool) or not isinstance(repeats, int) or repeats < 1):
        _config_error(config, f"repeats must be a whole number from 1, not {one_line(repr(repeats), 40)}")
    try:
        if rubric not in gate.ready:
            check_env_names([chosen], gate.allowed_env)  # before any variable is read, let alone sent anywhere
            check_environment([chosen], gate.env)
            gate.ready.add(rubric)
        if isinstance(case, dict) and "external_id" not in case and "id" not in case:
            # The test names the case; a test judging several gets them numbered.
            gate.judged_ids[test_id] = number = gate.judged_ids.get(test_id, 0) + 1
            case = {"external_id": test_id if number == 1 else f"{test_id}#{number}", **case}
        case = check_case(case, shown_as=f"the case given to evalhub_judge in {test_id}")
    except ConfigError as exc:
        _config_error(config, _error_text(exc))
    k = repeats or gate.repeats
    [result] = judge_all([chosen], [case], repeats=k, concurrency=gate.concurrency, cache=gate.cache, env=gate.env,
                         allowed_env=gate.allowed_env)
    refused = refused_keys([result])
    if refused:  # a broken key is the pipeline's config error, never an outage (evalhub-gate's exit 2)
        _config_error(config, f"the key for rubric {one_line(rubric)} was refused: {one_line(refused[0][1])}")
    # The session's result of this rubric collects every case judged, for the summary and the exit code.
    gate.results.setdefault(rubric, RubricResult(chosen, repeats=gate.repeats)).cases.extend(result.cases)
    judged = result.cases[0]
    return Judged(
        rubric=rubric, stage=chosen.stage, fail_closed=chosen.fail_closed, gates_on_rate=result.gates_on_rate,
        external_id=judged.external_id, verdict=judged.verdict, reason=judged.reason,
        repeats=[repeat_summary(j) for j in judged.judgments], flipped=judged.flipped,
    )


@pytest.fixture
def evalhub_judge(evalhub_gate_config: dict[str, GateRubric], request: pytest.FixtureRequest,
                  pytestconfig: pytest.Config) -> Callable[..., Judged]:
    """`evalhub_judge(case, rubric="return-policy", repeats=None) -> Judged`: judge one case (the case format of
    docs/cases.md, `output` required; `external_id` defaults to the test's id) with the rubric's pinned judge.
    It judges and records; `assert_judged` applies the stage."""
    gate = pytestconfig.stash[_STATE].gate
    assert gate is not None  # evalhub_gate_config loaded it

    def judge(case: Any, *, rubric: str, repeats: int | None = None) -> Judged:
        __tracebackhide__ = True
        return _judge(pytestconfig, gate, case, rubric=rubric, repeats=repeats, test_id=request.node.nodeid)

    return judge


def _session_code(state: _State) -> int | None:
    """evalhub-gate's exit code for what the session judged (None when nothing was)."""
    from judges.gate.judging import EXIT_CONFIG, exit_code

    if state.config_errors:
        return EXIT_CONFIG
    if state.gate is None or not state.gate.results:
        return None
    return exit_code(list(state.gate.results.values()))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Where pytest would exit 0 (or 1 beside a config error), say what evalhub-gate would: 1 for a failed rate
    gate, 3 for a gate-stage case not evaluated, 2 for a config error. The session's judgments go to the cache
    folder now, as one pack."""
    state = session.config.stash[_STATE]
    if state.gate is not None and state.gate.cache is not None:
        state.gate.cache.flush()
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller decides the session's outcome
        workeroutput[WORKER_OUTPUT] = _worker_output(state)
        return
    code = _session_code(state)
    if code is None:
        return
    if session.exitstatus == pytest.ExitCode.OK or (code == 2 and session.exitstatus == pytest.ExitCode.TESTS_FAILED):
        session.exitstatus = code


def _worker_output(state: _State) -> dict[str, Any]:
    """What a worker judged, as plain data (execnet carries no objects): config errors and each rubric's cases."""
    results = state.gate.results if state.gate is not None else {}
    return {
        "config_errors": list(state.config_errors),
        "results": {
            slug: [{"external_id": c.external_id, "verdict": c.verdict, "reason": c.reason, "category": c.category,
                    "judgments": [j.to_dict() for j in c.judgments]} for c in result.cases]
            for slug, result in results.items()
        },
    }


@pytest.hookimpl(optionalhook=True)  # an xdist hook: unknown where xdist is not installed
def pytest_testnodedown(node: Any, error: Any) -> None:
    """A worker finished: add what it judged to the controller's session, as if judged here."""
    output = getattr(node, "workeroutput", {}).get(WORKER_OUTPUT)
    if not output:
        return
    from judges.engine import Judgment
    from judges.gate.judging import CaseResult, RubricResult
    from judges.gate.messages import ConfigError

    config = node.config
    state = config.stash[_STATE]
    for message in output["config_errors"]:
        if message not in state.config_errors:
            state.config_errors.append(message)
    if not output["results"]:
        return
    if state.gate is None:
        try:  # the controller reads the gate config for the rubrics' stages and rules; it judges nothing
            state.gate = _load_gate(config, with_cache=False)
        except ConfigError as exc:
            state.config_errors.append(_error_text(exc))
            return
    for slug, cases in output["results"].items():
        rubric = state.gate.rubrics.get(slug)
        if rubric is None:  # the config changed under the session: the worker's rubric is gone
            state.config_errors.append(f"a worker judged rubric {slug!r}, which the gate config no longer lists")
            continue
        result = state.gate.results.setdefault(slug, RubricResult(rubric, repeats=state.gate.repeats))
        for case in cases:
            judgments = [Judgment.from_stored(j) for j in case["judgments"]]
            result.cases.append(CaseResult(case["external_id"], case["verdict"], case["reason"],
                                           [j for j in judgments if j is not None], case["category"]))


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    """evalhub-gate's summary of what the session judged: per rubric the verdicts, the failures with their
    reasons, the agent's pass rate and where the budget went."""
    state = config.stash[_STATE]
    code = _session_code(state)
    if code is None:
        return
    from judges.gate.judging import exit_code
    from judges.gate.report import write_recalibration, write_summary

    terminalreporter.write_sep("=", "evalhub")
    out = io.StringIO()
    if state.gate is not None and state.gate.no_cache_why:
        out.write(f"evalhub-gate: no cache: {state.gate.no_cache_why} (docs/gate.md)\n")
    if state.gate is not None and state.gate.results:
        results = list(state.gate.results.values())
        write_recalibration([r.rubric for r in results], out, github=False)
        write_summary(results, exit_code(results), out)
    for message in state.config_errors:
        out.write(f"evalhub-gate: config error: {message}\n")
    terminalreporter.write(out.getvalue())

