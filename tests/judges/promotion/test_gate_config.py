"""The gate config: GET /api/gates (gates:read) and `manage.py export_gates`, exactly the JSON of docs/gate.md."""

import io
import json
from decimal import Decimal

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.urls import reverse

from evalhub.models import ApiToken, Scope
from judges.configs import services as config_services
from judges.engine import JudgeConfig
from judges.gate.config import ConfigError, check_calibrated, parse_gate_config
from judges.models import ModelPrice
from judges.promotion.gate_config import gate_config
from judges.promotion.services import rubric_demote, rubric_promote, rubric_thresholds_change
from labeling.models import Dataset, Rubric
from tests.conftest import TEST_PROJECT, make_user, store_project
from tests.judges.configs.test_views import form_data as editor_form
from tests.judges.promotion_factories import REASON, evidence_run

pytestmark = pytest.mark.django_db

PRIMARY, SECONDARY, UNPRICED = "gpt-4o-mini-2024-07-18", "claude-haiku-4-5-20251001", "mistral-small-2409"


def behavioral_config(rubric, lead, *, policy="Returns: 30 days.", secondary_model=SECONDARY):
    spec = {
        "layers": ["behavioral"], "provider": "openai", "model": PRIMARY, "policy": policy,
        "base_url_env": "EVALHUB_JUDGE_OPENAI_URL",
        "api_key_env": "EVALHUB_JUDGE_API_KEY", "params": {"temperature": 0},
        "secondary": {"role": "fallback", "provider": "anthropic", "model": secondary_model,
                      "base_url_env": "EVALHUB_JUDGE_ANTHROPIC_URL", "api_key_env": "EVALHUB_JUDGE_API_KEY"},
    }
    return config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)


@pytest.fixture
def prices(lead):
    ModelPrice.objects.create(model=PRIMARY, input_per_mtok=Decimal("0.15"), output_per_mtok=Decimal("0.6"),
                              updated_by=lead)
    ModelPrice.objects.create(model=SECONDARY, input_per_mtok=Decimal("1"), output_per_mtok=Decimal("5"),
                              updated_by=lead)
    ModelPrice.objects.create(model="unused-model", input_per_mtok=Decimal("9"), output_per_mtok=Decimal("9"),
                              updated_by=lead)


@pytest.fixture
def gated(rubric, dataset, lead, reviewer, prices):
    """`rubric` promoted to gate on a behavioral judge's run, fail_closed on."""
    config = behavioral_config(rubric, lead)
    run = evidence_run(rubric, dataset, lead, reviewer, config=config)
    for stage in ("observe", "warn", "gate"):
        rubric_promote(rubric=rubric, to_stage=stage, run=run, reason=REASON, by=lead)
    rubric_thresholds_change(rubric=rubric, reason="A gate must not pass unjudged cases.", by=lead, fail_closed=True)
    return run


def test_it_ships_each_promoted_rubric_with_its_pinned_judge(rubric, lead, gated):
    Rubric.objects.create(project=store_project(), slug="draft-one", name="Draft?", criteria="Not yet.")
    config = gate_config(project=store_project())
    assert config["schema"] == "evalhub.gates/v1" and config["generated_at"]
    [entry] = config["rubrics"]  # the draft rubric is left out
    assert list(entry) == ["slug", "criteria", "stage", "fail_closed", "judge", "prices", "calibration",
                           "gate_on", "min_agent_pass_rate", "release_judge", "release_calibration",
                           "recalibration_needed", "recalibration_reasons",
                           "promoted_by", "promoted_at"]
    assert (entry["recalibration_needed"], entry["recalibration_reasons"]) == (False, [])
    assert (entry["slug"], entry["criteria"], entry["stage"], entry["fail_closed"]) == (
        rubric.slug, rubric.criteria, "gate", True,
    )
    assert entry["judge"]["config_hash"] == gated.config.config_hash
    assert JudgeConfig.from_dict(entry["judge"]).config_hash == gated.config.config_hash  # the hash verifies
    assert entry["prices"] == {PRIMARY: {"input_per_mtok": 0.15, "output_per_mtok": 0.6},
                               SECONDARY: {"input_per_mtok": 1.0, "output_per_mtok": 5.0}}
    calibration = entry["calibration"]
    assert list(calibration) == ["run", "n", "repeats", "agreement", "agreement_ci95", "kappa", "false_pass",
                                 "false_fail", "true_pass_rate", "true_fail_rate", "flip_rate", "coverage", "cases",
                                 "cases_single"]
    assert (calibration["run"], calibration["n"], calibration["repeats"]) == (gated.pk, 40, 2)
    assert calibration["agreement"] == pytest.approx(0.95) and calibration["false_pass"] == 2
    assert entry["promoted_by"] == lead.username
    assert parse_gate_config(config)[0].judge.config_hash == gated.config.config_hash  # CI accepts it


