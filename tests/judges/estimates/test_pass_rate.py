"""The agent's pass rate of a stored run: the figures from the database against ppi_py, the API
(`runs:read`), `manage.py pass_rate`, and the run page with its draw form."""

import json
from io import StringIO

import numpy as np
import pytest
from django.core.management import call_command
from django.db.models import Count, Max, Q
from django.urls import reverse
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

from evalhub.models import ApiToken, Scope
from judges.calibration.estimates import Sample, pass_rate, probability_in_draw
from judges.estimates.selectors import RunCases, RunSample, interval_history, run_cases, run_pass_rate, uncertainty
from judges.estimates.services import audit_sample_draw
from judges.models import AuditDraw, AuditSampleCase
from judges.runs.tallies import case_tallies_refresh
from labeling.disputes.selectors import cases_with_human_verdict
from labeling.models import Case
from tests.conftest import TEST_PROJECT, store_project
from tests.judges.estimates.factories import make_sampled_run
from tests.judges.report_factories import label, make_cases, make_config, make_run

pytestmark = pytest.mark.django_db
DESIGN_KEYS = {"estimate", "ci95", "method", "lambda", "n_drawn", "n_labeled", "n_pending", "N", "judge_pass_rate",
               "human_only", "effective_labels", "by_category", "min_labels"}


def truth(external_id: str) -> str:
    return "fail" if int(external_id[1:]) % 3 == 0 else "pass"


@pytest.fixture
def run(dataset, rubric, lead):
    return make_sampled_run(dataset, rubric, lead)


@pytest.fixture
def labeled_run(run, rubric, reviewer, lead):
    """42 of 60 cases drawn uniformly, 36 of them labeled (6 pending; an estimate needs 30): (run, drawn ids,
    verdicts)."""
    drawn = audit_sample_draw(run=run, size=42, method="uniform", seed=4, by=lead)
    verdicts = {}
    for i, external_id in enumerate(drawn.external_ids[:36]):
        verdicts[external_id] = "fail" if i % 3 == 0 else "pass"  # in the order labeled: a mix from the start
        label(Case.objects.get(dataset=run.dataset, external_id=external_id), rubric, reviewer, verdicts[external_id])
    return run, drawn.external_ids, verdicts


def test_the_figures_equal_ppi_py_on_the_labeled_drawn_cases(labeled_run):
    run, drawn, verdicts = labeled_run
    figures = run_pass_rate(run=run)
    cases = run_cases(run=run)
    f = dict(zip(cases.external_id, cases.f, strict=True))
    labeled = drawn[:36]
    y = np.array([1.0 if verdicts[e] == "pass" else 0.0 for e in labeled])
    yhat = np.array([f[e] for e in labeled])
    unlabeled = np.array([f[e] for e in cases.external_id if e not in set(labeled)])  # the cases NOT labeled
    assert figures["estimate"] == pytest.approx(float(ppi_mean_pointestimate(y, yhat, unlabeled)[0]), abs=1e-9)
    low, high = ppi_mean_ci(y, yhat, unlabeled, alpha=0.05)
    assert figures["ci95"][0] <= figures["estimate"] <= figures["ci95"][1]
    assert figures["ci95"][1] - figures["ci95"][0] >= high[0] - low[0]  # the score interval is the wider here
    assert (figures["n_drawn"], figures["n_labeled"], figures["n_pending"], figures["N"]) == (42, 36, 6, 60)
    assert figures["human_only"]["estimate"] == pytest.approx(y.mean())
    assert figures["judge_pass_rate"] == pytest.approx(cases.f.mean())
    assert figures["method"] == "uniform"


def test_labels_outside_the_sample_never_enter_the_estimate(labeled_run, rubric, second_reviewer):
    run, drawn, _ = labeled_run
    before = run_pass_rate(run=run)
    for case in Case.objects.filter(dataset=run.dataset).exclude(external_id__in=drawn)[:10]:
        label(case, rubric, second_reviewer, "fail")
    assert run_pass_rate(run=run) == before


def test_the_history_replays_the_labels_in_order_and_ends_at_the_estimate(labeled_run):
    run, *_ = labeled_run
    figures = run_pass_rate(run=run, history=True)
    history = figures["history"]
    assert history[-1]["labels"] == 36 and history[-1]["estimate"] == pytest.approx(figures["estimate"])
    assert history[0]["labels"] == 30  # the fewest labels an estimate needs
    assert [p["labels"] for p in history] == sorted({p["labels"] for p in history})
    assert history[0]["ci95"][1] - history[0]["ci95"][0] > history[-1]["ci95"][1] - history[-1]["ci95"][0]


def test_an_active_sample_is_weighted(run, rubric, reviewer, lead):
    drawn = audit_sample_draw(run=run, size=40, method="active", seed=2, by=lead)
    for external_id in drawn.external_ids:
        label(Case.objects.get(dataset=run.dataset, external_id=external_id), rubric, reviewer, truth(external_id))
    figures = run_pass_rate(run=run)
    assert figures["method"] == "active" and figures["n_pending"] == 0 and figures["provisional"] is None
    assert 0 <= figures["ci95"][0] <= figures["estimate"] <= figures["ci95"][1] <= 1


