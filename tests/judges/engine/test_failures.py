"""Every fault a provider can produce, through the real SDKs over real HTTP, ends in the right outcome."""

import itertools
import json
import time

import pytest

from judges.engine import KEY_REFUSED, RetryPolicy, judge_batch, judge_case

from .conftest import FAKE_KEY
from .factories import ANTHROPIC_MODEL, OPENAI_MODEL, PRICES, judge_config, tool_case

PROVIDERS = ["openai", "anthropic"]


def timed(*args, **kwargs):
    started = time.monotonic()
    j = judge_case(*args, **kwargs)
    return j, time.monotonic() - started


def waits_between_calls(fake) -> list[float]:
    """Seconds from each call's answer to the next call's arrival, on the stand-in's clock: the client's
    wait alone, without its start-up (the SDK's first import) or a busy machine's slowness in the calls."""
    calls = fake.requests()
    return [after["started"] - before["ended"] for before, after in itertools.pairwise(calls)]


def gaps_between_arrivals(fake) -> list[float]:
    calls = fake.requests()
    return [after["started"] - before["started"] for before, after in itertools.pairwise(calls)]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_it_judges_through_the_sdk(fake, env, provider):
    j = judge_case(tool_case(), judge_config(provider), 1, env=env, prices=PRICES)
    assert (j.outcome, j.layer, j.judge, j.error) == ("pass", "behavioral", "primary", "")
    assert j.provider_calls == 1
    assert "scripted stand-in" in j.reason
    assert j.input_tokens > 0 and j.output_tokens > 0
    price = PRICES[j.model]
    expected = (j.input_tokens * price["input_per_mtok"] + j.output_tokens * price["output_per_mtok"]) / 1e6
    assert j.cost_usd == pytest.approx(expected)
    assert j.latency_ms >= 0
    [request] = fake.requests()
    assert request["endpoint"] == provider
    assert request["model"] == (ANTHROPIC_MODEL if provider == "anthropic" else OPENAI_MODEL)
    assert request["structured"] is True
    assert request["authorized"] is True
    assert request["params"]["temperature"] == 0
    assert "<<<ANSWER>>>\nYour order ORD-101 shipped yesterday" in request["prompt"]
    assert "<<<POLICY>>>\nNever promise a delivery date" in request["prompt"]
    assert "<<<CRITERIA>>>\nThe answer gives the order's true status." in request["prompt"]
    assert '"name": "lookup_order"' in request["prompt"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_scores_pass_only_when_every_score_reaches_the_pass_score(fake, env, provider):
    config = judge_config(provider, output_kind="scores", pass_score=4)
    j = judge_case(tool_case(), config, 1, env=env)
    assert j.outcome == "pass" and j.scores == dict.fromkeys(j.scores, 5)
    scores = {"relevance": 5, "correctness": 5, "faithfulness": 3, "helpfulness": 5, "hallucinationFree": 5}
    fake.control(rule={"kind": "always_pass", "pass_scores": scores})
    j = judge_case(tool_case(), config, 1, env=env)
    assert j.outcome == "fail" and j.scores == scores


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_verdict_rule_reads_the_answer_from_the_prompt(fake, env, provider):
    fake.control(rule={"kind": "answer_min_length", "chars": 40})
    long = judge_case(tool_case(), judge_config(provider), 1, env=env)
    short = judge_case(tool_case(output="Shipped."), judge_config(provider), 1, env=env)
    assert (long.outcome, short.outcome) == ("pass", "fail")
    assert "8 characters" in short.reason


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_429_is_retried_after_waiting_out_its_retry_after(fake, env, provider, quick_retry):
    fake.control(fault="429", fault_count=1, retry_after=1)
    j = judge_case(tool_case(), judge_config(provider), 1, env=env, retry=quick_retry)
    assert (j.outcome, j.provider_calls) == ("pass", 2)
    # The backoff is milliseconds here, so a wait of a second can only be the Retry-After.
    [wait] = waits_between_calls(fake)
    assert wait >= 1.0
    assert fake.stats()["by_fault"] == {"429": 1}


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_lasting_429_ends_not_evaluated_rate_limit(fake, env, provider, quick_retry):
    fake.control(fault="429", retry_after=0.5)
    j = judge_case(tool_case(), judge_config(provider, max_attempts=3), 1, env=env, retry=quick_retry)
    assert (j.outcome, j.error, j.provider_calls) == ("not_evaluated", "rate limit", 3)
    assert all(wait >= 0.5 for wait in waits_between_calls(fake))  # a wait of 0.5 s between attempts
    assert "after 3 attempts" in j.reason
    assert j.scores is None


def test_a_retry_after_longer_than_the_engine_waits_ends_at_once(fake, env):
    fake.control(fault="429", retry_after=30)
    j, elapsed = timed(tool_case(), judge_config(), 1, env=env, retry=RetryPolicy(max_retry_after_s=2))
    assert (j.outcome, j.error, j.provider_calls) == ("not_evaluated", "rate limit", 1)
    assert "Retry-After 30 s is too long" in j.reason
    assert elapsed < 20  # not one second of the 30 was waited (a margin no busy machine uses up)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_500_is_retried_with_backoff(fake, env, provider, quick_retry):
    fake.control(fault="500", fault_count=2)
    j = judge_case(tool_case(), judge_config(provider), 1, env=env, retry=quick_retry)
    assert (j.outcome, j.provider_calls) == ("pass", 3)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_lasting_500_ends_not_evaluated_server_error(fake, env, provider, quick_retry):
    fake.control(fault="500")
    j = judge_case(tool_case(), judge_config(provider), 1, env=env, retry=quick_retry)
    assert (j.outcome, j.error, j.provider_calls) == ("not_evaluated", "server error", 3)
    assert "HTTP 500" in j.reason


def test_the_sdk_does_not_retry_on_its_own(fake, env):
    fake.control(fault="500")
    j = judge_case(tool_case(), judge_config(max_attempts=1), 1, env=env)
    assert j.provider_calls == 1
    assert fake.stats()["total"] == 1  # the SDK's default would have made 3 calls


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_hung_provider_times_out(fake, env, provider, quick_retry):
    fake.control(fault="timeout", hang_s=60)
    config = judge_config(provider, timeout_s=0.5, max_attempts=2)
    j = judge_case(tool_case(), config, 1, env=env, retry=quick_retry)
    assert (j.outcome, j.error, j.provider_calls) == ("not_evaluated", "timeout", 2)
    # The first call was given its 0.5 s (its clock starts before the request reaches the stand-in, so a
    # little less shows here), then cut off long before the stand-in's 60 s hang would end.
    [gap] = gaps_between_arrivals(fake)
    assert 0.4 <= gap < 30
    assert "0.5 s" in j.reason


@pytest.mark.parametrize("provider", PROVIDERS)
def test_timeout_s_bounds_the_whole_call_of_a_provider_trickling_bytes(fake, env, provider):
    # One byte a second: each read succeeds, so only a deadline on the whole call can end it.
    fake.control(fault="trickle")
    j, elapsed = timed(tool_case(), judge_config(provider, timeout_s=2, max_attempts=1), 1, env=env)
    assert (j.outcome, j.error, j.provider_calls) == ("not_evaluated", "timeout", 1)
    assert j.reason == "timeout: no answer within 2 s"
    assert elapsed < 30  # the trickled response would take several minutes
    fake.reset()  # stops the trickle
    assert judge_case(tool_case(), judge_config(provider, timeout_s=2), 1, env=env).outcome == "pass"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_dropped_connection_is_a_connection_error(fake, env, provider, quick_retry):
    fake.control(fault="disconnect")
    j = judge_case(tool_case(), judge_config(provider), 1, env=env, retry=quick_retry)
    assert (j.outcome, j.error, j.provider_calls) == ("not_evaluated", "connection error", 3)


def test_nothing_listening_is_a_connection_error(env, quick_retry):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dead = {**env, "EVALHUB_JUDGE_OPENAI_URL": f"http://127.0.0.1:{port}/v1"}
    j = judge_case(tool_case(), judge_config(), 1, env=dead, retry=quick_retry)
    assert (j.outcome, j.error) == ("not_evaluated", "connection error")


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("output_kind", ["verdict", "scores"])
@pytest.mark.parametrize("fault", ["malformed_json", "score_7", "missing_field"])
def test_an_invalid_answer_is_asked_again_never_guessed(fake, env, provider, output_kind, fault):
    fake.control(fault=fault)
    j = judge_case(tool_case(), judge_config(provider, output_kind=output_kind), 1, env=env)
    assert (j.outcome, j.error, j.provider_calls) == ("not_evaluated", "invalid output", 3)
    assert j.scores is None
    assert j.raw_output  # what the judge said is kept for a human to read
    if fault == "score_7" and output_kind == "scores":
        assert '"correctness": 7' in j.raw_output
        assert "7 is outside 1-5" in j.reason


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_valid_answer_after_an_invalid_one_decides(fake, env, provider):
    fake.control(fault="score_7", fault_count=1)
    j = judge_case(tool_case(), judge_config(provider, output_kind="scores"), 1, env=env)
    assert (j.outcome, j.provider_calls) == ("pass", 2)
    assert set(j.scores.values()) == {5}
    assert j.input_tokens > 0  # both calls' tokens are counted


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_verdict_of_capitalised_pass_with_a_full_stop_is_normalised(fake, env, provider):
    fake.control(fault="verdict_Pass.")
    j = judge_case(tool_case(), judge_config(provider), 1, env=env)
    assert (j.outcome, j.provider_calls) == ("pass", 1)
    assert json.loads(j.raw_output)["verdict"] == "Pass."
    fake.control(rule={"kind": "always_fail"})
    assert judge_case(tool_case(), judge_config(provider), 1, env=env).outcome == "fail"


def test_a_verdict_that_is_neither_pass_nor_fail_is_invalid(fake, env):
    fake.control(fault="verdict_maybe")
    j = judge_case(tool_case(), judge_config(max_attempts=2), 1, env=env)
    assert (j.outcome, j.error, j.provider_calls) == ("not_evaluated", "invalid output", 2)
    assert "'maybe'" in j.reason


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("fault", ["401", "403"])
def test_a_refused_key_is_its_own_config_error_never_retried_and_never_shown(fake, env, provider, fault, quick_retry):
    fake.control(fault=fault)
    j = judge_case(tool_case(), judge_config(provider), 1, env=env, retry=quick_retry)
    assert (j.outcome, j.error, j.provider_calls) == ("not_evaluated", KEY_REFUSED, 1)
    assert j.reason.startswith(f"key refused: HTTP {fault}: ")
    assert j.reason.endswith("(the key in EVALHUB_JUDGE_API_KEY)")
    assert "***" in j.reason  # the fake echoed the key; the engine hid it
    assert FAKE_KEY not in json.dumps(j.to_dict())


def test_a_refused_key_is_asked_once_per_batch(fake, env):
    fake.control(fault="401")
    items = [(tool_case(external_id=f"case-{i}"), 1) for i in range(5)]
    judgments = judge_batch(items, judge_config(), concurrency=1, env=env)
    assert {j.error for j in judgments} == {KEY_REFUSED}
    assert [j.provider_calls for j in judgments] == [1, 0, 0, 0, 0]
    assert judgments[-1].reason == "key refused: the key in EVALHUB_JUDGE_API_KEY was refused earlier in this batch"
    assert fake.stats()["total"] == 1


def test_a_refused_key_is_not_hidden_by_the_fallback(fake, env, quick_retry):
    fake.control(model=OPENAI_MODEL, fault="401")
    j = judge_case(tool_case(), judge_config(secondary=FALLBACK), 1, env=env, retry=quick_retry)
    assert (j.outcome, j.error, j.judge, j.provider_calls) == ("not_evaluated", KEY_REFUSED, "primary", 1)
    assert fake.stats()["by_model"] == {OPENAI_MODEL: 1}


def test_a_fallbacks_refused_key_is_reported_as_such(fake, env, quick_retry):
    fake.control(model=OPENAI_MODEL, fault="500")
    fake.control(model=ANTHROPIC_MODEL, fault="403")
    j = judge_case(tool_case(), judge_config(secondary=FALLBACK), 1, env=env, retry=quick_retry)
    assert (j.outcome, j.error, j.judge) == ("not_evaluated", KEY_REFUSED, "fallback")
    assert "fallback: key refused: HTTP 403" in j.reason


def test_a_missing_environment_variable_is_a_config_error_without_a_call(fake, env):
    j = judge_case(tool_case(), judge_config(), 1, env={"EVALHUB_JUDGE_OPENAI_URL": env["EVALHUB_JUDGE_OPENAI_URL"]})
    assert (j.outcome, j.error, j.provider_calls) == ("not_evaluated", "config error", 0)
    assert j.reason == "config error: environment variable EVALHUB_JUDGE_API_KEY is not set"
    j = judge_case(tool_case(), judge_config(), 1, env={"EVALHUB_JUDGE_API_KEY": FAKE_KEY})
    assert "EVALHUB_JUDGE_OPENAI_URL is not set" in j.reason
    assert fake.stats()["total"] == 0


def test_a_provider_without_a_key_variable_reads_its_usual_one(fake, env):
    # Its usual key goes only with its SDK's own URL variable (or its own endpoint): docs/gate.md, "Keys and endpoints".
    config = judge_config(api_key_env=None, base_url_env="OPENAI_BASE_URL")
    url = {"OPENAI_BASE_URL": env["EVALHUB_JUDGE_OPENAI_URL"]}
    j = judge_case(tool_case(), config, 1, env=url)
    assert "OPENAI_API_KEY is not set" in j.reason
    j = judge_case(tool_case(), config, 1, env={**url, "OPENAI_API_KEY": "sk-other"})
    assert j.outcome == "pass"
    elsewhere = judge_case(tool_case(), judge_config(api_key_env=None), 1, env={**env, "OPENAI_API_KEY": "sk-other"})
    assert elsewhere.error == "config error" and "not to EVALHUB_JUDGE_OPENAI_URL" in elsewhere.reason


def test_an_openai_compatible_server_needs_no_key(fake, env):
    config = judge_config(provider="openai-compatible", model="llama3.1:8b", model_family="meta", api_key_env=None)
    j = judge_case(tool_case(), config, 1, env={"EVALHUB_JUDGE_OPENAI_URL": env["EVALHUB_JUDGE_OPENAI_URL"]})
    assert (j.outcome, j.model) == ("pass", "llama3.1:8b")
    [request] = fake.requests()
    assert request["params"]["max_tokens"] == 300  # local servers know max_tokens


def test_an_unknown_models_cost_is_none_not_zero(fake, env):
    j = judge_case(tool_case(), judge_config(), 1, env=env, prices={})
    assert j.outcome == "pass" and j.cost_usd is None and j.input_tokens > 0


# ---- the secondary judge ---------------------------------------------------------------------------

FALLBACK = {
    "role": "fallback",
    "provider": "anthropic",
    "model": ANTHROPIC_MODEL,
    "base_url_env": "EVALHUB_JUDGE_ANTHROPIC_URL",
    "api_key_env": "EVALHUB_JUDGE_API_KEY",
}


def test_the_fallback_answers_when_the_primary_cannot(fake, env, quick_retry):
    fake.control(model=OPENAI_MODEL, fault="500")
    fake.control(model=ANTHROPIC_MODEL, rule={"kind": "always_fail"})
    j = judge_case(tool_case(), judge_config(secondary=FALLBACK), 1, env=env, retry=quick_retry, prices=PRICES)
    assert (j.outcome, j.judge, j.model, j.error) == ("fail", "fallback", ANTHROPIC_MODEL, "")
    assert j.provider_calls == 4  # three primary attempts, then the fallback
    assert fake.stats()["by_model"] == {OPENAI_MODEL: 3, ANTHROPIC_MODEL: 1}
    assert j.cost_usd is not None and j.cost_usd > 0


def test_the_fallback_keeps_the_primarys_temperature_and_token_bound_only(fake, env, quick_retry):
    fake.control(model=OPENAI_MODEL, fault="500")
    config = judge_config(secondary=FALLBACK, params={"temperature": 0, "max_tokens": 300, "seed": 7})
    assert judge_case(tool_case(), config, 1, env=env, retry=quick_retry).judge == "fallback"
    params = fake.requests()[-1]["params"]
    assert (params["temperature"], params["max_tokens"]) == (0, 300)
    assert "seed" not in params  # an OpenAI parameter the Anthropic API would refuse


def test_the_fallback_is_not_asked_when_the_primary_answers(fake, env):
    j = judge_case(tool_case(), judge_config(secondary=FALLBACK), 1, env=env)
    assert (j.judge, j.provider_calls) == ("primary", 1)
    assert fake.stats()["by_model"] == {OPENAI_MODEL: 1}


def test_when_the_fallback_fails_too_both_reasons_are_given(fake, env, quick_retry):
    fake.control(model=OPENAI_MODEL, fault="429", retry_after=0)
    fake.control(model=ANTHROPIC_MODEL, fault="malformed_json")
    j = judge_case(tool_case(), judge_config(secondary=FALLBACK), 1, env=env, retry=quick_retry)
    assert (j.outcome, j.error, j.judge) == ("not_evaluated", "rate limit", "fallback")
    assert j.reason.startswith("primary: rate limit")
    assert "fallback: invalid output" in j.reason
    assert j.provider_calls == 6


def second_opinion(**when):
    return {
        "role": "second_opinion",
        "provider": "anthropic",
        "model": ANTHROPIC_MODEL,
        "base_url_env": "EVALHUB_JUDGE_ANTHROPIC_URL",
        "api_key_env": "EVALHUB_JUDGE_API_KEY",
        "when": when or {"mode": "always"},
    }


def test_a_second_opinion_never_answers_for_a_primary_that_could_not(fake, env, quick_retry):
    fake.control(model=OPENAI_MODEL, fault="500")
    j = judge_case(tool_case(), judge_config(secondary=second_opinion()), 1, env=env, retry=quick_retry)
    assert (j.outcome, j.error, j.judge, j.secondary_outcome) == ("not_evaluated", "server error", "primary", None)
    assert "fallback" not in j.reason
    assert fake.stats()["by_model"] == {OPENAI_MODEL: 3}  # the second opinion was never asked


def test_the_fallback_is_not_asked_once_the_spend_cap_is_reached(fake, env):
    [j] = judge_batch([(tool_case(), 1)], judge_config(secondary=FALLBACK), concurrency=1, env=env,
                      prices=PRICES, spend_cap_usd=0.0)
    assert (j.outcome, j.error, j.judge, j.provider_calls) == ("not_evaluated", "spend cap", "primary", 0)
    assert "fallback" not in j.reason
    assert fake.stats()["total"] == 0


def test_a_disagreeing_second_opinion_marks_the_judgment_contested(fake, env):
    fake.control(model=ANTHROPIC_MODEL, rule={"kind": "always_fail"})
    j = judge_case(tool_case(), judge_config(secondary=second_opinion()), 1, env=env)
    assert (j.outcome, j.secondary_outcome, j.contested, j.judge) == ("pass", "fail", True, "primary")
    assert j.provider_calls == 2


def test_an_agreeing_second_opinion_is_not_contested(fake, env):
    j = judge_case(tool_case(), judge_config(secondary=second_opinion()), 1, env=env)
    assert (j.outcome, j.secondary_outcome, j.contested) == ("pass", "pass", False)


def test_a_second_opinion_that_cannot_answer_leaves_the_primary_uncontested(fake, env, quick_retry):
    fake.control(model=ANTHROPIC_MODEL, fault="500")
    j = judge_case(tool_case(), judge_config(secondary=second_opinion()), 1, env=env, retry=quick_retry)
    assert (j.outcome, j.secondary_outcome, j.contested) == ("pass", "not_evaluated", False)


def test_a_second_opinion_on_chosen_categories_only(fake, env):
    config = judge_config(secondary=second_opinion(mode="categories", categories=["adversarial"]))
    assert judge_case(tool_case(), config, 1, env=env).secondary_outcome is None
    j = judge_case(tool_case(category="adversarial"), config, 1, env=env)
    assert j.secondary_outcome == "pass"


def test_a_second_opinion_on_borderline_scores_only(fake, env):
    config = judge_config(output_kind="scores", secondary=second_opinion(mode="borderline"))
    assert judge_case(tool_case(), config, 1, env=env).secondary_outcome is None  # all 5s: clear
    borderline = {
        "relevance": 5,
        "correctness": 4,
        "faithfulness": 5,
        "helpfulness": 5,
        "hallucinationFree": 5,
    }
    fake.control(model=OPENAI_MODEL, rule={"kind": "always_pass", "pass_scores": borderline})
    assert judge_case(tool_case(), config, 1, env=env).secondary_outcome == "pass"


def test_a_second_opinion_samples_the_same_cases_on_every_run(fake, env):
    config = judge_config(secondary=second_opinion(mode="sample", share=0.3))
    items = [(tool_case(external_id=f"case-{i}"), 1) for i in range(40)]

    def sampled():
        judgments = judge_batch(items, config, concurrency=8, env=env)
        return {j.external_id for j in judgments if j.secondary_outcome}

    first = sampled()
    assert first == sampled()
    assert 4 <= len(first) <= 20  # about 30 % of 40
