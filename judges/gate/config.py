"""The gate config (docs/gate.md): read it from a URL or a file and check it whole before
anything is judged."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from judges.engine import JudgeConfig, env_name_refusals, parse_env_allow
from judges.engine.providers import endpoint_env_problems, key_pairing_problem
from judges.gate.messages import ConfigError, one_line
from judges.gate.server import checked_url, http_request
from judges.gate.versions import check_versions
from labeling.importing.reading import json_error, parse_json

GATES_SCHEMA = "evalhub.gates/v1"
STAGES = ("observe", "warn", "gate")
GATE_ON = ("every_case", "pass_rate")
ENV_ALLOW_ENV = "EVALHUB_JUDGE_ENV_ALLOW"


@dataclass(frozen=True)
class GateRubric:
    slug: str
    stage: str
    fail_closed: bool
    judge: JudgeConfig
    prices: dict[str, dict[str, float]]
    calibration: dict[str, Any] | None
    # Set by the server when the evidence no longer holds (stale, a rule now broken, drift).
    recalibration_needed: bool = False
    recalibration_reasons: tuple[str, ...] = ()
    # At gate stage: fail on any failing case, or on the agent's corrected pass rate (judges.gate.rates).
    gate_on: str = "every_case"
    min_agent_pass_rate: float | None = None
    # The release tier (docs/gate.md, "Tiers"): its judge and evidence, None when the rubric has none.
    release_judge: JudgeConfig | None = None
    release_calibration: dict[str, Any] | None = None
    # The tier this rubric is judged in (`--tier`), and whether it fell back to the default judge for want of one.
    tier: str = "default"
    tier_fallback: bool = False


def load_gate_config(source: str, *, token: str | None) -> dict[str, Any]:
    """The gate config JSON from an http(s) URL (with the bearer token) or a file path."""
    if source.startswith(("http://", "https://")):
        checked_url(source, given_as="--config")
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        body = http_request(urllib.request.Request(source, headers=headers), f"reading the gate config from {source}")
        text = body.decode("utf-8", errors="replace")
    else:
        try:
            with open(source, encoding="utf-8") as fh:
                text = fh.read()
        except OSError as exc:
            raise ConfigError(f"reading the gate config {source}: {exc.strerror or exc}") from None
        except UnicodeDecodeError:
            raise ConfigError(f"reading the gate config {source}: not UTF-8 text") from None
    try:
        return parse_json(text)
    except ValueError as exc:
        line = f" (line {exc.lineno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise ConfigError(f"the gate config is not JSON{line}: {json_error(exc)}") from None


def _is_confusion(value: Any) -> bool:
    """{tp, fn, fp, tn}, each a whole number ≥ 0 (the evidence's case counts)."""
    return isinstance(value, dict) and all(
        not isinstance(value.get(name), bool) and isinstance(value.get(name), int) and value[name] >= 0
        for name in ("tp", "fn", "fp", "tn")
    )


def _prices(value: Any, where: str) -> dict[str, dict[str, float]]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}.prices: expected an object of model → price")
    out = {}
    for model, price in value.items():
        if not isinstance(price, dict):
            raise ConfigError(f"{where}.prices.{model}: expected {{input_per_mtok, output_per_mtok}}")
        numbers = {}
        for name in ("input_per_mtok", "output_per_mtok"):
            number = price.get(name)
            if isinstance(number, bool) or not isinstance(number, int | float) or number < 0:
                raise ConfigError(f"{where}.prices.{model}.{name}: expected a non-negative number")
            numbers[name] = float(number)
        out[model] = numbers
    return out