def test_it_keeps_the_calibrated_judge_when_a_newer_config_exists(rubric, lead, gated):
    newer = behavioral_config(rubric, lead, policy="Returns: 60 days.")
    assert newer.version == 2
    [entry] = gate_config(project=store_project())["rubrics"]
    assert entry["judge"]["config_hash"] == gated.config.config_hash != newer.config_hash
    assert entry["judge"]["policy"] == "Returns: 30 days."


def test_a_candidate_saved_in_the_editor_changes_nothing_ci_reads(client, lead_client, rubric, lead, gated):
    headers = {"Authorization": f"Bearer {token(lead, Scope.GATES_READ)}"}
    before = client.get(reverse("judges:api_gates"), headers=headers).json()
    saved = lead_client.post(
        reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug]), editor_form(policy="Returns: 60 days."),
        follow=True,
    ).content.decode()
    assert "v2 is a candidate: CI keeps judging with v1 until a run of v2 is promoted or renews the evidence" in saved
    assert f"the evidence of run {gated.pk} still holds" in saved

    after = client.get(reverse("judges:api_gates"), headers=headers).json()
    assert after["rubrics"] == before["rubrics"]  # same judge, same evidence, no recalibration flag
    check_calibrated(parse_gate_config(after))  # --require-calibrated: no exit 2 for a candidate
    page = lead_client.get(reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])).content.decode()
    assert "A candidate v2 exists: CI keeps judging with v1" in page

    # A criteria edit still makes the evidence stale, and --require-calibrated refuses it.
    rubric.criteria = "The answer also names the refund's deadline."
    rubric.save(update_fields=["criteria"])
    edited = client.get(reverse("judges:api_gates"), headers=headers).json()
    [entry] = edited["rubrics"]
    assert entry["recalibration_reasons"] == ["the rubric's criteria were edited after this run's config was saved"]
    with pytest.raises(ConfigError, match="recalibration needed for return-policy"):
        check_calibrated(parse_gate_config(edited))


def test_it_leaves_out_a_price_it_does_not_know(rubric, dataset, lead, reviewer, prices):
    config = behavioral_config(rubric, lead, secondary_model=UNPRICED)
    run = evidence_run(rubric, dataset, lead, reviewer, config=config)
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)
    [entry] = gate_config(project=store_project())["rubrics"]
    assert list(entry["prices"]) == [PRIMARY]


def test_a_demotion_to_draft_takes_the_rubric_out(rubric, lead, gated):
    rubric_demote(rubric=rubric, to_stage="warn", reason="Flaky in CI.", by=lead)
    assert [e["stage"] for e in gate_config(project=store_project())["rubrics"]] == ["warn"]
    rubric_demote(rubric=rubric, to_stage="draft", reason="Rewrite.", by=lead)
    assert gate_config(project=store_project())["rubrics"] == []


@pytest.mark.parametrize("n", [1, 4])
def test_its_query_count_does_not_grow_with_rubrics(project, lead, reviewer, prices, n, django_assert_num_queries):
    for i in range(n):
        rubric = Rubric.objects.create(project=project, slug=f"r{i}", name=f"R{i}?", criteria="c")
        data = Dataset.objects.create(project=project, slug=f"d{i}", name=f"D{i}")
        run = evidence_run(rubric, data, lead, reviewer, config=behavioral_config(rubric, lead), prefix=f"r{i}")
        rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)
    # The evidence (rubric, run, config, who); the release tiers' entries; whether it holds: staleness, judgments
    # counted per case, human verdicts (one UNION), the not-evaluated judgments, the reviewers' labels on cases
    # labeled twice, the newest drift check of each evidence; the prices.
    with django_assert_num_queries(9):
        assert len(gate_config(project=project)["rubrics"]) == n


# ---- the endpoint and the command ----------------------------------------------------------------------


def token(lead, *scopes: str) -> str:
    return ApiToken.issue(project=store_project(), name="ci", scopes=list(scopes), created_by=lead)[1]


def test_the_api_serves_it_with_a_gates_read_token(client, lead, gated):
    headers = {"Authorization": f"Bearer {token(lead, Scope.GATES_READ)}"}
    response = client.get(reverse("judges:api_gates"), headers=headers)
    assert response.status_code == 200
    body = response.json()
    assert body["rubrics"] == json.loads(json.dumps(gate_config(project=store_project())["rubrics"]))


@pytest.mark.parametrize(
    ("scopes", "status"), [(None, 401), ([Scope.RESULTS_WRITE], 403), ([Scope.RUNS_READ], 403)]
)
def test_the_api_refuses_without_the_scope(client, lead, gated, scopes, status):
    headers = {"Authorization": f"Bearer {token(lead, *scopes)}"} if scopes else {}
    response = client.get(reverse("judges:api_gates"), headers=headers)
    assert response.status_code == status
    assert "rubrics" not in response.json()


