"""Judge tiers (docs/promotion.md, "Tiers"): a config version's tier is set when it is saved and kept by its edits; a
rubric above draft may promote a release-tier config on its own evidence, under the same rules with "newest"
counted within the tier; the gate config ships it as `release_judge` and `release_calibration`; a release demotion
withdraws it and a demotion to draft clears both tiers. Every step is audited with its tier."""

import pytest
from django.urls import reverse

from judges.configs import services as config_services
from judges.configs.selectors import newest_config
from judges.drift.selectors import ci_events
from judges.models import JudgeConfig, RubricEvent, Tier
from judges.promotion.gate_config import gate_config
from judges.promotion.selectors import promotion_rows, release_tier
from judges.promotion.services import PromotionError, rubric_demote, rubric_promote, rubric_renew
from tests.conftest import TEST_PROJECT, store_project
from tests.judges.configs.test_views import form_data as editor_form
from tests.judges.helpers import behavioral_spec
from tests.judges.promotion_factories import REASON, evidence_run

pytestmark = pytest.mark.django_db

STRONG = "gpt-4.1-2025-04-14"


def release_config(rubric, lead, **extra) -> JudgeConfig:
    return config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(model=STRONG, **extra), by=lead,
                                             tier=Tier.RELEASE)


@pytest.fixture
def observed(rubric, dataset, lead, reviewer):
    """The rubric at observe on a default-tier run's evidence."""
    run = evidence_run(rubric, dataset, lead, reviewer)
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)
    return run


def test_a_release_tier_is_promoted_on_its_own_evidence_with_newest_counted_in_its_tier(
    rubric, other_dataset, lead, reviewer, observed
):
    release = release_config(rubric, lead)
    assert (release.tier, release.version) == ("release", 2)
    assert release.config_hash == config_services.judge_config_save(
        rubric=rubric, spec=behavioral_spec(model=STRONG), by=lead).config_hash  # the tier is not hashed
    run = evidence_run(rubric, other_dataset, lead, reviewer, config=release, prefix="rel")

    with pytest.raises(PromotionError, match="a config of the default tier"):  # the default judge's run
        rubric_promote(rubric=rubric, to_stage="observe", run=observed, reason=REASON, by=lead, tier=Tier.RELEASE)
    with pytest.raises(PromotionError, match="a config of the release tier"):
        rubric_renew(rubric=rubric, run=run, reason=REASON, by=lead)
    with pytest.raises(PromotionError, match="no stage of its own"):
        rubric_promote(rubric=rubric, to_stage="warn", run=run, reason=REASON, by=lead, tier=Tier.RELEASE)
    with pytest.raises(PromotionError, match="no release tier to renew"):
        rubric_renew(rubric=rubric, run=run, reason=REASON, by=lead, tier=Tier.RELEASE)

    event = rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead, tier=Tier.RELEASE)
    rubric.refresh_from_db()
    assert (event.tier, event.kind, event.from_stage, event.to_stage, rubric.stage) == (
        "release", "promote", "observe", "observe", "observe")
    # The default tier's CI config is unchanged; the gate config ships both.
    assert ci_events(rubric_ids=[rubric.pk]).get().run == observed
    [entry] = gate_config(project=store_project())["rubrics"]
    assert entry["judge"]["config_hash"] == observed.config.config_hash
    assert entry["release_judge"]["config_hash"] == release.config_hash and entry["release_judge"]["model"] == STRONG
    assert entry["release_calibration"]["run"] == run.pk and entry["release_calibration"]["n"] == 40
    # `project` (0.6.0) is in every gate config: the highest version its fields need
    assert entry["calibration"]["run"] == observed.pk
    assert gate_config(project=store_project())["requires_cli"] == "0.6.0"

    # "Newest" counts within a tier: a new default version leaves the release evidence the newest of its tier.
    newer_default = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(policy="v3"), by=lead)
    assert newest_config(rubric=rubric) == newer_default and newest_config(rubric=rubric, tier="release") == release
    tier = release_tier(rubric=rubric)
    assert tier.evidence == event and tier.recalibration == []
    assert next(r for r in tier.rules if r.key == "newest_config").met
    [row] = promotion_rows(rubrics=[rubric])
    assert row.candidate == newer_default.version  # the default tier's candidate
    # A newer release version is the release tier's candidate, not the default tier's.
    newer_release = release_config(rubric, lead, policy="stricter")
    assert not next(r for r in release_tier(rubric=rubric).rules if r.key == "newest_config").met
    assert newest_config(rubric=rubric) == newer_default and newer_release.tier == "release"

    # Withdrawn: --tier release falls back to the default judge; a demotion to draft clears both tiers.
    withdrawn = rubric_demote(rubric=rubric, reason="Too slow for releases.", by=lead, tier=Tier.RELEASE)
    assert (withdrawn.kind, withdrawn.tier, withdrawn.to_stage) == ("demote", "release", "observe")
    assert gate_config(project=store_project())["rubrics"][0]["release_judge"] is None
    with pytest.raises(PromotionError, match="no release tier to withdraw"):
        rubric_demote(rubric=rubric, reason="Again.", by=lead, tier=Tier.RELEASE)
    with pytest.raises(PromotionError, match="newest config"):  # its v4 is the release tier's newest now
        rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead, tier=Tier.RELEASE)
    newer_run = evidence_run(rubric, other_dataset, lead, reviewer, config=newer_release, prefix="rel2")
    rubric_promote(rubric=rubric, to_stage="observe", run=newer_run, reason=REASON, by=lead, tier=Tier.RELEASE)
    rubric_demote(rubric=rubric, to_stage="draft", reason="Start over.", by=lead)
    assert not ci_events(rubric_ids=[rubric.pk], tier=Tier.RELEASE).exists()
    with pytest.raises(PromotionError, match="is a draft"):
        rubric_promote(rubric=rubric, to_stage="draft", run=run, reason=REASON, by=lead, tier=Tier.RELEASE)


