"""The run pages: the start form with its estimate, the polled progress partial, cancel, re-run of the
not-evaluated, the judgments table (filters, pages, constant queries) and the second run that costs nothing.

Work runs eagerly in-process here (CELERY_TASK_ALWAYS_EAGER and on-commit callbacks executed); behavioral
configs call the fake provider over HTTP. tests/browser/test_run_browser.py runs a real worker.
"""

import json
import threading
import uuid
from datetime import timedelta
from decimal import Decimal

import pytest
from django.urls import reverse
from django.utils import timezone

from judges.configs import services as config_services
from judges.configs.cases import engine_case
from judges.engine import build_messages
from judges.models import Judgment, ModelPrice, Run
from judges.runs import services
from judges.runs.tallies import case_tallies_refresh
from labeling.models import Dataset, Label
from tests.conftest import TEST_PROJECT
from tests.judges.helpers import (
    CONTRACT_SPEC,
    MODEL,
    behavioral_spec,
    give_golden_answers,
    make_cases,
    semantic_spec,
)


@pytest.fixture
def eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.EVALHUB_CHUNK_CASES = 4


def start_url(config) -> str:
    return reverse("judges:run_create", args=[TEST_PROJECT, config.pk])


def start_run(client, config, capture, **fields) -> Run:
    data = {"dataset": "store-support", "repeats": 2, "concurrency": 3, "spend_cap_usd": "",
            "start_token": uuid.uuid4(), **fields}
    with capture(execute=True):
        response = client.post(start_url(config), data)
    assert response.status_code == 302, response.content.decode()[:2000]
    run = Run.objects.order_by("-pk").first()
    assert response.url == reverse("judges:run_detail", args=[TEST_PROJECT, run.pk])
    return run


# ---- the start form and its estimate ----------------------------------------------------------


def test_the_form_offers_the_dataset_imported_last_not_the_first_by_name(lead_client, rubric, dataset, lead):
    # Before: the first dataset alphabetically ("CI traffic" / "a-ci-traffic") was preselected.
    make_cases(dataset, 2)
    older = Dataset.objects.create(project=dataset.project, slug="a-ci-traffic", name="CI traffic")
    make_cases(older, 1, prefix="old")
    older.cases.update(content_changed_at=timezone.now() - timedelta(days=3))
    Dataset.objects.create(project=dataset.project, slug="0-empty", name="Empty")  # no case: offered last
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    response = lead_client.get(start_url(config))
    assert response.context["form"]["dataset"].value() == dataset.slug


def test_it_estimates_nothing_for_a_contract_only_config(lead_client, rubric, dataset, lead):
    make_cases(dataset, 5)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)

    response = lead_client.get(start_url(config), {"dataset": dataset.slug, "repeats": 3})

    estimate = response.context["estimate"]
    assert (estimate.cases, estimate.judgments, estimate.cost_usd, estimate.calls) == (5, 15, Decimal(0), 0)
    assert "no model is called" in response.content.decode()


def test_it_estimates_cases_times_repeats_times_tokens_times_price(lead_client, rubric, dataset, lead):
    cases = make_cases(dataset, 25)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    ModelPrice.objects.create(model=MODEL, input_per_mtok=Decimal("0.15"), output_per_mtok=Decimal("0.6"),
                              updated_by=lead)
    # The estimate reads the first 20 cases' prompts (chars / 4) and counts max_tokens (100) out.
    chars = [sum(map(len, build_messages(engine_case(c), template=config.spec["prompt_template"],
                                         criteria=rubric.criteria, policy="", output_kind="verdict")))
             for c in cases[:20]]
    tokens_in = round(sum(chars) / 20 / 4)
    expected = (Decimal(25 * 3) * (tokens_in * Decimal("0.15") + 100 * Decimal("0.6")) / 1_000_000)

    response = lead_client.get(start_url(config), {"dataset": dataset.slug, "repeats": 3})

    estimate = response.context["estimate"]
    assert (estimate.judgments, estimate.calls, estimate.input_tokens_per_call) == (75, 75, tokens_in)
    assert estimate.cost_usd == expected.quantize(Decimal("0.0001"))
    assert f"${estimate.cost_usd.normalize()}" in response.content.decode()


