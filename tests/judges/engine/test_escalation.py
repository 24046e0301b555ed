"""The escalation step in the engine (docs/judging.md): a fallback and a second opinion together, the
adjudicator where the two disagree, the `when` modes of the new form, and the rotating sample.

Every judge is asked through the real SDKs over HTTP at the scripted stand-in; per-model rules make them
agree or disagree, and its per-model call counts say who was asked.
"""

import math

import pytest

from judges.engine import JudgeConfig, MemoryCache, env_name_refusals, judge_batch, judge_case
from judges.engine.escalation import SecondOpinion, ranked_sample, rotating_sample
from judges.engine.prompt import SCORE_FIELDS

from .factories import ANTHROPIC_MODEL, OPENAI_MODEL, PRICES, judge_config, tool_case

FALLBACK_MODEL = "gpt-4.1-mini-2025-04-14"
ADJUDICATOR_MODEL = "claude-opus-4-1-20250805"
PRICES = {**PRICES, FALLBACK_MODEL: PRICES[OPENAI_MODEL], ADJUDICATOR_MODEL: {"input_per_mtok": 15.0,
                                                                                "output_per_mtok": 75.0}}


def judge(provider: str, model: str, **more) -> dict:
    url = "EVALHUB_JUDGE_ANTHROPIC_URL" if provider == "anthropic" else "EVALHUB_JUDGE_OPENAI_URL"
    return {"provider": provider, "model": model, "base_url_env": url, "api_key_env": "EVALHUB_JUDGE_API_KEY", **more}


def escalating(*when: dict, fallback: bool = False, adjudicator: bool = False, **overrides) -> dict:
    config = judge_config(second_opinion=judge("anthropic", ANTHROPIC_MODEL, when=list(when) or [{"mode": "always"}]),
                          **overrides)
    if fallback:
        config["fallback"] = judge("openai", FALLBACK_MODEL)
    if adjudicator:
        config["adjudicator"] = judge("anthropic", ADJUDICATOR_MODEL)
    return config


def calls(fake, model: str) -> int:
    return fake.stats()["by_model"].get(model, 0)


# ---- the fallback and the second opinion together ----------------------------------------------------


def test_the_fallback_answers_when_the_primary_is_down_and_the_second_opinion_still_judges(fake, env, quick_retry):
    fake.control(model=OPENAI_MODEL, fault="500")
    fake.control(model=ANTHROPIC_MODEL, rule={"kind": "always_fail"})
    j = judge_case(tool_case(), escalating(fallback=True), 1, env=env, retry=quick_retry, prices=PRICES)
    assert (j.outcome, j.judge, j.model) == ("pass", "fallback", FALLBACK_MODEL)
    assert (j.secondary_outcome, j.contested) == ("fail", True)
    assert j.opinions["fallback"]["model"] == FALLBACK_MODEL and j.opinions["second_opinion"]["outcome"] == "fail"
    assert j.calls_by_judge == {"primary": 3, "fallback": 1, "second_opinion": 1}
    assert j.provider_calls == 5 and calls(fake, FALLBACK_MODEL) == calls(fake, ANTHROPIC_MODEL) == 1
    assert j.cost_by_judge["primary"] == 0 and j.cost_by_judge["second_opinion"] > j.cost_by_judge["fallback"] > 0
    assert j.cost_usd == pytest.approx(sum(j.cost_by_judge.values()))


# ---- the adjudicator ---------------------------------------------------------------------------------


def test_a_disagreement_goes_to_the_adjudicator_whose_verdict_is_the_cases(fake, env):
    fake.control(model=ANTHROPIC_MODEL, rule={"kind": "always_fail"})
    fake.control(model=ADJUDICATOR_MODEL, rule={"kind": "always_fail"})
    j = judge_case(tool_case(), escalating(adjudicator=True), 1, env=env, prices=PRICES)
    assert (j.outcome, j.judge, j.model, j.contested) == ("fail", "adjudicator", ADJUDICATOR_MODEL, True)
    # All three verdicts and reasons are kept.
    assert {role: o["outcome"] for role, o in j.opinions.items()} == {
        "primary": "pass", "second_opinion": "fail", "adjudicator": "fail"}
    assert all("stand-in" in o["reason"] for o in j.opinions.values())
    assert j.calls_by_judge == {"primary": 1, "second_opinion": 1, "adjudicator": 1}
    assert calls(fake, ADJUDICATOR_MODEL) == 1


def test_without_an_adjudicator_a_disagreement_is_contested_and_the_primary_stands(fake, env):
    fake.control(model=ANTHROPIC_MODEL, rule={"kind": "always_fail"})
    j = judge_case(tool_case(), escalating(), 1, env=env)
    assert (j.outcome, j.judge, j.secondary_outcome, j.contested) == ("pass", "primary", "fail", True)
    assert "adjudicator" not in j.opinions and calls(fake, ADJUDICATOR_MODEL) == 0