def parse_gate_config(data: Any) -> list[GateRubric]:
    """Check the gate config whole before anything is judged; a ConfigError names the field at fault.

    A field this command does not know is refused first (judges.gate.versions). Each judge goes through the
    engine's own validation, which also checks that its config_hash
    still matches its content: CI runs exactly the judge that was calibrated, or nothing.
    """
    if not isinstance(data, dict):
        raise ConfigError("the gate config: expected a JSON object")
    if data.get("schema") != GATES_SCHEMA:
        raise ConfigError(f"schema: expected {GATES_SCHEMA!r}, got {data.get('schema')!r}")
    check_versions(data)
    gate_project(data)
    rubrics = data.get("rubrics")
    if not isinstance(rubrics, list):
        raise ConfigError("rubrics: expected a list")
    out: list[GateRubric] = []
    seen: set[str] = set()
    for i, item in enumerate(rubrics):
        where = f"rubrics[{i}]"
        if not isinstance(item, dict):
            raise ConfigError(f"{where}: expected an object")
        slug = item.get("slug")
        if not isinstance(slug, str) or not slug:
            raise ConfigError(f"{where}.slug: expected a non-empty string")
        where = f"rubrics[{i}] ({slug})"
        if slug in seen:
            raise ConfigError(f"{where}: the rubric is listed twice")
        seen.add(slug)
        stage = item.get("stage")
        if stage not in STAGES:
            raise ConfigError(f"{where}.stage: expected one of {', '.join(STAGES)}, got {stage!r}")
        fail_closed = item.get("fail_closed", False)
        if not isinstance(fail_closed, bool):
            raise ConfigError(f"{where}.fail_closed: expected true or false")
        judge = _judge(item.get("judge"), f"{where}.judge", slug)
        calibration = _calibration(item.get("calibration"), f"{where}.calibration")
        release_judge = None
        if item.get("release_judge") is not None:
            release_judge = _judge(item["release_judge"], f"{where}.release_judge", slug)
        release_calibration = _calibration(item.get("release_calibration"), f"{where}.release_calibration")
        gate_on = item.get("gate_on", "every_case")
        if gate_on not in GATE_ON:
            raise ConfigError(
                f"{where}.gate_on: expected one of {', '.join(GATE_ON)}, got {one_line(repr(gate_on), 80)}"
            )
        minimum = item.get("min_agent_pass_rate")
        if minimum is not None and (isinstance(minimum, bool) or not isinstance(minimum, int | float)
                                    or not 0 <= minimum <= 1):
            raise ConfigError(f"{where}.min_agent_pass_rate: expected a fraction from 0 to 1 or null")
        if gate_on == "pass_rate" and minimum is None:
            raise ConfigError(f"{where}.min_agent_pass_rate: gate_on pass_rate needs the minimum rate")
        needed = item.get("recalibration_needed", False)
        if not isinstance(needed, bool):
            raise ConfigError(f"{where}.recalibration_needed: expected true or false")
        reasons = item.get("recalibration_reasons", [])
        if not (isinstance(reasons, list) and all(isinstance(r, str) for r in reasons)):
            raise ConfigError(f"{where}.recalibration_reasons: expected a list of strings")
        out.append(GateRubric(
            slug, stage, fail_closed, judge, _prices(item.get("prices"), where), calibration,
            recalibration_needed=needed, recalibration_reasons=tuple(reasons), gate_on=gate_on,
            min_agent_pass_rate=None if minimum is None else float(minimum),
            release_judge=release_judge, release_calibration=release_calibration,
        ))
    return out


def gate_project(data: dict[str, Any]) -> str | None:
    """The slug of the project the gate config is of (`project`, docs/gate.md), or None for a file exported before
    projects: `check --post` sends it back, so the server can refuse results meant for another project."""
    project = data.get("project")
    if project is not None and not (isinstance(project, str) and project.strip() and len(project) <= 100):
        raise ConfigError(f"project: expected the project's slug, got {one_line(repr(project), 80)}")
    return project


