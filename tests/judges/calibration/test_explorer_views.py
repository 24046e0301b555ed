"""The threshold explorer on a run's report, from a real run (semantic layer and judge on the stand-in)."""

import pytest
from django.urls import reverse

from judges.calibration.selectors import run_figures
from judges.configs import services as config_services
from judges.runs import services
from tests.conftest import TEST_PROJECT
from tests.judges.helpers import CONTRACT_SPEC, behavioral_spec, give_golden_answers, make_cases, semantic_spec
from tests.judges.report_factories import label


@pytest.fixture
def eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.EVALHUB_CHUNK_CASES = 5


def start(config, dataset, lead, capture):
    with capture(execute=True):
        run = services.run_start(config=config, dataset=dataset, repeats=1, concurrency=2, spend_cap_usd=None,
                                 by=lead)
    run.refresh_from_db()
    return run


@pytest.fixture
def semantic_run(eager, dataset, rubric, lead, reviewer, fake_provider, django_capture_on_commit_callbacks):
    """Ten cases, labeled (c000, c003, c004 fail, the rest pass); a config with the semantic layer (pass
    at 0.8, fail below 0.3) and the judge (the stand-in fails every case it is sent)."""
    cases = make_cases(dataset, 10)
    give_golden_answers(cases)
    for i, case in enumerate(cases):
        label(case, rubric, reviewer, "fail" if i in (0, 3, 4) else "pass")
    fake_provider.control(rule={"kind": "always_fail"})
    spec = {**behavioral_spec(), **semantic_spec(pass_at=0.8, fail_below=0.3), "layers": ["semantic", "behavioral"]}
    config = config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)
    return start(config, dataset, lead, django_capture_on_commit_callbacks)


def test_the_report_shows_the_explorer_at_the_runs_own_thresholds(lead_client, semantic_run):
    response = lead_client.get(reverse("judges:run_report", args=[TEST_PROJECT, semantic_run.pk]))
    assert response.status_code == 200
    explorer = response.context["explorer"]
    current, chosen = dict(explorer["rows"])["this run's"], dict(explorer["rows"])["chosen"]
    # At its own thresholds the replay is the run: the same agreement as the report's figures.
    assert current["agreement"] == pytest.approx(run_figures(run=semantic_run)["agreement"])
    assert current == chosen
    # make_cases' answers sit at 0.67 from their golden answers (sent to the judge), the empty ones at 0.
    assert (current["with_similarity"], current["judge_calls_saved"], current["judge_needed"]) == (10, 4, 0)
    html = response.content.decode()
    assert 'data-testid="explorer-chart"' in html and "pass_at 0.80 (run)" in html and "fail_below 0.30 (run)" in html
    assert "Save as a new config version with these thresholds" in html


def test_another_pass_at_replays_the_similarities(lead_client, semantic_run):
    response = lead_client.get(reverse("judges:run_report", args=[TEST_PROJECT, semantic_run.pk]), {"pass_at": "0.6"})
    chosen = dict(response.context["explorer"]["rows"])["chosen"]
    # Every non-empty answer now passes by similarity: no judge call, the human-failed ones false passes.
    assert (chosen["pass_at"], chosen["judge_calls_saved"], chosen["sent_to_judge"]) == (0.6, 10, 0)
    assert (chosen["false_pass"], chosen["false_fail"]) == (1, 2)  # c004 passes; the empty c006 and c009 fail
    html = response.content.decode()
    assert "pass_at 0.60 (chosen)" in html
    assert "pass_at=0.6" in html and "fail_below=0.3" in html  # the save link carries the choice


def test_a_lower_fail_below_leaves_cases_judge_needed(lead_client, semantic_run):
    # At 0.9 the answers fall between the thresholds: the run's judge verdicts count for them.
    high = lead_client.get(reverse("judges:run_report", args=[TEST_PROJECT, semantic_run.pk]), {"pass_at": "0.9"})
    assert dict(high.context["explorer"]["rows"])["chosen"]["judge_needed"] == 0
    # With no fail_below the empty answers too would go to the judge, which never saw them: judge needed.
    none = lead_client.get(reverse("judges:run_report", args=[TEST_PROJECT, semantic_run.pk]),
                           {"pass_at": "0.8", "fail_below": ""})
    assert dict(none.context["explorer"]["rows"])["chosen"]["judge_needed"] == 4


@pytest.mark.parametrize(("query", "message"), [
    ({"pass_at": "high"}, "pass_at must be a number from 0 to 1, not 'high'"),
    ({"pass_at": "1.5"}, "pass_at must be a number from 0 to 1, not 1.5"),
    ({"pass_at": "0.5", "fail_below": "0.7"}, "fail_below 0.7 is above pass_at 0.5"),
])
def test_bad_thresholds_are_a_message_not_a_500(lead_client, semantic_run, query, message):
    response = lead_client.get(reverse("judges:run_report", args=[TEST_PROJECT, semantic_run.pk]), query)
    assert response.status_code == 200
    assert any(error.startswith(message) for error in response.context["explorer"]["errors"])


def test_htmx_swaps_only_the_explorer(lead_client, semantic_run):
    response = lead_client.get(reverse("judges:run_report", args=[TEST_PROJECT, semantic_run.pk]), {"pass_at": "0.7"},
                               headers={"HX-Request": "true", "HX-Target": "threshold-explorer"})
    html = response.content.decode()
    assert html.lstrip().startswith('<section class="card threshold-explorer" id="threshold-explorer"')
    assert "Disagreements" not in html


def test_a_run_without_similarities_has_no_explorer(
    eager, lead_client, dataset, rubric, lead, django_capture_on_commit_callbacks
):
    make_cases(dataset, 3)
    config = config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead)
    run = start(config, dataset, lead, django_capture_on_commit_callbacks)
    response = lead_client.get(reverse("judges:run_report", args=[TEST_PROJECT, run.pk]))
    assert response.context["explorer"] is None
    assert "threshold-explorer" not in response.content.decode()


def test_save_as_a_new_version_prefills_the_editor_with_the_chosen_thresholds(lead_client, semantic_run):
    url = reverse("judges:config_create", args=[TEST_PROJECT, semantic_run.config.rubric.slug])
    response = lead_client.get(url, {"from": semantic_run.config.pk, "pass_at": "0.65", "fail_below": "0.25"})
    form = response.context["form"]
    assert (form.initial["semantic_pass_at"], form.initial["semantic_fail_below"]) == (0.65, 0.25)
    assert form.initial["semantic_model"] == "text-embedding-3-small"


def test_the_run_page_and_the_disagreements_show_the_similarity(lead_client, semantic_run):
    run_page = lead_client.get(reverse("judges:run_detail", args=[TEST_PROJECT, semantic_run.pk])).content.decode()
    assert "Similarity" in run_page and ">0.67<" in run_page
    report = lead_client.get(reverse("judges:run_report", args=[TEST_PROJECT, semantic_run.pk])).content.decode()
    assert "similarity 0.67" in report