def test_a_logged_in_session_is_no_token(lead_client, gated):
    assert lead_client.get(reverse("judges:api_gates")).status_code == 401


def test_the_api_answers_get_only(client, lead):
    headers = {"Authorization": f"Bearer {token(lead, Scope.GATES_READ)}"}
    response = client.post(reverse("judges:api_gates"), headers=headers)
    assert response.status_code == 405


def test_export_gates_writes_the_same_json(tmp_path, gated):
    out = io.StringIO()
    call_command("export_gates", stdout=out)
    printed = json.loads(out.getvalue())
    call_command("export_gates", "--output", str(tmp_path / "gates.json"), stderr=io.StringIO())
    written = json.loads((tmp_path / "gates.json").read_text())
    expected = json.loads(json.dumps(gate_config(project=store_project())["rubrics"]))
    assert printed["rubrics"] == written["rubrics"] == expected
    assert written["schema"] == "evalhub.gates/v1"


# ---- projects: a gate config is one project's ------------------------------------------------------------------


@pytest.fixture
def theirs(other_project, other_lead, prices):
    """Another project's rubric of the same slug, gated on its own evidence, with criteria of its own."""
    rubric = Rubric.objects.create(project=other_project, slug="return-policy", name="Theirs?",
                                   criteria="Their secret criteria.")
    data = Dataset.objects.create(project=other_project, slug="their-support", name="Theirs")
    reviewer = make_user("theo", project=other_project)
    run = evidence_run(rubric, data, other_lead, reviewer, config=behavioral_config(rubric, other_lead),
                       prefix="theirs", wrong=6)
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason="Theirs.", by=other_lead)
    return run


def test_it_is_the_projects_own_and_says_which(project, rubric, gated, theirs):
    config = gate_config(project=project)
    assert config["project"] == "store" and list(config)[:2] == ["schema", "project"]
    [entry] = config["rubrics"]
    assert entry["criteria"] == rubric.criteria and entry["calibration"]["run"] == gated.pk
    assert config["requires_cli"] == "0.6.0"  # `project` is 0.6.0's: an older command says to upgrade
    [their_entry] = gate_config(project=theirs.dataset.project)["rubrics"]
    assert their_entry["calibration"]["run"] == theirs.pk and their_entry["criteria"] == "Their secret criteria."


def test_a_gates_read_token_of_another_project_never_sees_this_ones_rubrics(client, rubric, gated, theirs,
                                                                             other_project, other_lead):
    raw = ApiToken.issue(project=other_project, name="their-ci", scopes=[Scope.GATES_READ],
                         created_by=other_lead)[1]
    body = client.get(reverse("judges:api_gates"), headers={"Authorization": f"Bearer {raw}"}).json()
    assert body["project"] == "shopnest"
    [entry] = body["rubrics"]
    # The same slug, but their rubric: their criteria, their evidence, their judge; nothing of the store project.
    assert entry["criteria"] == "Their secret criteria." and entry["calibration"]["run"] == theirs.pk
    assert entry["judge"]["config_hash"] == theirs.config.config_hash != gated.config.config_hash
    assert rubric.criteria not in json.dumps(body) and str(gated.pk) != str(entry["calibration"]["run"])


def test_the_pass_rate_correction_reads_the_projects_own_evidence(project, gated, theirs):
    # Both projects' evidence of "return-policy" ship case counts; each gate config carries its own project's.
    ours = gate_config(project=project)["rubrics"][0]["calibration"]["cases"]
    their_counts = gate_config(project=theirs.dataset.project)["rubrics"][0]["calibration"]["cases"]
    assert ours == {"tp": 19, "fn": 1, "fp": 1, "tn": 19}  # 40 cases, 2 wrong: the store project's evidence
    assert their_counts == {"tp": 17, "fn": 3, "fp": 3, "tn": 17}  # 6 wrong: shopnest's


def test_export_gates_names_the_projects_when_there_is_more_than_one(tmp_path, gated, theirs):
    with pytest.raises(CommandError, match="more than one project: name one with --project SLUG. Projects: "
                                           "shopnest, store."):
        call_command("export_gates", stdout=io.StringIO())
    with pytest.raises(CommandError, match="No project 'nope'. Projects: shopnest, store."):
        call_command("export_gates", "--project", "nope", stdout=io.StringIO())
    out = io.StringIO()
    call_command("export_gates", "--project", "shopnest", stdout=out)
    printed = json.loads(out.getvalue())
    assert printed["project"] == "shopnest" and [e["calibration"]["run"] for e in printed["rubrics"]] == [theirs.pk]