def test_the_editor_sets_a_tier_and_its_edits_keep_it(lead_client, rubric, lead):
    config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    url = reverse("judges:config_create", args=[TEST_PROJECT, rubric.slug])
    # A release tier starts from the default tier's newest version, in the release tier.
    page = lead_client.get(url, {"tier": "release"})
    assert page.context["form"]["tier"].value() == "release"
    response = lead_client.post(f"{url}?tier=release", editor_form(tier="release", model=STRONG))
    assert response.status_code == 302
    release = newest_config(rubric=rubric, tier="release")
    assert (release.version, release.spec["model"]) == (2, STRONG)
    # An edit of the release version (and the release tier's newest, the default start) stays in its tier.
    assert lead_client.get(url, {"from": release.pk}).context["form"]["tier"].value() == "release"
    assert lead_client.get(url, {"tier": "release"}).context["base"] == release
    assert lead_client.get(url).context["form"]["tier"].value() == "default"
    detail = lead_client.get(reverse("judges:config_detail", args=[TEST_PROJECT, release.pk])).content.decode()
    assert 'data-testid="config-tier">release' in detail


def test_the_promotion_page_promotes_renews_and_withdraws_the_release_tier_audited(
    lead_client, rubric, other_dataset, lead, reviewer, observed
):
    page_url = reverse("judges:promotion_rubric", args=[TEST_PROJECT, rubric.slug])
    url = reverse("judges:promotion_release", args=[TEST_PROJECT, rubric.slug])
    assert 'data-testid="release-none"' in lead_client.get(page_url).content.decode()
    release = release_config(rubric, lead)
    run = evidence_run(rubric, other_dataset, lead, reviewer, config=release, prefix="rel")
    page = lead_client.get(page_url)
    assert page.context["release_form"]["run"].value() == run.pk  # the newest run that can be its evidence

    response = lead_client.post(url, {"action": "promote", "release-run": run.pk, "release-reason": ""})
    assert response.status_code == 400 and not RubricEvent.objects.filter(tier="release").exists()
    response = lead_client.post(url, {"action": "promote", "release-run": run.pk,
                                      "release-reason": "A stronger judge before releases."})
    assert response.status_code == 302
    page = lead_client.get(page_url).content.decode()
    assert 'data-testid="release-evidence"' in page and f"run {run.pk}" in page
    # Again on the same run: a renewal of the tier.
    assert lead_client.post(url, {"action": "promote", "release-run": run.pk, "release-reason": "Renewed."}
                            ).status_code == 302
    assert lead_client.post(url, {"action": "withdraw", "withdraw-reason": "Not needed."}).status_code == 302
    assert list(RubricEvent.objects.filter(tier="release").order_by("pk").values_list("kind", flat=True)) == [
        "promote", "renew", "demote"]
    log = lead_client.get(reverse("judges:audit_log", args=[TEST_PROJECT]), {"tier": "release"})
    assert len(log.context["page"].object_list) == 3 and 'data-testid="tier">release tier' in log.content.decode()
    listed = lead_client.get(reverse("judges:audit_log", args=[TEST_PROJECT]), {"tier": "default"})
    assert len(listed.context["page"].object_list) == 1
    lead_client.force_login(reviewer)
    assert lead_client.post(url, {"action": "promote", "release-run": run.pk, "release-reason": "x"}
                            ).status_code == 403
