"""The installed `evalhub-gate check` and a `--cache-dir` folder it cannot trust (docs/gate.md, "The cache
folder"): CI restores the folder, anyone with the checkout can write in it. A forged or damaged entry is a
miss, judged again: it never decides the exit code and is never a traceback; a damaged pack is a warning. A
contract-only gate rubric, so no provider is asked.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from judges.engine import FolderCache, JudgeConfig, cache_key

GATE = Path(sys.executable).parent / "evalhub-gate"  # installed by [project.scripts]
CRITERIA = "Pass when the answer states the 30-day return window."
ANSWERS = {"pass": "Returns are accepted within 30 days.", "fail": "No returns, ever."}
JUDGE = JudgeConfig.from_dict({"rubric": "returns", "criteria": CRITERIA, "layers": ["contract"],
                               "contract_checks": ["must_match"], "must_match": ["30 days"]})


def write_check(tmp_path: Path, outcome: str) -> dict:
    """gates.json with the one gate rubric, and outputs.jsonl with one case answered to `outcome`."""
    rubric = {"slug": "returns", "criteria": CRITERIA, "stage": "gate", "fail_closed": False,
              "judge": JUDGE.to_dict(include_hash=True), "prices": {},
              "calibration": {"run": 1, "n": 40, "repeats": 2, "agreement": 0.9},
              "promoted_by": "lena", "promoted_at": "2025-01-01T00:00:00+00:00"}
    (tmp_path / "gates.json").write_text(
        json.dumps({"schema": "evalhub.gates/v1", "generated_at": "now", "rubrics": [rubric]}))
    case = {"external_id": "c1", "input": "Can I return shoes?", "output": ANSWERS[outcome]}
    (tmp_path / "outputs.jsonl").write_text(json.dumps(case) + "\n")
    return case


def gate(tmp_path: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "EVALHUB_"))}
    return subprocess.run([str(GATE), "check", "--config", "gates.json", "--outputs", "outputs.jsonl",
                           "--cache-dir", "cache"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def key(case: dict) -> str:
    """The cache key of the case's one judgment (repeat 1)."""
    return cache_key(case, JUDGE.config_hash, 1)


def cached(tmp_path: Path, case: dict) -> dict | None:
    """What the cache folder holds for the case's judgment, as the next run reads it."""
    return FolderCache(tmp_path / "cache").get(key(case))


def legacy_entry(tmp_path: Path, case: dict) -> Path:
    """Where the older layout (one file per entry) kept the case's judgment."""
    return tmp_path / "cache" / f"{key(case)}.json"


# A hand-written pass, bare and with the two fields a judgment cannot do without.
FORGED = [{"outcome": "pass"}, {"external_id": "c1", "repeat": 1, "outcome": "pass"}]


@pytest.mark.parametrize("forged", FORGED, ids=["bare", "with its id and repeat"])
def test_a_forged_pass_under_a_failing_judgments_key_does_not_pass_the_gate(tmp_path, forged):
    assert GATE.exists(), "pip install -e . installs the evalhub-gate console script"
    case = write_check(tmp_path, "fail")
    first = gate(tmp_path)
    assert first.returncode == 1, first.stdout + first.stderr
    assert cached(tmp_path, case)["outcome"] == "fail"  # the failing judgment is cached under this key

    with FolderCache(tmp_path / "cache") as cache:  # a newer pack: it wins the key
        cache.put(key(case), forged)
    forged_run = gate(tmp_path)

    assert (forged_run.returncode, forged_run.stderr) == (1, ""), forged_run.stdout + forged_run.stderr
    assert "FAIL returns c1" in forged_run.stdout
    assert cached(tmp_path, case)["outcome"] == "fail"  # judged again, replaced


def _directory(path: Path) -> None:
    path.mkdir()


@pytest.mark.parametrize("damage", [lambda path: path.write_bytes(b"\xff\xfe"), _directory,
                                    lambda path: path.write_text('{"outcome": "fail"}')],
                         ids=["not utf-8", "a directory", "an outcome without the judgment's fields"])
def test_a_damaged_entry_of_the_older_layout_is_judged_again_instead_of_a_traceback(tmp_path, damage):
    case = write_check(tmp_path, "pass")
    (tmp_path / "cache").mkdir()
    damage(legacy_entry(tmp_path, case))

    done = gate(tmp_path)

    assert (done.returncode, done.stderr) == (0, ""), done.stdout + done.stderr
    assert cached(tmp_path, case)["outcome"] == "pass"


def test_an_older_layouts_entry_is_used_then_moved_into_a_pack(tmp_path):
    case = write_check(tmp_path, "fail")
    assert gate(tmp_path).returncode == 1
    value = cached(tmp_path, case)
    [pack] = (tmp_path / "cache").glob("pack-*.jsonl")
    pack.unlink()
    # As the cache folder kept it before packs, with a pass forged in: read, so it decides (it is whole).
    legacy_entry(tmp_path, case).write_text(json.dumps({"key": key(case), "value": {**value, "reason": "old"}}))

    done = gate(tmp_path)

    assert (done.returncode, done.stderr) == (1, ""), done.stdout + done.stderr
    assert "FAIL returns c1: old" in done.stdout  # from the older entry, not judged again
    assert not legacy_entry(tmp_path, case).exists() and cached(tmp_path, case)["reason"] == "old"


def test_a_pack_cut_short_is_a_warning_and_its_entries_are_judged_again(tmp_path):
    case = write_check(tmp_path, "fail")
    assert gate(tmp_path).returncode == 1
    [pack] = (tmp_path / "cache").glob("pack-*.jsonl")
    pack.write_bytes(pack.read_bytes()[:-20])  # a cache restore that stopped early

    done = gate(tmp_path)

    assert done.returncode == 1 and "FAIL returns c1" in done.stdout, done.stdout + done.stderr
    assert done.stderr.startswith(f"evalhub-gate: warning: cache pack {Path('cache') / pack.name}: cut short (")
    assert done.stderr.count("\n") == 1
    assert cached(tmp_path, case)["outcome"] == "fail" and len(list((tmp_path / "cache").glob("pack-*"))) == 1
