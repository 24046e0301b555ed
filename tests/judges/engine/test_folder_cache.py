"""The cache folder (judges/engine/folder_cache.py): packs written whole, read back by later runs, shared by
processes, compacted; and a folder nobody guards (restored by CI, edited by hand) read without ever failing."""

import gc
import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from judges.engine import FolderCache
from judges.engine import folder_cache as fc

CACHE_KEY = b"a test cache key, 32 bytes long!!"  # the gate step's secret (FolderCache signs with it)

KEY, OTHER_KEY = "ef" * 32, "ab" * 32
JUDGMENT = {"outcome": "pass", "reason": "states the window", "checks": [{"name": "answer_present", "passed": True}],
            "scores": None, "similarity": 0.8123456789012345}


def key(n: int) -> str:
    return f"{n:064x}"


def packs(folder: Path) -> list[Path]:
    return sorted(folder.glob("pack-*.jsonl"))


class Warnings(list):
    """What a cache said, as the CI command prints it."""

    def __call__(self, message: str) -> None:
        self.append(message)


def write_pack(folder: Path, entries: dict[str, dict]) -> Path:
    """A pack as a run writes it (one flush of a cache that put `entries`)."""
    before = set(packs(folder))
    with FolderCache(folder, key=CACHE_KEY) as cache:
        for k, value in entries.items():
            cache.put(k, value)
    [made] = set(packs(folder)) - before
    return made


def test_it_keeps_what_was_put_in_memory_until_a_flush_writes_one_pack_a_later_run_reads(tmp_path):
    cache = FolderCache(tmp_path, key=CACHE_KEY)
    vector = np.array([0.1, -2.5e-300, 1 / 3, 7.0])
    cache.put(KEY, JUDGMENT)
    cache.put(OTHER_KEY, {"vector": vector})
    assert cache.get(KEY) == JUDGMENT
    assert list(tmp_path.iterdir()) == []  # nothing written yet: one write per run, not per entry

    cache.flush()

    [pack] = packs(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [pack.name]  # no temp file left
    later = FolderCache(tmp_path, key=CACHE_KEY)
    assert later.get(KEY) == JUDGMENT and cache.get(KEY) == JUDGMENT
    got = later.get(OTHER_KEY)["vector"]
    assert got.dtype == np.float64 and got.tobytes() == vector.tobytes()  # every bit kept
    later.get(KEY)["checks"].clear()  # each get is a copy of its own
    assert later.get(KEY) == JUDGMENT and len(later) == 2


def test_a_vector_deeper_in_a_value_is_kept_too(tmp_path):
    write_pack(tmp_path, {KEY: {"rows": [{"v": np.array([1.5, 2.0])}], "n": 1}})
    got = FolderCache(tmp_path, key=CACHE_KEY).get(KEY)
    assert got["n"] == 1 and got["rows"][0]["v"].tolist() == [1.5, 2.0]


def test_the_newest_put_and_the_newest_pack_win_a_key(tmp_path):
    cache = FolderCache(tmp_path, key=CACHE_KEY)
    cache.put(KEY, {"outcome": "fail"})
    cache.put(KEY, {"outcome": "pass"})
    cache.flush()
    write_pack(tmp_path, {KEY: {"outcome": "fail", "n": 2}})

    assert FolderCache(tmp_path, key=CACHE_KEY).get(KEY) == {"outcome": "fail", "n": 2}


def test_a_cache_dropped_without_a_flush_is_flushed_then(tmp_path):
    FolderCache(tmp_path, key=CACHE_KEY).put(KEY, JUDGMENT)
    gc.collect()
    assert FolderCache(tmp_path, key=CACHE_KEY).get(KEY) == JUDGMENT


def test_a_cache_folder_refuses_a_key_that_is_not_a_digest(tmp_path):
    with pytest.raises(ValueError):
        FolderCache(tmp_path, key=CACHE_KEY).get("../../etc/passwd")
    with pytest.raises(ValueError):
        FolderCache(tmp_path, key=CACHE_KEY).put('ab" , "value": {}}', {})  # would break out of its line


def test_a_pending_pack_is_written_once_it_grows_past_its_size(tmp_path, monkeypatch):
    monkeypatch.setattr(fc, "PACK_BYTES", 1000)
    cache = FolderCache(tmp_path, key=CACHE_KEY)
    for n in range(20):
        cache.put(key(n), {"reason": "x" * 100})
    assert len(packs(tmp_path)) >= 2  # written as it went: a killed run loses at most the last one
    assert all(cache.get(key(n)) == {"reason": "x" * 100} for n in range(20))


WRITER = textwrap.dedent("""
    import sys
    from judges.engine import FolderCache
    from judges.engine import folder_cache as fc
    CACHE_KEY = b"a test cache key, 32 bytes long!!"
    fc.PACK_BYTES, fc.MAX_PACKS = 3000, 2  # many packs, many compactions, all racing the other writer
    name, folder = sys.argv[1], sys.argv[2]
    cache = FolderCache(folder, warn=lambda message: sys.exit(f"warned: {message}"), key=CACHE_KEY)
    for n in range(600):
        cache.put(f"{n:032x}" + name * 32, {"writer": name, "n": n, "text": "x" * 200})
        cache.put("cd" * 32, {"writer": name, "n": n})  # both write this one
        if n % 150 == 0:
            cache.flush()  # and compact when due
    cache.close()
""")


def test_two_processes_writing_and_compacting_one_folder_lose_nothing_and_never_show_half_a_pack(tmp_path):
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, name, str(tmp_path)], stderr=subprocess.PIPE, text=True)
               for name in ("a", "b")]
    said, reads = Warnings(), 0
    while any(w.poll() is None for w in writers):  # a reader meanwhile sees whole packs only
        reader = FolderCache(tmp_path, warn=said, key=CACHE_KEY)
        for n in range(0, 600, 37):
            value = reader.get(f"{n:032x}" + "a" * 32)
            assert value is None or value == {"writer": "a", "n": n, "text": "x" * 200}
        reads += 1
    assert [w.wait() for w in writers] == [0, 0], [w.stderr.read() for w in writers]
    assert said == [] and reads > 1

    final = FolderCache(tmp_path, warn=said, key=CACHE_KEY)
    for name in ("a", "b"):
        assert [final.get(f"{n:032x}" + name * 32) for n in range(600)] == [
            {"writer": name, "n": n, "text": "x" * 200} for n in range(600)]
    assert final.get("cd" * 32)["n"] == 599
    assert said == [] and not list(tmp_path.glob(".*.tmp"))


