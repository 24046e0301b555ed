"""The semantic layer: cosine, references, decisions at each threshold, the cache and the failure chain.

Embeddings come through the real `openai` SDK over HTTP from the stand-in's /v1/embeddings, whose
vectors are a hashed bag of words (not a model): texts sharing words are close, others far apart.
"""

import math

import openai
import pytest

from judges.engine import (
    Engine,
    FolderCache,
    JudgeConfig,
    MemoryCache,
    cache_key,
    config_hash,
    cosine,
    decide,
    embedding_key,
    env_name_refusals,
    judge_batch,
    judge_case,
    judge_many,
    references,
)
from judges.engine import embeddings as embeddings_module
from judges.engine.providers import ClientPool, call_embeddings, resolve_endpoint
from judges.engine.semantic import EMBED_BATCH, SemanticLayer
from judges.testing.fake_provider import stand_in_vector

from .conftest import FAKE_KEY
from .factories import (
    EMBEDDING_MODEL,
    PRICES,
    contract_config,
    judge_config,
    semantic_block,
    semantic_config,
    tool_case,
)

CACHE_KEY = b"a test cache key, 32 bytes long!!"  # the gate step's secret (FolderCache signs with it)

# tool_case's golden answer is "ORD-101 has shipped and arrives Friday."
PARAPHRASE = "Your order ORD-101 shipped yesterday and arrives on Friday."
IN_BETWEEN = "Order ORD-101 is still at the warehouse."
UNRELATED = "We sell gift cards in three colours."


def embedding_calls(fake) -> int:
    return fake.stats()["by_endpoint"].get("embeddings", 0)


def sim(a: str, b: str) -> float:
    return round(cosine(stand_in_vector(a), stand_in_vector(b)), 4)


def test_the_stand_ins_texts_sit_where_these_tests_need_them():
    golden = tool_case()["golden_answer"]
    assert sim(PARAPHRASE, golden) >= 0.8
    assert 0.3 <= sim(IN_BETWEEN, golden) < 0.8
    assert sim(UNRELATED, golden) < 0.3


# ---- cosine, references, decisions -----------------------------------------------------------------


def test_cosine():
    assert cosine([1, 0], [1, 0]) == 1.0
    assert cosine([1, 0], [0, 3]) == 0.0
    assert cosine([1, 2], [-1, -2]) == pytest.approx(-1.0)
    assert cosine([1, 1], [1, 0]) == pytest.approx(1 / math.sqrt(2))
    assert cosine([0, 0], [1, 0]) == 0.0  # a zero vector points nowhere
    with pytest.raises(ValueError, match="different lengths"):
        cosine([1, 0], [1, 0, 0])


def test_references_are_the_golden_answer_then_metadata_references():
    case = tool_case(metadata={"references": ["Shipped; due Friday.", "  ", "It ships Friday."]})
    assert references(case) == [
        ("golden answer", "ORD-101 has shipped and arrives Friday."),
        ("references[0]", "Shipped; due Friday."),
        ("references[2]", "It ships Friday."),
    ]
    assert references(tool_case(golden_answer="", metadata={})) == []
    with pytest.raises(ValueError, match="metadata.references: expected a list of strings"):
        references(tool_case(metadata={"references": "one string"}))


LAYER = SemanticLayer(provider="openai", model=EMBEDDING_MODEL, pass_at=0.8, fail_below=0.5)


@pytest.mark.parametrize(
    ("similarity", "behavioral", "expected"),
    [
        (1.0, True, "pass"),
        (0.8, True, "pass"),  # at pass_at: passes
        (0.7999, True, None),  # just under: the judge decides
        (0.5, True, None),  # at fail_below: not below it, the judge decides
        (0.4999, True, "fail"),
        (0.0, True, "fail"),
        (0.8, False, "pass"),
        (0.7999, False, "fail"),  # no judge: below pass_at fails
        (0.4999, False, "fail"),
    ],
)
def test_decide_at_and_around_each_threshold(similarity, behavioral, expected):
    assert decide(similarity, LAYER, behavioral=behavioral) == expected


