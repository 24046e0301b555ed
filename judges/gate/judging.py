"""Judging the cases with each rubric's pinned judge, and applying the stages: observe records only,
warn reports, gate fails."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from judges.engine import KEY_REFUSED, Engine, FolderCache, Judgment, SpendTracker, judge_many
from judges.engine.escalation import ranked_sample
from judges.engine.providers import ClientPool
from judges.gate.config import GateRubric
from judges.gate.rates import pass_rate

EXIT_PASS, EXIT_FAIL, EXIT_CONFIG, EXIT_NOT_EVALUATED = 0, 1, 2, 3
# Under a spend cap, gate-stage rubrics spend first.
SPEND_ORDER = ("gate", "warn", "observe")
BUDGET_FIELDS = (
    "calls", "cache_hits", "input_tokens", "output_tokens", "cost_usd", "contested", "adjudicated", "latency_ms_p50",
    "latency_ms_p95",
)
# The judges whose calls and cost the budget tells apart, in this order.
JUDGE_ROLES = ("embeddings", "primary", "fallback", "second_opinion", "adjudicator")


def _percentile(sorted_values: Sequence[int], share: float) -> int | None:
    """Nearest-rank percentile: the smallest value with at least `share` of the values at or below it."""
    if not sorted_values:
        return None
    return sorted_values[max(0, math.ceil(share * len(sorted_values)) - 1)]


def budget(judgments: Iterable[Judgment]) -> dict[str, Any]:
    """Where the budget went (docs/gate.md): provider calls, cache hits, tokens, cost (None when
    a model used has no price), contested judgments, and the latency of the judgments that called a
    provider (cache hits and contract-only verdicts would only pull it towards zero). The SDKs are
    imported on the first call, so a check with few calls shows that second or two in its p95."""
    judgments = list(judgments)
    costs = [j.cost_usd for j in judgments]
    latencies = sorted(j.latency_ms for j in judgments if j.provider_calls)
    calls_by_judge: Counter[str] = Counter()
    cost_by_judge: dict[str, float | None] = {}
    for j in judgments:
        calls_by_judge.update(j.calls_by_judge)
        for role, cost in j.cost_by_judge.items():
            before = cost_by_judge.get(role, 0.0)
            cost_by_judge[role] = None if before is None or cost is None else before + cost
    return {
        "calls": sum(j.provider_calls for j in judgments),
        "cache_hits": sum(1 for j in judgments if j.cached),
        "input_tokens": sum(j.input_tokens for j in judgments),
        "output_tokens": sum(j.output_tokens for j in judgments),
        "cost_usd": None if any(c is None for c in costs) else round(sum(cast(list[float], costs)), 6),
        "contested": sum(1 for j in judgments if j.contested),
        "adjudicated": sum(1 for j in judgments if j.judge == "adjudicator"),
        "latency_ms_p50": _percentile(latencies, 0.50),
        "latency_ms_p95": _percentile(latencies, 0.95),
        # Calls and cost by judge (primary, fallback, second_opinion, adjudicator, embeddings); None: unpriced.
        "calls_by_judge": {role: calls_by_judge[role] for role in JUDGE_ROLES if calls_by_judge[role]},
        "cost_by_judge": {
            role: None if cost_by_judge[role] is None else round(cast(float, cost_by_judge[role]), 6)
            for role in JUDGE_ROLES if calls_by_judge[role]
        },
    }


def repeat_summary(judgment: Judgment) -> dict[str, Any]:
    """One repeat as the JSON, JUnit and the posted cases show it: what decided, and why."""
    return {
        "repeat": judgment.repeat,
        "verdict": judgment.outcome,
        "layer": judgment.layer,
        "failed_checks": [check.get("name") for check in judgment.checks if not check.get("passed")],
        "scores": judgment.scores,
        "similarity": judgment.similarity,
        "reason": judgment.reason,
    }


@dataclass
class CaseResult:
    external_id: str
    verdict: str  # pass | fail | not_evaluated, after the majority of repeats
    reason: str
    judgments: list[Judgment]
    category: str = ""

    @property
    def seconds(self) -> float:
        return sum(j.latency_ms for j in self.judgments) / 1000

    @property
    def flipped(self) -> bool:
        """Whether the evaluated repeats disagreed (one said pass, another fail)."""
        return len({j.outcome for j in self.judgments if j.evaluated}) > 1

    def as_json(self) -> dict[str, Any]:
        return {
            "external_id": self.external_id, "category": self.category, "verdict": self.verdict,
            "flipped": self.flipped, "reason": self.reason,
            "repeats": [repeat_summary(j) for j in self.judgments],
        }


@dataclass
class RubricResult:
    rubric: GateRubric
    cases: list[CaseResult] = field(default_factory=list)
    repeats: int = 1  # CI's --repeats: which evidence counts correct the pass rate

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
        if self.gates_on_rate:
            return self.rate_outcome
        if self.failed or (self.rubric.fail_closed and self.not_evaluated):
            return "fail"
        return "not_evaluated" if self.not_evaluated else "pass"

    @property
    def gates_on_rate(self) -> bool:
        """Whether the agent's corrected pass rate, not each case, decides this gate-stage rubric."""
        return self.rubric.stage == "gate" and self.rubric.gate_on == "pass_rate"

    @property
    def rate_outcome(self) -> str:
        """The rate gate: fail when the corrected rate's upper 95 % bound is below min_agent_pass_rate; not
        evaluated (fail under fail_closed) when the correction cannot be made; pass otherwise."""
        figures = self.pass_rate
        if figures["status"] != "ok":
            return "fail" if self.rubric.fail_closed else "not_evaluated"
        minimum = cast(float, self.rubric.min_agent_pass_rate)  # parse_gate_config requires it with pass_rate
        return "fail" if figures["ci95"][1] < minimum else "pass"

    @property
    def pass_rate(self) -> dict[str, Any]:
        """The judge's pass rate corrected with the evidence's case counts, per rubric and category
        (judges.gate.rates)."""
        categories = {category: (c["passed"], c["failed"]) for category, c in self.by_category().items()}
        return pass_rate(calibration=self.rubric.calibration, repeats=self.repeats, passed=self.passed,
                         failed=self.failed, by_category=categories)

    @property
    def judgments(self) -> list[Judgment]:
        return [j for case in self.cases for j in case.judgments]

    def by_category(self) -> dict[str, dict[str, int]]:
        """{category: {passed, failed, not_evaluated}} of the case verdicts, categories in name order."""
        counts: dict[str, Counter[str]] = {}
        for case in self.cases:
            counts.setdefault(case.category, Counter())[case.verdict] += 1
        return {
            category: {"passed": c["pass"], "failed": c["fail"], "not_evaluated": c["not_evaluated"]}
            for category, c in sorted(counts.items())
        }

    @property
    def budget(self) -> dict[str, Any]:
        return budget(self.judgments)

    def counts_as_failure(self, case: CaseResult) -> bool:
        """Whether this case is reported as a failure (JUnit <failure>, a warning, a failure line)."""
        if self.rubric.stage == "observe":
            return False
        if case.verdict == "fail":
            return True
        # Under a rate gate a case not evaluated is only left out of the rate.
        return (self.rubric.stage == "gate" and self.rubric.fail_closed and not self.gates_on_rate
                and case.verdict == "not_evaluated")


