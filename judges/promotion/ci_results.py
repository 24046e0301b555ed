"""CI results posted back by `evalhub-gate check --post` (results:write): checked whole, stored per rubric.

Each rubric's result may carry its cases as `--json` writes them (verdict, flipped, and every repeat's
verdict, layer, failed checks, scores, similarity and reason), kept on the CiResult for the CI results
page; the command sends the body gzip-compressed: CI_RESULTS_MAX_BYTES bounds the body as sent and
CI_RESULTS_MAX_INFLATED what it unpacks to.

Each rubric's result may carry where the budget went (docs/gate.md: calls, cache hits, tokens,
cost, contested judgments, latency p50/p95); a command older than those fields sends none, and each
may be null (no price for a model, no provider call to time), so every one is optional.
"""

from __future__ import annotations

import math
import re
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

from django.db import transaction

from evalhub.models import Project
from evalhub.params import MAX_INT, has_nul
from judges.engine.config import LAYERS
from judges.engine.judgment import OUTCOMES
from judges.gate.config import STAGES
from judges.gate.report import MAX_LISTED_CASES, RESULTS_SCHEMA
from judges.models import CiResult

# The body as sent (gzip) and unpacked: room for about 10,000 cases of 3 repeats with a judge's reasons.
CI_RESULTS_MAX_BYTES = 8 * 1024 * 1024
CI_RESULTS_MAX_INFLATED = 32 * 1024 * 1024
MAX_POSTED_CASES = 100_000  # per rubric
MAX_CASE_REPEATS = 100
MAX_REASON_CHARS = 20_000
_REPEAT_FIELDS = ("repeat", "verdict", "layer", "failed_checks", "scores", "similarity", "reason")
MAX_RUBRICS = 500
_HASH_RE = re.compile(r"^[0-9a-f]{64}$")
_COUNTS = ("passed", "failed", "not_evaluated", "total")
# The budget fields: whole numbers, and the cost in dollars; each optional, null allowed.
BUDGET_COUNTS = ("calls", "cache_hits", "input_tokens", "output_tokens", "contested", "latency_ms_p50",
                 "latency_ms_p95")
_MAX_COST_USD = 1_000_000  # a DecimalField(12, 6) holds less than this


class CiResultsRejected(Exception):
    """The payload is not what the gate command sends, or not for this project: every error as {"field",
    "message"}, and the HTTP status to answer with."""

    def __init__(self, errors: list[dict[str, Any]], status: int = 400) -> None:
        self.errors = errors
        self.status = status
        super().__init__("; ".join(f"{e['field']}: {e['message']}" for e in errors))


def _is_count(value: Any) -> bool:
    """A whole number the count columns hold (MAX_INT, an integer column's most)."""
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_INT


def _optional_text(payload: dict, name: str, limit: int, errors: list) -> str:
    value = payload.get(name)
    if value is None:
        return ""
    if not isinstance(value, str) or len(value) > limit:
        errors.append({"field": name, "message": f"expected a string of at most {limit} characters, or null"})
        return ""
    return value


def _budget(item: dict, where: str, errors: list) -> dict[str, Any]:
    """The rubric's budget fields that are present and not null, checked; absent ones stay out."""
    out: dict[str, Any] = {}
    for name in BUDGET_COUNTS:
        value = item.get(name)
        if value is None:
            continue
        if not _is_count(value):
            errors.append({"field": f"{where}.{name}", "message": "expected a whole number ≥ 0, or null"})
        else:
            out[name] = value
    cost = item.get("cost_usd")
    if cost is not None:
        if isinstance(cost, bool) or not isinstance(cost, int | float) or not math.isfinite(cost) \
                or not 0 <= cost < _MAX_COST_USD:
            errors.append({"field": f"{where}.cost_usd", "message": "expected dollars ≥ 0, or null"})
        else:
            out["cost_usd"] = Decimal(str(cost)).quantize(Decimal("0.000001"))
    return out


def _case_ids(item: dict, name: str, where: str, errors: list) -> list[str]:
    value = item.get(name, [])
    if not (
        isinstance(value, list)
        and len(value) <= MAX_LISTED_CASES
        and all(isinstance(v, str) and len(v) <= 200 for v in value)
    ):
        errors.append({"field": f"{where}.{name}", "message": f"expected at most {MAX_LISTED_CASES} case ids"})
        return []
    return value


def _is_text(value: Any, limit: int) -> bool:
    return isinstance(value, str) and len(value) <= limit


