"""Reporting the results: the summary, GitHub annotations and step summary, JUnit XML, and the
results JSON that `--json` writes and `--post` sends."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, TextIO

from judges.gate.config import GateRubric
from judges.gate.judging import BUDGET_FIELDS, OVERALL, RubricResult, budget, repeat_summary
from judges.gate.messages import ConfigError, one_line
from judges.gate.rates import ASSUMPTION, describe

RESULTS_SCHEMA = "evalhub.ci-results/v1"


@dataclass(frozen=True)
class BaseChanges:
    """One rubric's cases against the base ref's CI run: passed there and fail now, and the reverse."""

    base_ref: str
    new_failures: list[str]
    new_passes: list[str]

# The results posted back name at most this many failed or not-evaluated cases per rubric.
MAX_LISTED_CASES = 100
_XML_INVALID_RE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: range, out: TextIO) -> None:
    widths = [max(len(h), *(len(row[i]) for row in rows)) if rows else len(h) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    print(line(headers), file=out)
    print(line(["-" * w for w in widths]), file=out)
    for row in rows:
        print(line(row), file=out)


def _budget_cells(budget: dict[str, Any]) -> list[str]:
    cost = budget["cost_usd"]
    return [
        str(budget["calls"]), str(budget["cache_hits"]), str(budget["input_tokens"]), str(budget["output_tokens"]),
        "unpriced" if cost is None else f"{cost:.6f}", str(budget["contested"]), str(budget["adjudicated"]),
        *("-" if budget[name] is None else str(budget[name]) for name in ("latency_ms_p50", "latency_ms_p95")),
        _by_judge(budget),
    ]


def _by_judge(budget: dict[str, Any]) -> str:
    """Calls (and cost) by judge on one cell: "primary 10 ($0.001), second_opinion 3 ($0.002)"."""
    costs = budget["cost_by_judge"]
    return ", ".join(
        f"{role} {calls}" + ("" if costs.get(role) is None else f" (${costs[role]:.6f})")
        for role, calls in budget["calls_by_judge"].items()
    ) or "-"


BUDGET_HEADERS = (
    "calls", "cache hits", "input tokens", "output tokens", "cost USD", "contested", "adjudicated", "p50 ms",
    "p95 ms", "calls by judge",
)


def _rate_text(r: RubricResult) -> str:
    """The rubric's corrected pass rate on one line, saying which evidence counts made it."""
    figures = r.pass_rate
    text = describe(figures)
    if figures["counts"]:
        text += f"; corrected with the evidence's {figures['counts']} (K={figures['evidence_repeats']})"
    if figures["approximate"]:
        text += f", approximate: CI ran {r.repeats} repeats"
    return text


def _rate_gate_text(r: RubricResult) -> str:
    """What the rate gate decided and why, for a gate-stage rubric with gate_on pass_rate."""
    figures, minimum = r.pass_rate, r.rubric.min_agent_pass_rate or 0.0
    outcome = r.outcome.replace("_", " ")
    if figures["status"] != "ok":
        closed = " (fail_closed)" if r.rubric.fail_closed else ""
        why = describe(figures).split("; judge's rate")[0].removeprefix("not made: ")
        return f"{outcome}{closed}: correction not made ({why}), so the rate gate is not evaluated"
    high = figures["ci95"][1]
    relation = "below" if high < minimum else "at or above"
    return f"{outcome}: the upper 95 % bound {high * 100:.1f} % is {relation} the minimum {minimum * 100:.1f} %"


def pass_rate_lines(results: Sequence[RubricResult]) -> list[str]:
    """The agent's pass rate per rubric and category (observe stages included: the number is still the
    team's), with the assumption once."""
    lines = []
    for r in results:
        lines.append(f"  agent's pass rate, {one_line(r.rubric.slug, 80)}: {_rate_text(r)}")
        if r.gates_on_rate:
            lines.append(f"    rate gate: {_rate_gate_text(r)}")
        for category, figures in r.pass_rate["by_category"].items():
            lines.append(f"    {one_line(category or '(none)', 40)}: {describe(figures)}")
    return [*lines, f"  ({ASSUMPTION})"] if lines else []


def totals(results: Sequence[RubricResult]) -> dict[str, Any]:
    return budget(j for r in results for j in r.judgments)


