"""A run of many cases with chosen repeats, for the audit sample and pass-rate tests."""

import random

from judges.models import Run
from tests.judges.report_factories import make_cases, make_config, make_run


def make_sampled_run(dataset, rubric, lead, *, cases: int = 60, repeats: int = 3, seed: int = 5) -> Run:
    """`cases` cases in two categories; each case's repeats pass with its own chance (so some split)."""
    rng = random.Random(seed)
    made = make_cases(dataset, [(f"e{i:03d}", "policy" if i % 2 else "tools") for i in range(cases)])
    outcomes = {}
    for case in made:
        chance = rng.choice([0.0, 0.5, 1.0, 1.0])
        outcomes[case] = ["pass" if rng.random() < chance else "fail" for _ in range(repeats)]
    return make_run(make_config(rubric, lead, behavioral=True), dataset, lead, outcomes)