def _judge(spec: Any, where: str, slug: str) -> JudgeConfig:
    """A judge of the gate config through the engine's own validation, its config_hash checked."""
    if not isinstance(spec, dict) or not spec.get("config_hash"):
        raise ConfigError(f"{where}: expected the pinned judge config with its config_hash")
    try:
        judge = JudgeConfig.from_dict(spec)
    except ValueError as exc:
        raise ConfigError(f"{where}.{exc}") from None
    if judge.rubric != slug:
        raise ConfigError(f"{where}.rubric: the judge is for {judge.rubric!r}, not {slug!r}")
    return judge


def _calibration(calibration: Any, where: str) -> dict[str, Any] | None:
    if calibration is not None and not isinstance(calibration, dict):
        raise ConfigError(f"{where}: expected an object")
    for name in ("cases", "cases_single"):
        counts = (calibration or {}).get(name)
        if counts is not None and not _is_confusion(counts):
            raise ConfigError(f"{where}.{name}: expected {{tp, fn, fp, tn}}, whole numbers ≥ 0")
    return calibration


TIERS = ("default", "release")


def select_tier(rubrics: Sequence[GateRubric], tier: str) -> list[GateRubric]:
    """The rubrics as judged in `tier`: with `release`, each one's release judge and evidence, or, for a rubric
    with no release tier, its default judge, marked `tier_fallback` so the summary says so."""
    if tier == "default":
        return list(rubrics)
    return [
        replace(rubric, judge=rubric.release_judge, calibration=rubric.release_calibration, tier=tier)
        if rubric.release_judge is not None else replace(rubric, tier=tier, tier_fallback=True)
        for rubric in rubrics
    ]


def _judges(rubric: GateRubric) -> list[tuple[str, str | None, str | None, str]]:
    """(provider, base_url_env, api_key_env, model) of each model a rubric may call: embeddings, judges."""
    cfg = rubric.judge
    judges: list[tuple[str, str | None, str | None, str]] = []
    if cfg.semantic is not None:  # the embeddings endpoint of the semantic layer
        s = cfg.semantic
        judges.append((s.provider, s.base_url_env, s.api_key_env, s.model))
    if "behavioral" not in cfg.layers:
        return judges
    # JudgeConfig.from_dict requires a provider and a model with the behavioral layer.
    assert cfg.provider is not None and cfg.model is not None
    judges.append((cfg.provider, cfg.base_url_env, cfg.api_key_env, cfg.model))
    if cfg.secondary is not None:
        second = cfg.secondary
        judges.append((second.provider, second.base_url_env, second.api_key_env, second.model))
    for other in (cfg.fallback, cfg.second_opinion, cfg.adjudicator):
        if other is not None:
            judges.append((other.provider, other.base_url_env, other.api_key_env, other.model))
    return judges


def check_prices(rubrics: Sequence[GateRubric]) -> None:
    """Under a spend cap every model a judge may call needs its price, or the cap could not be kept."""
    unpriced = [
        f"{rubric.slug}: {model}"
        for rubric in rubrics
        for *_, model in _judges(rubric)
        if model not in rubric.prices
    ]
    if unpriced:
        raise ConfigError(
            "--max-cost-usd needs a price for every model the judges call; the gate config has none for "
            + "; ".join(unpriced)
        )


def select_rubrics(
    rubrics: Sequence[GateRubric], *, slugs: Sequence[str], stages: Sequence[str], contract_only: bool
) -> list[GateRubric]:
    """The rubrics a scoped check judges (--rubric, --stage, --layers contract), in the gate config's order.

    A slug the gate config does not have is a config error (a typo must not pass as "nothing to judge"),
    and so is a scope that selects no rubric. A gate config with no rubric and no scope selects none: a team
    that adds the check before promoting anything has nothing to gate yet (the caller says so, exit 0).
    """
    if not rubrics and not (slugs or stages or contract_only):
        return []
    known = {r.slug for r in rubrics}
    unknown = [slug for slug in dict.fromkeys(slugs) if slug not in known]
    if unknown:
        raise ConfigError(
            "--rubric: the gate config has no rubric " + ", ".join(one_line(s, 80) for s in unknown)
            + " (it lists " + (", ".join(one_line(s, 80) for s in sorted(known)) or "none") + ")"
        )
    chosen = [
        r for r in rubrics
        if (not slugs or r.slug in slugs) and (not stages or r.stage in stages)
        and (not contract_only or list(r.judge.layers) == ["contract"])
    ]
    if not chosen:
        scope = [f"--rubric {' '.join(slugs)}" if slugs else "", f"--stage {' '.join(stages)}" if stages else "",
                 "--layers contract" if contract_only else ""]
        raise ConfigError(f"the scope {one_line(' '.join(s for s in scope if s))} selects no rubric of the gate config")
    return chosen


