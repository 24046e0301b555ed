"""A full disk, for real: the installed `evalhub-gate` run in a mount namespace of its own over a tmpfs of 64 KiB
that is filled before it starts (`unshare`, no root needed where user namespaces are allowed).

Its result files (--json, --junit) and the cases file of `evalhub-gate cases` are written whole or not at all:
the file a pipeline reads keeps what it held (or stays absent), no temporary file is left, and the message says
"No space left on device" as what it is — never "cannot connect", which sends one looking at the network.
"""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from judges.engine import JudgeConfig
from tests.judges.gate.test_server import Recorder, _recorder

GATE = Path(sys.executable).parent / "evalhub-gate"  # installed by [project.scripts]
LISTING = "--- the folder after ---"
# Mount a small tmpfs over the folder, keep what the test put there, fill the rest, run the command, then list
# the folder and print the file named last (all inside the namespace: the tmpfs goes with it).
SCRIPT = f"""
set -e
dir="$1"; keep="$2"; shift 2
cp -a "$dir/." "$keep/"
mount -t tmpfs -o size=64k tmpfs "$dir"
cd "$dir"  # the tmpfs itself, not the folder it covers
cp -a "$keep/." .
dd if=/dev/zero of=filler bs=4k count=16 2>/dev/null || true  # never more than the tmpfs holds
set +e
"$@"; code=$?
echo "{LISTING}"; ls -A; echo; cat result 2>/dev/null
exit $code
"""


def _can_mount() -> bool:
    if shutil.which("unshare") is None:
        return False
    done = subprocess.run(["unshare", "-r", "-m", "sh", "-c", "mount -t tmpfs -o size=4k tmpfs /mnt"],
                          capture_output=True, check=False)
    return done.returncode == 0


pytestmark = pytest.mark.skipif(not _can_mount(), reason="needs unshare and a mount namespace (a real full disk)")


def on_a_full_disk(folder: Path, *command: str) -> tuple[subprocess.CompletedProcess, list[str], str]:
    """Run `command` (in `folder`) with `folder` a full tmpfs holding what it held; the result, the names in the
    folder afterwards and the content of its file `result`."""
    keep = folder.parent / f"{folder.name}-kept"
    keep.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "EVALHUB_"))}
    done = subprocess.run(["unshare", "-r", "-m", "sh", "-c", SCRIPT, "sh", str(folder), str(keep), *command],
                          cwd=folder, env=env, capture_output=True, text=True, timeout=120, check=False)
    out, _, after = done.stdout.partition(LISTING + "\n")
    names, _, content = after.partition("\n\n")
    return subprocess.CompletedProcess(done.args, done.returncode, out, done.stderr), names.split(), content


@pytest.fixture
def folder(tmp_path) -> Path:
    """A contract-only gate config, 40 outputs, and `result` holding an earlier run's results."""
    work = tmp_path / "work"
    work.mkdir()
    judge = JudgeConfig.from_dict({"rubric": "returns", "criteria": "Pass when…", "layers": ["contract"],
                                   "contract_checks": ["answer_present"]}).to_dict(include_hash=True)
    rubric = {"slug": "returns", "stage": "gate", "judge": judge, "calibration": None}
    (work / "gates.json").write_text(json.dumps({"schema": "evalhub.gates/v1", "rubrics": [rubric]}))
    # Results of 40 cases: several pages, more than the one the earlier results free when truncated.
    (work / "outputs.jsonl").write_text("".join(
        json.dumps({"external_id": f"c{i}", "input": "Q?", "output": "A."}) + "\n" for i in range(40)))
    (work / "result").write_text("the earlier run's results\n")
    return work


@pytest.mark.parametrize("option", ["--json", "--junit"])
def test_a_result_file_on_a_full_disk_is_left_as_it_was_and_the_message_says_why(folder, option):
    done, names, content = on_a_full_disk(
        folder, str(GATE), "check", "--config", "gates.json", "--outputs", "outputs.jsonl", "--no-cache",
        option, "result")

    assert content == "the earlier run's results\n", len(content)  # not truncated, not emptied
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.splitlines()[-1] == (
        "evalhub-gate: error: writing result: No space left on device; nothing was written there")
    assert sorted(names) == ["filler", "gates.json", "outputs.jsonl", "result"]  # no temporary file left


@pytest.fixture
def server() -> Recorder:
    yield from _recorder()


def test_the_cases_command_on_a_full_disk_says_so_not_cannot_connect(folder, server):
    server.serve("/api/datasets/support/cases", "".join(
        json.dumps({"external_id": f"c{i}", "input": "Can I return it? " * 50}) + "\n" for i in range(200)),
        content_type="application/jsonl")

    done, names, content = on_a_full_disk(
        folder, str(GATE), "cases", "--server", server.url, "--dataset", "support", "--out", "result",
        "--token", "evh_full-disk-test")

    assert done.returncode == 2, done.stdout + done.stderr
    assert "cannot connect" not in done.stderr
    assert done.stderr.splitlines()[-1] == (
        "evalhub-gate: error: writing result: No space left on device; nothing was written there")
    assert content == "the earlier run's results\n"
    assert sorted(names) == ["filler", "gates.json", "outputs.jsonl", "result"]
