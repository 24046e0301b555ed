"""Prints, as one JSON object, what a team reads off an evalhub database: every run's calibration report and pass
rate, and the gate config. Run with the code of a checkout as the working directory (DJANGO_SETTINGS_MODULE and
the database from the environment), so the same reading is taken before and after a migration — also with the
code from before projects, which made the expected file beside it."""

import io
import json
import os
import sys

sys.path.insert(0, os.getcwd())
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalhub.settings")

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402

from judges.models import Run  # noqa: E402


def _json_of(*args) -> object:
    out = io.StringIO()
    call_command(*args, stdout=out)
    return json.loads(out.getvalue())


figures = {"runs": {}, "pass_rates": {}}
for run_id in Run.objects.order_by("pk").values_list("pk", flat=True):
    figures["runs"][str(run_id)] = _json_of("calibration_report", str(run_id), "--json")
    figures["pass_rates"][str(run_id)] = _json_of("pass_rate", str(run_id), "--json")
gates = _json_of("export_gates")
figures["gate_rubrics"] = gates["rubrics"]
print(json.dumps(figures, sort_keys=True))
