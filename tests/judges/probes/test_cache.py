"""The probe figures' cache: the polled panel computes nothing again until a probe or the run changes.
These tests commit (transactional_db): inside a test's transaction the cache is off, since rows written
by one transaction cannot be told apart by their version (as for the report's cache)."""

import pytest
from django.core.cache import cache
from django.urls import reverse

from judges.models import Judgment, Run
from tests.conftest import TEST_PROJECT
from tests.judges.probes.factories import make_probe
from tests.judges.promotion_factories import evidence_run

HTMX = {"HX-Request": "true"}


@pytest.fixture
def run(transactional_db, rubric, dataset, lead, reviewer):
    cache.clear()
    yield evidence_run(rubric, dataset, lead, reviewer)
    cache.clear()


def test_the_polled_panel_reads_the_probe_figures_from_the_cache_until_a_probe_changes(
    lead_client, run, django_assert_num_queries
):
    url = reverse("judges:probes_panel", args=[TEST_PROJECT, run.pk])
    make_probe(run, "verbosity", moved=2)
    at_work = make_probe(run, "sycophancy", moved=0, status=Run.Status.RUNNING)
    assert lead_client.get(url, headers=HTMX).status_code == 200  # computes and caches
    # session, user, the project door's membership, run; the probes' cache key, the probe runs, the variants of the
    # moved cases listed; the agent models (the run's judge has a model: self-preference).
    with django_assert_num_queries(8):
        html = lead_client.get(url, headers=HTMX).content.decode()
    assert 'data-testid="moved-share-verbosity">5.0 %' in html
    assert 'data-testid="moved-share-sycophancy"' not in html
    # The sycophancy probe finishes: its row is written, the key changes, its figures show at once.
    Judgment.objects.filter(run=at_work, case__external_id="case-039").update(outcome="pass")  # the run: fail
    Run.objects.filter(pk=at_work.pk).update(status=Run.Status.FINISHED)
    html = lead_client.get(url, headers=HTMX).content.decode()
    assert 'data-testid="moved-share-sycophancy">2.5 %' in html
    # A change to the run's own judgments (written with its row, as every service does) shows too.
    Judgment.objects.filter(run=run, case__external_id="case-039").update(outcome="pass")
    Run.objects.filter(pk=run.pk).update(done=run.done)
    html = lead_client.get(url, headers=HTMX).content.decode()
    assert 'data-testid="moved-share-sycophancy">0.0 %' in html