def _repeat_problem(value: Any, number: int) -> str | None:
    """Why a posted repeat is not one `--json` writes, or None."""
    if not isinstance(value, dict):
        return "expected an object"
    similarity = value.get("similarity")
    scores = value.get("scores")
    checks = value.get("failed_checks")
    problems = [
        (value.get("repeat") == number and not isinstance(value.get("repeat"), bool),
         f"expected repeat {number} (repeats are numbered from 1, in order)"),
        (value.get("verdict") in OUTCOMES, f"verdict: expected one of {', '.join(OUTCOMES)}"),
        (value.get("layer") in LAYERS, f"layer: expected one of {', '.join(LAYERS)}"),
        (isinstance(checks, list) and len(checks) <= 1000 and all(c is None or _is_text(c, 200) for c in checks),
         "failed_checks: expected a list of check names"),
        (scores is None or (isinstance(scores, dict) and len(scores) <= 100 and all(
            _is_text(k, 200) and isinstance(v, int) and not isinstance(v, bool) and -MAX_INT <= v <= MAX_INT
            for k, v in scores.items())), "scores: expected null or {criterion: whole number}"),
        (similarity is None or (isinstance(similarity, int | float) and not isinstance(similarity, bool)
                                and math.isfinite(similarity)), "similarity: expected null or a finite number"),
        (_is_text(value.get("reason"), MAX_REASON_CHARS), f"reason: expected text of at most {MAX_REASON_CHARS:,} "
                                                          "characters"),
    ]
    return next((message for ok, message in problems if not ok), None)


def _cases(item: dict, where: str, errors: list) -> list[dict[str, Any]]:
    """The rubric's posted cases, each checked as `--json` writes it, and their verdicts against the counts."""
    value = item.get("cases", [])
    if not isinstance(value, list) or len(value) > MAX_POSTED_CASES:
        errors.append({"field": f"{where}.cases", "message": f"expected a list of at most {MAX_POSTED_CASES:,} cases"})
        return []
    before = len(errors)
    for i, case in enumerate(value):
        at = f"{where}.cases[{i}]"
        if not isinstance(case, dict):
            errors.append({"field": at, "message": "expected an object"})
            continue
        problems = [
            (_is_text(case.get("external_id"), 200) and case["external_id"], "external_id",
             "expected the case's id (at most 200 characters)"),
            (_is_text(case.get("category", ""), 200), "category", "expected text of at most 200 characters"),
            (case.get("verdict") in OUTCOMES, "verdict", f"expected one of {', '.join(OUTCOMES)}"),
            (isinstance(case.get("flipped"), bool), "flipped", "expected true or false"),
            (_is_text(case.get("reason"), MAX_REASON_CHARS), "reason",
             f"expected text of at most {MAX_REASON_CHARS:,} characters"),
            (isinstance(case.get("repeats"), list) and 1 <= len(case["repeats"]) <= MAX_CASE_REPEATS, "repeats",
             f"expected a list of 1 to {MAX_CASE_REPEATS} repeats"),
        ]
        bad = [(name, message) for ok, name, message in problems if not ok]
        errors += [{"field": f"{at}.{name}", "message": message} for name, message in bad]
        if bad:
            continue
        for number, repeat in enumerate(case["repeats"], start=1):
            problem = _repeat_problem(repeat, number)
            if problem:
                errors.append({"field": f"{at}.repeats[{number - 1}]", "message": problem})
        if len(errors) > 50:  # enough to fix the command; a payload of 10,000 bad cases needs no 10,000 lines
            return []
    if value and len(errors) == before and all(_is_count(item.get(name)) for name in _COUNTS):
        verdicts = [case["verdict"] for case in value]
        counted = (verdicts.count("pass"), verdicts.count("fail"), verdicts.count("not_evaluated"), len(value))
        if counted != tuple(item[name] for name in _COUNTS):
            errors.append({"field": f"{where}.cases", "message": "the cases' verdicts do not add up to passed, failed, "
                                                                 "not_evaluated and total"})
    if errors:
        return []
    # Only the fields the page shows are kept: anything else a sender adds is not stored.
    return [
        {"external_id": case["external_id"], "category": case.get("category", ""), "verdict": case["verdict"],
         "flipped": case["flipped"], "reason": case["reason"],
         "repeats": [{name: repeat[name] for name in _REPEAT_FIELDS} for repeat in case["repeats"]]}
        for case in value
    ]


