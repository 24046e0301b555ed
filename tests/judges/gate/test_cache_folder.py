"""The installed `evalhub-gate check` and a `--cache-dir` folder it cannot trust (docs/gate.md, "The cache"):
CI restores the folder, a pull request can commit one, the agent run earlier in the job can write in it. Only
an entry signed with the gate step's key ($EVALHUB_CACHE_KEY) is used; a forged or damaged entry is a miss,
judged again, said once: it never decides the exit code and is never a traceback. Without a key the check keeps
no cache and says so. The judge is the stand-in provider over real HTTP (it passes an answer with "30 days").
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from judges.engine import FolderCache, JudgeConfig, Judgment, cache_key
from tests.judges.gate.test_cli import PASS_RULE, gate_rubric

CACHE_KEY = b"a test cache key, 32 bytes long!!"  # the gate step's secret (FolderCache signs with it)

GATE = Path(sys.executable).parent / "evalhub-gate"  # installed by [project.scripts]
ANSWERS = {"pass": "Returns are accepted within 30 days.", "fail": "No returns, ever."}


@pytest.fixture
def check(tmp_path, fake_provider):
    fake_provider.control(rule=PASS_RULE)
    return tmp_path


def write_check(tmp_path: Path, outcomes: list[str], *, layers: tuple[str, ...] = ("behavioral",)) -> list[dict]:
    """gates.json with one gate rubric, and outputs.jsonl with a case answered to each of `outcomes`."""
    if layers == ("contract",):
        rubric = gate_rubric(layers=["contract"], contract_checks=["must_match"], must_match=["30 days"],
                             provider=None, model=None, params={}, base_url_env=None, api_key_env=None)
    else:
        rubric = gate_rubric()
    (tmp_path / "gates.json").write_text(
        json.dumps({"schema": "evalhub.gates/v1", "generated_at": "now", "rubrics": [rubric]}))
    cases = [{"external_id": f"c{i}", "input": "Can I return shoes?", "output": ANSWERS[o]}
             for i, o in enumerate(outcomes)]
    (tmp_path / "outputs.jsonl").write_text("".join(json.dumps(c) + "\n" for c in cases))
    return cases


def gate(tmp_path: Path, *, key: bytes | None = CACHE_KEY) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "EVALHUB_CACHE", "EVALHUB_TOKEN"))}
    if key is not None:
        env["EVALHUB_CACHE_KEY"] = key.decode()
    return subprocess.run([str(GATE), "check", "--config", "gates.json", "--outputs", "outputs.jsonl",
                           "--cache-dir", "cache"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def key(tmp_path: Path, case: dict) -> str:
    """The cache key of the case's one judgment (repeat 1)."""
    config = json.loads((tmp_path / "gates.json").read_text())["rubrics"][0]["judge"]
    return cache_key(case, JudgeConfig.from_dict(config).config_hash, 1)


def cached(tmp_path: Path, case: dict) -> dict | None:
    """What the cache folder holds for the case's judgment, as the next run reads it."""
    return FolderCache(tmp_path / "cache", key=CACHE_KEY).get(key(tmp_path, case))


def forged_pack(tmp_path: Path, cases: list[dict], *, signed_with: bytes | None) -> None:
    """A pack committed in the checkout: a well-formed pass for every case, in today's pack format signed with
    another key, or (signed_with None) in format 1 as evalhub-gate wrote it before entries were signed."""
    folder = tmp_path / "cache"
    folder.mkdir(exist_ok=True)
    passes = {key(tmp_path, c): Judgment(c["external_id"], 1, "pass", reason="forged", layer="behavioral").to_dict()
              for c in cases}
    if signed_with is not None:
        with FolderCache(folder, key=signed_with) as cache:
            for k, value in passes.items():
                cache.put(k, value)
        return
    lines = b"".join(b'{"key": "%s", "value": %s}\n' % (k.encode(), json.dumps(v).encode()) for k, v in passes.items())
    header = json.dumps({"evalhub_cache_pack": 1, "entries": len(passes), "bytes": len(lines)}).encode()
    (folder / f"pack-{1:020d}-00000000.jsonl").write_bytes(header.ljust(127) + b"\n" + lines)


