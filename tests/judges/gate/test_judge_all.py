"""judge_all, the CI command's orchestration, with no provider answering: what it judges, in which order,
under one spend cap and a concurrency cap, and what it keeps in the cache folder.

No stand-in and no waits: contract checks and a filled cache answer here, a spend cap refuses before any
call, and the endpoint is a port where nothing listens (a call, if one were made, is refused at once).
"""

import threading

import pytest

from judges.engine import FolderCache, JudgeConfig, Judgment, cache_key
from judges.engine.semantic import embedding_key
from judges.gate.config import GateRubric
from judges.gate.judging import judge_all
from tests.judges.gate.test_exit_codes import closed_port_url

CACHE_KEY = b"a test cache key, 32 bytes long!!"  # the gate step's secret (FolderCache signs with it)

MODEL = "gpt-4o-mini-2024-07-18"
EMBEDDING_MODEL = "text-embedding-3-small"
GOLDEN = "Returns are accepted within 30 days of delivery."
CASES = [
    {"external_id": "c1", "input": "Can I return shoes?", "output": "Yes, within 30 days.", "golden_answer": GOLDEN},
    {"external_id": "c2", "input": "Can I return a hat?", "output": "No returns, ever.", "golden_answer": GOLDEN},
]


@pytest.fixture
def env() -> dict[str, str]:
    return {"EVALHUB_JUDGE_DEAD_URL": closed_port_url(), "EVALHUB_JUDGE_API_KEY": "sk-test-not-a-real-key"}


def gate_rubric(slug: str, stage: str, judge: dict, prices: dict | None = None) -> GateRubric:
    config = JudgeConfig.from_dict({"rubric": slug, "criteria": "The 30-day return window.", **judge})
    return GateRubric(slug, stage, False, config, prices or {}, None)


def contract(*patterns: str) -> dict:
    return {"layers": ["contract"], "contract_checks": ["must_match"], "must_match": list(patterns)}


def behavioral(model: str) -> dict:
    return {"layers": ["behavioral"], "provider": "openai-compatible", "model": model,
            "base_url_env": "EVALHUB_JUDGE_DEAD_URL", "api_key_env": "EVALHUB_JUDGE_API_KEY", "max_attempts": 1}


def semantic(base_url_env: str = "EVALHUB_JUDGE_DEAD_URL") -> dict:
    return {"layers": ["semantic"], "max_attempts": 1, "semantic": {
        "provider": "openai-compatible", "model": EMBEDDING_MODEL, "base_url_env": base_url_env,
        "api_key_env": "EVALHUB_JUDGE_API_KEY", "pass_at": 0.8}}


class WatchedCache(FolderCache):
    """A cache folder that notes each lookup (which key, in order: the batch looks items up where it takes
    them) and each write of a new judgment (on which thread, how many at once: a judgment is written by
    the thread that judged it). With `meet`, a write waits until that many are under way, so a pool of
    that size is seen full."""

    def __init__(self, path, *, meet: int = 1) -> None:
        super().__init__(path, key=CACHE_KEY)
        self.looked_up: list[str] = []
        self.threads: set[int] = set()
        self.at_once = self.peak = 0
        self._lock = threading.Lock()
        self._meeting = threading.Barrier(meet)

    def get(self, key):
        with self._lock:
            self.looked_up.append(key)
        return super().get(key)

    def put(self, key, judgment):
        with self._lock:
            self.threads.add(threading.get_ident())
            self.at_once += 1
            self.peak = max(self.peak, self.at_once)
        try:
            self._meeting.wait(timeout=60)  # a safety net only: with the cap held, the others always come
        finally:
            with self._lock:
                self.at_once -= 1
        super().put(key, judgment)


@pytest.fixture
def cached_contracts(monkeypatch):
    """The batch's order, cap and repeats are watched through the cache with contract rubrics (quick, no provider);
    in a check a contract-only rubric keeps no cache (calls_models), so here it is given one."""
    monkeypatch.setattr("judges.gate.judging.calls_models", lambda rubric: True)


def test_a_contract_only_rubric_keeps_no_cache(tmp_path):
    cache = WatchedCache(tmp_path / "cache")
    judge_all([gate_rubric("returns", "gate", contract("30 days"))], CASES, repeats=1, concurrency=1, cache=cache,
              env={})
    assert (cache.looked_up, len(cache)) == ([], 0)


def verdicts(results) -> dict[str, list[tuple[str, str, str]]]:
    return {r.rubric.slug: [(c.external_id, c.verdict, c.reason) for c in r.cases] for r in results}