def write_summary(
    results: Sequence[RubricResult], code: int, out: TextIO, *, against_base: Mapping[str, BaseChanges] | None = None
) -> None:
    """The verdicts per rubric, a line per case that failed or was not evaluated, the pass counts per
    category, what changed against the base ref, then where the budget went per rubric, ending with the
    totals and the exit code."""
    rows = [
        (
            one_line(r.rubric.slug, 80),
            r.rubric.stage + (" (fail_closed)" if r.rubric.fail_closed and r.rubric.stage == "gate" else ""),
            str(r.passed), str(r.failed), str(r.not_evaluated), r.outcome.replace("_", " "),
        )
        for r in results
    ]
    _table(("rubric", "stage", "pass", "fail", "not evaluated", "outcome"), rows, range(2, 5), out)
    for r in results:
        listed = [c for c in r.cases if c.verdict != "pass" and r.rubric.stage != "observe"]
        for case in listed:
            if r.counts_as_failure(case):
                tag = "FAIL" if r.rubric.stage == "gate" else "WARN"
                tag += " (reported; the pass rate decides)" if r.gates_on_rate else ""
            else:
                tag = "NOT EVALUATED"
            closed = " (fail_closed: counts as fail)" if case.verdict == "not_evaluated" and tag == "FAIL" else ""
            print(f"  {tag} {one_line(r.rubric.slug, 80)} {one_line(case.external_id, 120)}{closed}: "
                  f"{one_line(case.reason)}", file=out)
    for r in results:
        counts = ", ".join(
            f"{one_line(category or '(none)', 40)} {c['passed']}/{sum(c.values())}"
            for category, c in r.by_category().items()
        )
        print(f"  pass by category, {one_line(r.rubric.slug, 80)}: {counts or 'no cases'}", file=out)
    for line in pass_rate_lines(results):
        print(line, file=out)
    for slug, changes in (against_base or {}).items():
        print(f"  against base {one_line(changes.base_ref, 80)}, {one_line(slug, 80)}: "
              f"{len(changes.new_failures)} passed there and fail now, {len(changes.new_passes)} failed there and "
              "pass now", file=out)
        for external_id in changes.new_failures[:MAX_LISTED_CASES]:
            print(f"    NEWLY FAILING {one_line(external_id, 120)}", file=out)
    budget_rows = [(one_line(r.rubric.slug, 80), *_budget_cells(r.budget)) for r in results]
    budget_rows.append(("total", *_budget_cells(totals(results))))
    print("where the budget went:", file=out)
    _table(("rubric", *BUDGET_HEADERS), budget_rows, range(1, 10), out)
    print(f"evalhub-gate: exit {code} ({OVERALL[code].replace('_', ' ')})", file=out)


def _gh_escape(text: str, *, prop: bool = False) -> str:
    # GitHub's workflow-command escaping: data escapes %, CR, LF; properties also : and ,
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def workflow_command(level: str, title: str, message: str) -> str:
    """A GitHub Actions annotation whose title and message went through one_line first."""
    return f"::{level} title={_gh_escape(one_line(title, 120), prop=True)}::{_gh_escape(one_line(message, 1000))}"


def write_github_annotations(results: Sequence[RubricResult], out: TextIO) -> None:
    """`::warning` for a warn-stage failure and for a gate-stage case not evaluated (that does not count as
    a failure), `::error` for a gate-stage failure (GITHUB_ACTIONS=true)."""
    for r in results:
        for case in r.cases:
            if r.counts_as_failure(case):
                level = "error" if r.rubric.stage == "gate" else "warning"
            elif r.rubric.stage == "gate" and case.verdict == "not_evaluated":
                level = "warning"
            else:
                continue
            message = f"{one_line(case.external_id, 120)}: {case.verdict}: {one_line(case.reason)}"
            print(workflow_command(level, f"evalhub {r.rubric.stage} {r.rubric.slug}", message), file=out)


def write_recalibration(rubrics: Sequence[GateRubric], out: TextIO, *, github: bool) -> None:
    """Announce each rubric the server marked recalibration needed (a warning annotation on GitHub)."""
    for rubric in rubrics:
        if not rubric.recalibration_needed:
            continue
        reasons = "; ".join(rubric.recalibration_reasons) or "no reason given"
        print(f"evalhub-gate: warning: recalibration needed for {one_line(rubric.slug, 80)}: {one_line(reasons)}",
              file=out)
        if github:
            print(workflow_command("warning", f"evalhub recalibration needed {rubric.slug}", reasons), file=out)