def test_a_crashed_runs_temp_file_is_ignored_and_removed_once_stale(tmp_path):
    write_pack(tmp_path, {KEY: JUDGMENT})
    crashed, live = tmp_path / ".pack-crashed.tmp", tmp_path / ".pack-live.tmp"
    for tmp in (crashed, live):
        tmp.write_bytes(fc._header(2, 500) + fc.entry_line(OTHER_KEY, JUDGMENT, CACHE_KEY)[:40])
    hour_ago = time.time() - fc.STALE_SECONDS - 60
    os.utime(crashed, (hour_ago, hour_ago))
    said = Warnings()

    cache = FolderCache(tmp_path, warn=said, key=CACHE_KEY)
    assert (cache.get(KEY), cache.get(OTHER_KEY), said) == (JUDGMENT, None, [])
    cache.compact()

    assert not crashed.exists() and live.exists()  # another run may still be writing that one
    assert FolderCache(tmp_path, key=CACHE_KEY).get(KEY) == JUDGMENT


def test_a_pack_cut_short_is_said_its_whole_entries_are_used_and_the_next_flush_compacts_it_away(tmp_path):
    first = write_pack(tmp_path, {key(1): {"n": 1}, key(2): {"n": 2}})
    cut = write_pack(tmp_path, {key(3): {"n": 3}, key(4): {"n": 4}, key(5): {"n": 5}})
    cut.write_bytes(cut.read_bytes()[:-10])  # a restore or a copy that stopped early
    said = Warnings()

    cache = FolderCache(tmp_path, warn=said, key=CACHE_KEY)

    assert [cache.get(key(n)) for n in range(1, 6)] == [{"n": 1}, {"n": 2}, {"n": 3}, {"n": 4}, None]
    assert said == [f"cache pack {cut}: cut short ({cut.stat().st_size - fc.HEADER_SIZE} of its "
                    f"{cut.stat().st_size + 10 - fc.HEADER_SIZE} bytes): its 2 whole entries are still used, the "
                    "rest is judged again"]
    cache.put(key(5), {"n": 5})
    cache.flush()
    [compacted] = packs(tmp_path)
    assert compacted not in (first, cut)
    again = FolderCache(tmp_path, warn=said, key=CACHE_KEY)
    assert [again.get(key(n)) for n in range(1, 6)] == [{"n": n} for n in range(1, 6)] and len(said) == 1


def _entry(value: str, key: str = KEY) -> bytes:
    """A line under `key` holding `value` as it is, signed with the cache key: what a holder of the key could write."""
    body = value.encode()
    return b'{"key": "%s", "mac": "%s", "value": %s}\n' % (key.encode(), fc._mac(CACHE_KEY, key, body), body)