def check_calibrated(rubrics: Sequence[GateRubric]) -> None:
    """--require-calibrated: a rubric marked recalibration needed is a config error."""
    marked = [r for r in rubrics if r.recalibration_needed]
    if marked:
        raise ConfigError(
            "--require-calibrated: recalibration needed for "
            + "; ".join(f"{r.slug} ({', '.join(r.recalibration_reasons) or 'no reason given'})" for r in marked)
        )


def allowed_env_names(allow_env: Sequence[str], env: Mapping[str, str]) -> tuple[str, ...]:
    """The names the pipeline allows a judge to read beyond the usual ones: --allow-env and $EVALHUB_JUDGE_ENV_ALLOW."""
    try:
        return parse_env_allow(",".join(allow_env)) + parse_env_allow(env.get(ENV_ALLOW_ENV, ""))
    except ValueError as exc:
        raise ConfigError(f"--allow-env / ${ENV_ALLOW_ENV}: {one_line(str(exc))}") from None


def check_env_names(rubrics: Sequence[GateRubric], allowed: Sequence[str]) -> None:
    """A judge reads only allowed variables (the engine decides): a gate config naming GITHUB_TOKEN as
    its key would otherwise send the pipeline's token to whatever endpoint the config names."""
    refusals = [
        f"rubric {one_line(rubric.slug)}: {message}"
        for rubric in rubrics
        for message in env_name_refusals(rubric.judge, extra_allowed=allowed)
    ]
    if refusals:
        raise ConfigError("a judge names environment variables it may not read: " + "; ".join(refusals))


def check_environment(rubrics: Sequence[GateRubric], env: Mapping[str, str]) -> None:
    """Every endpoint and key variable a judge names must be set (and usable) before anything is judged.

    Otherwise every judgment would come back not evaluated ("config error") and a gate would exit
    3 as if the provider were down; a missing secret is the pipeline's config error: exit 2. The error
    names each variable once, with the rubrics that need it, and never a value.
    """
    unpaired = list(dict.fromkeys(
        f"rubric {one_line(rubric.slug)}: {unpaired_why}"
        for rubric in rubrics
        for provider, base_url_env, api_key_env, _ in _judges(rubric)
        if (unpaired_why := key_pairing_problem(provider=provider, base_url_env=base_url_env, api_key_env=api_key_env,
                                           env=env))
    ))
    if unpaired:  # before any key is read: a config must not choose where the pipeline's key goes
        raise ConfigError("a judge would send a key to an endpoint it is not paired with: " + "; ".join(unpaired))
    needed_by: dict[tuple[str, str], list[str]] = {}
    for rubric in rubrics:
        for provider, base_url_env, api_key_env, _ in _judges(rubric):
            for problem in endpoint_env_problems(
                provider=provider, base_url_env=base_url_env, api_key_env=api_key_env, env=env
            ):
                slugs = needed_by.setdefault(problem, [])
                if rubric.slug not in slugs:
                    slugs.append(rubric.slug)
    if needed_by:
        raise ConfigError(
            "the judges need environment variables that are not set or not usable: "
            + "; ".join(f"{name} {problem} (rubric {', '.join(one_line(s) for s in slugs)})"
                        for (name, problem), slugs in needed_by.items())
        )