def markdown_text(text: str, limit: int = 120) -> str:
    """Untrusted text as inert Markdown on one line: every character but letters, digits, spaces and `-` as an
    HTML character reference (no table break, tag, link, emphasis or autolink), and a zero-width space
    after each `@`, which GitHub would otherwise read as a mention once the references are decoded."""
    flat = one_line(text, limit)
    return "".join(
        c if c.isalnum() or c in " -" else f"&#{ord(c)};" + ("\u200b" if c == "@" else "") for c in flat
    )


def write_step_summary(
    results: Sequence[RubricResult], code: int, path: str, *, against_base: Mapping[str, BaseChanges] | None = None,
) -> None:
    """Markdown for the GitHub Actions job page (GITHUB_STEP_SUMMARY): a table per stage, the failures with
    their reasons, what changed against the base ref, and where the budget went."""
    lines = [f"### evalhub-gate: {OVERALL[code].replace('_', ' ')} (exit {code})", ""]
    for stage in ("gate", "warn", "observe"):
        staged = [r for r in results if r.rubric.stage == stage]
        if not staged:
            continue
        lines += [f"#### {stage}", "", "| rubric | pass | fail | not evaluated | outcome | pass by category |",
                  "| --- | ---: | ---: | ---: | --- | --- |"]
        for r in staged:
            categories = ", ".join(
                f"{markdown_text(category or '(none)', 40)} {c['passed']}/{sum(c.values())}"
                for category, c in r.by_category().items()
            )
            lines.append(f"| {markdown_text(r.rubric.slug)} | {r.passed} | {r.failed} | {r.not_evaluated} | "
                         f"{r.outcome.replace('_', ' ')} | {categories} |")
        lines.append("")
    lines += ["#### the agent's pass rate", "", "| rubric | category | corrected pass rate |", "| --- | --- | --- |"]
    for r in results:
        lines.append(f"| {markdown_text(r.rubric.slug)} | all | {markdown_text(_rate_text(r), 300)} |")
        lines += [f"| {markdown_text(r.rubric.slug)} | {markdown_text(category or '(none)', 40)} | "
                  f"{markdown_text(describe(figures), 300)} |"
                  for category, figures in r.pass_rate["by_category"].items()]
    lines += ["", ASSUMPTION, ""]
    failures = [(r, case) for r in results for case in r.cases if r.counts_as_failure(case)]
    if failures:
        lines += ["#### failures", "", "| rubric | case | verdict | reason |", "| --- | --- | --- | --- |"]
        lines += [f"| {markdown_text(r.rubric.slug)} | {markdown_text(case.external_id)} | "
                  f"{case.verdict.replace('_', ' ')} | {markdown_text(case.reason, 300)} |"
                  for r, case in failures[:MAX_LISTED_CASES]]
        lines.append("")
    for slug, changes in (against_base or {}).items():
        lines += [f"#### against {markdown_text(changes.base_ref, 80)}: {markdown_text(slug)}", "",
                  f"{len(changes.new_failures)} passed there and fail now; "
                  f"{len(changes.new_passes)} failed there and pass now.", ""]
        lines += [f"- fails now: {markdown_text(external_id)}"
                  for external_id in changes.new_failures[:MAX_LISTED_CASES]]
        lines.append("")
    lines += ["#### where the budget went", "", f"| rubric | {' | '.join(BUDGET_HEADERS)} |",
              "| --- |" + " ---: |" * (len(BUDGET_HEADERS) - 1) + " --- |"]
    lines += [f"| {markdown_text(r.rubric.slug)} | {' | '.join(_budget_cells(r.budget))} |" for r in results]
    lines.append(f"| **total** | {' | '.join(_budget_cells(totals(results)))} |")
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write("\n".join(lines) + "\n")
    except OSError as exc:
        raise ConfigError(f"writing $GITHUB_STEP_SUMMARY {path}: {exc.strerror or exc}") from None


def _xml_text(text: str) -> str:
    return _XML_INVALID_RE.sub("\ufffd", str(text))


def _rate_properties(r: RubricResult) -> list[tuple[str, str]]:
    """The corrected pass rate as JUnit properties: `pass_rate.*` for the rubric, `pass_rate.<category>.*`
    for each category; a figure that could not be made is left out, its status says why."""
    def props(prefix: str, figures: dict[str, Any]) -> list[tuple[str, str]]:
        out = [(f"{prefix}.status", figures["status"])]
        if figures["estimate"] is not None:
            out.append((f"{prefix}.estimate", repr(figures["estimate"])))
        if figures["ci95"] is not None:
            out += [(f"{prefix}.ci95_low", repr(figures["ci95"][0])), (f"{prefix}.ci95_high", repr(figures["ci95"][1]))]
        return out

    figures = r.pass_rate
    rows = [*props("pass_rate", figures), ("pass_rate.counts", figures["counts"] or ""),
            ("pass_rate.approximate", str(figures["approximate"]).lower())]
    for category, by in figures["by_category"].items():
        rows += props(f"pass_rate.{_xml_text(category or '(none)')}", by)
    return rows