def parse_ci_results(payload: Any) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(run fields, [per-rubric fields]) of a results payload, or CiResultsRejected with every error."""
    if not isinstance(payload, dict):
        raise CiResultsRejected([{"field": None, "message": "expected a JSON object"}])
    if has_nul(payload):  # PostgreSQL stores no NUL character, in text or in JSON
        raise CiResultsRejected([{"field": None, "message": "a string holds a NUL character (\\u0000)"}])
    errors: list[dict[str, Any]] = []
    if payload.get("schema") != RESULTS_SCHEMA:
        errors.append({"field": "schema", "message": f"expected {RESULTS_SCHEMA!r}"})
    exit_code = payload.get("exit_code")
    if exit_code not in (0, 1, 3) or isinstance(exit_code, bool):
        errors.append({"field": "exit_code", "message": "expected 0, 1 or 3 (the command posts only what it judged)"})
    repeats = payload.get("repeats", 1)
    if not _is_count(repeats) or not 1 <= repeats <= 100:
        errors.append({"field": "repeats", "message": "expected a whole number from 1 to 100"})
    run = {
        "exit_code": exit_code,
        "repeats": repeats,
        "commit": _optional_text(payload, "commit", 100, errors),
        "ref": _optional_text(payload, "ref", 255, errors),
        "run_url": _optional_text(payload, "run_url", 500, errors),
    }
    if run["run_url"] and urlsplit(run["run_url"]).scheme not in ("http", "https"):
        errors.append({"field": "run_url", "message": "expected an http(s) URL"})
        run["run_url"] = ""
    items = payload.get("rubrics")
    if not isinstance(items, list) or not items or len(items) > MAX_RUBRICS:
        errors.append({"field": "rubrics", "message": f"expected a list of 1 to {MAX_RUBRICS} rubric results"})
        raise CiResultsRejected(errors)
    rubrics: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, item in enumerate(items):
        where = f"rubrics[{i}]"
        if not isinstance(item, dict):
            errors.append({"field": where, "message": "expected an object"})
            continue
        slug = item.get("slug")
        if not isinstance(slug, str) or not slug:
            errors.append({"field": f"{where}.slug", "message": "expected a rubric's slug"})
        elif slug in seen:
            errors.append({"field": f"{where}.slug", "message": f"{slug!r} is listed twice"})
        seen.add(slug if isinstance(slug, str) else "")
        if item.get("stage") not in STAGES:
            errors.append({"field": f"{where}.stage", "message": f"expected one of {', '.join(STAGES)}"})
        if not isinstance(item.get("fail_closed", False), bool):
            errors.append({"field": f"{where}.fail_closed", "message": "expected true or false"})
        if not isinstance(item.get("config_hash"), str) or not _HASH_RE.match(item["config_hash"]):
            errors.append({"field": f"{where}.config_hash", "message": "expected the judge's sha256 config_hash"})
        if item.get("outcome") not in CiResult.Outcome.values:
            errors.append(
                {"field": f"{where}.outcome", "message": f"expected one of {', '.join(CiResult.Outcome.values)}"}
            )
        bad = [name for name in _COUNTS if not _is_count(item.get(name))]
        for name in bad:
            errors.append({"field": f"{where}.{name}", "message": f"expected a whole number from 0 to {MAX_INT}"})
        if not bad and item["passed"] + item["failed"] + item["not_evaluated"] != item["total"]:
            errors.append({"field": f"{where}.total", "message": "passed + failed + not_evaluated must equal total"})
        rubrics.append(
            {
                "slug": slug, "stage": item.get("stage"), "fail_closed": bool(item.get("fail_closed", False)),
                "config_hash": item.get("config_hash"), "outcome": item.get("outcome"),
                **{name: item.get(name) for name in _COUNTS},
                "failed_cases": _case_ids(item, "failed_cases", where, errors),
                "not_evaluated_cases": _case_ids(item, "not_evaluated_cases", where, errors),
                "cases": _cases(item, where, errors),
                **_budget(item, where, errors),
            }
        )
    if errors:
        raise CiResultsRejected(errors)
    return run, rubrics


def _check_project(payload: Any, project: Project) -> None:
    """CiResultsRejected unless the results may be `project`'s. They carry the project of the gate config CI judged
    with (`project`; a command older than projects sends none, and the token's project decides alone): results
    judged with one project's judges are never stored under another's rubrics, even where the slugs are alike."""
    if not isinstance(payload, dict) or "project" not in payload:
        return
    named = payload["project"]
    if not isinstance(named, str) or not named:
        raise CiResultsRejected([{"field": "project", "message": "expected the slug of the gate config's project"}])
    if named != project.slug:
        message = (f"these results were judged with the gate config of project {named[:100]!r}, and this token is "
                   f"of project {project.slug!r}: post them with a token of their own project")
        raise CiResultsRejected([{"field": "project", "message": message}], status=403)


@transaction.atomic
def ci_results_store(*, project: Project, payload: Any, token_name: str) -> list[CiResult]:
    """Check a results payload whole and store one CiResult per rubric of `project` (the token's), all or none.

    Results of another project (their `project` is not this one) are refused whole (403). A rubric CI names that
    the project does not have is an error (a typo'd or deleted rubric must not vanish silently; another project's
    is answered as one that does not exist); nothing else here changes a rubric, a dataset or a run.
    """
    _check_project(payload, project)
    run, items = parse_ci_results(payload)
    known = {r.slug: r for r in project.rubrics.filter(slug__in=[item["slug"] for item in items])}
    missing = [
        {"field": f"rubrics[{i}].slug", "message": f"no rubric {item['slug']!r} in project {project.slug!r}"}
        for i, item in enumerate(items)
        if item["slug"] not in known
    ]
    if missing:
        raise CiResultsRejected(missing)
    results = [
        CiResult(rubric=known[item.pop("slug")], token_name=token_name, **run, **item)
        for item in items
    ]
    return CiResult.objects.bulk_create(results)
