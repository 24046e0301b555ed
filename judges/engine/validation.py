"""Reading a judge's answer: normalised where harmless, rejected where it would take a guess.

`Pass`, `pass.` and ` PASS` are the same verdict. A score of 7, a missing field, a string where an
integer belongs or text that is not JSON is an invalid answer: the engine asks again, it never
clamps, rounds or fills in.
"""

import json
import re
import string
from dataclasses import dataclass
from typing import Any

from .prompt import SCORE_FIELDS


class InvalidOutput(Exception):
    """The judge answered, but not with a valid judgment."""


@dataclass(frozen=True)
class Verdict:
    outcome: str  # pass | fail
    reason: str
    scores: dict[str, int] | None


_FENCE_RE = re.compile(r"^```[A-Za-z0-9_-]*\s*\n(.*)\n\s*```$", re.DOTALL)


def load_json_object(text: str) -> dict[str, Any]:
    """The JSON object in a judge's text; one surrounding Markdown code fence is tolerated."""
    stripped = text.strip()
    fenced = _FENCE_RE.match(stripped)
    if fenced:
        stripped = fenced.group(1).strip()
    try:
        value = json.loads(stripped)
    except ValueError as exc:
        raise InvalidOutput(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise InvalidOutput(f"expected a JSON object, got {type(value).__name__}")
    return value


def normalise_verdict(value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidOutput(f"verdict: expected a string, got {type(value).__name__}")
    word = value.strip().strip(string.punctuation + string.whitespace).lower()
    if word not in ("pass", "fail"):
        raise InvalidOutput(f"verdict: expected pass or fail, got {value!r}")
    return word


def _reason(answer: dict[str, Any]) -> str:
    reason = answer.get("reason")
    if not isinstance(reason, str):
        raise InvalidOutput("reason: missing" if reason is None else "reason: expected a string")
    if not reason.strip():
        raise InvalidOutput("reason: empty")
    return reason.strip()


def validate_answer(answer: dict[str, Any], *, output_kind: str, pass_score: int) -> Verdict:
    """The verdict in a judge's parsed answer, or InvalidOutput saying what is wrong with it."""
    if output_kind == "verdict":
        if "verdict" not in answer:
            raise InvalidOutput("verdict: missing")
        outcome = normalise_verdict(answer["verdict"])
        return Verdict(outcome=outcome, reason=_reason(answer), scores=None)

    scores: dict[str, int] = {}
    for name in SCORE_FIELDS:
        if name not in answer:
            raise InvalidOutput(f"{name}: missing")
        value = answer[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise InvalidOutput(f"{name}: expected an integer from 1 to 5, got {value!r}")
        if not 1 <= value <= 5:
            raise InvalidOutput(f"{name}: {value} is outside 1-5")
        scores[name] = value
    reason = _reason(answer)
    outcome = "pass" if all(v >= pass_score for v in scores.values()) else "fail"
    return Verdict(outcome=outcome, reason=reason, scores=scores)