def per_case_figures(run) -> dict:
    """The figures from every case of N read one by one from the run's judgments, in case order: the
    estimate's input as it was built before the tallies, for comparison with the tallies' shortcut."""
    in_run = Q(judgments__run=run)
    rows = list(Case.objects.filter(in_run, output__isnull=False).annotate(
        evaluated=Count("judgments", filter=in_run & Q(judgments__outcome__in=["pass", "fail"])),
        passes=Count("judgments", filter=in_run & Q(judgments__outcome="pass")),
    ).order_by("pk").values_list("pk", "external_id", "category", "evaluated", "passes"))
    evaluated, passes = (np.array([row[i] for row in rows], dtype=float) for i in (3, 4))
    cases = RunCases(case_id=np.array([row[0] for row in rows]), external_id=[row[1] for row in rows],
                     category=np.array([row[2] or "" for row in rows], dtype=object),
                     f=np.divide(passes, evaluated, out=np.full(len(rows), np.nan), where=evaluated > 0),
                     similarity=np.full(len(rows), np.nan))
    index = {case_id: i for i, case_id in enumerate(cases.case_id.tolist())}
    draws = list(run.audit_draws.order_by("created_at", "id"))
    drawn = np.full(len(rows), -1)
    for case_id, draw_id in AuditSampleCase.objects.filter(run=run).values_list("case_id", "draw_id"):
        drawn[index[case_id]] = [d.pk for d in draws].index(draw_id)
    probabilities = np.column_stack([
        probability_in_draw(uncertainty(run=run, cases=cases, source=d.uncertainty), scale=d.scale,
                            uniform_share=d.uniform_share) for d in draws])
    human, verdict_at = np.full(len(rows), np.nan), [None] * len(rows)
    verdicts = cases_with_human_verdict(rubric=run.config.rubric, cases=Case.objects.filter(pk__in=list(index)))
    for case_id, verdict, when in verdicts.annotate(at=Max("labels__updated_at")).values_list("pk", "human_verdict",
                                                                                             "at"):
        if verdict is not None and drawn[index[case_id]] >= 0:
            human[index[case_id]], verdict_at[index[case_id]] = float(verdict == "pass"), when
    sample = Sample(f=cases.f, category=cases.category, draw=drawn, human=human, probabilities=probabilities,
                    uniform=all(d.method == "uniform" for d in draws))
    return {**pass_rate(sample), "history": interval_history(RunSample(cases, sample, verdict_at))}


def assert_same_figures(got, expected, path="figures"):
    if isinstance(expected, dict):
        assert set(got) == set(expected), path
        for key in expected:
            assert_same_figures(got[key], expected[key], f"{path}.{key}")
    elif isinstance(expected, list):
        assert len(got) == len(expected), path
        for i, (a, b) in enumerate(zip(got, expected, strict=True)):
            assert_same_figures(a, b, f"{path}[{i}]")
    elif isinstance(expected, float):
        assert got == pytest.approx(expected, rel=1e-12, abs=1e-12), path
    else:
        assert got == expected, path


def test_the_figures_from_the_tallies_equal_those_from_every_case_read_one_by_one(run, rubric, reviewer, lead,
                                                                                   monkeypatch):
    """Two draws (uniform, then active: weighted), pending cases, a case with no output (not in N) and one
    whose every repeat was not evaluated (f filled with the mean): every figure, and the history, alike.
    Categories get figures from 10 labels here (not 30) so that their figures are compared too."""
    monkeypatch.setattr("judges.calibration.estimates.MIN_LABELS", 10)
    monkeypatch.setattr("judges.estimates.selectors.HISTORY_FIRST", 10)
    cases = list(Case.objects.filter(dataset=run.dataset).order_by("pk"))
    Case.objects.filter(pk=cases[1].pk).update(output=None)
    run.judgments.filter(case=cases[2]).update(outcome="not_evaluated")
    case_tallies_refresh(run_id=run.pk, case_ids=[cases[2].pk])  # as every writer of judgments does
    uniform = audit_sample_draw(run=run, size=20, method="uniform", seed=4, by=lead).external_ids
    active = audit_sample_draw(run=run, size=15, method="active", seed=9, by=lead).external_ids
    for external_id in (uniform + active)[:-6]:
        label(Case.objects.get(dataset=run.dataset, external_id=external_id), rubric, reviewer, truth(external_id))
    figures = run_pass_rate(run=run, history=True)
    assert figures["method"] == "active" and figures["n_pending"] > 0 and figures["history"]
    assert any(c["estimate"] is not None for c in figures["by_category"].values())
    assert_same_figures(figures, per_case_figures(run))


def _token(lead, project=None) -> str:
    return ApiToken.issue(project=project or store_project(), name="ci", scopes=[Scope.RUNS_READ], created_by=lead)[1]