def test_the_estimate_partial_follows_repeats_and_concurrency(lead_client, rubric, dataset, lead):
    cases = make_cases(dataset, 25)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    earlier = Run.objects.create(config=config, dataset=dataset, created_by=lead)
    Judgment.objects.bulk_create([
        Judgment(run=earlier, case=cases[0], repeat=1, outcome="pass", layer="behavioral", latency_ms=600),
        Judgment(run=earlier, case=cases[1], repeat=1, outcome="pass", layer="behavioral", latency_ms=1000),
        Judgment(run=earlier, case=cases[2], repeat=1, outcome="pass", layer="behavioral", latency_ms=9000,
                 cached=True),  # a cache hit says nothing of the model's speed
    ])
    htmx = {"HX-Request": "true", "HX-Target": "estimate"}

    slow = lead_client.get(start_url(config), {"dataset": dataset.slug, "repeats": 3, "concurrency": 5},
                           headers=htmx)
    fast = lead_client.get(start_url(config), {"dataset": dataset.slug, "repeats": 4, "concurrency": 50},
                           headers=htmx)

    assert slow.content.decode().lstrip().startswith('<section id="estimate"')  # the partial alone
    # 75 calls, 5 at a time: 15 rounds of the model's recent 800 ms mean = 12 s.
    assert (slow.context["estimate"].waves, slow.context["estimate"].seconds) == (15, 12.0)
    assert "~12 s: 75 calls, 5 at a time (15 rounds of ~800 ms" in slow.content.decode()
    assert "25 cases × 4 repeats = 100" in fast.content.decode()
    assert (fast.context["estimate"].waves, fast.context["estimate"].seconds) == (2, 1.6)
    bad = lead_client.get(start_url(config), {"dataset": dataset.slug, "repeats": "x", "concurrency": 0},
                          headers=htmx)
    assert bad.status_code == 200 and bad.context["estimate"] is None


def test_it_says_when_the_model_has_no_price(lead_client, rubric, dataset, lead):
    make_cases(dataset, 2)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)

    response = lead_client.get(start_url(config), {"dataset": dataset.slug, "repeats": 1},
                               headers={"HX-Request": "true"})

    page = response.content.decode()
    assert page.lstrip().startswith('<section id="estimate"')  # the partial alone
    assert f"No price for model {MODEL}" in page
    assert response.context["estimate"].cost_usd is None


def test_it_counts_cached_judgments_as_free_in_the_estimate(
    eager, lead_client, rubric, dataset, lead, fake_provider, django_capture_on_commit_callbacks
):
    make_cases(dataset, 4)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    ModelPrice.objects.create(model=MODEL, input_per_mtok=1, output_per_mtok=1, updated_by=lead)
    start_run(lead_client, config, django_capture_on_commit_callbacks, repeats=2)

    again = lead_client.get(start_url(config), {"dataset": dataset.slug, "repeats": 2}).context["estimate"]
    more = lead_client.get(start_url(config), {"dataset": dataset.slug, "repeats": 3}).context["estimate"]

    assert (again.cached, again.calls, again.cost_usd) == (8, 0, Decimal(0))
    assert (more.cached, more.calls) == (8, 4)  # only repeat 3 is new work


SECOND = "claude-haiku-4-5-20251001"


def second_opinion(**when) -> dict:
    return {"role": "second_opinion", "provider": "anthropic", "model": SECOND,
            "base_url_env": "EVALHUB_JUDGE_ANTHROPIC_URL", "api_key_env": "EVALHUB_JUDGE_API_KEY", "when": when}