# Lines under KEY's name in an otherwise whole pack: each is a miss, never an error.
HOSTILE_LINES = {
    "cut short": _entry('{"outcome": "pa')[:-1] + b"\n",
    "not utf-8": _entry('{"reason": "\xff"}').replace(b"\xc3\xbf", b"\xff\xfe"),
    "too deep to parse": _entry("[" * 100_000 + "]" * 100_000),
    "a list": _entry("[1, 2]"),
    "a string": _entry('"pass"'),
    "null": _entry("null"),
    "a second key that names another entry": _entry('{"outcome": "pass"}, "key": "' + OTHER_KEY + '"'),
    "a vector that is not base64": _entry('{"vector": {"' + fc._ARRAY + '": "not base64!"}}'),
    "a vector of a length no float64 has": _entry('{"vector": {"' + fc._ARRAY + '": "AAAA"}}'),
    "a key that is not a digest": b'{"key": "../../etc/passwd", "value": {}}\n',
    "not an entry at all": b"\x00\x01 pickle? no\n",
}


@pytest.mark.parametrize("line", list(HOSTILE_LINES.values()), ids=list(HOSTILE_LINES))
def test_a_hostile_line_in_a_pack_is_a_miss_the_rest_is_read_and_the_next_put_replaces_it(tmp_path, line):
    good = fc.entry_line(OTHER_KEY, JUDGMENT, CACHE_KEY)
    body = good + line
    (tmp_path / f"pack-{1:020d}-00000000.jsonl").write_bytes(fc._header(2, len(body)) + body)
    said = Warnings()

    cache = FolderCache(tmp_path, warn=said, key=CACHE_KEY)

    assert (cache.get(KEY), cache.get(OTHER_KEY)) == (None, JUDGMENT)
    cache.put(KEY, {"outcome": "fail"})
    cache.close()
    assert FolderCache(tmp_path, key=CACHE_KEY).get(KEY) == {"outcome": "fail"}


def test_a_line_longer_than_an_entry_may_be_is_skipped_and_said(tmp_path, monkeypatch):
    monkeypatch.setattr(fc, "MAX_ENTRY", 1000)
    body = _entry(json.dumps({"reason": "x" * 5000})) + fc.entry_line(OTHER_KEY, JUDGMENT, CACHE_KEY)
    pack = tmp_path / f"pack-{1:020d}-00000000.jsonl"
    pack.write_bytes(fc._header(2, len(body)) + body)
    said = Warnings()

    cache = FolderCache(tmp_path, warn=said, key=CACHE_KEY)

    assert (cache.get(KEY), cache.get(OTHER_KEY)) == (None, JUDGMENT)
    assert said == [f"cache pack {pack}: 1 line(s) that are not entries: its 1 whole entries are still used, the "
                    "rest is judged again"]


def _symlink_loop(path: Path) -> None:
    path.symlink_to(path)


# What can sit under a pack's name.
HOSTILE_PACKS = {
    "empty": (lambda path: path.write_bytes(b""), "not a cache pack (no pack header): skipped"),
    "random bytes": (lambda path: path.write_bytes(os.urandom(5000)), "not a cache pack (no pack header): skipped"),
    "a header of another format": (
        lambda path: path.write_bytes(b'{"evalhub_cache_pack": 99, "entries": 0, "bytes": 0}\n'),
        "not a cache pack (no pack header): skipped"),
    "a header claiming more": (
        lambda path: path.write_bytes(fc._header(10**6, 10**12) + fc.entry_line(KEY, {"n": 1}, CACHE_KEY)),
        "cut short"),
    "a directory": (lambda path: path.mkdir(), "not a file: skipped"),
    "a FIFO": (lambda path: os.mkfifo(path), "not a file: skipped"),
    "a symlink loop": (_symlink_loop, "cannot be read"),
}


@pytest.mark.parametrize("make, said_what", list(HOSTILE_PACKS.values()), ids=list(HOSTILE_PACKS))
def test_a_hostile_pack_is_skipped_with_a_warning_and_nothing_else_is_lost(tmp_path, make, said_what):
    write_pack(tmp_path, {OTHER_KEY: JUDGMENT})
    bad = tmp_path / f"pack-{time.time_ns() + 10**12:020d}-00000000.jsonl"  # the newest
    make(bad)
    said = Warnings()

    cache = FolderCache(tmp_path, warn=said, key=CACHE_KEY)

    assert cache.get(OTHER_KEY) == JUDGMENT
    assert len(said) == 1 and said[0].startswith(f"cache pack {bad}: {said_what}")
    cache.close()  # compacts it away where it can (a directory stays, said again)
    assert FolderCache(tmp_path, warn=Warnings(), key=CACHE_KEY).get(OTHER_KEY) == JUDGMENT