def case_verdict(judgments: Sequence[Judgment], *, gate: bool) -> tuple[str, str]:
    """(verdict, reason) of one case from its repeats: the majority of the evaluated ones; a tie is
    not evaluated. At gate stage a contested judgment (the second opinion disagreed) counts as not
    evaluated, a human must look before it can block or pass a merge, unless the adjudicator decided it."""
    if len(judgments) == 1:  # one repeat (the usual check): its own verdict, no votes to count
        [j] = judgments
        not_counted = _not_counted(j, gate=gate)
        return ("not_evaluated", not_counted) if not_counted is not None else (j.outcome, j.reason)
    votes: Counter[str] = Counter()
    reasons: dict[str, str] = {}
    missing: list[str] = []
    for j in judgments:
        not_counted = _not_counted(j, gate=gate)
        if not_counted is not None:
            missing.append(not_counted)
        else:
            votes[j.outcome] += 1
            reasons.setdefault(j.outcome, j.reason)
    if votes["pass"] == votes["fail"]:
        if votes["pass"]:
            return "not_evaluated", f"a tie: {votes['pass']} pass and {votes['fail']} fail over the repeats"
        return "not_evaluated", missing[0] if missing else "not evaluated"
    verdict = "pass" if votes["pass"] > votes["fail"] else "fail"
    return verdict, f"{votes[verdict]} of {len(judgments)} repeats: {reasons[verdict]}"


def _not_counted(j: Judgment, *, gate: bool) -> str | None:
    """Why a repeat's judgment casts no vote (case_verdict), or None when it votes."""
    if gate and j.contested and j.judge != "adjudicator":
        return f"contested: the second opinion said {j.secondary_outcome} (a human must look)"
    if j.evaluated:
        return None
    return j.reason or j.error or "not evaluated"


def calls_models(rubric: GateRubric) -> bool:
    """Whether a rubric's judgments may call a model: only those are worth a cache (a contract-only verdict is the
    engine's own arithmetic, as quick to redo as to look up, and never taken from a folder)."""
    return bool({"behavioral", "semantic"} & set(rubric.judge.layers))


