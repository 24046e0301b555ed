"""Each JUnit testcase carries its own case's time: not the seconds every case of the batch spent waiting on
the provider SDK's first import (the engine imports it before any case's clock starts)."""

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

from tests.judges.gate.test_cli import GOOD, gate_rubric, workdir, write_config, write_outputs

__all__ = ["workdir"]
GATE = Path(sys.executable).parent / "evalhub-gate"


def test_each_testcase_has_its_own_time(workdir, fake_provider):
    # Before, in a fresh process: 1.81, 1.75 and 2.18 s for calls of about 0.15 s, the SDK import in each.
    fake_provider.control(latency_ms=150, latency_sigma=0.8, latency_seed=3)
    config = write_config(workdir / "gates.json", gate_rubric())
    outputs = write_outputs(workdir / "outputs.jsonl", GOOD)
    done = subprocess.run([str(GATE), "check", "--config", config, "--outputs", outputs, "--no-cache",
                           "--junit", str(workdir / "junit.xml")], cwd=workdir, env=dict(os.environ),
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    times = [float(c.get("time")) for c in ET.parse(workdir / "junit.xml").iter("testcase")]
    served = fake_provider.stats()["latency_ms_served"]
    assert len(times) == len(GOOD) and len(set(times)) == len(times)  # each its own
    # Each case's time is its call's latency plus little: the calls served sum to about the cases' times.
    assert sum(times) < served / 1000 + 0.25 * len(times), (times, served)