def test_without_fail_below_everything_under_pass_at_goes_to_the_judge():
    layer = SemanticLayer(provider="openai", model=EMBEDDING_MODEL, pass_at=0.8)
    assert decide(0.0, layer, behavioral=True) is None
    assert decide(0.8, layer, behavioral=True) == "pass"


# ---- the config --------------------------------------------------------------------------------------


def test_a_semantic_only_config_is_valid_and_calls_no_judge_model():
    cfg = JudgeConfig.from_dict(semantic_config())
    assert cfg.layers == ("semantic",)
    assert cfg.provider is None and cfg.semantic.model == EMBEDDING_MODEL
    assert JudgeConfig.from_dict(cfg.to_dict()) == cfg


def test_layers_run_cheapest_first_whatever_order_they_are_given_in():
    cfg = JudgeConfig.from_dict(
        judge_config(layers=["behavioral", "semantic", "contract"], contract_checks=["answer_present"],
                     semantic=semantic_block())
    )
    assert cfg.layers == ("contract", "semantic", "behavioral")


WITHOUT_PASS_AT = {k: v for k, v in semantic_block().items() if k != "pass_at"}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (semantic_config(semantic=None), "semantic: the semantic layer needs"),
        (contract_config("answer_present", semantic=semantic_block()), "semantic: given, but the semantic layer"),
        (semantic_config(semantic=semantic_block(pass_at=1.2)), "semantic.pass_at: must be a number from 0 to 1"),
        (semantic_config(semantic=semantic_block(pass_at="0.8")), "semantic.pass_at"),
        (semantic_config(semantic=WITHOUT_PASS_AT), "semantic.pass_at: required"),
        (judge_config(layers=["semantic", "behavioral"], semantic=semantic_block(fail_below=0.9)), "fail_below: must"),
        (semantic_config(semantic=semantic_block(fail_below=0.3)), "fail_below: without the behavioral layer"),
        (semantic_config(semantic=semantic_block(base_url_env=None)), "semantic.base_url_env: an openai-compatible"),
        (semantic_config(semantic=semantic_block(provider="anthropic")), "semantic.provider: must be one of openai"),
        (semantic_config(semantic=semantic_block(dimensions=0)), "semantic.dimensions"),
        (semantic_config(semantic=semantic_block(api_key_env="sk-live-abc")), "semantic.api_key_env: must be the NAME"),
        (semantic_config(semantic=semantic_block(temperature=0)), "semantic.temperature: unknown field"),
    ],
)
def test_a_bad_semantic_block_is_refused_naming_the_field(config, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        JudgeConfig.from_dict(config)


def test_the_semantic_block_is_hashed_and_leaves_other_configs_hashes_alone():
    base = config_hash(semantic_config())
    assert config_hash(semantic_config(semantic=semantic_block(pass_at=0.85))) != base
    assert config_hash(semantic_config(semantic=semantic_block(dimensions=256))) != base
    assert config_hash(semantic_config(semantic=semantic_block(api_key_env="EVALHUB_JUDGE_EMBED_KEY"))) != base
    # A config without the layer hashes as before: no `semantic` key in what is hashed.
    assert config_hash(judge_config()) == config_hash({**judge_config(), "semantic": None})


def test_the_embeddings_variables_pass_the_allowed_names_check():
    assert env_name_refusals(semantic_config()) == []
    [refusal] = env_name_refusals(semantic_config(semantic=semantic_block(api_key_env="AWS_SECRET_ACCESS_KEY")))
    assert refusal.startswith("semantic.api_key_env: AWS_SECRET_ACCESS_KEY is not an allowed variable")
    [refusal] = env_name_refusals(semantic_config(semantic=semantic_block(base_url_env="DJANGO_SECRET_KEY")))
    assert refusal.startswith("semantic.base_url_env: DJANGO_SECRET_KEY is never allowed")
    listed = semantic_config(semantic=semantic_block(api_key_env="MY_KEY"))
    assert env_name_refusals(listed, extra_allowed=["MY_KEY"]) == []


def test_a_refused_variable_stops_the_layer_before_any_call(fake, env):
    cfg = semantic_config(semantic=semantic_block(api_key_env="HOME"))
    j = judge_case(tool_case(output=PARAPHRASE), cfg, 1, env={**env, "HOME": "/root"})
    assert (j.outcome, j.error, j.layer) == ("not_evaluated", "config error", "semantic")
    assert "semantic.api_key_env: HOME is not an allowed variable" in j.reason
    assert embedding_calls(fake) == 0


# ---- cache keys ----------------------------------------------------------------------------------------


def test_references_are_judged_content_in_the_cache_key():
    h = "0" * 64
    plain = cache_key(tool_case(), h, 1)
    assert cache_key(tool_case(metadata={"agent_model": "other"}), h, 1) == plain  # metadata alone: no change
    assert cache_key(tool_case(metadata={"references": []}), h, 1) == plain  # empty: as if absent
    one = cache_key(tool_case(metadata={"references": ["It ships Friday."]}), h, 1)
    assert one != plain
    assert cache_key(tool_case(metadata={"references": ["It ships Monday."]}), h, 1) != one


def test_embedding_keys_follow_provider_model_dimensions_and_text():
    key = embedding_key(provider="openai", model="m", dimensions=None, text="a")
    assert embedding_key(provider="openai", model="m", dimensions=None, text="a") == key
    assert embedding_key(provider="openai-compatible", model="m", dimensions=None, text="a") != key
    assert embedding_key(provider="openai", model="n", dimensions=None, text="a") != key
    assert embedding_key(provider="openai", model="m", dimensions=64, text="a") != key
    assert embedding_key(provider="openai", model="m", dimensions=None, text="b") != key


# ---- through the SDK, over HTTP ----------------------------------------------------------------------


def test_the_stand_in_serves_the_embeddings_api_to_the_real_sdk(fake):
    client = openai.OpenAI(base_url=fake.openai_base_url, api_key=FAKE_KEY, max_retries=0)
    # The SDK's default encoding is base64, which it decodes itself; floats are asked for explicitly.
    default = client.embeddings.create(model=EMBEDDING_MODEL, input=["one order", "two orders"])
    floats = client.embeddings.create(model=EMBEDDING_MODEL, input="one order", encoding_format="float", dimensions=64)
    client.close()
    assert [d.index for d in default.data] == [0, 1]
    assert default.data[0].embedding == pytest.approx(stand_in_vector("one order"), abs=1e-6)
    assert len(floats.data[0].embedding) == 64
    assert floats.usage.prompt_tokens > 0


@pytest.mark.parametrize(
    ("output", "outcome"),
    [(PARAPHRASE, "pass"), (IN_BETWEEN, "fail"), (UNRELATED, "fail")],
)
def test_a_semantic_only_config_decides_by_similarity(fake, env, output, outcome):
    j = judge_case(tool_case(output=output), semantic_config(), 1, env=env, prices=PRICES)
    golden = tool_case()["golden_answer"]
    assert (j.outcome, j.layer, j.error) == (outcome, "semantic", "")
    assert j.similarity == sim(output, golden)
    assert j.reason.startswith(f"similarity {j.similarity:.4f} to the golden answer")
    assert j.model == EMBEDDING_MODEL
    assert j.provider_calls == 1  # the answer and the golden answer in one request
    assert j.input_tokens > 0 and j.output_tokens == 0
    assert j.cost_usd == pytest.approx(j.input_tokens * 0.02 / 1e6)
    assert embedding_calls(fake) == 1


def test_the_highest_similarity_of_all_references_counts(fake, env):
    case = tool_case(output=UNRELATED, metadata={"references": ["Nothing alike here.", UNRELATED + " Really."]})
    j = judge_case(case, semantic_config(), 1, env=env)
    assert j.outcome == "pass"
    assert "to the references[1]" in j.reason
    assert j.similarity == sim(UNRELATED, UNRELATED + " Really.")


def test_a_case_with_no_reference_skips_the_layer(fake, env):
    case = tool_case(output=PARAPHRASE, golden_answer="")
    alone = judge_case(case, semantic_config(), 1, env=env)
    assert (alone.outcome, alone.error, alone.similarity) == ("not_evaluated", "no reference", None)
    assert "no golden answer and no metadata.references" in alone.reason
    judged = judge_case(case, judge_config(layers=["semantic", "behavioral"], semantic=semantic_block()), 1, env=env)
    assert (judged.outcome, judged.layer, judged.similarity) == ("pass", "behavioral", None)
    assert embedding_calls(fake) == 0


def test_a_failed_contract_decides_before_any_embedding(fake, env):
    cfg = semantic_config(layers=["contract", "semantic"], contract_checks=["expected_tool"])
    j = judge_case(tool_case(output=PARAPHRASE, trace={"toolCalls": []}), cfg, 1, env=env)
    assert (j.outcome, j.layer) == ("fail", "contract")
    assert embedding_calls(fake) == 0


def test_a_passed_contract_alone_is_no_pass_where_the_semantic_layer_follows(fake, env):
    cfg = semantic_config(layers=["contract", "semantic"], contract_checks=["expected_tool"])
    j = judge_case(tool_case(output=UNRELATED), cfg, 1, env=env)
    assert (j.outcome, j.layer) == ("fail", "semantic")


# ---- semantic and behavioral together ----------------------------------------------------------------

BOTH = judge_config(
    layers=["contract", "semantic", "behavioral"],
    contract_checks=["answer_present"],
    semantic=semantic_block(fail_below=0.3),
)


@pytest.mark.parametrize(
    ("output", "outcome", "layer", "judge_calls"),
    [(PARAPHRASE, "pass", "semantic", 0), (IN_BETWEEN, "fail", "behavioral", 1), (UNRELATED, "fail", "semantic", 0)],
)
def test_only_the_cases_between_the_thresholds_reach_the_judge(fake, env, output, outcome, layer, judge_calls):
    fake.control(rule={"kind": "always_fail"})
    j = judge_case(tool_case(output=output), BOTH, 1, env=env, prices=PRICES)
    assert (j.outcome, j.layer) == (outcome, layer)
    assert j.similarity == sim(output, tool_case()["golden_answer"])
    assert fake.stats()["by_endpoint"].get("openai", 0) == judge_calls
    assert j.provider_calls == 1 + judge_calls


@pytest.mark.parametrize("fault", ["500", "429"])
def test_when_the_judge_is_down_a_semantic_verdict_stands(fake, env, quick_retry, fault):
    fake.control(model=BOTH["model"], fault=fault, retry_after=0)
    passed = judge_case(tool_case(output=PARAPHRASE), BOTH, 1, env=env, retry=quick_retry)
    failed = judge_case(tool_case(output=UNRELATED), BOTH, 1, env=env, retry=quick_retry)
    assert (passed.outcome, failed.outcome) == ("pass", "fail")
    between = judge_case(tool_case(output=IN_BETWEEN), BOTH, 1, env=env, retry=quick_retry)
    assert (between.outcome, between.layer) == ("not_evaluated", "behavioral")
    assert between.reason.startswith("behavioral judge unavailable: ")
    assert between.reason.endswith(f"; contract passed (1 checks); similarity {between.similarity:.2f}")
    assert between.similarity == sim(IN_BETWEEN, tool_case()["golden_answer"])


def test_the_fallback_judge_answers_for_a_primary_that_cannot(fake, env, quick_retry):
    cfg = {**BOTH, "secondary": {"role": "fallback", "provider": "anthropic", "model": "claude-haiku-4-5-20251001",
                                 "base_url_env": "EVALHUB_JUDGE_ANTHROPIC_URL", "api_key_env": "EVALHUB_JUDGE_API_KEY"}}
    fake.control(model=BOTH["model"], fault="500")
    j = judge_case(tool_case(output=IN_BETWEEN), cfg, 1, env=env, retry=quick_retry)
    assert (j.outcome, j.judge, j.layer) == ("pass", "fallback", "behavioral")
    assert j.similarity is not None


# ---- the embeddings' own failure chain ------------------------------------------------------------------


def test_a_rate_limit_is_waited_out_then_the_layer_decides(fake, env):
    fake.control(model=EMBEDDING_MODEL, fault="429", fault_count=1, retry_after=0)
    j = judge_case(tool_case(output=PARAPHRASE), semantic_config(), 1, env=env)
    assert (j.outcome, j.provider_calls) == ("pass", 2)
    assert fake.stats()["by_fault"] == {"429": 1}


@pytest.mark.parametrize(
    ("fault", "error"),
    [
        ("500", "server error"),
        ("timeout", "timeout"),
        ("malformed_json", "server error"),
        ("disconnect", "connection error"),
    ],
)
def test_embeddings_that_never_come_leave_a_semantic_only_case_not_evaluated(fake, env, quick_retry, fault, error):
    fake.control(model=EMBEDDING_MODEL, fault=fault, hang_s=2)
    j = judge_case(tool_case(output=PARAPHRASE), semantic_config(), 1, env=env, retry=quick_retry)
    assert (j.outcome, j.error, j.layer, j.similarity) == ("not_evaluated", error, "semantic", None)
    assert j.reason.startswith(f"embeddings unavailable: {error}: ")
    assert "(after 3 attempts)" in j.reason
    assert j.provider_calls == 3


def test_vectors_of_different_lengths_are_refused_and_asked_for_again(fake, env, quick_retry):
    fake.control(model=EMBEDDING_MODEL, fault="ragged_vectors", fault_count=1)
    j = judge_case(tool_case(output=PARAPHRASE), semantic_config(), 1, env=env, retry=quick_retry)
    assert (j.outcome, j.layer, j.provider_calls) == ("pass", "semantic", 2)
    fake.control(model=EMBEDDING_MODEL, fault="ragged_vectors", fault_count=None)
    j = judge_case(tool_case(output="A different answer, with other words."), semantic_config(), 1, env=env,
                   retry=quick_retry)
    assert (j.outcome, j.similarity) == ("not_evaluated", None)
    assert "of another length" in j.reason


def test_embeddings_that_never_come_leave_the_judge_to_decide(fake, env, quick_retry):
    fake.control(model=EMBEDDING_MODEL, fault="500")
    j = judge_case(tool_case(output=PARAPHRASE), BOTH, 1, env=env, retry=quick_retry)
    assert (j.outcome, j.layer, j.similarity) == ("pass", "behavioral", None)
    assert j.provider_calls == 3 + 1


def test_a_refused_embeddings_key_is_a_config_error_and_never_shown(fake, env):
    fake.control(model=EMBEDDING_MODEL, fault="401")
    j = judge_case(tool_case(output=PARAPHRASE), semantic_config(), 1, env=env)
    assert (j.outcome, j.error, j.provider_calls) == ("not_evaluated", "key refused", 1)
    assert FAKE_KEY not in j.reason and FAKE_KEY[-8:] not in j.reason


def test_a_spend_cap_needs_the_embeddings_price(fake, env):
    [j] = judge_batch([(tool_case(output=PARAPHRASE), 1)], semantic_config(), concurrency=1, env=env, spend_cap_usd=1.0)
    assert (j.outcome, j.error) == ("not_evaluated", "config error")
    assert f"{EMBEDDING_MODEL} has no price" in j.reason
    assert embedding_calls(fake) == 0


# ---- the cache ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("make_cache", [lambda tmp: MemoryCache(),
                                        lambda tmp: FolderCache(tmp / "embeddings", key=CACHE_KEY)])
