"""The demo's judge run: a contract-only config and a finished run of it, without any provider key."""

import pytest
from django.urls import reverse

from evalhub.demo.judges import DEMO_CHECKS, DEMO_NOTE, DEMO_REPEATS, SEMANTIC_DEMO_NOTE, create_demo_run
from evalhub.models import Project
from judges.models import JudgeConfig, Judgment, Run
from labeling.models import Case
from tests.judges.helpers import make_cases


def test_it_makes_a_finished_contract_only_run_through_the_real_machinery(dataset, rubric, lead, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    make_cases(dataset, 7)

    run = create_demo_run(rubric=rubric, dataset=dataset, by=lead)

    assert run.status == Run.Status.FINISHED and run.finished_at is not None
    assert run.config.spec["layers"] == ["contract"] and run.config.spec["contract_checks"] == DEMO_CHECKS
    assert run.config.spec["provider"] is None
    assert Judgment.objects.filter(run=run).count() == run.total == run.done == 7 * DEMO_REPEATS
    assert run.provider_calls == 0
    # Cases c000, c003, c006 have an empty answer: answer_present fails them.
    failed = set(run.judgments.filter(outcome="fail").values_list("case__external_id", flat=True))
    assert failed == {"c000", "c003", "c006"}
    assert all(len(j.checks) == len(DEMO_CHECKS) for j in run.judgments.all())


def test_it_makes_the_demo_run_once(dataset, rubric, lead):
    make_cases(dataset, 3)
    first = create_demo_run(rubric=rubric, dataset=dataset, by=lead)
    second = create_demo_run(rubric=rubric, dataset=dataset, by=lead)
    assert first.pk == second.pk
    assert (Run.objects.count(), JudgeConfig.objects.count()) == (1, 1)


@pytest.mark.usefixtures("demo_loaded_twice")
@pytest.mark.django_db
class TestLoadDemo:
    """load_demo run twice (tests/evalhub/demo/conftest.py): each part of the demo exists once."""

    def test_load_demo_creates_the_demo_run_once(self):
        run = Run.objects.select_related("config__rubric").get(config__note=DEMO_NOTE, source=Run.Source.WORKER)
        cases = Case.objects.filter(dataset=run.dataset).count()
        assert run.config.rubric == Project.objects.get(slug="store-support").rubrics.get(slug="tool-use")
        assert run.status == Run.Status.FINISHED
        assert run.judgments.count() == cases * DEMO_REPEATS
        # The demo's tool-use cases are not all right: the contract fails some of them.
        assert 0 < run.judgments.filter(outcome="fail").count() < run.total

    def test_load_demo_makes_a_semantic_run_through_the_stand_in_once(self):
        run = Run.objects.select_related("config__rubric").get(config__note=SEMANTIC_DEMO_NOTE)
        assert run.config.rubric.slug == "return-policy" and run.status == Run.Status.FINISHED
        assert run.config.spec["layers"] == ["semantic", "behavioral"]
        judgments = run.judgments.all()
        assert judgments.count() == run.total == run.done and run.not_evaluated == 0
        # Every demo case has a golden answer: each judgment has a similarity, and the layers share the work.
        assert not judgments.filter(similarity__isnull=True).exists()
        assert set(judgments.values_list("layer", flat=True)) == {"semantic", "behavioral"}
        assert "scripted stand-in" in judgments.filter(layer="behavioral").first().reason

    def test_load_demo_puts_a_rubric_at_observe_with_no_evidence_once(self):
        from evalhub.demo.judges import OBSERVED_NOTE, OBSERVED_SLUG
        from judges.models import CiResult, RubricEvent
        from judges.promotion.gate_config import gate_config

        store = Project.objects.get(slug="store-support")
        rubric = store.rubrics.get(slug=OBSERVED_SLUG)
        [event] = RubricEvent.objects.filter(rubric=rubric)
        assert (rubric.stage, event.run, event.config.note) == ("observe", None, OBSERVED_NOTE)
        assert not Run.objects.filter(config__rubric=rubric).exists()
        [shipped] = [r for r in gate_config(project=store)["rubrics"] if r["slug"] == OBSERVED_SLUG]
        assert shipped["calibration"] is None and shipped["judge"]["config_hash"] == event.config.config_hash
        # The demo's CI check recorded its verdicts at observe.
        assert CiResult.objects.get(rubric=rubric).outcome == "recorded"

    def test_load_demo_posts_ci_traffic_back_into_a_reviewers_queue_once(self, client):
        run = Run.objects.select_related("config__rubric", "dataset__project").get(source=Run.Source.CI)
        assert (run.dataset.project.slug, run.dataset.slug, run.ref, run.config.rubric.slug) == (
            "store-support", "ci-traffic", "demo-nightly", "tool-use")
        assert run.judgments.count() == run.total == Case.objects.filter(dataset=run.dataset).count() == 12
        reviewer = run.dataset.reviewers.order_by("username").first()
        client.force_login(reviewer)
        page = client.get(reverse("labeling:queue", args=["store-support", "ci-traffic", "tool-use"]))
        assert page.status_code == 200 and "demo-nightly/" in page.content.decode()
