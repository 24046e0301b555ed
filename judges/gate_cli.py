"""evalhub-gate: CI runs the calibrated judge on new agent outputs (DESIGN "Gate config").

    evalhub-gate check --config URL_OR_FILE [--token TOKEN] --outputs FILE.jsonl [--repeats K]
                       [--junit FILE] [--json FILE] [--post URL] [--cache-dir DIR] [--concurrency N]

Plain Python with no Django import: a pipeline runs it with the package installed and no server or
database. It reads the gate config (a URL fetched with a `gates:read` token, or a file), judges every
case of the outputs file with each rubric's pinned judge through the same engine the app uses, and
applies the stages: observe records only, warn reports, gate fails.

Exit codes, the contract a pipeline relies on:
    0  pass: no gate-stage case failed and every gate-stage case was evaluated
    1  fail: a gate-stage case failed (or was not evaluated under fail_closed)
    3  not evaluated: nothing failed, but some gate-stage judgment could not be made
    2  usage or config error: nothing was judged, or the results could not be posted
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TextIO

from judges.engine import FolderCache, JudgeConfig, Judgment, judge_batch
from judges.engine.providers import ProviderFailure, resolve_endpoint

EXIT_PASS, EXIT_FAIL, EXIT_CONFIG, EXIT_NOT_EVALUATED = 0, 1, 2, 3
GATES_SCHEMA = "evalhub.gates/v1"
RESULTS_SCHEMA = "evalhub.ci-results/v1"
STAGES = ("observe", "warn", "gate")
TOKEN_ENV = "EVALHUB_TOKEN"
HTTP_TIMEOUT_S = 30
# The results posted back name at most this many failed or not-evaluated cases per rubric.
MAX_LISTED_CASES = 100
MAX_ERRORS_SHOWN = 20

# What a case of the outputs file may hold (DESIGN's case fields) and the type each must have.
_STRING_FIELDS = ("golden_answer", "expected_behaviour", "category")
_NULLABLE_STRING_FIELDS = ("expected_tool", "expected_source")
_CASE_FIELDS = frozenset(
    {"external_id", "input", "output", "trace", "expected_tool_argument", "metadata",
     *_STRING_FIELDS, *_NULLABLE_STRING_FIELDS}
)
_CONTROL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")
_XML_INVALID_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


class ConfigError(Exception):
    """A usage or config problem: exit 2, with this message."""


# ---- the gate config --------------------------------------------------------------------------------


@dataclass(frozen=True)
class GateRubric:
    slug: str
    stage: str
    fail_closed: bool
    judge: JudgeConfig
    prices: dict[str, dict[str, float]]
    calibration: dict[str, Any] | None


def _http(request: urllib.request.Request, what: str) -> bytes:
    """The response body, or a ConfigError naming the status and the server's own message."""
    try:
        with urllib.request.urlopen(request, timeout=HTTP_TIMEOUT_S) as response:
            return response.read()
    except urllib.error.HTTPError as exc:
        detail = ""
        try:
            detail = str(json.loads(exc.read()).get("error") or "")
        except (ValueError, AttributeError, OSError):
            pass
        hint = {
            401: f"the token was not accepted (pass --token or set {TOKEN_ENV})",
            403: "the token lacks the scope this needs",
            404: "nothing at that URL",
        }.get(exc.code, "the server refused")
        message = f"{what}: HTTP {exc.code}, {hint}"
        raise ConfigError(f"{message}: {_one_line(detail)}" if detail else message) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ConfigError(f"{what}: cannot connect ({_one_line(str(reason))})") from None