def test_an_embedded_text_is_never_embedded_again(fake, env, tmp_path, make_cache):
    cache = make_cache(tmp_path)
    first = judge_case(tool_case(output=PARAPHRASE), semantic_config(), 1, env=env, embedding_cache=cache)
    assert embedding_calls(fake) == 1
    # Another engine, another repeat, another config sharing the endpoint: no second call.
    again = judge_case(tool_case(output=PARAPHRASE), semantic_config(), 2, env=env, embedding_cache=cache)
    other = semantic_config(semantic=semantic_block(pass_at=0.95))
    stricter = judge_case(tool_case(output=PARAPHRASE), other, 1, env=env, embedding_cache=cache)
    assert embedding_calls(fake) == 1
    assert first.similarity == again.similarity == stricter.similarity
    assert (again.provider_calls, again.input_tokens, again.cost_usd) == (0, 0, 0.0)
    assert stricter.outcome == "fail"
    # Other dimensions are another embedding.
    judge_case(tool_case(output=PARAPHRASE), semantic_config(semantic=semantic_block(dimensions=64)), 1, env=env,
               embedding_cache=cache)
    assert embedding_calls(fake) == 2


@pytest.mark.parametrize("damaged", [{"vector": "not numbers"}, {"vector": []}, {"vector": [1.0, math.nan]},
                                     {"vector": [[1.0], [2.0]]}, {"other": 1}])
