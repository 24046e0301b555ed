"""CI traffic comes back (docs/gate.md, "Posting the cases back"): a chunk of what `evalhub-gate check
--post-cases` judged becomes cases of a living dataset and the judgments of the CI run of (config,
dataset, ref), checked whole and written all or nothing.

Each posted case is named `<ref>/<external_id>` and keeps where it came from in `metadata.ci`; it goes
through the dataset's own import rules (a changed answer makes its labels stop counting). Its judgments
are the engine's, checked as strictly as a cache entry (data from outside), and recorded by the same
service the worker uses. A (ref, config) already posted for a case changes nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from evalhub.params import MAX_INT, has_nul
from judges.engine import Judgment as EngineJudgment
from judges.engine.judgment import ERRORS, OUTCOMES
from judges.gate.posting import CASES_SCHEMA, MAX_REF_CHARS, ref_problem
from judges.models import JudgeConfig, Judgment, Run
from judges.runs.worker import judgments_record
from labeling.importing import ImportRejected
from labeling.importing.cases import cases_import_items
from labeling.models import Case, CaseTally, Dataset, QueuePriority

MAX_CHUNK_CASES = 1_000
MAX_REPEATS = 20
_LAYERS = ("contract", "semantic", "behavioral")
_OPINION_ROLES = ("primary", "fallback", "second_opinion", "adjudicator")
_COUNTS = ("input_tokens", "output_tokens", "latency_ms", "provider_calls", "repeat")
_MAX_COST_USD = 1_000_000  # a DecimalField(12, 6) holds less than this


class CiCasesRejected(Exception):
    """The chunk is not what the gate command sends: every error as {"index", "field", "message"}."""

    def __init__(self, errors: list[dict[str, Any]], status: int = 400) -> None:
        self.errors = errors
        self.status = status
        super().__init__("; ".join(f"{e['field']}: {e['message']}" for e in errors))


@dataclass(frozen=True)
class CiCasesStored:
    run: Run
    created: int
    updated: int
    unchanged: int
    judgments: int


def _error(errors: list, index: int | None, field: str | None, message: str) -> None:
    errors.append({"index": index, "field": field, "message": message})


def _optional_text(payload: dict, name: str, limit: int, errors: list) -> str | None:
    value = payload.get(name)
    if value is not None and (not isinstance(value, str) or len(value) > limit):
        _error(errors, None, name, f"expected text of at most {limit} characters, or null")
        return None
    return value or None


def _judgment_problems(value: Any, repeat: int) -> tuple[EngineJudgment | None, str | None]:
    """The engine judgment a posted dict holds, or why not: every field with its type (as a cache entry)
    and every value one the tables can store."""
    judgment = EngineJudgment.from_stored(value)
    if judgment is None:
        return None, "expected an engine judgment with every field and its type"
    if judgment.repeat != repeat:
        return None, f"expected repeat {repeat} here (repeats are numbered from 1, in order)"
    if any(not 0 <= getattr(judgment, name) <= MAX_INT for name in _COUNTS):
        return None, f"{', '.join(_COUNTS)} must be whole numbers from 0 to {MAX_INT}"
    cost, similarity = judgment.cost_usd, judgment.similarity
    if cost is not None and not (math.isfinite(cost) and 0 <= cost < _MAX_COST_USD):
        return None, f"cost_usd must be null or from 0 to below {_MAX_COST_USD}"
    if similarity is not None and not math.isfinite(similarity):
        return None, "similarity must be null or a finite number"
    if judgment.error and judgment.error not in ERRORS:
        return None, f"error must be empty or one of {', '.join(ERRORS)}"
    if judgment.layer not in _LAYERS or len(judgment.judge) > 16 or len(judgment.secondary_outcome or "") > 16:
        return None, f"layer must be one of {', '.join(_LAYERS)}; judge and secondary_outcome at most 16 characters"
    if judgment.scores is not None and any(not -MAX_INT <= v <= MAX_INT for v in judgment.scores.values()):
        return None, "scores must be whole numbers an integer column holds"
    if judgment.opinions is not None and not all(
        role in _OPINION_ROLES and isinstance(o, dict) and o.get("outcome") in OUTCOMES
        and isinstance(o.get("reason", ""), str) for role, o in judgment.opinions.items()
    ):
        return None, f"opinions must map {', '.join(_OPINION_ROLES)} to a verdict (outcome, reason)"
    if any(not 0 <= n <= MAX_INT for n in judgment.calls_by_judge.values()):
        return None, f"calls_by_judge must be whole numbers from 0 to {MAX_INT}"
    return judgment, None


@dataclass(frozen=True)
class _Chunk:
    ref: str
    ci: dict[str, Any]  # branch and run_url, as metadata.ci holds them
    rubric: str
    config_hash: str
    repeats: int
    items: list[tuple[int, dict[str, Any], list[EngineJudgment]]]


def parse_ci_cases(payload: Any) -> _Chunk:
    """The chunk a payload holds, or CiCasesRejected listing every problem."""
    if not isinstance(payload, dict):
        raise CiCasesRejected([{"index": None, "field": None, "message": "expected a JSON object"}])
    if has_nul(payload):  # PostgreSQL stores no NUL character, in text or in JSON
        raise CiCasesRejected([{"index": None, "field": None, "message": "a string holds a NUL character (\\u0000)"}])
    errors: list[dict[str, Any]] = []
    if payload.get("schema") != CASES_SCHEMA:
        _error(errors, None, "schema", f"expected {CASES_SCHEMA!r}")
    ref = payload.get("ref")
    problem = ref_problem(ref) if isinstance(ref, str) else f"expected text of 1 to {MAX_REF_CHARS} characters"
    if problem:
        _error(errors, None, "ref", problem)
    ci = {"branch": _optional_text(payload, "branch", 255, errors),
          "run_url": _optional_text(payload, "run_url", 500, errors)}
    rubric, config_hash = payload.get("rubric"), payload.get("config_hash")
    if not isinstance(rubric, str) or not rubric:
        _error(errors, None, "rubric", "expected a rubric's slug")
    if not isinstance(config_hash, str) or not config_hash:
        _error(errors, None, "config_hash", "expected the judge's config_hash")
    repeats = payload.get("repeats")
    if not isinstance(repeats, int) or isinstance(repeats, bool) or not 1 <= repeats <= MAX_REPEATS:
        _error(errors, None, "repeats", f"expected a whole number from 1 to {MAX_REPEATS}")
        repeats = 0
    cases = payload.get("cases")
    if not isinstance(cases, list) or not 1 <= len(cases) <= MAX_CHUNK_CASES:
        _error(errors, None, "cases", f"expected a list of 1 to {MAX_CHUNK_CASES} judged cases")
        raise CiCasesRejected(errors)
    items = []
    for index, item in enumerate(cases):
        if not isinstance(item, dict) or not isinstance(item.get("case"), dict):
            _error(errors, index, None, 'expected {"case": {…}, "judgments": […]}')
            continue
        judged = item.get("judgments")
        if not isinstance(judged, list) or len(judged) != repeats:
            _error(errors, index, "judgments", f"expected a list of {repeats} judgment(s), one per repeat")
            continue
        judgments = []
        for repeat, value in enumerate(judged, start=1):
            judgment, why = _judgment_problems(value, repeat)
            if why:
                _error(errors, index, f"judgments[{repeat - 1}]", why)
            else:
                judgments.append(judgment)
        items.append((index, item["case"], judgments))
    if errors:
        raise CiCasesRejected(errors)
    return _Chunk(ref=ref, ci=ci, rubric=rubric, config_hash=config_hash, repeats=repeats, items=items)


def _posted_case(chunk: _Chunk, index: int, case: dict[str, Any], errors: list) -> dict[str, Any] | None:
    """The case as the dataset keeps it: named `<ref>/<external_id>`, its origin in metadata.ci."""
    external_id, metadata = case.get("external_id"), case.get("metadata", {})
    if not isinstance(external_id, str) or not external_id:
        _error(errors, index, "external_id", "expected the case's external_id")
        return None
    if not isinstance(metadata, dict):
        _error(errors, index, "metadata", "expected an object")
        return None
    ci = {"ref": chunk.ref, **chunk.ci, "external_id": external_id}
    return {**case, "external_id": f"{chunk.ref}/{external_id}", "metadata": {**metadata, "ci": ci}}


def ci_cases_store(*, dataset: Dataset, payload: Any, by) -> CiCasesStored:
    """Check a chunk whole, then write its new cases and their judgments on the CI run, all or nothing.

    The dataset row is locked first (as every case import does), so two posts of the same ref cannot
    both create its run. A case whose judgments this run already holds is left as it is.
    """
    chunk = parse_ci_cases(payload)
    # The dataset's project's rubric: a slug names a rubric within its project only.
    config = (JudgeConfig.objects.filter(rubric__project_id=dataset.project_id, rubric__slug=chunk.rubric,
                                         config_hash=chunk.config_hash, external=False)
              .select_related("rubric").order_by("-version").first())
    if config is None:
        raise CiCasesRejected([{"index": None, "field": "config_hash", "message":
                                f"rubric {chunk.rubric!r} has no judge config with this config_hash"}], status=404)
    errors: list[dict[str, Any]] = []
    posted = [(index, _posted_case(chunk, index, case, errors), judgments) for index, case, judgments in chunk.items]
    if errors:
        raise CiCasesRejected(errors)
    now = timezone.now()
    with transaction.atomic():
        Dataset.objects.select_for_update().only("pk").get(pk=dataset.pk)
        run, _ = Run.objects.get_or_create(
            config=config, dataset=dataset, source=Run.Source.CI, ref=chunk.ref,
            defaults={"repeats": chunk.repeats, "concurrency": 1, "status": Run.Status.FINISHED, "created_by": by,
                      "started_at": now, "finished_at": now},
        )
        if run.repeats != chunk.repeats:
            raise CiCasesRejected([{"index": None, "field": "repeats", "message":
                                    f"ref {chunk.ref!r} was posted with {run.repeats} repeat(s) for this judge"}],
                                  status=409)
        ids = [case["external_id"] for _, case, _ in posted if case]
        judged = set(Judgment.objects.filter(run=run, case__external_id__in=ids).values_list("case__external_id",
                                                                                             flat=True))
        fresh = [(index, case, judgments) for index, case, judgments in posted
                 if case and case["external_id"] not in judged]
        created = updated = recorded = 0
        if fresh:
            try:
                imported = cases_import_items(dataset=dataset, items=[(i, case) for i, case, _ in fresh], errors=[],
                                              update=True)
            except ImportRejected as rejected:
                raise CiCasesRejected([error.as_api() for error in rejected.errors]) from None
            created, updated = imported.created, imported.updated
            fresh_ids = [case["external_id"] for _, case, _ in fresh]
            cases = {c.external_id: c for c in
                     Case.objects.filter(dataset=dataset, external_id__in=fresh_ids).only("pk", "external_id")}
            recorded = judgments_record(
                run=run, results=[(cases[case["external_id"]].pk, j) for _, case, judgments in fresh for j in judgments]
            )
            Run.objects.filter(pk=run.pk).update(total=F("total") + len(fresh) * chunk.repeats, finished_at=now)
            # A contested verdict needs humans before other needed cases (docs/words.md, queue order).
            contested = [cases[case["external_id"]].pk for _, case, judgments in fresh
                         if any(judgment.contested for judgment in judgments)]
            CaseTally.objects.filter(case_id__in=contested, rubric=config.rubric,
                                     priority__lt=QueuePriority.CONTESTED).update(priority=QueuePriority.CONTESTED)
        run.refresh_from_db()  # the counters as this chunk left them
    return CiCasesStored(run=run, created=created, updated=updated, unchanged=len(posted) - created - updated,
                         judgments=recorded)
