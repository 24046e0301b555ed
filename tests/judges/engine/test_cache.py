import hashlib
import json

import pytest

from judges.engine import Engine, FolderCache, JudgeConfig, MemoryCache, cache_key, case_content_key, judge_case
from judges.engine.cache import cache_scope
from judges.engine.credentials import contract_rules

from .factories import contract_config, tool_case

CACHE_KEY = b"a test cache key, 32 bytes long!!"  # the gate step's secret (FolderCache signs with it)


def test_case_content_key_is_sha256_of_what_the_judge_sees():
    case = tool_case()
    content = {k: v for k, v in case.items() if k not in ("external_id", "metadata")}
    expected = hashlib.sha256(json.dumps(content, sort_keys=True, separators=(",", ":")).encode()).hexdigest()
    assert case_content_key(case) == expected


def test_case_content_key_ignores_the_id_and_metadata_only():
    key = case_content_key(tool_case())
    assert case_content_key(tool_case(external_id="other", metadata={"agent_model": "v2"})) == key
    assert case_content_key(tool_case(output="Something else.")) != key
    assert case_content_key(tool_case(expected_tool_argument={"order_id": "ORD-999"})) != key
    assert case_content_key(tool_case(category="edge")) != key
    traced = tool_case()
    traced["trace"]["toolCalls"][0]["result"] = {"status": "lost"}
    assert case_content_key(traced) != key


def test_case_content_key_ignores_fields_outside_the_case_format():
    assert case_content_key({**tool_case(), "split": "dev", "id": 42}) == case_content_key(tool_case())


def test_cache_key_changes_with_content_config_and_repeat():
    case = tool_case()
    key = cache_key(case, "a" * 64, 1)
    assert cache_key(case, "a" * 64, 1) == key
    assert cache_key(case, "b" * 64, 1) != key
    assert cache_key(case, "a" * 64, 2) != key
    assert cache_key(tool_case(output="x"), "a" * 64, 1) != key


def test_an_engine_keys_a_cases_repeats_as_one_by_one_with_its_salt():
    case = tool_case()
    for salt in ("", "run:7"):
        engine = Engine(contract_config("answer_present"), cache=MemoryCache(), cache_salt=salt)
        keys = engine.cache_keys(case, [1, 2, 3])
        assert keys == [cache_key(case, engine.config_hash, r, salt) for r in (1, 2, 3)] == [
            engine.cache_key(case, r) for r in (1, 2, 3)]
    assert Engine(contract_config("answer_present")).cache_keys(case, [1, 2]) == [None, None]  # no cache, no key


@pytest.mark.parametrize("make", [MemoryCache, "folder"])
def test_a_cache_gives_back_what_was_put(make, tmp_path):
    # The folder's own tests: test_folder_cache.py.
    cache = FolderCache(tmp_path, key=CACHE_KEY) if make == "folder" else make()
    key = cache_key(tool_case(), "h", 1)
    assert cache.get(key) is None
    cache.put(key, {"outcome": "pass", "scores": None})
    assert cache.get(key) == {"outcome": "pass", "scores": None}


def test_memory_cache_hands_out_copies():
    cache = MemoryCache()
    value = {"checks": [{"name": "a"}]}
    cache.put("ab" * 16, value)
    value["checks"].append({"name": "b"})
    got = cache.get("ab" * 16)
    got["checks"].clear()
    assert cache.get("ab" * 16) == {"checks": [{"name": "a"}]}


# The judgment's own check: an entry under the right key is still a verdict only when it is a whole judgment.
PARTIAL_JUDGMENTS = {
    "only an outcome": {"outcome": "pass"},
    "a count that is text": "input_tokens",
    "checks that are not a list": "checks",
    "a flag for a count": "provider_calls",
    "a field missing": "similarity",
}


@pytest.mark.parametrize("damage", list(PARTIAL_JUDGMENTS.values()), ids=list(PARTIAL_JUDGMENTS))
def test_an_entry_that_is_not_a_whole_judgment_is_judged_again(tmp_path, damage):
    config = contract_config("must_match", must_match=["ORD-101"])
    case = tool_case(output="I could not find that order.")
    cache = FolderCache(tmp_path, key=CACHE_KEY)
    first = judge_case(case, config, 1, cache=cache)
    assert first.outcome == "fail" and not first.cached
    key = cache_key(case, JudgeConfig.from_dict(config).config_hash, 1)
    stored = cache.get(key)
    assert judge_case(case, config, 1, cache=cache).cached  # what the engine wrote is a whole judgment
    if isinstance(damage, dict):
        forged = damage
    else:
        forged = {**stored, "outcome": "pass"}
        forged[damage] = {"input_tokens": "12", "checks": 5, "provider_calls": True}.get(damage)
        if damage == "similarity":
            del forged[damage]
    cache.put(key, forged)
    again = judge_case(case, config, 1, cache=cache)
    assert (again.outcome, again.cached) == ("fail", False)
    assert cache.get(key) == stored | {"latency_ms": again.latency_ms}  # replaced by the fresh judgment


def test_a_config_running_no_secrets_keys_its_judgments_under_the_scanners_rules(monkeypatch):
    # A new scanner release changes what no_secrets finds without changing the config: a verdict of the old
    # rules must not be reused (docs/security.md, "Finding credentials").
    case = tool_case()
    cache = MemoryCache()
    before = Engine(contract_config("no_secrets"), cache=cache)
    assert before.cache_scope == cache_scope(before.config_hash, contract_rules()) != before.config_hash
    key = before.cache_key(case, 1)
    assert key == cache_key(case, before.cache_scope, 1) != cache_key(case, before.config_hash, 1)
    judge_case(case, contract_config("no_secrets"), 1, cache=cache)
    assert len(cache) == 1 and cache.get(key) is not None
    monkeypatch.setattr("judges.engine.config.contract_rules", lambda: "another scanner 9.9")
    after = Engine(contract_config("no_secrets"), cache=cache)
    assert after.config_hash == before.config_hash  # the config is the same: no export, no stale evidence
    assert after.cache_key(case, 1) != key and after.lookup(case, 1)[1] is None
    # A config without no_secrets is keyed by its hash alone, whatever the scanner.
    plain = Engine(contract_config("answer_present"), cache=cache)
    assert plain.cache_scope == plain.config_hash
