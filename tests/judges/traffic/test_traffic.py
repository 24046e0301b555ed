"""Traffic judging: a lead turns it on for a (rubric, dataset) pair on the rubric's promotion page (audited);
the periodic task judges the cases that arrived since the pair's last traffic run, with the rubric's gate
config judge, as a traffic run through the worker."""

import pytest

from evalhub.models import Role
from judges.configs.services import judge_config_save
from judges.models import RubricEvent, Run, TrafficJudging
from judges.traffic.services import TrafficRefused, traffic_judging_set
from judges.traffic.tasks import traffic_judge
from labeling.importing.cases import cases_import_objects
from labeling.models import Dataset, Rubric
from tests.conftest import PASSWORD, make_user, store_project


@pytest.fixture
def world(db, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the traffic runs work in-process
    lead = make_user("lena", role=Role.LEAD)
    project = store_project()
    dataset = Dataset.objects.create(project=project, slug="prod", name="Production traffic")
    rubric = Rubric.objects.create(project=project, slug="safe-actions", name="No refund tool",
                                   criteria="Fail on a refund.")
    config = judge_config_save(rubric=rubric, by=lead, spec={
        "layers": ["contract"], "contract_checks": ["answer_present", "forbidden_tools"],
        "forbidden_tools": ["issue_refund"],
    })
    golden = Dataset.objects.create(project=project, slug="golden", name="Golden")
    evidence = Run.objects.create(config=config, dataset=golden, status=Run.Status.FINISHED, created_by=lead)
    RubricEvent.objects.create(rubric=rubric, kind=RubricEvent.Kind.PROMOTE, from_stage="draft", to_stage="observe",
                               run=evidence, figures={}, reason="observe", by=lead)
    Rubric.objects.filter(pk=rubric.pk).update(stage=Rubric.Stage.OBSERVE)
    return {"lead": lead, "dataset": dataset, "rubric": rubric, "config": config}


def ingest(dataset, *ids, refund=()):
    cases_import_objects(dataset=dataset, objects=[
        {"external_id": i, "input": "Refund me?", "output": "Done." if i in refund else "Returns within 30 days.",
         "trace": {"toolCalls": [{"name": "issue_refund", "argument": {}, "result": "ok"}] if i in refund else []}}
        for i in ids
    ])


@pytest.fixture
def tick(django_capture_on_commit_callbacks):
    """One tick of the schedule, the runs it queues worked eagerly once its transactions commit."""

    def run() -> list[int]:
        with django_capture_on_commit_callbacks(execute=True):
            return traffic_judge()

    return run


def test_it_judges_only_the_cases_that_arrive_after_it_is_turned_on(world, client, tick):
    dataset, rubric = world["dataset"], world["rubric"]
    ingest(dataset, "before")
    client.login(username="lena", password=PASSWORD)
    response = client.post("/p/store/rubrics/safe-actions/promotion/traffic/",
                           {"dataset": "prod", "enabled": "on", "reason": "see the judge on production"})
    assert response.status_code == 302
    event = RubricEvent.objects.get(rubric=rubric, kind=RubricEvent.Kind.TRAFFIC)
    assert event.changes == {"traffic judging of prod": [False, True]} and event.by == world["lead"]
    assert tick() == []  # nothing new yet

    ingest(dataset, "t1", "t2", refund={"t2"})
    [run_id] = tick()
    run = Run.objects.get(pk=run_id)
    assert run.source == Run.Source.TRAFFIC and run.config == world["config"]
    assert run.status == Run.Status.FINISHED
    assert dict(run.judgments.values_list("case__external_id", "outcome")) == {"t1": "pass", "t2": "fail"}
    assert tick() == []  # the same cases are never judged twice

    ingest(dataset, "t3")
    [second] = tick()
    assert list(Run.objects.get(pk=second).judgments.values_list("case__external_id", flat=True)) == ["t3"]
    page = client.get("/p/store/rubrics/safe-actions/promotion/").content.decode()
    assert f"run {second}" in page

    client.post("/p/store/rubrics/safe-actions/promotion/traffic/",
                {"dataset": "prod", "enabled": "off", "reason": "enough"})
    ingest(dataset, "t4")
    assert tick() == []
    assert not TrafficJudging.objects.get().enabled


def test_a_draft_rubric_judges_no_traffic_and_a_reviewer_cannot_turn_it_on(world, client, tick):
    make_user("rita")
    client.login(username="rita", password=PASSWORD)
    response = client.post("/p/store/rubrics/safe-actions/promotion/traffic/",
                           {"dataset": "prod", "enabled": "on", "reason": "x"})
    assert response.status_code == 403 and not TrafficJudging.objects.exists()

    client.login(username="lena", password=PASSWORD)
    client.post("/p/store/rubrics/safe-actions/promotion/traffic/", {"dataset": "prod", "enabled": "on", "reason": "x"})
    RubricEvent.objects.create(rubric=world["rubric"], kind=RubricEvent.Kind.DEMOTE, from_stage="observe",
                               to_stage="draft", reason="back", by=world["lead"])
    Rubric.objects.filter(pk=world["rubric"].pk).update(stage=Rubric.Stage.DRAFT)
    ingest(world["dataset"], "t1")
    assert tick() == []


def test_a_bad_form_says_why_and_changes_nothing(world, client):
    client.login(username="lena", password=PASSWORD)
    response = client.post("/p/store/rubrics/safe-actions/promotion/traffic/",
                           {"dataset": "no-such", "enabled": "on", "reason": ""}, follow=True)
    assert response.status_code == 200
    assert "Traffic judging not changed" in response.content.decode()
    assert not TrafficJudging.objects.exists()


# ---- projects: a rubric judges its own project's traffic only ------------------------------------------------


def test_another_projects_dataset_is_not_offered_and_is_refused(world, client, other_project):
    Dataset.objects.create(project=other_project, slug="theirs", name="Another team's traffic")
    client.login(username="lena", password=PASSWORD)
    page = client.get("/p/store/rubrics/safe-actions/promotion/").content.decode()
    assert 'value="prod"' in page and "theirs" not in page  # the form's menu: the project's datasets only
    response = client.post("/p/store/rubrics/safe-actions/promotion/traffic/",
                           {"dataset": "theirs", "enabled": "on", "reason": "x"}, follow=True)
    assert "Traffic judging not changed" in response.content.decode()
    assert not TrafficJudging.objects.exists()


def test_the_service_refuses_a_pair_across_projects_and_a_lead_of_another_project(world, other_project):
    theirs = Dataset.objects.create(project=other_project, slug="theirs", name="Another team's traffic")
    with pytest.raises(TrafficRefused, match="dataset of its own project only"):
        traffic_judging_set(rubric=world["rubric"], dataset=theirs, enabled=True, reason="x", by=world["lead"])
    stranger = make_user("otto", role=Role.LEAD, project=other_project)
    with pytest.raises(TrafficRefused, match="Only a lead of safe-actions's project"):
        traffic_judging_set(rubric=world["rubric"], dataset=world["dataset"], enabled=True, reason="x", by=stranger)
    assert not TrafficJudging.objects.exists() and not RubricEvent.objects.filter(kind="traffic").exists()


def test_a_pair_across_projects_is_never_judged(world, other_project, tick):
    # Written straight to the table (the service refuses it): the periodic task must not pair them either.
    theirs = Dataset.objects.create(project=other_project, slug="theirs", name="Another team's traffic")
    TrafficJudging.objects.create(rubric=world["rubric"], dataset=theirs, enabled=True, changed_by=world["lead"])
    ingest(theirs, "t1")
    assert tick() == [] and not Run.objects.filter(source=Run.Source.TRAFFIC).exists()


def test_a_lead_of_another_project_gets_404(world, client, other_project):
    make_user("otto", role=Role.LEAD, project=other_project)
    client.login(username="otto", password=PASSWORD)
    response = client.post("/p/store/rubrics/safe-actions/promotion/traffic/",
                           {"dataset": "prod", "enabled": "on", "reason": "x"})
    assert response.status_code == 404 and not TrafficJudging.objects.exists()
