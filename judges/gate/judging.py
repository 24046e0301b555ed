"""Judging the cases with each rubric's pinned judge, and applying the stages: observe records only,
warn reports, gate fails."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from judges.engine import KEY_REFUSED, FolderCache, Judgment, judge_batch
from judges.gate.config import GateRubric

EXIT_PASS, EXIT_FAIL, EXIT_CONFIG, EXIT_NOT_EVALUATED = 0, 1, 2, 3


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


def embedding_cache(cache: FolderCache | None) -> FolderCache | None:
    """The semantic layer's embeddings, in the cache folder's `embeddings/` (a text is embedded once, whatever
    the rubric or the check); none when the check runs without a cache."""
    return None if cache is None else FolderCache(cache.path / "embeddings")


def judge_rubric(
    rubric: GateRubric,
    cases: Sequence[dict[str, Any]],
    *,
    repeats: int,
    concurrency: int,
    cache: FolderCache | None,
    env: Mapping[str, str],
    allowed_env: Sequence[str] = (),
) -> RubricResult:
    items = [(case, repeat) for case in cases for repeat in range(1, repeats + 1)]
    judgments = judge_batch(
        items, rubric.judge, concurrency=concurrency, cache=cache, prices=rubric.prices, env=env,
        allowed_env=allowed_env, embedding_cache=embedding_cache(cache),
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


def refused_keys(results: Sequence[RubricResult]) -> list[tuple[str, str]]:
    """(slug, reason) of each rubric whose provider refused a key (401/403): a config error, not an outage."""
    refused = []
    for r in results:
        reasons = [j.reason for case in r.cases for j in case.judgments if j.error == KEY_REFUSED]
        if reasons:
            refused.append((r.rubric.slug, reasons[0]))
    return refused


def exit_code(results: Sequence[RubricResult]) -> int:
    gates = [r for r in results if r.rubric.stage == "gate"]
    if any(r.outcome == "fail" for r in gates):
        return EXIT_FAIL
    if any(r.outcome == "not_evaluated" for r in gates):
        return EXIT_NOT_EVALUATED
    return EXIT_PASS


OVERALL = {EXIT_PASS: "pass", EXIT_FAIL: "fail", EXIT_NOT_EVALUATED: "not_evaluated"}
