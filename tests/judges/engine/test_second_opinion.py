"""Second opinions in the engine, beyond test_failures.py's basics: when each routing mode asks the
secondary judge (counted on the fake provider by model), the family refusal, and the cache.

The primary is an OpenAI model, the second opinion an Anthropic one; per-model rules on the fake
provider make them agree or disagree.
"""

import pytest

from judges.engine import JudgeConfig, MemoryCache, judge_batch, judge_case
from judges.engine.secondary import sample_share

from .factories import ANTHROPIC_MODEL, OPENAI_MODEL, judge_config, tool_case

SCORES_AT = {"relevance": 5, "correctness": 5, "faithfulness": 5, "helpfulness": 5, "hallucinationFree": 5}


def second_opinion(**when) -> dict:
    return {
        "role": "second_opinion",
        "provider": "anthropic",
        "model": ANTHROPIC_MODEL,
        "base_url_env": "EVALHUB_JUDGE_ANTHROPIC_URL",
        "api_key_env": "EVALHUB_JUDGE_API_KEY",
        "when": when or {"mode": "always"},
    }


def secondary_calls(fake) -> int:
    return fake.stats()["by_model"].get(ANTHROPIC_MODEL, 0)


def primary_scores(fake, low: int) -> None:
    """The primary answers every score 5 but correctness, which is `low`."""
    fake.control(model=OPENAI_MODEL, rule={"kind": "always_pass", "pass_scores": {**SCORES_AT, "correctness": low}})


# ---- always --------------------------------------------------------------------------------------------


def test_always_asks_the_second_opinion_on_every_judgment_and_every_repeat(fake, env):
    cases = [tool_case(external_id=f"case-{i}", category=c) for i, c in enumerate(["tools", "edge"])]
    items = [(case, r) for case in cases for r in (1, 2)]
    judgments = judge_batch(items, judge_config(secondary=second_opinion()), concurrency=2, env=env)
    assert [j.secondary_outcome for j in judgments] == ["pass"] * 4
    assert fake.stats()["by_model"] == {OPENAI_MODEL: 4, ANTHROPIC_MODEL: 4}


def test_a_failed_contract_asks_no_judge_at_all(fake, env):
    config = judge_config(
        layers=["contract", "behavioral"], contract_checks=["answer_present"], secondary=second_opinion()
    )
    j = judge_case(tool_case(output=""), config, 1, env=env)
    assert (j.outcome, j.layer, j.secondary_outcome, j.contested) == ("fail", "contract", None, False)
    assert fake.stats()["total"] == 0


def test_the_primary_verdict_stands_both_ways_when_contested(fake, env):
    fake.control(model=OPENAI_MODEL, rule={"kind": "always_fail"})
    j = judge_case(tool_case(), judge_config(secondary=second_opinion()), 1, env=env)
    assert (j.outcome, j.secondary_outcome, j.contested, j.model) == ("fail", "pass", True, OPENAI_MODEL)


# ---- categories ----------------------------------------------------------------------------------------


def test_categories_ask_only_on_the_chosen_categories(fake, env):
    config = judge_config(secondary=second_opinion(mode="categories", categories=["safety", "adversarial"]))
    fake.control(model=ANTHROPIC_MODEL, rule={"kind": "always_fail"})
    chosen = judge_case(tool_case(category="safety"), config, 1, env=env)
    other = judge_case(tool_case(category="tools"), config, 1, env=env)
    assert (chosen.secondary_outcome, chosen.contested) == ("fail", True)
    assert (other.secondary_outcome, other.contested) == (None, False)
    assert secondary_calls(fake) == 1


# ---- borderline ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pass_score", "low", "asked", "outcome"),
    [
        (4, 5, False, "pass"),  # a clear pass: two points from failing
        (4, 4, True, "pass"),  # at the pass line: one point from failing
        (4, 3, True, "fail"),  # one point under it: one point from passing
        (4, 2, False, "fail"),  # a clear fail
        (3, 4, False, "pass"),  # the window follows the config's pass score
        (3, 2, True, "fail"),
    ],
)
def test_borderline_asks_within_one_point_of_the_pass_score(fake, env, pass_score, low, asked, outcome):
    primary_scores(fake, low)
    config = judge_config(output_kind="scores", pass_score=pass_score, secondary=second_opinion(mode="borderline"))
    j = judge_case(tool_case(), config, 1, env=env)
    assert j.outcome == outcome and j.scores["correctness"] == low
    assert (j.secondary_outcome is not None, secondary_calls(fake)) == (asked, int(asked))


def test_a_borderline_pass_the_second_opinion_fails_is_contested(fake, env):
    primary_scores(fake, 4)
    fake.control(model=ANTHROPIC_MODEL, rule={"kind": "always_fail"})
    config = judge_config(output_kind="scores", secondary=second_opinion(mode="borderline"))
    j = judge_case(tool_case(), config, 1, env=env)
    assert (j.outcome, j.secondary_outcome, j.contested) == ("pass", "fail", True)