def test_an_agreement_never_asks_the_adjudicator(fake, env):
    j = judge_case(tool_case(), escalating(adjudicator=True), 1, env=env)
    assert (j.outcome, j.judge, j.contested) == ("pass", "primary", False)
    assert calls(fake, ADJUDICATOR_MODEL) == 0


def test_an_adjudicator_that_cannot_answer_leaves_the_case_contested_for_humans(fake, env, quick_retry):
    fake.control(model=ANTHROPIC_MODEL, rule={"kind": "always_fail"})
    fake.control(model=ADJUDICATOR_MODEL, fault="500")
    j = judge_case(tool_case(), escalating(adjudicator=True), 1, env=env, retry=quick_retry)
    assert (j.outcome, j.judge, j.contested) == ("pass", "primary", True)
    assert j.opinions["adjudicator"]["outcome"] == "not_evaluated" and j.calls_by_judge["adjudicator"] == 3


def scores_failing(metric: str) -> dict:
    return {"kind": "always_fail", "fail_scores": {**{name: 5 for name in SCORE_FIELDS}, metric: 2}}


@pytest.mark.parametrize("legacy", [False, True])
def test_scores_judges_disagree_when_a_metrics_pass_fail_differs_though_both_fail(fake, env, legacy):
    fake.control(model=OPENAI_MODEL, rule=scores_failing("correctness"))
    fake.control(model=ANTHROPIC_MODEL, rule=scores_failing("faithfulness"))
    if legacy:  # a legacy secondary keeps today's rule: the verdicts alone
        config = judge_config(output_kind="scores", secondary={"role": "second_opinion", **judge(
            "anthropic", ANTHROPIC_MODEL)})
    else:
        config = escalating(output_kind="scores")
    j = judge_case(tool_case(), config, 1, env=env)
    assert (j.outcome, j.secondary_outcome, j.contested) == ("fail", "fail", not legacy)


# ---- the cache: each judge under its own key ----------------------------------------------------------


def test_each_judges_verdict_is_cached_under_its_own_key(fake, env):
    fake.control(model=ANTHROPIC_MODEL, rule={"kind": "always_fail"})
    fake.control(model=ADJUDICATOR_MODEL, rule={"kind": "always_fail"})
    cache, config = MemoryCache(), escalating(adjudicator=True)
    first = judge_case(tool_case(), config, 1, env=env, cache=cache)
    assert len(cache) == 3 and fake.stats()["total"] == 3
    again = judge_case(tool_case(), config, 1, env=env, cache=cache)
    assert fake.stats()["total"] == 3  # not one call more
    assert (again.cached, again.outcome, again.judge, again.provider_calls) == (True, "fail", "adjudicator", 0)
    assert {r: o["outcome"] for r, o in again.opinions.items()} == {r: o["outcome"] for r, o in first.opinions.items()}


# ---- the `when` modes of the new form ------------------------------------------------------------------


def test_safety_asks_on_the_named_categories_only(fake, env):
    config = escalating({"mode": "safety", "categories": ["safety", "adversarial"]})
    cases = [tool_case(external_id=f"c{i}", category=c) for i, c in enumerate(["safety", "tools", "adversarial"])]
    judged = judge_batch([(c, 1) for c in cases], config, concurrency=2, env=env)
    assert [j.secondary_outcome for j in judged] == ["pass", None, "pass"]
    assert calls(fake, ANTHROPIC_MODEL) == 2


@pytest.mark.parametrize(("low", "asked"), [(5, False), (4, True), (3, True), (2, False)])
def test_borderline_asks_within_one_point_of_the_pass_score(fake, env, low, asked):
    scores = {**{name: 5 for name in SCORE_FIELDS}, "correctness": low}
    fake.control(model=OPENAI_MODEL, rule={"kind": "always_pass", "pass_scores": scores, "fail_scores": scores})
    j = judge_case(tool_case(), escalating({"mode": "borderline"}, output_kind="scores"), 1, env=env)
    assert (j.secondary_outcome is not None, calls(fake, ANTHROPIC_MODEL)) == (asked, int(asked))


@pytest.mark.parametrize(
    ("similarity", "legacy", "asked"),
    [(0.77, False, True), (0.75, False, True), (0.74, False, False), (0.80, False, True), (0.77, True, False)],
)
def test_borderline_covers_a_similarity_just_under_pass_at_in_the_new_form_only(similarity, legacy, asked):
    second = SecondOpinion("anthropic", ANTHROPIC_MODEL, when=({"mode": "borderline"},), legacy=legacy)
    drawn = second.asks_on({}, None, similarity, pass_score=4, pass_at=0.8, sampled=None)
    assert drawn is asked


