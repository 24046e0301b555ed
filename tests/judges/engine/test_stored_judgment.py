"""Judgment.from_stored: a dict from outside (a cache entry, a posted CI judgment) is a judgment only when every
field is there with its declared type; anything else is None, never a verdict."""

import pytest

from judges.engine.judgment import Judgment

WHOLE = Judgment(external_id="case-1", repeat=2, outcome="fail", scores={"accuracy": 2}, reason="wrong window",
                 checks=[{"name": "forbidden_tools", "passed": False}], cost_usd=0.001, similarity=0.91,
                 secondary_outcome="fail", model="gpt-4o-mini").to_dict()


def test_a_whole_judgment_comes_back_as_it_was():
    assert Judgment.from_stored(dict(WHOLE)) == Judgment(**WHOLE)
    assert Judgment.from_stored(WHOLE | {"cost_usd": 1, "similarity": None, "scores": None}).cost_usd == 1


@pytest.mark.parametrize(("name", "value"), [
    ("repeat", True), ("repeat", 1.0), ("repeat", "1"), ("outcome", "maybe"), ("reason", None), ("reason", False),
    ("cached", 0), ("cached", None), ("cost_usd", True), ("cost_usd", "0.1"), ("similarity", False),
    ("scores", {"accuracy": True}), ("scores", {"accuracy": 2.5}), ("scores", [2]), ("checks", {"name": "x"}),
    ("checks", ["x"]), ("input_tokens", None), ("secondary_outcome", 1), ("model", ["gpt"]),
])
def test_a_field_of_the_wrong_type_makes_it_none(name, value):
    assert Judgment.from_stored(WHOLE | {name: value}) is None


def test_a_missing_field_or_a_non_dict_makes_it_none():
    partial = dict(WHOLE)
    del partial["latency_ms"]
    assert Judgment.from_stored(partial) is None
    assert Judgment.from_stored([WHOLE]) is None and Judgment.from_stored(None) is None