# ---- sample --------------------------------------------------------------------------------------------


def test_sample_chooses_by_a_salted_hash_of_the_external_id_for_every_repeat(fake, env):
    config = judge_config(secondary=second_opinion(mode="sample", share=0.5))
    ids = [f"case-{i}" for i in range(30)]
    items = [(tool_case(external_id=e, output=f"Order ORD-{e} shipped."), r) for e in ids for r in (1, 2)]
    judgments = judge_batch(items, config, concurrency=4, env=env)
    asked = {(j.external_id, j.repeat) for j in judgments if j.secondary_outcome}
    expected = {e for e in ids if sample_share(e) < 0.5}
    assert 0 < len(expected) < len(ids)  # a real sample, not all or nothing
    assert asked == {(e, r) for e in expected for r in (1, 2)}  # a case's repeats alike
    assert secondary_calls(fake) == 2 * len(expected)


def test_sample_share_one_asks_on_every_case(fake, env):
    config = judge_config(secondary=second_opinion(mode="sample", share=1))
    judgments = judge_batch([(tool_case(external_id=f"c{i}"), 1) for i in range(8)], config, concurrency=4, env=env)
    assert all(j.secondary_outcome == "pass" for j in judgments)


# ---- the cache -----------------------------------------------------------------------------------------


def test_a_second_run_with_a_second_opinion_is_served_from_the_cache_contested_and_all(fake, env):
    fake.control(model=ANTHROPIC_MODEL, rule={"kind": "always_fail"})
    config = judge_config(secondary=second_opinion(mode="sample", share=0.5))
    items = [(tool_case(external_id=f"case-{i}", output=f"Order {i} shipped."), 1) for i in range(12)]
    cache = MemoryCache()
    first = judge_batch(items, config, concurrency=4, env=env, cache=cache)
    calls = fake.stats()["total"]
    again = judge_batch(items, config, concurrency=4, env=env, cache=cache)
    assert fake.stats()["total"] == calls  # not one call more
    assert all(j.cached for j in again)
    assert [(j.outcome, j.secondary_outcome, j.contested) for j in again] == [
        (j.outcome, j.secondary_outcome, j.contested) for j in first
    ]
    assert any(j.contested for j in again)


def test_a_second_opinion_that_could_not_answer_is_not_cached(fake, env, quick_retry):
    fake.control(model=ANTHROPIC_MODEL, fault="500")
    config = judge_config(secondary=second_opinion())
    cache = MemoryCache()
    first = judge_case(tool_case(), config, 1, env=env, cache=cache, retry=quick_retry)
    assert (first.outcome, first.secondary_outcome) == ("pass", "not_evaluated")
    fake.control(model=ANTHROPIC_MODEL, fault=None, rule={"kind": "always_fail"})
    j = judge_case(tool_case(), config, 1, env=env, cache=cache)
    # The primary's verdict comes from the cache (its own key); the second opinion is asked again.
    assert (j.cached, j.secondary_outcome, j.contested) == (True, "fail", True)
    assert j.calls_by_judge == {"second_opinion": 1}


# ---- the same-family refusal ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("primary", "secondary"),
    [
        ({}, {"provider": "openai", "model": "o3-mini-2025-01-31"}),  # another OpenAI line is still OpenAI
        (
            {},
            {
                "provider": "openai-compatible",
                "model": "judge-local",
                "model_family": "OpenAI",
                "base_url_env": "LOCAL_URL",
            },
        ),  # a family set on the secondary counts
        (
            {
                "provider": "openai-compatible",
                "model": "local-judge",
                "model_family": "anthropic",
                "base_url_env": "LOCAL_URL",
            },
            {"provider": "anthropic", "model": ANTHROPIC_MODEL},
        ),  # on the primary too
    ],
)
def test_it_refuses_a_second_opinion_of_the_primarys_family_with_a_clear_message(primary, secondary):
    with pytest.raises(ValueError) as excinfo:
        JudgeConfig.from_dict(judge_config(**primary, secondary={"role": "second_opinion", **secondary}))
    message = str(excinfo.value)
    assert message.startswith("secondary: a second_opinion must come from another model family")
    assert "set model_family where the name says nothing" in message


def test_the_same_model_as_a_fallback_is_fine_but_not_as_a_second_opinion():
    same = {"provider": "openai", "model": OPENAI_MODEL}
    assert JudgeConfig.from_dict(judge_config(secondary={"role": "fallback", **same})).secondary.role == "fallback"
    with pytest.raises(ValueError, match="another model family"):
        JudgeConfig.from_dict(judge_config(secondary={"role": "second_opinion", **same}))