def test_the_modes_are_a_list_any_of_which_asks(fake, env):
    config = escalating({"mode": "safety", "categories": ["safety"]}, {"mode": "sample", "share": 0.5})
    cases = [tool_case(external_id=f"c{i}", category="safety" if i < 2 else "tools") for i in range(6)]
    judged = judge_batch([(c, 1) for c in cases], config, concurrency=3, env=env, sampled={"c4"})
    assert [j.external_id for j in judged if j.secondary_outcome] == ["c0", "c1", "c4"]


# ---- the rotating sample ---------------------------------------------------------------------------------


def test_the_rotating_sample_covers_a_100_case_dataset_within_4_runs_at_share_0_3(fake, env):
    """Four runs share one cache, as the app's runs of a config do: the primary's verdicts come from the
    cache after the first run, and each run's drawn cases still get their second opinion."""
    config = escalating({"mode": "sample", "share": 0.3})
    cases = [tool_case(external_id=f"case-{i:03}", output=f"Order ORD-{i} shipped.") for i in range(100)]
    ids = [c["external_id"] for c in cases]
    cache, seen = MemoryCache(), set()
    for turn in range(4):
        drawn = rotating_sample(ids, 0.3, seed="config-hash:dataset", turn=turn)
        judged = judge_batch([(c, 1) for c in cases], config, concurrency=8, env=env, cache=cache, sampled=drawn)
        asked = {j.external_id for j in judged if j.secondary_outcome}
        assert asked == drawn and len(asked) == 30  # ⌈0.3 · 100⌉ a run
        assert all(j.cached for j in judged) == (turn > 0)
        seen |= asked
    assert seen == set(ids)
    # 120 draws: the 20 drawn a second time (the walk wraps round) find their second opinion cached.
    assert calls(fake, OPENAI_MODEL) == 100 and calls(fake, ANTHROPIC_MODEL) == 100


@pytest.mark.parametrize(("n", "share"), [(100, 0.3), (7, 0.5), (10, 0.05), (33, 1.0), (50, 0.2)])
def test_every_case_is_drawn_within_ceil_one_over_share_runs_and_each_run_holds_its_share(n, share):
    ids = [f"e{i}" for i in range(n)]
    runs = [rotating_sample(ids, share, seed="s", turn=t) for t in range(math.ceil(1 / share))]
    assert set().union(*runs) == set(ids)
    assert all(abs(len(r) - share * n) <= 1 for r in runs)


def test_ci_draws_its_sample_per_ref_within_one_case_of_the_share():
    ids = [f"e{i}" for i in range(40)]
    one, same, other = (ranked_sample(ids, 0.25, salt=ref) for ref in ("sha-1", "sha-1", "sha-2"))
    assert one == same and one != other and len(one) == len(other) == 10


# ---- the config's rules -------------------------------------------------------------------------------


def test_a_legacy_secondary_keeps_its_hash_and_reads_as_the_one_it_names():
    legacy = judge_config(secondary={"role": "second_opinion", **judge("anthropic", ANTHROPIC_MODEL),
                                     "when": {"mode": "categories", "categories": ["safety"]}})
    cfg = JudgeConfig.from_dict(legacy)
    assert cfg.second_opinion_judge.when == ({"mode": "safety", "categories": ["safety"]},)
    assert cfg.second_opinion_judge.legacy and cfg.fallback_judge is None
    assert "second_opinion" not in cfg.to_dict()  # written as it was, so hashed as it was
    new = escalating({"mode": "safety", "categories": ["safety"]})
    assert JudgeConfig.from_dict(new).config_hash != cfg.config_hash


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"second_opinion": judge("openai", "o3-mini-2025-01-31")},
         "second_opinion: must come from another model family"),
        ({"adjudicator": judge("openai", OPENAI_MODEL), "second_opinion": None}, "adjudicator: decides where"),
        ({"secondary": {"role": "fallback", **judge("openai", FALLBACK_MODEL)}}, "either the older `secondary`"),
        ({"second_opinion": judge("anthropic", ANTHROPIC_MODEL, when=[{"mode": "borderline"}])}, "borderline needs"),
        ({"second_opinion": judge("anthropic", ANTHROPIC_MODEL, when=[{"mode": "sample"}])}, r"when\[0\]\.share"),
    ],
)
def test_bad_escalation_fields_are_refused_naming_the_field(change, message):
    with pytest.raises(ValueError, match=message):
        JudgeConfig.from_dict({**escalating(), **change})


def test_every_judges_variables_go_through_the_allowed_names_check():
    config = {**escalating(adjudicator=True), "fallback": judge("openai", FALLBACK_MODEL, api_key_env="DEPLOY_TOKEN")}
    config["adjudicator"]["base_url_env"] = "DATABASE_URL"
    refusals = env_name_refusals(config)
    assert [r.split(":")[0] for r in refusals] == ["fallback.api_key_env", "adjudicator.base_url_env"]


def test_the_adjudicator_may_be_of_any_family():
    cfg = JudgeConfig.from_dict({**escalating(), "adjudicator": judge("openai", OPENAI_MODEL)})
    assert cfg.adjudicator.model == OPENAI_MODEL
