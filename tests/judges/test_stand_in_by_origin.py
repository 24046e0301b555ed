"""A stand-in is told by where its answers come from, never by a name: the scripted stand-in marks every
answer (judges.testing.fake_provider.STAND_IN_HEADER), the engine notes it on each judgment, the worker records
it, and the config page says so from its runs, the run, report and promotion pages from the run (the evidence run). A config named after a real model
(`gpt-4o-2024-08-06`) reached through an ordinary variable is marked once the stand-in served it; a real-looking
provider (the stand-in with its mark switched off) is not, even when named "stand-in". All over real HTTP through
the real worker (Celery eager)."""

import uuid

import pytest
from django.urls import reverse

from judges.configs import services as config_services
from judges.engine import judge_case
from judges.models import Run
from tests.conftest import TEST_PROJECT
from tests.judges.helpers import behavioral_spec, semantic_spec
from judges.promotion.services import rubric_promote
from tests.judges.promotion_factories import REASON
from tests.judges.report_factories import label, make_cases

pytestmark = pytest.mark.django_db
NOTE = 'data-testid="stand-in-note"'


@pytest.fixture
def eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.EVALHUB_CHUNK_CASES = 20


def start_run(client, config, capture) -> Run:
    data = {"dataset": "store-support", "repeats": 2, "concurrency": 4, "spend_cap_usd": "", "start_token": uuid.uuid4()}
    with capture(execute=True):
        assert client.post(reverse("judges:run_create", args=[TEST_PROJECT, config.pk]), data).status_code == 302
    run = Run.objects.order_by("-pk").first()
    assert run.status == Run.Status.FINISHED and run.done == run.total > 0
    return run


def pages(client, config, run) -> dict[str, str]:
    get = {
        "config": reverse("judges:config_detail", args=[TEST_PROJECT, config.pk]),
        "run": reverse("judges:run_detail", args=[TEST_PROJECT, run.pk]),
        "report": reverse("judges:run_report", args=[TEST_PROJECT, run.pk]),
        "promotion": reverse("judges:promotion_rubric", args=[TEST_PROJECT, config.rubric.slug]),
    }
    return {where: client.get(url).content.decode() for where, url in get.items()}


@pytest.mark.parametrize(("model", "marked"), [("gpt-4o-2024-08-06", True), ("stand-in-judge-2024-08-06", False)])
def test_the_badge_comes_from_where_the_answers_came_from(
    eager, lead_client, rubric, dataset, lead, reviewer, fake_provider, django_capture_on_commit_callbacks,
    model, marked,
):
    # 40 labeled cases the stand-in's rule judges as the reviewer did but for two (evidence a lead may promote),
    # through the ordinary EVALHUB_JUDGE_OPENAI_URL, with its mark on (gpt-4o…) or off (a real-looking
    # provider, named "stand-in").
    cases = make_cases(dataset, [(f"case-{i:03}", "good" if i % 2 == 0 else "bad") for i in range(40)])
    for i, case in enumerate(cases):
        label(case, rubric, reviewer, ("pass" if i % 2 == 0 else "fail") if i >= 2 else ("fail" if i == 0 else "pass"))
    fake_provider.control(mark_stand_in=marked, rule={"kind": "category_in", "categories": ["good"]})
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(model=model), by=lead)
    assert "base_url_env" in config.spec and config.spec["base_url_env"] == "EVALHUB_JUDGE_OPENAI_URL"
    before = lead_client.get(reverse("judges:config_detail", args=[TEST_PROJECT, config.pk])).content.decode()
    assert NOTE not in before  # before any run, nothing is said rather than guessed

    run = start_run(lead_client, config, django_capture_on_commit_callbacks)
    assert run.judgments.filter(stand_in=True).count() == (run.done if marked else 0)
    rubric_promote(rubric=rubric, to_stage="observe", run=run, reason=REASON, by=lead)  # the evidence run

    for where, html in pages(lead_client, config, run).items():
        assert (NOTE in html) is marked, where


def test_the_engine_notes_the_mark_on_chat_messages_and_embeddings(fake_provider):
    case = {"external_id": "c1", "input": "Can I return shoes?", "output": "Yes, within 30 days.",
            "golden_answer": "Yes, within 30 days."}
    anthropic = behavioral_spec(provider="anthropic", model="claude-x", base_url_env="EVALHUB_JUDGE_ANTHROPIC_URL")
    semantic_only = semantic_spec()
    for spec in (behavioral_spec(model="gpt-4o-2024-08-06"), anthropic, semantic_only):
        spec = {"rubric": "return-policy", "criteria": "Is the answer right?", **spec}
        fake_provider.control(mark_stand_in=True)
        marked = judge_case(case, spec, 1)
        fake_provider.control(mark_stand_in=False)
        unmarked = judge_case(case, spec, 1)
        assert marked.provider_calls and marked.evaluated and unmarked.evaluated, (spec, marked.reason)
        assert (marked.stand_in, unmarked.stand_in) == (True, False), spec


def test_a_verdict_the_cache_answers_stays_the_stand_ins(
    eager, lead_client, rubric, dataset, lead, fake_provider, django_capture_on_commit_callbacks,
):
    # The second run asks nothing: the cache answers every judgment (in bulk, in PostgreSQL: judges.runs.cached),
    # and each stays marked as the stand-in's; the stand-in's mark being off now changes nothing about them.
    make_cases(dataset, [(f"case-{i:03}", "good") for i in range(6)])
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(model="gpt-4o-2024-08-06"), by=lead)
    first = start_run(lead_client, config, django_capture_on_commit_callbacks)
    fake_provider.control(mark_stand_in=False)
    second = start_run(lead_client, config, django_capture_on_commit_callbacks)
    assert first.judgments.filter(stand_in=True).count() == first.done == 12
    assert (second.provider_calls, second.cache_hits) == (0, 12)
    assert second.judgments.filter(stand_in=True).count() == 12
    assert second.served_by_stand_in
