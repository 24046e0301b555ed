"""The embedded default migrates from scratch on SQLite with the queue's triggers intact: a migration that
rebuilt a labeling table there would drop its triggers (or fail on a trigger naming it)."""

import os
import sqlite3
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

CHECK = """
from evalhub.models import Project
from labeling.models import Case, CaseTally, Dataset, Rubric
project, elsewhere = Project.objects.create(slug="p", name="p"), Project.objects.create(slug="q", name="q")
dataset = Dataset.objects.create(project=project, slug="d", name="d")
Case.objects.create(dataset=dataset, external_id="a", input="i", output="o")
Rubric.objects.create(project=project, slug="r", name="r", criteria="c")
Rubric.objects.create(project=elsewhere, slug="r", name="r", criteria="c")
Case.objects.create(dataset=dataset, external_id="b", input="i", output="o")
print(CaseTally.objects.count())
"""


def test_a_fresh_sqlite_database_keeps_every_queue_trigger(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("DATABASE_URL", "CELERY_BROKER_URL")}
    env["EVALHUB_DATA_DIR"] = str(tmp_path)
    manage = [sys.executable, str(ROOT / "manage.py")]
    subprocess.run([*manage, "migrate", "-v0"], env=env, cwd=ROOT, check=True, capture_output=True)
    triggers = {name for (name,) in sqlite3.connect(tmp_path / "evalhub.sqlite3").execute(
        "SELECT name FROM sqlite_master WHERE type = 'trigger'")}
    assert {"labeling_case_tally", "labeling_rubric_tally", "labeling_label_tally_ins",
            "labeling_label_stale_ins"} <= triggers

    done = subprocess.run([*manage, "shell", "-c", CHECK], env=env, cwd=ROOT, check=True, capture_output=True,
                          text=True)
    # One tally row per (case, rubric of the case's own project), kept by the triggers.
    assert done.stdout.strip().splitlines()[-1] == "2"