def test_each_case_is_judged_once_a_repeat_numbered_from_1_and_kept_in_the_cache(tmp_path, cached_contracts):
    rubrics = [gate_rubric("returns", "gate", contract("30 days")), gate_rubric("tone", "warn", contract("(?i)yes"))]
    cache = FolderCache(tmp_path / "cache", key=CACHE_KEY)

    results = judge_all(rubrics, CASES, repeats=3, concurrency=2, cache=cache, env={})

    assert verdicts(results) == {
        "returns": [("c1", "pass", "3 of 3 repeats: all 1 contract checks passed"),
                    ("c2", "fail", "3 of 3 repeats: contract failed: must_match: no match for '30 days'")],
        "tone": [("c1", "pass", "3 of 3 repeats: all 1 contract checks passed"),
                 ("c2", "fail", "3 of 3 repeats: contract failed: must_match: no match for '(?i)yes'")],
    }
    for r in results:
        assert [[(j.external_id, j.repeat) for j in c.judgments] for c in r.cases] == [
            [(c, 1), (c, 2), (c, 3)] for c in ("c1", "c2")]
    assert len(cache) == 2 * 2 * 3  # rubrics × cases × repeats, nothing more
    again = judge_all(rubrics, CASES, repeats=3, concurrency=2, cache=cache, env={})
    assert verdicts(again) == verdicts(results)
    assert all(j.cached for r in again for j in r.judgments)


def test_gate_rubrics_are_judged_first_case_by_case_across_them(tmp_path, cached_contracts):
    rubrics = [gate_rubric("seen", "observe", contract("a")), gate_rubric("first", "gate", contract("b")),
               gate_rubric("told", "warn", contract("c")), gate_rubric("second", "gate", contract("d"))]
    name = {cache_key(case, r.judge.config_hash, repeat): (r.slug, case["external_id"], repeat)
            for r in rubrics for case in CASES for repeat in (1, 2)}
    cache = WatchedCache(tmp_path / "cache")

    results = judge_all(rubrics, CASES, repeats=2, concurrency=1, cache=cache, env={})

    assert [name[key] for key in cache.looked_up] == [
        (slug, case, repeat)
        for stage in (["first", "second"], ["told"], ["seen"])
        for case in ("c1", "c2") for repeat in (1, 2) for slug in stage
    ]
    assert [r.rubric.slug for r in results] == ["seen", "first", "told", "second"]  # reported in their order


def test_no_more_cases_are_judged_at_once_than_the_concurrency(tmp_path, cached_contracts):
    rubrics = [gate_rubric("returns", "gate", contract("30 days")), gate_rubric("tone", "warn", contract("(?i)yes"))]
    cache = WatchedCache(tmp_path / "cache", meet=2)

    # Six cases of distinct content: none is a hit for another, so each of the 24 judgments is written.
    cases = [{**c, "external_id": f"{c['external_id']}-{i}", "input": f"{c['input']} ({i})"} for i in range(3)
             for c in CASES]
    judge_all(rubrics, cases, repeats=2, concurrency=2, cache=cache, env={})

    assert len(cache.looked_up) == 2 * 6 * 2
    assert (cache.peak, len(cache.threads)) == (2, 2)


def test_a_contested_judgment_holds_a_gate_but_not_a_warning(tmp_path, env):
    judge = {**behavioral(MODEL), "provider": "openai", "secondary": {
        "role": "second_opinion", "provider": "anthropic", "model": "claude-haiku-4-5-20251001",
        "base_url_env": "EVALHUB_JUDGE_DEAD_URL", "api_key_env": "EVALHUB_JUDGE_API_KEY"}}
    rubrics = [gate_rubric("returns", "gate", judge), gate_rubric("returns-warn", "warn", judge)]
    cache = FolderCache(tmp_path / "cache", key=CACHE_KEY)
    [case] = CASES[:1]
    # Judged before: the primary passed it, the second opinion failed it.
    contested = Judgment("c1", 1, "pass", reason="states the window", layer="behavioral", contested=True,
                         secondary_outcome="fail")
    for r in rubrics:
        cache.put(cache_key(case, r.judge.config_hash, 1), contested.to_dict())

    results = judge_all(rubrics, [case], repeats=1, concurrency=1, cache=cache, env=env)

    assert verdicts(results) == {
        "returns": [("c1", "not_evaluated", "contested: the second opinion said fail (a human must look)")],
        "returns-warn": [("c1", "pass", "states the window")],
    }