def embedding_cache(cache: FolderCache | None) -> FolderCache | None:
    """The semantic layer's embeddings, in the cache folder's `embeddings/` (a text is embedded once, whatever
    the rubric or the check); none when the check runs without a cache."""
    return None if cache is None else cache.subfolder("embeddings")


def judge_all(
    rubrics: Sequence[GateRubric],
    cases: Sequence[dict[str, Any]],
    *,
    repeats: int,
    concurrency: int,
    cache: FolderCache | None,
    env: Mapping[str, str],
    max_cost_usd: float | None = None,
    allowed_env: Sequence[str] = (),
    sample_salt: str = "",
) -> list[RubricResult]:
    """Judge every (rubric, case, repeat) side by side on one pool of `concurrency` threads (judge_many).

    One spend cap covers the whole check. Work is queued gate-stage rubrics first (then warn, then
    observe), case by case across the rubrics of a stage, so that when the cap runs out the gates
    have spent first and the cases judged are the same for each of them; what is left comes back not
    evaluated ("spend cap"). Results are in the rubrics' order, each case's judgments by repeat.
    `allowed_env`: variable names the pipeline allows beyond the engine's own (--allow-env). A second
    opinion's rotating `sample` draws its ⌈share · N⌉ cases by a hash salted with `sample_salt` (the ref), so
    each ref draws its own.
    """
    spend = SpendTracker(max_cost_usd)
    clients = ClientPool()  # one SDK client per endpoint, shared by every rubric's judge
    embeddings = embedding_cache(cache)
    engines = [
        Engine(r.judge, cache=cache if calls_models(r) else None, prices=r.prices, spend=spend, env=env,
               clients=clients, allowed_env=allowed_env, embedding_cache=embeddings,
               sampled=_sampled(r, cases, sample_salt))
        for r in rubrics
    ]
    # The batch starts its work in the order given: the spend order above holds.
    work = (
        ((index, case["external_id"], repeat), engines[index], case, repeat)
        for stage in SPEND_ORDER
        for case in cases
        for repeat in range(1, repeats + 1)
        for index, rubric in enumerate(rubrics)
        if rubric.stage == stage
    )
    judgments: dict[tuple[int, str, int], Judgment] = {}
    try:
        for done in judge_many(work, concurrency=concurrency):
            judgments.update(done)
    finally:
        clients.close()
    results = []
    for index, rubric in enumerate(rubrics):
        result = RubricResult(rubric, repeats=repeats)
        for case in cases:
            mine = [judgments[(index, case["external_id"], repeat)] for repeat in range(1, repeats + 1)]
            verdict, reason = case_verdict(mine, gate=rubric.stage == "gate")
            result.cases.append(CaseResult(case["external_id"], verdict, reason, mine, case.get("category") or ""))
        results.append(result)
    return results


def _sampled(rubric: GateRubric, cases: Sequence[dict[str, Any]], salt: str) -> frozenset[str] | None:
    second = rubric.judge.second_opinion_judge
    share = second.sample_share if second is not None else None
    if share is None:
        return None
    return ranked_sample([str(case["external_id"]) for case in cases], share, salt=salt)


def refused_keys(results: Sequence[RubricResult]) -> list[tuple[str, str]]:
    """(slug, reason) of each rubric whose provider refused a key (401/403): a config error, not an outage."""
    refused = []
    for r in results:
        reasons = [j.reason for case in r.cases for j in case.judgments if j.error == KEY_REFUSED]
        if reasons:
            refused.append((r.rubric.slug, reasons[0]))
    return refused


def exit_code(results: Sequence[RubricResult], *, report_failed: bool = False) -> int:
    """The check's exit code, decided here only (judges.gate.cli lists the codes), in this order:

    2 when a provider refused a judge's key, whatever the stages say: a broken key must not pass for an
      outage (exit 3), which a pipeline may tolerate;
    1 when a gate-stage case failed (or was not evaluated under fail_closed), or a rate gate failed (its
      corrected rate too low, or not made under fail_closed), even when a report could not be made
      (`report_failed`: a file or a post asked for): no report problem ever hides a failure;
    2 when a report could not be made;
    3 when nothing failed but some gate-stage judgment could not be made (for a rate gate: the correction);
      0 otherwise.
    Warn- and observe-stage rubrics never change it.
    """
    if refused_keys(results):
        return EXIT_CONFIG
    gates = [r for r in results if r.rubric.stage == "gate"]
    if any(r.outcome == "fail" for r in gates):
        return EXIT_FAIL
    if report_failed:
        return EXIT_CONFIG
    if any(r.outcome == "not_evaluated" for r in gates):
        return EXIT_NOT_EVALUATED
    return EXIT_PASS


OVERALL = {EXIT_PASS: "pass", EXIT_FAIL: "fail", EXIT_NOT_EVALUATED: "not_evaluated"}