@pytest.mark.parametrize("signed_with", [None, b"the agent's own key, 32 bytes long"], ids=["format 1", "another key"])
def test_a_forged_cache_committed_in_the_checkout_does_not_pass_a_failing_gate(check, fake_provider, signed_with):
    assert GATE.exists(), "pip install -e . installs the evalhub-gate console script"
    cases = write_check(check, ["fail", "fail", "fail"])
    forged_pack(check, cases, signed_with=signed_with)

    done = gate(check)

    assert done.returncode == 1, done.stdout + done.stderr  # before: exit 0 with 3 cache hits
    assert all(f"FAIL return-policy c{i}" in done.stdout for i in range(3))
    assert fake_provider.stats()["total"] == 3  # every case judged again
    # Said once, whatever the number of forged entries.
    assert done.stderr.count("evalhub-gate: warning:") == 1, done.stderr
    assert ("format 1, whose entries are not authenticated" if signed_with is None
            else "do not verify under this cache key") in done.stderr
    assert [cached(check, c)["outcome"] for c in cases] == ["fail"] * 3  # replaced by signed verdicts


def test_with_the_key_a_second_run_is_answered_from_the_cache(check, fake_provider):
    cases = write_check(check, ["pass", "fail"])
    assert gate(check).returncode == 1

    again = gate(check)

    assert again.returncode == 1 and again.stderr == "", again.stdout + again.stderr
    assert fake_provider.stats()["total"] == 2  # the second run asked nothing
    assert [cached(check, c)["outcome"] for c in cases] == ["pass", "fail"]


def test_without_a_key_the_check_keeps_no_cache_and_says_so(check, fake_provider):
    cases = write_check(check, ["fail"])
    forged_pack(check, cases, signed_with=CACHE_KEY)  # even an entry the real key signed is not read without it

    done = gate(check, key=None)

    assert done.returncode == 1, done.stdout + done.stderr
    assert "evalhub-gate: no cache: $EVALHUB_CACHE_KEY is not set" in done.stdout
    assert fake_provider.stats()["total"] == 1
    assert len(list((check / "cache").glob("pack-*"))) == 1  # nothing written


def test_a_key_too_short_is_a_config_error(check):
    write_check(check, ["pass"])
    done = gate(check, key=b"short")
    assert done.returncode == 2 and "a cache key needs at least 16 bytes" in done.stderr, done.stderr


def test_a_contract_only_gate_keeps_no_cache_at_all(tmp_path):
    cases = write_check(tmp_path, ["fail"], layers=("contract",))
    forged_pack(tmp_path, cases, signed_with=CACHE_KEY)  # even a validly signed pass is not consulted

    done = gate(tmp_path)

    assert done.returncode == 1, done.stdout + done.stderr
    assert "no cache" not in done.stdout  # nothing to say: contract checks need none
    assert len(list((tmp_path / "cache").glob("pack-*"))) == 1


def test_a_pack_cut_short_is_a_warning_and_its_entries_are_judged_again(check, fake_provider):
    cases = write_check(check, ["fail"])
    assert gate(check).returncode == 1
    [pack] = (check / "cache").glob("pack-*.jsonl")
    pack.write_bytes(pack.read_bytes()[:-20])  # a cache restore that stopped early

    done = gate(check)

    assert done.returncode == 1 and "FAIL return-policy c0" in done.stdout, done.stdout + done.stderr
    assert done.stderr.startswith(f"evalhub-gate: warning: cache pack {Path('cache') / pack.name}: cut short (")
    assert done.stderr.count("\n") == 1
    assert cached(check, cases[0])["outcome"] == "fail" and len(list((check / "cache").glob("pack-*"))) == 1