@pytest.mark.parametrize("when", [
    {"mode": "always"}, {"mode": "sample", "share": 0.5}, {"mode": "categories", "categories": ["tools"]},
])
def test_the_estimate_counts_the_second_opinion_exactly_as_the_run_asks_it(
    eager, lead_client, rubric, dataset, lead, fake_provider, django_capture_on_commit_callbacks, when
):
    make_cases(dataset, 15)
    spec = behavioral_spec(secondary=second_opinion(**when))
    config = config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)
    for model in (MODEL, SECOND):
        ModelPrice.objects.create(model=model, input_per_mtok=1, output_per_mtok=1, updated_by=lead)
    estimate = lead_client.get(start_url(config), {"dataset": dataset.slug, "repeats": 2}).context["estimate"]

    run = start_run(lead_client, config, django_capture_on_commit_callbacks, repeats=2)

    run.refresh_from_db()
    asked = fake_provider.stats()["by_model"].get(SECOND, 0)
    assert 0 < asked and estimate.second_calls == (asked, asked)
    assert estimate.judge_calls == (30, 30) and estimate.all_calls == (run.provider_calls, run.provider_calls)
    # Both judges' calls are in the tokens and the cost, not the primary's alone.
    assert estimate.total_tokens == (30 + asked) * (estimate.input_tokens_per_call + estimate.output_tokens_per_call)
    assert estimate.cost_usd == estimate.cost_usd_high > Decimal(0)


def test_the_estimate_brackets_what_a_semantic_judge_with_a_borderline_second_opinion_calls(
    eager, lead_client, rubric, dataset, lead, fake_provider, django_capture_on_commit_callbacks
):
    cases = make_cases(dataset, 12)
    give_golden_answers(cases)
    spec = semantic_spec()
    spec = behavioral_spec(
        layers=["contract", "semantic", "behavioral"], contract_checks=["answer_present"], output_kind="scores",
        semantic={**spec["semantic"], "pass_at": 0.99}, secondary=second_opinion(mode="borderline"),
    )
    config = config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)
    estimate = lead_client.get(start_url(config), {"dataset": dataset.slug, "repeats": 2}).context["estimate"]
    page = lead_client.get(start_url(config), {"dataset": dataset.slug, "repeats": 2}).content.decode()

    run = start_run(lead_client, config, django_capture_on_commit_callbacks, repeats=2)

    run.refresh_from_db()
    # Four cases have no answer: the contract fails them before any model. The other eight reach the
    # semantic layer (16 texts, one embeddings call at best) and may reach the judge, which a
    # borderline score may send to the second opinion.
    assert estimate.judge_calls == (0, 16) and estimate.second_calls == (0, 16)
    assert estimate.embedding_calls == (1, 8)
    low, high = estimate.all_calls
    assert low <= run.provider_calls <= high
    assert f"{low}–{high}" in page
    assert "second opinion claude-haiku-4-5-20251001 (borderline): 0–16" in page


def test_it_refuses_a_dataset_without_cases_on_the_form(lead_client, rubric, dataset, lead):
    Dataset.objects.create(project=dataset.project, slug="empty", name="Empty")
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)

    response = lead_client.post(start_url(config), {"dataset": "empty", "repeats": 1, "concurrency": 1,
                                                    "start_token": uuid.uuid4()})

    assert response.status_code == 200
    assert "The dataset empty has no cases." in response.content.decode()
    assert not Run.objects.exists()


def test_it_starts_one_run_when_the_same_form_is_posted_twice(
    lead_client, rubric, dataset, lead, django_capture_on_commit_callbacks
):
    make_cases(dataset, 3)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    form = lead_client.get(start_url(config)).context["form"]
    data = {"dataset": dataset.slug, "repeats": 1, "concurrency": 1, "start_token": form["start_token"].value()}

    with django_capture_on_commit_callbacks() as queued:
        first = lead_client.post(start_url(config), data)
        second = lead_client.post(start_url(config), data)  # a double click, or the form sent again

    run = Run.objects.get()
    assert first.status_code == second.status_code == 302
    assert first.url == second.url == reverse("judges:run_detail", args=[TEST_PROJECT, run.pk])
    assert len(queued) == 1  # its work was queued once
    # A fresh form is a new intention: it starts another run.
    fresh = lead_client.get(start_url(config)).context["form"]["start_token"].value()
    assert fresh != data["start_token"]
    lead_client.post(start_url(config), {**data, "start_token": fresh})
    assert Run.objects.count() == 2