def test_one_spend_cap_covers_every_rubric_and_gate_rubrics_spend_first(env):
    dear, cheap = "dear-model-2025-01-01", "cheap-model-2025-01-01"
    prices = {dear: {"input_per_mtok": 1000.0, "output_per_mtok": 1000.0},
              cheap: {"input_per_mtok": 0.01, "output_per_mtok": 0.01}}
    # Listed first, and its calls would fit the cap; the gate's first call alone would not.
    observed = gate_rubric("tone", "observe", behavioral(cheap), {cheap: prices[cheap]})
    gated = gate_rubric("returns", "gate", behavioral(dear), {dear: prices[dear]})

    results = judge_all([observed, gated], CASES, repeats=2, concurrency=1, cache=None, env=env, max_cost_usd=0.01)

    for r in results:
        assert {(j.outcome, j.error, j.provider_calls) for j in r.judgments} == {("not_evaluated", "spend cap", 0)}
        assert r.cases[0].reason == "spend cap: the spend cap of $0.01 is reached"
    # Alone, the observed rubric's call fits the cap and is made (refused here: nothing listens).
    [alone] = judge_all([observed], CASES[:1], repeats=1, concurrency=1, cache=None, env=env, max_cost_usd=0.01)
    assert [(j.error, j.provider_calls) for j in alone.judgments] == [("connection error", 1)]


def fill_embeddings(cache_dir, vectors: dict[str, list[float]]) -> None:
    embeddings = FolderCache(cache_dir / "embeddings", key=CACHE_KEY)
    for text, vector in vectors.items():
        key = embedding_key(provider="openai-compatible", model=EMBEDDING_MODEL, dimensions=None, text=text)
        embeddings.put(key, {"vector": vector})


def test_embeddings_come_from_the_cache_folders_embeddings(tmp_path, env):
    fill_embeddings(tmp_path / "cache", {GOLDEN: [1.0, 0.0], "Yes, within 30 days.": [0.96, 0.28],
                                         "No returns, ever.": [0.0, 1.0]})
    # A variable outside the usual names, which the pipeline allows (--allow-env).
    rubric = gate_rubric("returns", "gate", semantic(base_url_env="TEAM_EMBEDDINGS_URL"))

    cache = FolderCache(tmp_path / "cache", key=CACHE_KEY)
    [result] = judge_all([rubric], CASES, repeats=2, concurrency=2, cache=cache,
                         env={**env, "TEAM_EMBEDDINGS_URL": env["EVALHUB_JUDGE_DEAD_URL"]},
                         allowed_env=["TEAM_EMBEDDINGS_URL"])

    assert [(c.external_id, c.verdict) for c in result.cases] == [("c1", "pass"), ("c2", "fail")]
    assert result.cases[0].reason == "2 of 2 repeats: similarity 0.9600 to the golden answer >= pass_at 0.8"
    assert sum(j.provider_calls for j in result.judgments) == 0


def test_the_texts_of_every_case_go_to_the_embeddings_endpoint_in_one_call(env):
    cases = [*CASES, {**CASES[0], "external_id": "c3", "output": "Within a month."}]

    [result] = judge_all([gate_rubric("returns", "gate", semantic())], cases, repeats=2, concurrency=2, cache=None,
                         env=env)

    # Four texts (three answers, one golden answer), one call; it is refused, so nothing is evaluated.
    assert sum(j.provider_calls for j in result.judgments) == 1
    assert {j.error for j in result.judgments} == {"connection error"}
    assert all(c.verdict == "not_evaluated" for c in result.cases)


def test_the_ci_commands_batch_judges_each_case_as_the_one_case_path_does_and_again_from_its_folder(
    tmp_path, fake_provider
):
    from judges.engine import judge_case

    env = {"EVALHUB_JUDGE_OPENAI_URL": fake_provider.openai_base_url, "EVALHUB_JUDGE_API_KEY": "sk-test-not-a-real-key"}
    outputs = ["Yes, returns are accepted within 30 days of delivery.", "Within 30 days, yes.", "No returns, ever.",
               "", "Returns are accepted within 30 days of delivery."]
    cases = [{"external_id": f"c{i}", "input": "Can I return shoes?", "output": output, "golden_answer": GOLDEN}
             for i, output in enumerate(outputs)]
    judge = {**semantic("EVALHUB_JUDGE_OPENAI_URL"), "layers": ["contract", "semantic"],
             "contract_checks": ["answer_present"]}
    judge["semantic"]["pass_at"] = 0.6
    rubric = gate_rubric("returns", "gate", judge)

    def seen(judgments):
        return [(j.external_id, j.repeat, j.outcome, j.reason, j.similarity, j.checks) for j in judgments]

    alone = [judge_case(c, rubric.judge, repeat, env=env) for c in cases for repeat in (1, 2)]
    folder = tmp_path / "cache"
    [first] = judge_all([rubric], cases, repeats=2, concurrency=3, cache=FolderCache(folder, key=CACHE_KEY), env=env)
    [again] = judge_all([rubric], cases, repeats=2, concurrency=3, cache=FolderCache(folder, key=CACHE_KEY), env=env)

    assert {j.outcome for j in alone} == {"pass", "fail"} and len({j.similarity for j in alone}) > 2
    assert seen(first.judgments) == seen(alone)
    assert seen(again.judgments) == seen(alone) and all(j.cached for j in again.judgments)