def test_a_damaged_cached_embedding_is_a_miss_and_embedded_again(fake, env, damaged):
    cache = MemoryCache()
    first = judge_case(tool_case(output=PARAPHRASE), semantic_config(), 1, env=env, embedding_cache=cache)
    for key in list(cache._data):
        cache.put(key, damaged)
    again = judge_case(tool_case(output=PARAPHRASE), semantic_config(), 2, env=env, embedding_cache=cache)
    assert embedding_calls(fake) == 2
    assert (again.outcome, again.similarity) == (first.outcome, first.similarity)


def test_a_failed_embedding_is_not_cached(fake, env, quick_retry):
    cache = MemoryCache()
    fake.control(model=EMBEDDING_MODEL, fault="500")
    judge_case(tool_case(output=PARAPHRASE), semantic_config(), 1, env=env, retry=quick_retry, embedding_cache=cache)
    assert len(cache) == 0


def test_a_cached_vector_of_another_length_leaves_the_case_unjudged_by_similarity(fake, env):
    # A cache filled by a server that ignored `dimensions`, say: no cosine between vectors of two lengths.
    cache = MemoryCache()
    case = tool_case(output=PARAPHRASE)
    s = semantic_block()
    key = embedding_key(provider=s["provider"], model=s["model"], dimensions=None, text=case["golden_answer"])
    cache.put(key, {"vector": [0.5, 0.5, 0.5]})
    for judged in (judge_case(case, semantic_config(), 1, env=env, embedding_cache=cache),
                   judge_batch([(case, 1)], semantic_config(), concurrency=2, env=env, embedding_cache=cache)[0]):
        assert (judged.outcome, judged.error, judged.similarity) == ("not_evaluated", "invalid output", None)
        assert "embeddings unavailable: vectors of different lengths: 256 and 3" in judged.reason
    with_judge = judge_config(layers=["semantic", "behavioral"], semantic=semantic_block())
    judged = judge_case(case, with_judge, 1, env=env, embedding_cache=cache)
    assert (judged.outcome, judged.layer, judged.similarity) == ("pass", "behavioral", None)  # the judge decided


