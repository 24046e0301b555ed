"""Judge configs that reference a policy document version: the spec carries the text and its
sha256 (and the hash covers them), the editor offers the policies and marks a config on an older version
"behind", and a new policy version makes runs of configs on an older one stale — so a promoted rubric
needs recalibration, in the gate config too."""

import hashlib

import pytest
from django.urls import reverse

from judges.calibration.selectors import stale_reasons
from judges.configs import services as config_services
from judges.engine import JudgeConfig, config_hash
from judges.gate.config import parse_gate_config
from judges.promotion.gate_config import gate_config
from judges.promotion.services import rubric_promote
from labeling.policies.services import policy_write
from tests.conftest import TEST_PROJECT
from tests.judges.configs.test_views import form_data
from tests.judges.promotion.test_gate_config import behavioral_config
from tests.judges.promotion_factories import REASON, evidence_run

pytestmark = pytest.mark.django_db

V1, V2 = "Refunds within 30 days.", "Refunds within 14 days."


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.fixture
def returns_v1(project, lead):
    return policy_write(project=project, slug="returns", text=V1, by=lead)


def referencing_config(rubric, lead, version: int):
    spec = {**behavioral_config(rubric, lead).spec, "policy": "ignored: the document's text wins",
            "policy_ref": {"slug": "returns", "version": version}}
    return config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)


def test_the_saved_spec_carries_the_policy_text_and_its_sha(rubric, lead, returns_v1):
    config = referencing_config(rubric, lead, 1)
    assert (config.spec["policy"], config.spec["policy_sha256"]) == (V1, sha(V1))
    assert config.spec["policy_ref"] == {"slug": "returns", "version": 1}
    pasted = behavioral_config(rubric, lead, policy=V1)  # the same text pasted: another config (the ref is hashed)
    assert pasted.config_hash != config.config_hash


def test_configs_without_a_policy_keep_their_hash(rubric, lead):
    spec = behavioral_config(rubric, lead).spec
    without = {k: v for k, v in spec.items() if k not in ("policy_ref", "policy_sha256")}
    assert config_hash(without) == config_hash({**without, "policy_ref": None, "policy_sha256": None})
    assert config_hash(without) == config_hash(spec)  # the stored spec holds them at null


def test_the_engine_refuses_a_sha_that_is_not_the_texts(rubric, lead, returns_v1):
    spec = dict(referencing_config(rubric, lead, 1).spec)
    with pytest.raises(ValueError, match="policy_sha256"):
        JudgeConfig.from_dict({**spec, "policy": V2})
    with pytest.raises(ValueError, match="policy_sha256"):
        JudgeConfig.from_dict({**spec, "policy_ref": None})


def test_it_refuses_a_version_that_does_not_exist(rubric, lead, returns_v1):
    with pytest.raises(ValueError, match="policy_ref"):
        referencing_config(rubric, lead, 2)


def test_a_new_policy_version_makes_runs_on_an_older_one_stale(rubric, dataset, lead, reviewer, returns_v1):
    config = referencing_config(rubric, lead, 1)
    run = evidence_run(rubric, dataset, lead, reviewer, config=config)
    assert stale_reasons(run=run) == []

    policy_write(project=rubric.project, slug="returns", text=V2, by=lead)

    assert stale_reasons(run=run) == ["policy returns is at v2; this run's config uses v1"]


def test_the_gate_config_ships_the_sha_and_needs_recalibration_after_a_new_version(
    rubric, dataset, lead, reviewer, returns_v1,
):
    run = evidence_run(rubric, dataset, lead, reviewer, config=referencing_config(rubric, lead, 1))
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)
    [entry] = gate_config(project=rubric.project)["rubrics"]
    assert (entry["judge"]["policy"], entry["judge"]["policy_sha256"]) == (V1, sha(V1))
    assert entry["recalibration_needed"] is False
    # CI reads and verifies it
    assert parse_gate_config(gate_config(project=rubric.project))[0].judge.policy_sha256 == sha(V1)

    policy_write(project=rubric.project, slug="returns", text=V2, by=lead)

    [entry] = gate_config(project=rubric.project)["rubrics"]
    assert entry["recalibration_needed"] is True
    assert entry["recalibration_reasons"] == ["policy returns is at v2; this run's config uses v1"]
    assert entry["judge"]["policy_sha256"] == sha(V1)  # the judge that was calibrated, still


def test_the_editor_offers_the_policies_and_saves_a_reference(lead_client, rubric, returns_v1):
    url = reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug])
    assert "returns v1" in lead_client.get(url).text

    response = lead_client.post(url, form_data(policy_ref="returns@1"))

    assert response.status_code == 302
    config = rubric.judge_configs.get()
    assert (config.spec["policy_ref"], config.spec["policy"]) == ({"slug": "returns", "version": 1}, V1)
    assert lead_client.post(url, form_data(policy_ref="returns@7")).status_code == 200  # not a choice: refused


def test_a_config_on_an_older_version_is_marked_behind(lead_client, rubric, lead, returns_v1):
    config = referencing_config(rubric, lead, 1)
    detail = reverse("judges:config_detail", args=[TEST_PROJECT, config.pk])
    assert "policy-behind" not in lead_client.get(detail).text

    policy_write(project=rubric.project, slug="returns", text=V2, by=lead)

    assert "behind: v2 is the newest" in lead_client.get(detail).text
    assert "policy behind" in lead_client.get(reverse("judges:config_list", args=[TEST_PROJECT, rubric.slug])).text


def test_a_config_refers_to_its_own_projects_policy_only(rubric, lead, other_project, other_lead):
    policy_write(project=other_project, slug="returns", text=V2, by=other_lead)  # the same slug, another project
    with pytest.raises(ValueError, match="policy_ref: there is no policy 'returns' v1"):
        referencing_config(rubric, lead, 1)
    policy_write(project=rubric.project, slug="returns", text=V1, by=lead)
    config = referencing_config(rubric, lead, 1)
    assert config.spec["policy"] == V1  # the project's own text, not the other's
    policy_write(project=other_project, slug="returns", text="A third text.", by=other_lead)  # their v2
    assert not [r for r in stale_reasons(run=evidence_run(rubric, rubric.project.datasets.create(slug="d", name="D"),
                                                          lead, lead, config=config)) if "policy" in r]


def test_the_editor_offers_only_the_projects_policies(lead_client, rubric, lead, other_project, other_lead):
    policy_write(project=other_project, slug="their-secret-policy", text=V2, by=other_lead)
    policy_write(project=rubric.project, slug="returns", text=V1, by=lead)
    url = reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug])
    page = lead_client.get(url).text
    assert "returns v1" in page and "their-secret-policy" not in page
    assert lead_client.post(url, form_data(policy_ref="their-secret-policy@1")).status_code == 200  # not a choice
    assert not rubric.judge_configs.exists()