def _unreadable(path: Path) -> None:
    path.write_text(json.dumps({"key": KEY, "value": {"outcome": "pass"}}))
    path.chmod(0)


# What can sit under an entry's name in a folder of the older layout (one file per entry).
BAD_LEGACY_ENTRIES = {
    "not utf-8": lambda path: path.write_bytes(b"\xff\xfe"),
    "cut short": lambda path: path.write_text('{"key": "ef'),
    "too deep to parse": lambda path: path.write_text("[" * 100_000 + "]" * 100_000),
    "a list": lambda path: path.write_text("[1, 2]"),
    "written before entries recorded their key": lambda path: path.write_text('{"outcome": "pass"}'),
    "written under another key": lambda path: path.write_text(json.dumps({"key": OTHER_KEY, "value": {"n": 1}})),
    "a value that is not an object": lambda path: path.write_text(json.dumps({"key": KEY, "value": "pass"})),
    "a directory": lambda path: (path.mkdir(), (path / "x.json").write_text("{}")),
    "a symlink loop": _symlink_loop,
    "a FIFO": lambda path: os.mkfifo(path),
    "an unreadable file": _unreadable,
}


def test_a_folder_of_the_older_layout_is_never_read_and_compaction_removes_it(tmp_path):
    # As the cache folder wrote them before packs: {"key": ..., "value": ...} in <key>.json, unsigned: anyone could
    # have written them.
    old = {key(1): JUDGMENT, key(2): {"vector": [0.25, -1.0, 3.0]}}
    for k, value in old.items():
        (tmp_path / f"{k}.json").write_text(json.dumps({"key": k, "value": value}, sort_keys=True))
    (tmp_path / "embeddings").mkdir()  # a folder beside them is no entry

    cache = FolderCache(tmp_path, key=CACHE_KEY)
    assert (cache.get(key(1)), cache.get(key(2)), len(cache)) == (None, None, 0)
    cache.put(key(3), {"n": 3})
    cache.flush()  # entries of the older layout: the folder is compacted

    assert [p.name for p in tmp_path.iterdir() if p.suffix == ".json"] == []
    later = FolderCache(tmp_path, key=CACHE_KEY)
    assert [later.get(key(n)) for n in (1, 2, 3)] == [None, None, {"n": 3}] and len(packs(tmp_path)) == 1


def test_an_entry_signed_under_another_key_or_forged_is_a_miss_said_once(tmp_path):
    with FolderCache(tmp_path, key=b"another gate's key, 32 bytes long") as other:
        other.put(KEY, {"outcome": "pass"})
        other.put(OTHER_KEY, {"outcome": "pass"})
    [pack] = packs(tmp_path)
    # A forged line: the right shape, a mac of the right length that is not the mac of this value.
    body = b'{"outcome": "pass"}'
    forged = b'{"key": "%s", "mac": "%s", "value": %s}\n' % (key(3).encode(), b"0" * 64, body)
    (tmp_path / f"pack-{2 * 10**19:020d}-00000000.jsonl").write_bytes(fc._header(1, len(forged)) + forged)
    said = Warnings()

    cache = FolderCache(tmp_path, key=CACHE_KEY, warn=said)

    assert [cache.get(k) for k in (KEY, OTHER_KEY, key(3))] == [None, None, None]
    [warning] = said  # said once, for all three
    assert "do not verify under this cache key" in warning
    assert FolderCache(tmp_path, key=b"another gate's key, 32 bytes long").get(KEY) == {"outcome": "pass"}
    cache.put(KEY, {"outcome": "fail"})
    cache.flush()
    assert FolderCache(tmp_path, key=CACHE_KEY).get(KEY) == {"outcome": "fail"}


def test_a_pack_of_format_1_is_not_read_and_compaction_removes_it(tmp_path):
    # As format 1 wrote a pack: no mac. Whatever it holds, it was never authenticated.
    line = b'{"key": "%s", "value": {"outcome": "pass"}}\n' % KEY.encode()
    header = json.dumps({"evalhub_cache_pack": 1, "entries": 1, "bytes": len(line)}).encode()
    (tmp_path / f"pack-{1:020d}-00000000.jsonl").write_bytes(header.ljust(fc.HEADER_SIZE - 1) + b"\n" + line)
    said = Warnings()

    cache = FolderCache(tmp_path, key=CACHE_KEY, warn=said)

    assert cache.get(KEY) is None
    assert any("format 1, whose entries are not authenticated" in w for w in said)
    cache.flush()
    assert packs(tmp_path) == [] or all(b'"evalhub_cache_pack": 2' in p.read_bytes()[:60] for p in packs(tmp_path))