def test_the_judgment_cache_keeps_the_similarity(fake, env):
    cache = MemoryCache()
    first = judge_case(tool_case(output=PARAPHRASE), semantic_config(), 1, env=env, cache=cache)
    hit = judge_case(tool_case(output=PARAPHRASE), semantic_config(), 1, env=env, cache=cache)
    assert hit.cached and hit.similarity == first.similarity and hit.layer == "semantic"
    assert embedding_calls(fake) == 1


# ---- batches ----------------------------------------------------------------------------------------------------


def test_a_batch_embeds_many_texts_to_a_call_and_bills_each_call_once(fake, env):
    cases = [tool_case(external_id=f"c{i}", output=f"{PARAPHRASE} Ticket {i}.") for i in range(EMBED_BATCH + 10)]
    items = [(case, repeat) for case in cases for repeat in (1, 2)]
    results = judge_batch(items, semantic_config(), concurrency=4, env=env, prices=PRICES)
    texts = len(cases) + 1  # every answer differs; the golden answer is shared
    calls = embedding_calls(fake)
    assert calls == math.ceil(texts / EMBED_BATCH)
    assert sum(j.provider_calls for j in results) == calls
    assert sum(r["inputs"] for r in fake.requests() if r["endpoint"] == "embeddings") == texts
    # The stand-in bills a quarter token a character; the calls' tokens are shared out, none lost.
    billed = [*(c["output"] for c in cases), cases[0]["golden_answer"]]
    assert sum(j.input_tokens for j in results) == sum(max(1, len(t) // 4) for t in billed)
    # The repeats share their case's embeddings, billed once.
    for first, second in zip(results[::2], results[1::2], strict=True):
        assert first.similarity == second.similarity is not None
        assert (first.input_tokens > 0) != (second.input_tokens > 0)


def test_a_batch_judges_every_kind_of_case_as_one_at_a_time_does(fake, env):
    # judge_batch decides a semantic-only config's cases many at a time; judge_case one by one. Same verdicts.
    cfg = semantic_config(layers=["contract", "semantic"], contract_checks=["expected_tool"])
    cases = [
        tool_case(external_id="paraphrase", output=PARAPHRASE),
        tool_case(external_id="between", output=IN_BETWEEN),
        tool_case(external_id="unrelated", output=UNRELATED),
        tool_case(external_id="second-ref", output=UNRELATED, metadata={"references": ["Nothing.", UNRELATED + "!"]}),
        tool_case(external_id="equal-refs", output=PARAPHRASE, metadata={"references": [tool_case()["golden_answer"]]}),
        tool_case(external_id="no-reference", output=PARAPHRASE, golden_answer=""),
        tool_case(external_id="bad-references", output=PARAPHRASE, metadata={"references": "not a list"}),
        tool_case(external_id="blank", output="  "),
        tool_case(external_id="contract", output=PARAPHRASE, trace={"toolCalls": []}),
    ]
    items = [(case, repeat) for case in cases for repeat in (1, 2)]
    batch = judge_batch(items, cfg, concurrency=3, env=env, prices=PRICES)
    alone = [judge_case(case, cfg, repeat, env=env, prices=PRICES) for case, repeat in items]

    def seen(j):
        return (j.external_id, j.repeat, j.outcome, j.layer, j.error, j.similarity, j.reason, j.checks, j.model)

    assert [seen(j) for j in batch] == [seen(j) for j in alone]
    assert {j.outcome for j in batch} == {"pass", "fail", "not_evaluated"}
    assert "to the golden answer" in batch[8].reason  # equal similarities: the first reference counts
    # Each text billed once in the batch, by whichever judgment took it first.
    assert sum(j.input_tokens for j in batch) == sum(max(1, len(t) // 4) for t in {
        text for case in cases[:5] for text in [case["output"], case["golden_answer"],
                                                 *case.get("metadata", {}).get("references", [])]})


def test_the_embeddings_request_is_the_one_the_sdks_typed_method_sends(fake, env):
    client = openai.OpenAI(base_url=fake.openai_base_url, api_key=FAKE_KEY, max_retries=0)
    client.embeddings.create(model=EMBEDDING_MODEL, input=["one order", "two orders"], dimensions=64)
    client.close()
    s = semantic_block()
    endpoint = resolve_endpoint(provider=s["provider"], base_url_env=s["base_url_env"], api_key_env=s["api_key_env"],
                                env=env, timeout_s=5)
    clients = ClientPool()
    got = call_embeddings(clients.get(endpoint), endpoint, model=EMBEDDING_MODEL, inputs=["one order", "two orders"],
                          dimensions=64)
    clients.close()
    typed, ours = ({k: v for k, v in r.items() if k not in ("started", "ended", "model_calls")}
                   for r in fake.requests() if r["endpoint"] == "embeddings")
    assert ours == typed
    assert ours["fields"] == ["dimensions", "encoding_format", "input", "model"]
    assert (ours["encoding_format"], ours["dimensions"], ours["inputs"], ours["authorized"]) == ("base64", 64, 2, True)
    assert got.vectors.tolist() == [pytest.approx(stand_in_vector("one order", 64), abs=1e-6),
                                    pytest.approx(stand_in_vector("two orders", 64), abs=1e-6)]


def test_a_batch_embeds_nothing_for_failed_contracts_or_cached_judgments(fake, env):
    cfg = semantic_config(layers=["contract", "semantic"], contract_checks=["expected_tool"])
    failing = tool_case(external_id="bad", output=UNRELATED + " x", trace={"toolCalls": []})
    cache = MemoryCache()
    judge_batch([(tool_case(output=PARAPHRASE), 1)], cfg, concurrency=2, env=env, cache=cache)
    assert embedding_calls(fake) == 1
    results = judge_batch([(failing, 1), (tool_case(output=PARAPHRASE), 1)], cfg, concurrency=2, env=env, cache=cache)
    assert [j.outcome for j in results] == ["fail", "pass"]
    assert results[1].cached
    assert embedding_calls(fake) == 1


def test_vectors_are_read_as_base64_or_as_floats():
    import base64

    import numpy as np

    from judges.engine.providers import _vectors

    floats, other = [0.25, -0.5, 1.0], [2.0, 0.0, -4.0]
    packed = [base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode() for v in (floats, other)]
    assert _vectors(packed).tolist() == [floats, other]  # what OpenAI sends for encoding_format=base64
    assert [v.tolist() for v in _vectors([floats, other])] == [floats, other]  # a server sending floats anyway
    # Rows of different lengths stay apart, for the engine to refuse (not one array that hides it).
    ragged = _vectors([packed[0], base64.b64encode(np.zeros(2, dtype="<f4").tobytes()).decode()])
    assert [len(v) for v in ragged] == [3, 2]
    assert _vectors([]) == []


# ---- memory ---------------------------------------------------------------------------------------------


def embedded_texts(fake) -> int:
    return sum(r["inputs"] for r in fake.requests() if r["endpoint"] == "embeddings")


GOLDEN = [f"Order ORD-10{g} has shipped and arrives Friday." for g in range(3)]


@pytest.mark.parametrize("layers", [["semantic"], ["semantic", "behavioral"]])
def test_a_batch_keeps_the_vectors_its_waiting_items_need_not_the_whole_batchs(fake, env, monkeypatch, layers):
    # Items judged let their answers' vectors go (all but the last KEPT_DONE); the golden answers every
    # third case shares are held while a case waits for them, and kept for the next batch: embedded once.
    monkeypatch.setattr(embeddings_module, "KEPT_DONE", 40)
    cfg = judge_config(layers=layers, semantic=semantic_block(pass_at=0.9, fail_below=0.3)) if len(layers) > 1 \
        else semantic_config()
    engine = Engine(cfg, env=env)
    assert engine.embeddings is not None
    for start in (0, 300):  # two batches on one engine, as a run's windows are
        cases = [tool_case(external_id=f"c{i}", output=f"{PARAPHRASE} Ticket {i}.", golden_answer=GOLDEN[i % 3])
                 for i in range(start, start + 300)]
        judged = dict(j for done in judge_many(((i, engine, c, 1) for i, c in enumerate(cases)), concurrency=4)
                      for j in done)
        expected = [sim(c["output"], c["golden_answer"]) for c in cases]
        assert [judged[i].similarity for i in range(len(cases))] == expected
        assert engine.embeddings.in_memory() <= 40
    assert embedded_texts(fake) == 600 + len(GOLDEN)
    if layers == ["semantic"]:
        assert embedding_calls(fake) == 2 * math.ceil(300 / EMBED_BATCH)  # the golden answers went with the first


def test_one_case_at_a_time_keeps_no_more_vectors_than_the_bound_and_embeds_a_shared_text_once(fake, env, monkeypatch):
    monkeypatch.setattr(embeddings_module, "KEPT_DONE", 10)
    engine = Engine(semantic_config(), env=env)
    assert engine.embeddings is not None
    for i in range(30):
        engine.judge(tool_case(external_id=f"c{i}", output=f"{PARAPHRASE} Ticket {i}."), 1)
    assert engine.embeddings.in_memory() <= 10
    assert embedded_texts(fake) == 30 + 1  # the golden answer with the first case, never again