def junit_xml(results: Sequence[RubricResult]) -> bytes:
    """A testsuite per rubric, a testcase per case: <failure> for what counts as a failure at warn or
    gate, <skipped> for not evaluated, and observe-stage cases passed with their verdict in system-out."""
    root = ET.Element("testsuites", name="evalhub-gate")
    all_counts: Counter[str] = Counter()
    for r in results:
        classname = _xml_text(f"evalhub.{r.rubric.slug}")
        suite = ET.SubElement(root, "testsuite", name=classname)
        properties = ET.SubElement(suite, "properties")
        spent = r.budget
        for name, value in (
            ("stage", r.rubric.stage), ("fail_closed", str(r.rubric.fail_closed).lower()),
            ("config_hash", r.rubric.judge.config_hash), ("outcome", r.outcome),
            ("recalibration_needed", str(r.rubric.recalibration_needed).lower()),
            # Where the budget went; a cost is left out when a model used has no price.
            *((field, str(spent[field])) for field in BUDGET_FIELDS if spent[field] is not None),
            *_rate_properties(r),
        ):
            ET.SubElement(properties, "property", name=name, value=value)
        counts: Counter[str] = Counter()
        for case in r.cases:
            element = ET.SubElement(
                suite, "testcase", classname=classname, name=_xml_text(case.external_id), time=f"{case.seconds:.3f}"
            )
            counts["tests"] += 1
            case_properties = ET.SubElement(element, "properties")
            for name, value in (("verdict", case.verdict), ("category", case.category),
                                ("flipped", str(case.flipped).lower()),
                                *((f"repeat.{j.repeat}", json.dumps(repeat_summary(j), ensure_ascii=False))
                                  for j in case.judgments)):
                ET.SubElement(case_properties, "property", name=name, value=_xml_text(value))
            reason = _xml_text(case.reason)
            if r.counts_as_failure(case):
                counts["failures"] += 1
                # The reason in the message: most CI pages show only the message in their list of failures.
                verdict = "judge verdict: fail" if case.verdict == "fail" else "not evaluated (fail_closed)"
                message = _xml_text(f"{verdict}: {one_line(case.reason, 300)}")
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
        all_counts.update(counts)
    for name in ("tests", "failures", "skipped"):
        root.set(name, str(all_counts[name]))
    root.set("errors", "0")
    return ET.tostring(root, encoding="utf-8", xml_declaration=True)


def ci_context(env: Mapping[str, str]) -> dict[str, str | None]:
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
    results: Sequence[RubricResult], *, code: int, repeats: int, n_cases: int, env: Mapping[str, str],
    max_cost_usd: float | None = None, per_case: bool = False, against_base: Mapping[str, BaseChanges] | None = None,
    project: str | None = None,
) -> dict[str, Any]:
    """What `--post` sends and `--json` writes: counts and the budget per rubric, never a key or a token.

    `per_case` (the JSON file and `--post`) adds each rubric's cases with their repeats and the pass counts
    per category; `--post-cases` sends the cases themselves (outputs and judgments) to a dataset. `project` is the
    gate config's (left out when it names none: a file exported before projects); the server refuses results of
    another project than the token's.
    """
    payload: dict[str, Any] = {
        "schema": RESULTS_SCHEMA,
        **({"project": project} if project is not None else {}),
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "exit_code": code,
        "outcome": OVERALL[code],
        "repeats": repeats,
        "cases": n_cases,
        **ci_context(env),
        "max_cost_usd": max_cost_usd,
        "totals": totals(results),
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
                **r.budget,
                "recalibration_needed": r.rubric.recalibration_needed,
                "recalibration_reasons": list(r.rubric.recalibration_reasons),
                "pass_rate": r.pass_rate,
            }
            for r in results
        ],
    }
    items: list[dict[str, Any]] = payload["rubrics"]
    for item, r in zip(items, results, strict=True):
        changes = (against_base or {}).get(r.rubric.slug)
        if changes is not None:
            item["against_base"] = {"ref": changes.base_ref, "new_failures": changes.new_failures,
                                    "new_passes": changes.new_passes}
        if per_case:
            item["categories"] = r.by_category()
            item["cases"] = [case.as_json() for case in r.cases]
    return payload

