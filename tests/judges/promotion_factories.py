"""Evidence runs with chosen figures, written straight to the tables (no engine, no worker).

`evidence_run` builds n cases with alternating human verdicts (even index pass, odd fail, one label
each) and a finished run whose judgments agree with them except where told otherwise, so each
promotion rule can be broken alone. Its config is a judge with a model unless one is given (a
deterministic config is promoted by other rules: tests/judges/promotion/test_deterministic.py).
"""

from judges.models import Run
from tests.judges.report_factories import label, make_cases, make_config, make_run

REASON = "Calibrated on the support set; agreement well inside the band."


def human(i: int) -> str:
    return "pass" if i % 2 == 0 else "fail"


def flip(verdict: str) -> str:
    return "fail" if verdict == "pass" else "pass"


def evidence_run(
    rubric, dataset, lead, reviewer, *, n: int = 40, repeats: int = 2, wrong: int = 2, wrong_on: str | None = None,
    flips: int = 0, not_evaluated: int = 0, config=None, status=Run.Status.FINISHED, prefix: str = "case",
) -> Run:
    """A run over n fresh cases of `dataset`, each labelled by `reviewer`.

    wrong: cases the judge gets wrong on every repeat (the first ones with human verdict `wrong_on`,
    or the first ones whatever their verdict); flips: cases after those whose last repeat differs;
    not_evaluated: judgments (the last repeat of the last cases) that could not be made.
    """
    cases = make_cases(dataset, [(f"{prefix}-{i:03}", "policy" if i % 3 else "tools") for i in range(n)])
    for i, case in enumerate(cases):
        label(case, rubric, reviewer, human(i))
    order = [i for i in range(n) if wrong_on is None or human(i) == wrong_on]
    wrong_ids = set(order[:wrong])
    rest = [i for i in range(n) if i not in wrong_ids]
    flip_ids = set(rest[:flips])
    ne_ids = set(range(n)[n - not_evaluated:]) if not_evaluated else set()
    judgments = {}
    for i, case in enumerate(cases):
        verdict = flip(human(i)) if i in wrong_ids else human(i)
        outcomes = [verdict] * repeats
        if i in flip_ids:
            outcomes[-1] = flip(verdict)
        if i in ne_ids:
            outcomes[-1] = "not_evaluated"
        judgments[case] = outcomes
    config = config or make_config(rubric, lead, behavioral=True)
    return make_run(config, dataset, lead, judgments, status=status)