def load_gate_config(source: str, *, token: str | None) -> dict[str, Any]:
    """The gate config JSON from an http(s) URL (with the bearer token) or a file path."""
    if source.startswith(("http://", "https://")):
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        body = _http(urllib.request.Request(source, headers=headers), f"reading the gate config from {source}")
        text = body.decode("utf-8", errors="replace")
    else:
        try:
            with open(source, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise ConfigError(f"reading the gate config {source}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"reading the gate config {source}: not UTF-8 text") from None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigError(f"the gate config is not JSON: {exc}") from None


def _prices(value: Any, where: str) -> dict[str, dict[str, float]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}.prices: expected an object of model → price")
    out = {}
    for model, price in value.items():
        if not isinstance(price, dict):
            raise ConfigError(f"{where}.prices.{model}: expected {{input_per_mtok, output_per_mtok}}")
        numbers = {}
        for name in ("input_per_mtok", "output_per_mtok"):
            number = price.get(name)
            if isinstance(number, bool) or not isinstance(number, int | float) or number < 0:
                raise ConfigError(f"{where}.prices.{model}.{name}: expected a non-negative number")
            numbers[name] = float(number)
        out[model] = numbers
    return out


def parse_gate_config(data: Any) -> list[GateRubric]:
    """Check the gate config whole before anything is judged; a ConfigError names the field at fault.

    Each judge goes through the engine's own validation, which also checks that its config_hash
    still matches its content: CI runs exactly the judge that was calibrated, or nothing.
    """
    if not isinstance(data, dict):
        raise ConfigError("the gate config: expected a JSON object")
    if data.get("schema") != GATES_SCHEMA:
        raise ConfigError(f"schema: expected {GATES_SCHEMA!r}, got {data.get('schema')!r}")
    rubrics = data.get("rubrics")
    if not isinstance(rubrics, list):
        raise ConfigError("rubrics: expected a list")
    out: list[GateRubric] = []
    seen: set[str] = set()
    for i, item in enumerate(rubrics):
        where = f"rubrics[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(f"{where}: expected an object")
        slug = item.get("slug")
        if not isinstance(slug, str) or not slug:
            raise ConfigError(f"{where}.slug: expected a non-empty string")
        where = f"rubrics[{i}] ({slug})"
        if slug in seen:
            raise ConfigError(f"{where}: the rubric is listed twice")
        seen.add(slug)
        stage = item.get("stage")
        if stage not in STAGES:
            raise ConfigError(f"{where}.stage: expected one of {', '.join(STAGES)}, got {stage!r}")
        fail_closed = item.get("fail_closed", False)
        if not isinstance(fail_closed, bool):
            raise ConfigError(f"{where}.fail_closed: expected true or false")
        judge_spec = item.get("judge")
        if not isinstance(judge_spec, dict) or not judge_spec.get("config_hash"):
            raise ConfigError(f"{where}.judge: expected the pinned judge config with its config_hash")
        try:
            judge = JudgeConfig.from_dict(judge_spec)
        except ValueError as exc:
            raise ConfigError(f"{where}.judge.{exc}") from None
        if judge.rubric != slug:
            raise ConfigError(f"{where}.judge.rubric: the judge is for {judge.rubric!r}, not {slug!r}")
        calibration = item.get("calibration")
        if calibration is not None and not isinstance(calibration, dict):
            raise ConfigError(f"{where}.calibration: expected an object")
        out.append(GateRubric(slug, stage, fail_closed, judge, _prices(item.get("prices"), where), calibration))
    return out


def check_environment(rubrics: Sequence[GateRubric], env: Mapping[str, str]) -> None:
    """Every endpoint and key variable a judge names must be set before anything is judged.

    Otherwise every judgment would come back not evaluated ("config error") and a gate would exit
    3 as if the provider were down; a missing secret is the pipeline's config error: exit 2.
    """
    missing: list[str] = []
    for rubric in rubrics:
        cfg = rubric.judge
        if "behavioral" not in cfg.layers:
            continue
        judges = [(cfg.provider, cfg.base_url_env, cfg.api_key_env)]
        if cfg.secondary is not None:
            s = cfg.secondary
            judges.append((s.provider, s.base_url_env, s.api_key_env))
        for provider, base_url_env, api_key_env in judges:
            try:
                resolve_endpoint(
                    provider=provider, base_url_env=base_url_env, api_key_env=api_key_env, env=env,
                    timeout_s=cfg.timeout_s,
                )
            except ProviderFailure as failure:
                missing.append(f"{rubric.slug}: {failure.detail}")  # names the variable, never a value
    if missing:
        raise ConfigError("the judges need environment variables that are not set: " + "; ".join(missing))


# ---- the outputs file -------------------------------------------------------------------------------


def _case_errors(obj: Any) -> list[str]:
    if not isinstance(obj, dict):
        return ["expected a JSON object (one case per line)"]
    errors = []
    unknown = sorted(set(obj) - _CASE_FIELDS)
    if unknown:
        errors.append(f"unknown field(s) {', '.join(unknown)}")
    external_id = obj.get("external_id")
    if not isinstance(external_id, str) or not external_id.strip():
        errors.append("external_id: expected a non-empty string")
    for name in ("input", "output"):
        if not isinstance(obj.get(name), str):
            errors.append(f"{name}: expected a string")
    for name in _STRING_FIELDS:
        if name in obj and not isinstance(obj[name], str):
            errors.append(f"{name}: expected a string")
    for name in _NULLABLE_STRING_FIELDS:
        if obj.get(name) is not None and not isinstance(obj[name], str):
            errors.append(f"{name}: expected a string or null")
    for name in ("trace", "metadata"):
        if obj.get(name) is not None and not isinstance(obj[name], dict):
            errors.append(f"{name}: expected an object")
    trace = obj.get("trace") or {}
    if isinstance(trace, dict):
        sources = trace.get("retrievedSources")
        if sources is not None and not (isinstance(sources, list) and all(isinstance(s, str) for s in sources)):
            errors.append("trace.retrievedSources: expected a list of strings")
        calls = trace.get("toolCalls")
        if calls is not None and not (
            isinstance(calls, list) and all(isinstance(c, dict) and isinstance(c.get("name"), str) for c in calls)
        ):
            errors.append("trace.toolCalls: expected a list of {name, argument, result}")
        if trace.get("context") is not None and not isinstance(trace["context"], str):
            errors.append("trace.context: expected a string")
    return errors


def read_outputs(path: str) -> list[dict[str, Any]]:
    """The cases of a JSONL file (DESIGN's case format); every bad line is reported with its number."""
    try:
        fh = open(path, encoding="utf-8")  # noqa: SIM115 - closed below, after the line loop
    except OSError as exc:
        raise ConfigError(f"reading the outputs {path}: {exc.strerror or exc}") from None
    cases: list[dict[str, Any]] = []
    errors: list[str] = []
    first_line: dict[str, int] = {}
    with fh:
        try:
            for number, line in enumerate(fh, start=1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except ValueError as exc:
                    errors.append(f"line {number}: not JSON ({exc})")
                    continue
                problems = _case_errors(obj)
                if not problems:
                    external_id = obj["external_id"]
                    if external_id in first_line:
                        problems = [f"external_id {external_id!r} repeats line {first_line[external_id]}"]
                    first_line.setdefault(external_id, number)
                errors.extend(f"line {number}: {p}" for p in problems)
                if not problems:
                    cases.append(obj)
        except UnicodeDecodeError:
            raise ConfigError(f"reading the outputs {path}: not UTF-8 text") from None
    if errors:
        shown = errors[:MAX_ERRORS_SHOWN]
        more = f"\n  … and {len(errors) - len(shown)} more" if len(errors) > len(shown) else ""
        raise ConfigError(f"the outputs file {path} has errors:\n  " + "\n  ".join(shown) + more)
    if not cases:
        raise ConfigError(f"the outputs file {path} has no cases")
    return cases


# ---- judging and the stages -------------------------------------------------------------------------


@dataclass
class CaseResult:
    external_id: str
    verdict: str  # pass | fail | not_evaluated, after the majority of repeats
    reason: str
    judgments: list[Judgment]

    @property
    def seconds(self) -> float:
        return sum(j.latency_ms for j in self.judgments) / 1000


@dataclass
class RubricResult:
    rubric: GateRubric
    cases: list[CaseResult] = field(default_factory=list)

    def count(self, verdict: str) -> int:
        return sum(1 for c in self.cases if c.verdict == verdict)

    @property
    def passed(self) -> int:
        return self.count("pass")

    @property
    def failed(self) -> int:
        return self.count("fail")

    @property
    def not_evaluated(self) -> int:
        return self.count("not_evaluated")

    @property
    def outcome(self) -> str:
        """gate: pass | fail | not_evaluated; warn: pass | warning | not_evaluated; observe: recorded."""
        stage = self.rubric.stage
        if stage == "observe":
            return "recorded"
        if stage == "warn":
            return "warning" if self.failed else ("not_evaluated" if self.not_evaluated else "pass")
        if self.failed or (self.rubric.fail_closed and self.not_evaluated):
            return "fail"
        return "not_evaluated" if self.not_evaluated else "pass"

    def counts_as_failure(self, case: CaseResult) -> bool:
        """Whether this case is reported as a failure (JUnit <failure>, a warning, a failure line)."""
        if self.rubric.stage == "observe":
            return False
        if case.verdict == "fail":
            return True
        return self.rubric.stage == "gate" and self.rubric.fail_closed and case.verdict == "not_evaluated"


def case_verdict(judgments: Sequence[Judgment], *, gate: bool) -> tuple[str, str]:
    """(verdict, reason) of one case from its repeats: the majority of the evaluated ones; a tie is
    not evaluated. At gate stage a contested judgment (the second opinion disagreed) counts as not
    evaluated: a human must look before it can block or pass a merge."""
    votes: Counter[str] = Counter()
    reasons: dict[str, str] = {}
    missing: list[str] = []
    for j in judgments:
        if gate and j.contested:
            missing.append(f"contested: the second opinion said {j.secondary_outcome} (a human must look)")
        elif j.evaluated:
            votes[j.outcome] += 1
            reasons.setdefault(j.outcome, j.reason)
        else:
            missing.append(j.reason or j.error or "not evaluated")
    if votes["pass"] == votes["fail"]:
        if votes["pass"]:
            return "not_evaluated", f"a tie: {votes['pass']} pass and {votes['fail']} fail over the repeats"
        return "not_evaluated", missing[0] if missing else "not evaluated"
    verdict = "pass" if votes["pass"] > votes["fail"] else "fail"
    reason = reasons[verdict]
    if len(judgments) > 1:
        reason = f"{votes[verdict]} of {len(judgments)} repeats: {reason}"
    return verdict, reason


def judge_rubric(
    rubric: GateRubric,
    cases: Sequence[dict[str, Any]],
    *,
    repeats: int,
    concurrency: int,
    cache: FolderCache | None,
    env: Mapping[str, str],
) -> RubricResult:
    items = [(case, repeat) for case in cases for repeat in range(1, repeats + 1)]
    judgments = judge_batch(
        items, rubric.judge, concurrency=concurrency, cache=cache, prices=rubric.prices, env=env
    )
    by_case: dict[str, list[Judgment]] = {}
    for (case, _), judgment in zip(items, judgments, strict=True):
        by_case.setdefault(case["external_id"], []).append(judgment)
    result = RubricResult(rubric)
    for case in cases:
        mine = by_case[case["external_id"]]
        verdict, reason = case_verdict(mine, gate=rubric.stage == "gate")
        result.cases.append(CaseResult(case["external_id"], verdict, reason, mine))
    return result


def exit_code(results: Sequence[RubricResult]) -> int:
    gates = [r for r in results if r.rubric.stage == "gate"]
    if any(r.outcome == "fail" for r in gates):
        return EXIT_FAIL
    if any(r.outcome == "not_evaluated" for r in gates):
        return EXIT_NOT_EVALUATED
    return EXIT_PASS


OVERALL = {EXIT_PASS: "pass", EXIT_FAIL: "fail", EXIT_NOT_EVALUATED: "not_evaluated"}


# ---- reporting ----------------------------------------------------------------------------------------


def _one_line(text: str, limit: int = 300) -> str:
    """Untrusted text (judge reasons, case ids) on one line with no control characters.

    One line matters in CI: GitHub Actions reads any output line starting with `::` as a command, and
    every line printed here starts with text of ours.
    """
    text = " ".join(_CONTROL_RE.sub(" ", str(text)).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def write_summary(results: Sequence[RubricResult], code: int, out: TextIO) -> None:
    headers = ("rubric", "stage", "pass", "fail", "not evaluated", "outcome")
    rows = [
        (
            r.rubric.slug,
            r.rubric.stage + (" (fail_closed)" if r.rubric.fail_closed and r.rubric.stage == "gate" else ""),
            str(r.passed), str(r.failed), str(r.not_evaluated), r.outcome.replace("_", " "),
        )
        for r in results
    ]
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if 2 <= i <= 4 else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    print(line(headers), file=out)
    print(line(["-" * w for w in widths]), file=out)
    for row in rows:
        print(line(row), file=out)
    for r in results:
        listed = [c for c in r.cases if c.verdict != "pass" and r.rubric.stage != "observe"]
        for case in listed:
            if r.counts_as_failure(case):
                tag = "FAIL" if r.rubric.stage == "gate" else "WARN"
            else:
                tag = "NOT EVALUATED"
            closed = " (fail_closed: counts as fail)" if case.verdict == "not_evaluated" and tag == "FAIL" else ""
            print(f"  {tag} {r.rubric.slug} {_one_line(case.external_id, 120)}{closed}: {_one_line(case.reason)}",
                  file=out)
    print(f"evalhub-gate: exit {code} ({OVERALL[code].replace('_', ' ')})", file=out)


def _gh_escape(text: str, *, prop: bool = False) -> str:
    # GitHub's workflow-command escaping: data escapes %, CR, LF; properties also : and ,
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def write_github_annotations(results: Sequence[RubricResult], out: TextIO) -> None:
    """`::warning` for a warn-stage failure, `::error` for a gate-stage one (GITHUB_ACTIONS=true)."""
    for r in results:
        for case in r.cases:
            if not r.counts_as_failure(case):
                continue
            level = "error" if r.rubric.stage == "gate" else "warning"
            title = _gh_escape(f"evalhub {r.rubric.stage} {r.rubric.slug}", prop=True)
            message = _gh_escape(f"{_one_line(case.external_id, 120)}: {case.verdict}: {_one_line(case.reason)}")
            print(f"::{level} title={title}::{message}", file=out)


def write_step_summary(results: Sequence[RubricResult], code: int, path: str) -> None:
    """A markdown table for the GitHub Actions job page (GITHUB_STEP_SUMMARY)."""

    def cell(text: str) -> str:
        return _one_line(text, 120).replace("|", "\\|").replace("<", "&lt;")

    lines = [
        f"### evalhub-gate: {OVERALL[code].replace('_', ' ')} (exit {code})",
        "",
        "| rubric | stage | pass | fail | not evaluated | outcome |",
        "| --- | --- | ---: | ---: | ---: | --- |",
    ]
    lines += [
        f"| {cell(r.rubric.slug)} | {r.rubric.stage} | {r.passed} | {r.failed} | {r.not_evaluated} | "
        f"{r.outcome.replace('_', ' ')} |"
        for r in results
    ]
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("\n".join(lines) + "\n")


def _xml_text(text: str) -> str:
    return _XML_INVALID_RE.sub("\ufffd", str(text))


def junit_xml(results: Sequence[RubricResult]) -> bytes:
    """A testsuite per rubric, a testcase per case: <failure> for what counts as a failure at warn or
    gate, <skipped> for not evaluated, and observe-stage cases passed with their verdict in system-out."""
    root = ET.Element("testsuites", name="evalhub-gate")
    totals = Counter()
    for r in results:
        classname = f"evalhub.{r.rubric.slug}"
        suite = ET.SubElement(root, "testsuite", name=classname)
        properties = ET.SubElement(suite, "properties")
        for name, value in (
            ("stage", r.rubric.stage), ("fail_closed", str(r.rubric.fail_closed).lower()),
            ("config_hash", r.rubric.judge.config_hash), ("outcome", r.outcome),
        ):
            ET.SubElement(properties, "property", name=name, value=value)
        counts = Counter()
        for case in r.cases:
            element = ET.SubElement(
                suite, "testcase", classname=classname, name=_xml_text(case.external_id), time=f"{case.seconds:.3f}"
            )
            counts["tests"] += 1
            reason = _xml_text(case.reason)
            if r.counts_as_failure(case):
                counts["failures"] += 1
                message = "judge verdict: fail" if case.verdict == "fail" else "not evaluated (fail_closed)"
                failure = ET.SubElement(element, "failure", message=message, type=case.verdict)
                failure.text = reason
            elif case.verdict == "not_evaluated" and r.rubric.stage != "observe":
                counts["skipped"] += 1
                ET.SubElement(element, "skipped", message=_xml_text(f"not evaluated: {_one_line(case.reason)}"))
            elif r.rubric.stage == "observe":
                ET.SubElement(element, "system-out").text = f"observe stage (recorded only): {case.verdict}: {reason}"
        suite.set("tests", str(counts["tests"]))
        suite.set("failures", str(counts["failures"]))
        suite.set("skipped", str(counts["skipped"]))
        suite.set("errors", "0")
        suite.set("time", f"{sum(c.seconds for c in r.cases):.3f}")
        totals.update(counts)
    for name in ("tests", "failures", "skipped"):
        root.set(name, str(totals[name]))
    root.set("errors", "0")
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def _ci_context(env: Mapping[str, str]) -> dict[str, str | None]:
    """Which commit and pipeline run these results belong to (GitHub Actions, GitLab CI or plain env)."""
    run_url = env.get("EVALHUB_RUN_URL") or env.get("CI_JOB_URL")
    if not run_url and env.get("GITHUB_RUN_ID") and env.get("GITHUB_REPOSITORY"):
        server = env.get("GITHUB_SERVER_URL", "https://github.com")
        run_url = f"{server}/{env['GITHUB_REPOSITORY']}/actions/runs/{env['GITHUB_RUN_ID']}"
    return {
        "commit": env.get("EVALHUB_COMMIT") or env.get("GITHUB_SHA") or env.get("CI_COMMIT_SHA"),
        "ref": env.get("EVALHUB_REF") or env.get("GITHUB_REF_NAME") or env.get("CI_COMMIT_REF_NAME"),
        "run_url": run_url,
    }


def results_payload(
    results: Sequence[RubricResult], *, code: int, repeats: int, n_cases: int, env: Mapping[str, str]
) -> dict[str, Any]:
    """What `--post` sends and `--json` writes: counts per rubric, never a key or a token."""
    return {
        "schema": RESULTS_SCHEMA,
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "exit_code": code,
        "outcome": OVERALL[code],
        "repeats": repeats,
        "cases": n_cases,
        **_ci_context(env),
        "rubrics": [
            {
                "slug": r.rubric.slug,
                "stage": r.rubric.stage,
                "fail_closed": r.rubric.fail_closed,
                "config_hash": r.rubric.judge.config_hash,
                "passed": r.passed,
                "failed": r.failed,
                "not_evaluated": r.not_evaluated,
                "total": len(r.cases),
                "outcome": r.outcome,
                "failed_cases": [c.external_id for c in r.cases if c.verdict == "fail"][:MAX_LISTED_CASES],
                "not_evaluated_cases": [
                    c.external_id for c in r.cases if c.verdict == "not_evaluated"
                ][:MAX_LISTED_CASES],
            }
            for r in results
        ],
    }


def post_results(url: str, token: str, payload: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(
        url,
        data=json.dumps(payload).encode(),
        method="POST",
        headers={"Content-Type": "application/json", "Accept": "application/json", "Authorization": f"Bearer {token}"},
    )
    body = _http(request, f"posting the results to {url}")
    try:
        return json.loads(body)
    except ValueError:
        return {}


# ---- the command ------------------------------------------------------------------------------------


def _positive(value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {value!r}") from None
    if number < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {number}")
    return number


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="evalhub-gate",
        description="Run evalhub's calibrated judges on new agent outputs in CI. "
        "Exit 0 pass, 1 fail, 3 not evaluated, 2 usage or config error.",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    check = commands.add_parser(
        "check", help="judge an outputs file against the gate config",
        description="Judge every case of the outputs file with each rubric's pinned judge and apply its stage: "
        "observe records only, warn reports, gate fails.",
    )
    check.add_argument("--config", required=True, metavar="URL_OR_FILE",
                       help="the gate config: https://…/api/gates (needs a gates:read token) or a JSON file")
    check.add_argument("--token", help=f"API token (default: ${TOKEN_ENV}); gates:read to fetch, results:write "
                                       "to post")
    check.add_argument("--outputs", required=True, metavar="FILE", help="the agent outputs, one case per JSONL line")
    check.add_argument("--repeats", type=_positive, default=1, metavar="K",
                       help="judge each case K times; its verdict is the majority, a tie is not evaluated")
    check.add_argument("--junit", metavar="FILE", help="write JUnit XML here")
    check.add_argument("--json", metavar="FILE", help="write the results JSON (what --post sends) here")
    check.add_argument("--post", metavar="URL", help="POST the results here (…/api/ci-results, results:write)")
    check.add_argument("--cache-dir", default=".evalhub-cache", metavar="DIR",
                       help="where identical work is cached between runs (default: .evalhub-cache)")
    check.add_argument("--no-cache", action="store_true", help="ask the judges again even for cached work")
    check.add_argument("--concurrency", type=_positive, default=4, metavar="N",
                       help="judge calls in flight per rubric (default: 4)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # argparse exits 2 on a usage error, 0 on --help
        return int(exc.code or 0)
    if args.command != "check":
        parser.print_help(sys.stderr)
        return EXIT_CONFIG
    env = os.environ
    try:
        return _check(args, env)
    except ConfigError as exc:
        print(f"evalhub-gate: error: {exc}", file=sys.stderr)
        return EXIT_CONFIG


def _check(args: argparse.Namespace, env: Mapping[str, str]) -> int:
    token = args.token or env.get(TOKEN_ENV) or None
    if args.post and not token:
        raise ConfigError(f"--post needs a token with results:write (--token or ${TOKEN_ENV})")
    rubrics = parse_gate_config(load_gate_config(args.config, token=token))
    cases = read_outputs(args.outputs)
    check_environment(rubrics, env)
    cache = None if args.no_cache else FolderCache(args.cache_dir)

    started = time.monotonic()
    print(
        f"evalhub-gate: {len(cases)} cases × {args.repeats} repeat(s), {len(rubrics)} rubric(s)", file=sys.stdout
    )
    results = [
        judge_rubric(r, cases, repeats=args.repeats, concurrency=args.concurrency, cache=cache, env=env)
        for r in rubrics
    ]
    code = exit_code(results)
    print(f"evalhub-gate: judged in {time.monotonic() - started:.1f} s", file=sys.stdout)
    write_summary(results, code, sys.stdout)
    if env.get("GITHUB_ACTIONS") == "true":
        write_github_annotations(results, sys.stdout)
        if env.get("GITHUB_STEP_SUMMARY"):
            write_step_summary(results, code, env["GITHUB_STEP_SUMMARY"])
    try:
        _report(args, token, results, code, n_cases=len(cases), env=env)
    except ConfigError as exc:
        # A report asked for (a file, a post) that could not be made is a config error the pipeline must
        # see; but a failed gate stays exit 1, so that no report problem ever hides a failure.
        print(f"evalhub-gate: error: {exc}", file=sys.stderr)
        return code if code == EXIT_FAIL else EXIT_CONFIG
    return code


def _report(
    args: argparse.Namespace, token: str | None, results: list[RubricResult], code: int, *, n_cases: int,
    env: Mapping[str, str],
) -> None:
    if args.junit:
        _write(args.junit, junit_xml(results))
    payload = results_payload(results, code=code, repeats=args.repeats, n_cases=n_cases, env=env)
    if args.json:
        _write(args.json, json.dumps(payload, indent=2).encode())
    if args.post:
        sys.stdout.flush()
        post_results(args.post, token, payload)
        print(f"evalhub-gate: results posted to {args.post}", file=sys.stdout)


def _write(path: str, data: bytes) -> None:
    try:
        with open(path, "wb") as fh:
            fh.write(data)
    except OSError as exc:
        raise ConfigError(f"writing {path}: {exc.strerror or exc}") from None


if __name__ == "__main__":
    sys.exit(main())
