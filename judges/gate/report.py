"""Reporting the results: the summary, GitHub annotations and step summary, JUnit XML, and the
results JSON that `--json` writes and `--post` sends."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TextIO

from judges.gate.judging import OVERALL, RubricResult
from judges.gate.messages import one_line

RESULTS_SCHEMA = "evalhub.ci-results/v1"
# The results posted back name at most this many failed or not-evaluated cases per rubric.
MAX_LISTED_CASES = 100
_XML_INVALID_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


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
            print(f"  {tag} {r.rubric.slug} {one_line(case.external_id, 120)}{closed}: {one_line(case.reason)}",
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
            message = _gh_escape(f"{one_line(case.external_id, 120)}: {case.verdict}: {one_line(case.reason)}")
            print(f"::{level} title={title}::{message}", file=out)


def write_step_summary(results: Sequence[RubricResult], code: int, path: str) -> None:
    """A markdown table for the GitHub Actions job page (GITHUB_STEP_SUMMARY)."""

    def cell(text: str) -> str:
        return one_line(text, 120).replace("|", "\\|").replace("<", "&lt;")

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
                ET.SubElement(element, "skipped", message=_xml_text(f"not evaluated: {one_line(case.reason)}"))
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