def test_the_api_returns_designs_fields_and_the_command_the_same(client, labeled_run, lead):
    run, *_ = labeled_run
    url = reverse("judges:api_run_pass_rate", args=[run.pk])
    assert client.get(url).status_code == 401
    wrong = ApiToken.issue(project=run.dataset.project, name="ci", scopes=[Scope.GATES_READ], created_by=lead)[1]
    assert client.get(url, headers={"Authorization": f"Bearer {wrong}"}).status_code == 403
    response = client.get(url, headers={"Authorization": f"Bearer {_token(lead)}"})
    assert response.status_code == 200
    body = response.json()
    assert DESIGN_KEYS <= set(body) and set(body["human_only"]) == {"estimate", "ci95"}
    assert body["provisional"]["all_fail"] <= body["estimate"] <= body["provisional"]["all_pass"]
    out = StringIO()
    call_command("pass_rate", str(run.pk), "--json", stdout=out)
    assert json.loads(out.getvalue()) == body
    missing = client.get(reverse("judges:api_run_pass_rate", args=[999999]),
                         headers={"Authorization": f"Bearer {_token(lead)}"})
    assert missing.status_code == 404 and "error" in missing.json()


def test_the_command_prints_a_readable_summary(labeled_run):
    run, *_ = labeled_run
    out = StringIO()
    call_command("pass_rate", str(run.pk), stdout=out)
    text = out.getvalue()
    assert "agent's pass rate" in text and "95 % CI" in text
    assert "6 of 42 drawn cases still unlabeled" in text
    assert "drawn at random, as recorded" in text


def test_the_run_page_shows_the_estimate_and_how_it_narrowed(lead_client, labeled_run):
    run, *_ = labeled_run
    page = lead_client.get(reverse("judges:run_detail", args=[TEST_PROJECT, run.pk])).content.decode()
    figures = run_pass_rate(run=run)
    assert f"{figures['estimate'] * 100:.1f} %" in page
    assert "6 of 42 drawn cases still unlabeled" in page
    assert 'data-testid="pass-rate-chart"' in page
    assert "drawn at random, as recorded" in page


def test_the_run_page_draws_a_sample_for_a_lead(lead_client, run):
    url = reverse("judges:audit_sample_create", args=[TEST_PROJECT, run.pk])
    response = lead_client.post(url, {"size": "12", "method": "uniform"}, follow=True)
    assert response.status_code == 200
    assert "12 cases drawn" in response.content.decode()
    assert AuditDraw.objects.get().size == 12


@pytest.mark.parametrize("data", [{"size": "0", "method": "uniform"}, {"size": "many", "method": "uniform"},
                                  {"size": "5", "method": "<script>"}, {}])
def test_bad_input_draws_nothing_and_says_why(lead_client, run, data):
    response = lead_client.post(reverse("judges:audit_sample_create", args=[TEST_PROJECT, run.pk]), data, follow=True)
    assert response.status_code == 200
    assert "No cases drawn" in response.content.decode() and "<script>" not in response.content.decode()
    assert not AuditDraw.objects.exists()


def test_active_without_uncertainty_is_refused_on_the_page(lead_client, dataset, rubric, lead):
    cases = make_cases(dataset, [("a", "policy")])
    run = make_run(make_config(rubric, lead), dataset, lead, {cases[0]: ["pass"]})
    response = lead_client.post(reverse("judges:audit_sample_create", args=[TEST_PROJECT, run.pk]),
                                {"size": "1", "method": "active"}, follow=True)
    assert "draw a uniform sample instead" in response.content.decode()


def test_reviewers_may_not_draw(reviewer_client, run):
    response = reviewer_client.post(reverse("judges:audit_sample_create", args=[TEST_PROJECT, run.pk]), {"size": "3"})
    assert response.status_code in (403, 404)
    assert not AuditDraw.objects.exists()


def test_the_overview_shows_each_rubrics_latest_estimate(lead_client, labeled_run, rubric):
    run, *_ = labeled_run
    page = lead_client.get(reverse("judges:promotion_overview", args=[TEST_PROJECT])).content.decode()
    figures = run_pass_rate(run=run)
    assert f"{figures['estimate'] * 100:.1f} %" in page
    assert f"run {run.pk}</a>, 36 of 42 labeled" in page


def test_too_few_labels_say_so_on_the_page_and_in_the_command(lead_client, run, rubric, reviewer, lead):
    # Before: 15 of 40 labeled read "Worth, in labels 51", an interval and all.
    drawn = audit_sample_draw(run=run, size=20, method="uniform", seed=4, by=lead)
    for external_id in drawn.external_ids[:15]:
        label(Case.objects.get(dataset=run.dataset, external_id=external_id), rubric, reviewer, truth(external_id))
    figures = run_pass_rate(run=run)
    assert (figures["estimate"], figures["effective_labels"], figures["min_labels"]) == (None, None, 30)
    page = lead_client.get(reverse("judges:run_detail", args=[TEST_PROJECT, run.pk])).content.decode()
    assert "15 labeled: too few labels yet" in page and "with 30 labeled drawn cases" in page
    out = StringIO()
    call_command("pass_rate", str(run.pk), stdout=out)
    assert "too few labels: 15 labeled drawn cases, an estimate needs 30" in out.getvalue()
