"""Which evalhub-gate knows which gate config field (docs/gate.md, "requires_cli").

FIELD_VERSIONS is the one table: every field of the gate config, of each rubric, of each rubric's judge and of
its calibration, with the evalhub-gate version that first reads it. The server ships `requires_cli`, the highest version
among the fields a config uses; the command refuses (exit 2) a field missing from its table, naming the
field and that version, and a config that needs a newer command than itself. A field added to the gate
config is added here with the next package version (VERSION in judges/gate/__init__.py, bumped with it),
so an older command never judges with a field it would silently ignore.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from judges.gate import VERSION
from judges.gate.messages import ConfigError, one_line

_ORIGINAL = "0.1.0"
_JUDGE_FIELDS = (
    "rubric", "criteria", "layers", "contract_checks", "must_match", "must_not_match", "json_schema", "allowed_tools",
    "forbidden_tools", "max_tool_calls", "secret_patterns", "provider", "model", "model_family", "prompt_template",
    "policy", "policy_ref", "policy_sha256", "params", "output_kind", "pass_score", "timeout_s", "max_attempts",
    "base_url_env", "api_key_env", "secondary", "semantic", "config_hash",
)
_RUBRIC_FIELDS = (
    "slug", "criteria", "stage", "fail_closed", "judge", "prices", "calibration", "recalibration_needed",
    "recalibration_reasons", "promoted_by", "promoted_at",
)
_CALIBRATION_FIELDS = (
    "run", "n", "repeats", "agreement", "agreement_ci95", "kappa", "false_pass", "false_fail", "true_pass_rate",
    "true_fail_rate", "flip_rate", "coverage",
)
# Field path → the first evalhub-gate version that reads it: `rubrics[].x` is a rubric's field,
# `rubrics[].judge.x` its judge's, `rubrics[].calibration.x` its calibration's.
FIELD_VERSIONS: dict[str, str] = {
    "schema": _ORIGINAL,
    "generated_at": _ORIGINAL,
    "rubrics": _ORIGINAL,
    **{f"rubrics[].{name}": _ORIGINAL for name in _RUBRIC_FIELDS},
    **{f"rubrics[].judge.{name}": _ORIGINAL for name in _JUDGE_FIELDS},
    **{f"rubrics[].calibration.{name}": _ORIGINAL for name in _CALIBRATION_FIELDS},
    "requires_cli": "0.2.0",
    "rubrics[].calibration.cases": "0.3.0",
    "rubrics[].calibration.cases_single": "0.3.0",
    "rubrics[].gate_on": "0.3.0",
    "rubrics[].min_agent_pass_rate": "0.3.0",
    # The release tier (docs/gate.md, "Tiers"): its judge and calibration have the fields of `judge` and
    # `calibration`, each known from the version that knows it there (and no older than 0.4.0).
    "rubrics[].release_judge": "0.4.0",
    "rubrics[].release_calibration": "0.4.0",
    # A judge's other judges (docs/judging.md, "Escalation").
    "rubrics[].judge.fallback": "0.5.0",
    "rubrics[].judge.second_opinion": "0.5.0",
    "rubrics[].judge.adjudicator": "0.5.0",
    # What a kept proposal adds to its judge (docs/improving.md).
    "rubrics[].judge.guidance": "0.5.0",
    "rubrics[].judge.examples": "0.5.0",
    # The project the gate config is of (docs/projects.md): `check --post` sends it back with the results, and the
    # server refuses results of another project than the token's.
    "project": "0.6.0",
}
# A release tier's judge and calibration are read with the table of the default tier's.
_SAME_FIELDS = {"release_judge": "judge", "release_calibration": "calibration"}
_VERSION_RE = re.compile(r"\d+\.\d+\.\d+")


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def fields_used(config: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(table path, where it is) of each field the config uses, at the four levels the table covers.

    Values of the wrong type are left to the config's own checks."""
    for name in config:
        yield name, name
    rubrics = config.get("rubrics")
    for i, rubric in enumerate(rubrics if isinstance(rubrics, list) else []):
        if not isinstance(rubric, dict):
            continue
        for name in rubric:
            yield f"rubrics[].{name}", f"rubrics[{i}].{name}"
        for part in ("judge", "calibration", *_SAME_FIELDS):
            inner = rubric.get(part)
            for name in inner if isinstance(inner, dict) else ():
                yield f"rubrics[].{_SAME_FIELDS.get(part, part)}.{name}", f"rubrics[{i}].{part}.{name}"


def requires_cli(config: dict[str, Any]) -> str:
    """The lowest evalhub-gate version that knows every field `config` uses (the server's side)."""
    missing = sorted({path for path, _ in fields_used(config) if path not in FIELD_VERSIONS})
    if missing:
        raise ValueError(f"gate config field(s) missing from FIELD_VERSIONS: {', '.join(missing)}")
    return max((FIELD_VERSIONS[path] for path, _ in fields_used(config)), key=version_key, default=_ORIGINAL)


def check_versions(config: dict[str, Any], *, version: str = VERSION) -> None:
    """Refuse (ConfigError, exit 2) a gate config this command (`version`) cannot read whole: a field its
    table does not know, named with the version the server says knows it, or a newer `requires_cli`."""
    needed = config.get("requires_cli")
    if needed is not None and not (isinstance(needed, str) and _VERSION_RE.fullmatch(needed)):
        raise ConfigError(f"requires_cli: expected a version such as {VERSION}, got {one_line(repr(needed), 80)}")
    unknown = [where for path, where in fields_used(config) if path not in FIELD_VERSIONS]
    if unknown:
        knows = f"evalhub-gate {needed} or newer knows" if needed else "a newer evalhub-gate may know"
        raise ConfigError(
            f"{', '.join(one_line(where, 120) for where in unknown[:5])}: a gate config field evalhub-gate {version} "
            f"does not know; {knows} it: upgrade the evalhub package where CI runs"
        )
    if needed is not None and version_key(needed) > version_key(version):
        raise ConfigError(
            f"requires_cli: this gate config needs evalhub-gate {needed} or newer; this is {version}: upgrade the "
            "evalhub package where CI runs"
        )
