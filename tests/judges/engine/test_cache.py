import hashlib
import json
import threading

import pytest

from judges.engine import FolderCache, MemoryCache, cache_key, case_content_key

from .factories import tool_case


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


@pytest.mark.parametrize("make", [MemoryCache, "folder"])
def test_a_cache_gives_back_what_was_put(make, tmp_path):
    cache = FolderCache(tmp_path) if make == "folder" else make()
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


def test_folder_cache_writes_one_file_per_key_and_leaves_no_temp_files(tmp_path):
    cache = FolderCache(tmp_path / "c")
    keys = [cache_key(tool_case(), "h", r) for r in range(1, 4)]
    for k in keys:
        cache.put(k, {"outcome": "fail"})
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == sorted(f"{k}.json" for k in keys)


def test_folder_cache_concurrent_writers_never_leave_half_a_file(tmp_path):
    cache = FolderCache(tmp_path)
    key = "cd" * 32
    big = {"raw_output": "x" * 200_000}

    def write(n):
        for _ in range(20):
            cache.put(key, {**big, "n": n})

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for _ in range(50):
        value = cache.get(key)
        assert value is None or len(value["raw_output"]) == 200_000
    for t in threads:
        t.join()
    assert cache.get(key)["n"] in range(4)
    assert [p.name for p in tmp_path.iterdir()] == [f"{key}.json"]


def test_a_damaged_folder_entry_is_a_miss(tmp_path):
    cache = FolderCache(tmp_path)
    (tmp_path / f"{'ef' * 32}.json").write_text('{"outcome": "pa')
    assert cache.get("ef" * 32) is None


def test_a_folder_cache_refuses_a_key_that_is_not_a_digest(tmp_path):
    with pytest.raises(ValueError):
        FolderCache(tmp_path).get("../../etc/passwd")
