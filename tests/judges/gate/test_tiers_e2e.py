"""Tiers end to end (docs/gate.md, "Tiers"): a rubric promotes a stronger judge as its release tier on its own
evidence, the gate config is exported (`manage.py export_gates`), and the installed `evalhub-gate check --tier
release` judges with that judge through the real SDK against the stand-in (in this process: the installed
command's own process is tests/judges/gate/test_pipeline_e2e.py's); without `--tier` it
judges with the default one; once the release tier is withdrawn, `--tier release` uses the default judge and says
so."""

import json

import pytest
from django.core.management import call_command

from judges.configs import services as config_services
from judges.gate.cli import main as evalhub_gate
from judges.models import Run, Tier
from judges.promotion.services import rubric_demote, rubric_promote
from judges.runs import services as run_services
from judges.runs.worker import run_work_here
from tests.judges.drift.test_drift import add_cases
from tests.judges.helpers import MODEL, behavioral_spec

pytestmark = pytest.mark.django_db

STRONG = "gpt-4.1-2025-04-14"
OUTPUTS = [{"id": f"o{i}", "question": f"Where is order {i}?", "answer": "Your order ships today."} for i in range(3)]


def evidence(config, dataset, lead) -> Run:
    run = run_services.run_start(config=config, dataset=dataset, repeats=2, concurrency=4, spend_cap_usd=None,
                                 by=lead)
    run_work_here(run_id=run.pk)
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED
    return run


def check(tmp_path, fake_provider, capsys, *extra: str) -> tuple[str, dict]:
    """Export the gate config, run the check on OUTPUTS; (its stdout, the calls it made by model)."""
    call_command("export_gates", output=str(tmp_path / "gates.json"))
    before = fake_provider.stats()["by_model"]
    capsys.readouterr()
    code = evalhub_gate(["check", "--config", str(tmp_path / "gates.json"), "--outputs",
                         str(tmp_path / "outputs.jsonl"), "--no-cache", *extra])
    out = capsys.readouterr()
    assert code == 0, out.out + out.err
    after = fake_provider.stats()["by_model"]
    return out.out, {model: after[model] - before.get(model, 0) for model in after
                     if after[model] != before.get(model, 0)}


def test_check_tier_release_judges_with_the_promoted_release_judge(
    tmp_path, dataset, rubric, lead, reviewer, fake_provider, capsys
):
    fake_provider.control(rule={"kind": "answer_contains", "text": "ships"})
    # 30 labeled cases, the judge right on 28: evidence that meets every rule, for both tiers.
    add_cases(dataset, rubric, reviewer, [
        (f"c{i:02}", "Your order ships today." if i % 2 == 0 else "It is lost.",
         ("pass" if i % 2 == 0 else "fail") if i > 1 else ("fail" if i == 0 else "pass"))
        for i in range(30)
    ])
    default = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    rubric_promote(rubric=rubric, to_stage="observe", run=evidence(default, dataset, lead), reason="Cheap judge.",
                   by=lead)
    strong = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(model=STRONG), by=lead,
                                               tier=Tier.RELEASE)
    release_run = evidence(strong, dataset, lead)
    rubric_promote(rubric=rubric, to_stage="observe", run=release_run, reason="A stronger judge before releases.",
                   by=lead, tier=Tier.RELEASE)
    (tmp_path / "outputs.jsonl").write_text("".join(json.dumps(row) + "\n" for row in OUTPUTS))

    out, calls = check(tmp_path, fake_provider, capsys, "--tier", "release", "--json",
                       str(tmp_path / "release.json"))
    assert calls == {STRONG: len(OUTPUTS)}  # the release judge only, through the stand-in
    assert f"rubric {rubric.slug} judged with its release judge (config_hash {strong.config_hash[:12]})" in out
    [result] = json.loads((tmp_path / "release.json").read_text())["rubrics"]
    assert (result["passed"], result["config_hash"]) == (len(OUTPUTS), strong.config_hash)

    out, calls = check(tmp_path, fake_provider, capsys)  # pull requests: the default judge
    assert calls == {MODEL: len(OUTPUTS)} and "--tier" not in out

    rubric_demote(rubric=rubric, reason="Withdrawn.", by=lead, tier=Tier.RELEASE)
    out, calls = check(tmp_path, fake_provider, capsys, "--tier", "release")
    assert calls == {MODEL: len(OUTPUTS)}
    assert f"rubric {rubric.slug} has no release tier: judged with its default judge" in out