@pytest.mark.django_db(transaction=True)
def test_it_starts_one_run_when_two_posts_of_a_form_arrive_at_once(client, rubric, dataset, lead, settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # a contract-only run, judged in the request's thread
    make_cases(dataset, 3)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    data = {"dataset": dataset.slug, "repeats": 1, "concurrency": 1, "start_token": uuid.uuid4()}
    together = threading.Barrier(2)
    responses = []

    def post() -> None:
        from django.db import connection
        from django.test import Client

        own = Client()
        own.force_login(lead)
        together.wait()
        try:
            responses.append(own.post(start_url(config), data))
        finally:
            connection.close()

    threads = [threading.Thread(target=post) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    run = Run.objects.get()
    assert [r.status_code for r in responses] == [302, 302]
    assert {r.url for r in responses} == {reverse("judges:run_detail", args=[TEST_PROJECT, run.pk])}


def test_it_refuses_a_form_without_its_start_token(lead_client, rubric, dataset, lead):
    make_cases(dataset, 1)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    response = lead_client.post(start_url(config), {"dataset": dataset.slug, "repeats": 1, "concurrency": 1})
    assert response.status_code == 200
    assert "This form has no start token: reload the page" in response.content.decode()
    assert not Run.objects.exists()


def test_it_does_not_run_an_external_config(lead_client, rubric, dataset, lead):
    from judges.models import JudgeConfig

    config = JudgeConfig.objects.create(rubric=rubric, version=1, spec={"external": True}, config_hash="x",
                                        external=True, created_by=lead)
    response = lead_client.post(start_url(config), {"dataset": dataset.slug, "repeats": 1, "concurrency": 1})
    assert response.status_code == 302 and not Run.objects.exists()


def test_it_forbids_reviewers_to_start_runs(reviewer_client, rubric, dataset, lead):
    make_cases(dataset, 1)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    response = reviewer_client.post(start_url(config), {"dataset": dataset.slug, "repeats": 1, "concurrency": 1})
    assert response.status_code == 403 and not Run.objects.exists()


# ---- starting, progress, cancel, re-run --------------------------------------------------------


def test_it_starts_a_run_that_works_in_the_background_to_the_end(
    eager, lead_client, rubric, dataset, lead, django_capture_on_commit_callbacks
):
    make_cases(dataset, 9)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)

    run = start_run(lead_client, config, django_capture_on_commit_callbacks, repeats=2, concurrency=2)

    run.refresh_from_db()
    assert (run.status, run.repeats, run.concurrency, run.created_by) == (Run.Status.FINISHED, 2, 2, lead)
    assert Judgment.objects.filter(run=run).count() == run.total == run.done == 18
    page = lead_client.get(reverse("judges:run_detail", args=[TEST_PROJECT, run.pk])).content.decode()
    assert "18 / 18" in page and 'hx-trigger="every 1s"' not in page  # a finished run is not polled


def test_it_polls_progress_until_the_run_ends_then_answers_286(rubric, dataset, lead, lead_client):
    make_cases(dataset, 3)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    run = Run.objects.create(config=config, dataset=dataset, created_by=lead, total=6, done=2, cache_hits=1,
                             provider_calls=4, status=Run.Status.RUNNING, started_at=timezone.now())
    url = reverse("judges:run_progress", args=[TEST_PROJECT, run.pk])

    running = lead_client.get(url, headers={"HX-Request": "true"})
    page = running.content.decode()
    assert running.status_code == 200
    assert 'hx-trigger="every 1s"' in page and "2 / 6" in page
    assert '<progress class="run-bar" max="6" value="2">' in page

    Run.objects.filter(pk=run.pk).update(status=Run.Status.FINISHED, done=6, finished_at=timezone.now())
    finished = lead_client.get(url, headers={"HX-Request": "true"})
    assert finished.status_code == 286  # htmx stops polling
    assert json.loads(finished["HX-Trigger"]) == {"run-finished": {}}  # the judgments table reloads once
    assert "6 / 6" in finished.content.decode() and "every 1s" not in finished.content.decode()


def test_it_warns_when_no_worker_picks_a_queued_run_up(lead_client, rubric, dataset, lead):
    make_cases(dataset, 1)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    fresh = Run.objects.create(config=config, dataset=dataset, created_by=lead, total=1)
    stuck = Run.objects.create(config=config, dataset=dataset, created_by=lead, total=1,
                               created_at=timezone.now() - timedelta(seconds=20))

    def warned(run) -> bool:
        return "No worker has picked this run up" in lead_client.get(
            reverse("judges:run_progress", args=[TEST_PROJECT, run.pk])).content.decode()

    assert not warned(fresh)
    assert warned(stuck)
    assert "celery -A evalhub worker --beat" in lead_client.get(
        reverse("judges:run_detail", args=[TEST_PROJECT, stuck.pk])).content.decode()
    Run.objects.filter(pk=stuck.pk).update(status=Run.Status.RUNNING, started_at=timezone.now())
    assert not warned(stuck)


def test_it_cancels_a_run(lead_client, rubric, dataset, lead):
    make_cases(dataset, 1)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    run = Run.objects.create(config=config, dataset=dataset, created_by=lead, total=1)
    url = reverse("judges:run_cancel", args=[TEST_PROJECT, run.pk])

    assert lead_client.get(url).status_code == 405
    response = lead_client.post(url)

    run.refresh_from_db()
    assert response.status_code == 302 and run.status == Run.Status.CANCELLED and run.finished_at


def test_it_forbids_reviewers_to_cancel(reviewer_client, rubric, dataset, lead):
    make_cases(dataset, 1)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    run = Run.objects.create(config=config, dataset=dataset, created_by=lead, total=1)
    assert reviewer_client.post(reverse("judges:run_cancel", args=[TEST_PROJECT, run.pk])).status_code == 403
    assert reviewer_client.get(reverse("judges:run_detail", args=[TEST_PROJECT, run.pk])).status_code == 403
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED


def test_it_reruns_only_the_not_evaluated_judgments(
    eager, lead_client, rubric, dataset, lead, fake_provider, django_capture_on_commit_callbacks
):
    make_cases(dataset, 5)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    fake_provider.control(fault="500", fault_count=3)  # three calls fail; max_attempts is 1
    run = start_run(lead_client, config, django_capture_on_commit_callbacks, repeats=2)
    run.refresh_from_db()
    assert run.not_evaluated == 3 and run.status == Run.Status.FINISHED
    page = lead_client.get(reverse("judges:run_detail", args=[TEST_PROJECT, run.pk])).content.decode()
    assert "Re-run the 3 not-evaluated" in page
    kept = set(run.judgments.exclude(outcome="not_evaluated").values_list("pk", flat=True))
    calls_before = fake_provider.stats()["total"]

    with django_capture_on_commit_callbacks(execute=True):
        response = lead_client.post(reverse("judges:run_retry", args=[TEST_PROJECT, run.pk]), follow=True)

    run.refresh_from_db()
    assert "queued again for its 3 not-evaluated judgment(s)" in response.content.decode()
    assert (run.status, run.not_evaluated, run.done) == (Run.Status.FINISHED, 0, 10)
    assert run.judgments.count() == 10
    assert kept <= set(run.judgments.values_list("pk", flat=True))  # the evaluated ones were not redone
    assert fake_provider.stats()["total"] - calls_before == 3


def test_it_refuses_to_rerun_a_running_run(lead_client, rubric, dataset, lead):
    make_cases(dataset, 1)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    run = Run.objects.create(config=config, dataset=dataset, created_by=lead, total=1, status=Run.Status.RUNNING)
    response = lead_client.post(reverse("judges:run_retry", args=[TEST_PROJECT, run.pk]), follow=True)
    assert "Only a finished or cancelled run" in response.content.decode()


def test_it_calls_the_provider_zero_times_when_an_unchanged_config_runs_again(
    eager, lead_client, rubric, dataset, lead, fake_provider, django_capture_on_commit_callbacks
):
    make_cases(dataset, 6)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    first = start_run(lead_client, config, django_capture_on_commit_callbacks, repeats=2)
    calls = fake_provider.stats()["total"]
    assert calls == 12

    second = start_run(lead_client, config, django_capture_on_commit_callbacks, repeats=2)

    second.refresh_from_db()
    assert fake_provider.stats()["total"] == calls
    assert (second.cache_hits, second.provider_calls, second.done) == (12, 0, 12)
    assert first.pk != second.pk
    progress = lead_client.get(reverse("judges:run_progress", args=[TEST_PROJECT, second.pk])).content.decode()
    assert '<dd data-testid="run-cache-hits">12</dd>' in progress
    assert '<dd data-testid="run-calls">0</dd>' in progress


# ---- the judgments table -----------------------------------------------------------------------


@pytest.fixture
def finished_run(eager, rubric, dataset, lead, django_capture_on_commit_callbacks) -> Run:
    """30 cases × 2 repeats through the contract; every third case has no answer and fails."""
    make_cases(dataset, 30)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    with django_capture_on_commit_callbacks(execute=True):
        run = services.run_start(config=config, dataset=dataset, repeats=2, concurrency=2, spend_cap_usd=None,
                                 by=lead)
    run.refresh_from_db()
    return run


def test_it_shows_one_row_per_case_with_its_repeats_side_by_side(lead_client, finished_run):
    response = lead_client.get(reverse("judges:run_detail", args=[TEST_PROJECT, finished_run.pk]))

    page = response.content.decode()
    rows = response.context["rows"]
    first = rows[0]
    assert (first["external_id"], first["fails"], first["flipped"]) == ("c000", 2, False)
    assert [j.repeat for j in first["repeats"]] == [1, 2] and {j.outcome for j in first["repeats"]} == {"fail"}
    assert page.count('data-testid="case-row"') == 30 and page.count('data-testid="repeat-verdict"') == 60
    assert "answer_present ✗" in page and "expected_tool ✓" in page  # in each row's details
    assert reverse("labeling:case_detail", args=[TEST_PROJECT, first["case_id"]]) in page


def test_it_pages_cases_fifty_at_a_time(lead_client, rubric, dataset, lead, eager, django_capture_on_commit_callbacks):
    make_cases(dataset, 60)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    with django_capture_on_commit_callbacks(execute=True):
        run = services.run_start(config=config, dataset=dataset, repeats=2, concurrency=2, spend_cap_usd=None,
                                 by=lead)
    url = reverse("judges:run_detail", args=[TEST_PROJECT, run.pk])
    first, second = lead_client.get(url), lead_client.get(url, {"page": 2})
    assert len(first.context["rows"]) == 50
    assert len(second.context["rows"]) == 10
    assert "Page 1 of 2 · 60 cases" in first.content.decode()


@pytest.mark.parametrize("query, expected", [
    ({"outcome": "fail"}, 10),
    ({"outcome": "pass"}, 20),
    ({"outcome": "not_evaluated"}, 0),
    ({"layer": "contract"}, 30),
    ({"layer": "behavioral"}, 0),
    ({"q": "c01"}, 10),
    ({"q": "c012", "outcome": "fail"}, 1),
])
def test_it_filters_cases_by_their_judgments(lead_client, finished_run, query, expected):
    response = lead_client.get(reverse("judges:run_detail", args=[TEST_PROJECT, finished_run.pk]), query,
                               headers={"HX-Request": "true", "HX-Target": "judgments"})
    assert response.context["page"].paginator.count == expected
    assert response.content.decode().lstrip().startswith('<div id="judgments"')


@pytest.mark.parametrize("sort, first_ids", [
    ("case", ["c000", "c001", "c002"]),
    ("-case", ["c029", "c028", "c027"]),
    ("-fails", ["c000", "c003", "c006"]),  # every third case fails both repeats; ties by id
    ("fails", ["c001", "c002", "c004"]),
    ("nonsense", ["c000", "c001", "c002"]),  # an unknown key falls back to the default
    ("-raw_output", ["c000", "c001", "c002"]),  # so does a real field that is not offered
])
def test_it_sorts_cases(lead_client, finished_run, sort, first_ids):
    response = lead_client.get(reverse("judges:run_detail", args=[TEST_PROJECT, finished_run.pk]), {"sort": sort})
    assert response.status_code == 200
    assert [row["external_id"] for row in response.context["rows"][:3]] == first_ids


def test_it_marks_a_case_whose_repeats_flipped_and_sorts_it_first(lead_client, finished_run):
    judgment = finished_run.judgments.get(case__external_id="c005", repeat=2)
    judgment.outcome = "fail"
    judgment.save(update_fields=["outcome"])
    case_tallies_refresh(run_id=finished_run.pk, case_ids=[judgment.case_id])  # as every writer of judgments does

    response = lead_client.get(reverse("judges:run_detail", args=[TEST_PROJECT, finished_run.pk]), {"sort": "-flipped"})

    first = response.context["rows"][0]
    assert (first["external_id"], first["flipped"]) == ("c005", True)
    assert not response.context["rows"][1]["flipped"]
    assert '<span class="badge verdict-ne">flip</span>' in response.content.decode()


def test_it_lists_judgments_while_the_run_is_going(lead_client, finished_run):
    Run.objects.filter(pk=finished_run.pk).update(status=Run.Status.RUNNING)
    finished_run.judgments.filter(case__external_id="c001", repeat=2).delete()

    page = lead_client.get(reverse("judges:run_detail", args=[TEST_PROJECT, finished_run.pk])).content.decode()

    assert page.count('data-testid="case-row"') == 30
    assert page.count('data-testid="repeat-verdict"') == 59
    assert 'title="not judged yet"' in page
    assert "every 3s" in page  # the table refreshes itself while the run goes on


def test_it_filters_judgments_by_error(
    eager, lead_client, rubric, dataset, lead, fake_provider, django_capture_on_commit_callbacks
):
    make_cases(dataset, 4)
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    fake_provider.control(fault="500", fault_count=2)
    run = start_run(lead_client, config, django_capture_on_commit_callbacks, repeats=1)

    response = lead_client.get(reverse("judges:run_detail", args=[TEST_PROJECT, run.pk]), {"error": "server error"})

    assert response.context["choices"]["errors"] == ["server error"]
    assert [[j.outcome for j in row["repeats"]] for row in response.context["rows"]] == [["not_evaluated"]] * 2


def _many_runs(rubric, dataset, lead, count: int) -> None:
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    Run.objects.bulk_create(Run(config=config, dataset=dataset, created_by=lead) for _ in range(count))


@pytest.mark.parametrize("cases", [2, 10, 40])
def test_it_shows_a_run_page_in_constant_queries(
    eager, lead_client, rubric, dataset, lead, django_assert_num_queries, django_capture_on_commit_callbacks, cases
):
    make_cases(dataset, cases)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    with django_capture_on_commit_callbacks(execute=True):
        run = services.run_start(config=config, dataset=dataset, repeats=2, concurrency=2, spend_cap_usd=None,
                                 by=lead)
    url = reverse("judges:run_detail", args=[TEST_PROJECT, run.pk])
    # session, user, the project door's membership (with the project), the project's run with
    # config/rubric/dataset/creator, the cases' count and page, the page's judgments, the layers and errors present;
    # the agent's pass rate: the audit draws, the drawn cases and the cases' tallies counted (no sample yet, so no
    # drawn case's tally or human verdict to read); whether the stand-in served the run (Run.served_by_stand_in)
    with django_assert_num_queries(12):
        lead_client.get(url)
    # session, user, the door's membership, run (a partial: no navigation)
    with django_assert_num_queries(4):
        lead_client.get(reverse("judges:run_progress", args=[TEST_PROJECT, run.pk]))


@pytest.mark.parametrize("runs", [1, 5, 30])
@pytest.mark.parametrize("query", [{}, {"q": "store", "sort": "-cost"}])
def test_it_lists_runs_in_constant_queries(
    lead_client, rubric, dataset, lead, django_assert_num_queries, runs, query
):
    _many_runs(rubric, dataset, lead, runs)
    # session, user, the project door's membership, the count, the page of the project's runs with configs,
    # rubrics, datasets and creators; each row's agreement is loaded by its own
    # request once it shows
    with django_assert_num_queries(5):
        response = lead_client.get(reverse("judges:run_list", args=[TEST_PROJECT]), query)
    assert len(response.context["page"].object_list) == runs


def test_it_searches_and_sorts_runs(lead_client, rubric, dataset, lead):
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    other = Dataset.objects.create(project=dataset.project, slug="billing-chat", name="Billing")
    cheap = Run.objects.create(config=config, dataset=dataset, created_by=lead, cost_usd=Decimal("0.5"))
    dear = Run.objects.create(config=config, dataset=dataset, created_by=lead, cost_usd=Decimal("3"))
    billing = Run.objects.create(config=config, dataset=other, created_by=lead, cost_usd=Decimal("1"))
    url = reverse("judges:run_list", args=[TEST_PROJECT])

    def listed(**query):
        return [run.pk for run in lead_client.get(url, query).context["page"].object_list]

    assert listed() == [billing.pk, dear.pk, cheap.pk]  # newest first
    assert listed(q="billing") == [billing.pk]
    assert listed(q="store-supp") == [dear.pk, cheap.pk]
    assert listed(q=f"#{cheap.pk}") == [cheap.pk]
    assert listed(sort="-cost") == [dear.pk, billing.pk, cheap.pk]
    assert listed(sort="cost") == [cheap.pk, billing.pk, dear.pk]
    assert listed(sort="dataset") == [billing.pk, dear.pk, cheap.pk]
    assert listed(sort="created_by__password") == [billing.pk, dear.pk, cheap.pk]  # not offered: the default
    page = lead_client.get(url, {"q": "nothing-like-it"}).content.decode()
    assert "No run matches “nothing-like-it”." in page


def test_it_picks_two_finished_runs_to_compare(lead_client, finished_run, dataset, lead):
    Run.objects.create(config=finished_run.config, dataset=dataset, created_by=lead)  # queued: not comparable
    page = lead_client.get(reverse("judges:run_list", args=[TEST_PROJECT])).content.decode()

    assert f'action="{reverse("judges:run_compare", args=[TEST_PROJECT])}"' in page
    assert page.count('type="radio" name="a"') == page.count('type="radio" name="b"') == 1
    assert f'value="{finished_run.pk}"' in page
    assert reverse("judges:run_agreement", args=[TEST_PROJECT, finished_run.pk]) in page


def test_it_shows_a_runs_agreement_with_a_link_to_its_report(lead_client, finished_run, rubric, reviewer):
    # The contract fails every third case (no answer); the humans fail c000 and pass c001, c002.
    for external_id, verdict in (("c000", "fail"), ("c001", "pass"), ("c002", "fail")):
        case = finished_run.dataset.cases.get(external_id=external_id)
        Label.objects.create(case=case, rubric=rubric, reviewer=reviewer, verdict=verdict,
                             content_hash=case.content_hash)

    response = lead_client.get(reverse("judges:run_agreement", args=[TEST_PROJECT, finished_run.pk]))

    html = response.content.decode()
    assert 'data-testid="run-agreement">66.7 %</a>' in html  # 4 of 6 judgments agree
    assert reverse("judges:run_report", args=[TEST_PROJECT, finished_run.pk]) in html


def test_it_downloads_a_runs_judgments(lead_client, finished_run):
    response = lead_client.get(reverse("judges:run_export", args=[TEST_PROJECT, finished_run.pk, "jsonl"]))
    body = b"".join(response.streaming_content).decode()
    assert response["Content-Disposition"].startswith("attachment;")
    assert len(body.splitlines()) == 60
    assert lead_client.get(reverse("judges:run_export", args=[TEST_PROJECT, finished_run.pk, "xml"])).status_code == 404