def test_a_key_too_short_to_be_secret_is_refused(tmp_path):
    with pytest.raises(ValueError, match="at least 16 bytes"):
        FolderCache(tmp_path, key=b"short")


@pytest.mark.parametrize("make_bad", list(BAD_LEGACY_ENTRIES.values()), ids=list(BAD_LEGACY_ENTRIES))
def test_a_bad_entry_of_the_older_layout_is_a_miss_and_the_next_put_replaces_it(tmp_path, make_bad):
    if make_bad is _unreadable and os.geteuid() == 0:
        pytest.skip("root reads a file whatever its mode")
    make_bad(tmp_path / f"{KEY}.json")

    cache = FolderCache(tmp_path, key=CACHE_KEY)
    assert cache.get(KEY) is None
    cache.put(KEY, {"outcome": "fail"})
    cache.close()

    assert FolderCache(tmp_path, key=CACHE_KEY).get(KEY) == {"outcome": "fail"}


def test_more_packs_than_max_packs_are_compacted_into_one_the_newest_value_of_a_key_kept(tmp_path):
    for n in range(fc.MAX_PACKS + 1):
        write_pack(tmp_path, {key(n): {"n": n}, KEY: {"n": n}})
        assert len(packs(tmp_path)) == (n + 1 if n < fc.MAX_PACKS else 1)

    cache = FolderCache(tmp_path, key=CACHE_KEY)
    assert [cache.get(key(n)) for n in range(fc.MAX_PACKS + 1)] == [{"n": n} for n in range(fc.MAX_PACKS + 1)]
    assert cache.get(KEY) == {"n": fc.MAX_PACKS}


def test_a_compaction_is_skipped_while_another_process_compacts(tmp_path):
    pytest.importorskip("fcntl")
    held = subprocess.Popen([sys.executable, "-c", textwrap.dedent("""
        import fcntl, sys, time
        fh = open(sys.argv[1], "ab")
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX)
        print("held", flush=True)
        time.sleep(60)
    """), str(tmp_path / ".compact.lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert held.stdout.readline() == "held\n"
        for n in range(fc.MAX_PACKS + 2):
            write_pack(tmp_path, {key(n): {"n": n}})
        assert len(packs(tmp_path)) == fc.MAX_PACKS + 2  # left to the process compacting
    finally:
        held.kill()
        held.wait()
    write_pack(tmp_path, {key(99): {"n": 99}})
    assert len(packs(tmp_path)) == 1


def test_a_compacted_pack_does_not_outrank_a_pack_finished_while_it_was_made(tmp_path, monkeypatch):
    older = write_pack(tmp_path, {KEY: {"n": 1}})
    write_pack(tmp_path, {KEY: {"n": 2}})  # finished after the compaction below listed the folder
    listing = fc._Store.listing
    monkeypatch.setattr(fc._Store, "listing", lambda self: ([older], listing(self)[1]))

    FolderCache(tmp_path, key=CACHE_KEY).compact()

    monkeypatch.undo()
    assert len(packs(tmp_path)) == 2 and FolderCache(tmp_path, key=CACHE_KEY).get(KEY) == {"n": 2}


def test_an_embeddings_line_read_without_json_parsing_means_what_json_says(tmp_path):
    # An embedding's line is read by its known shape; a line of that shape holding more is still read as JSON.
    vector = np.array([0.5, -1.25])
    made = fc.entry_line(KEY, {"vector": vector}, CACHE_KEY)
    b64 = json.loads(made)["value"]["vector"][fc._ARRAY]
    more = _entry('{"vector": {"' + fc._ARRAY + '": "' + b64 + '"}, "n": {"m": "x"}}', OTHER_KEY)
    body = made + fc.entry_line(OTHER_KEY, {}, CACHE_KEY) + more
    (tmp_path / f"pack-{1:020d}-00000000.jsonl").write_bytes(fc._header(3, len(body)) + body)

    cache = FolderCache(tmp_path, key=CACHE_KEY)

    assert cache.get(KEY)["vector"].tolist() == [0.5, -1.25]
    got = cache.get(OTHER_KEY)
    assert (got["vector"].tolist(), got["n"]) == ([0.5, -1.25], {"m": "x"})
