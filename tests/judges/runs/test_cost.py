"""Unknown is not zero: a run counts its judgments of unknown cost (a model with no price), every page shows
such a run's cost as unknown or partly unknown, and migration 0009 counts them on runs stored before."""

import importlib
import uuid
from decimal import Decimal

import pytest
from django.apps import apps
from django.urls import reverse

from judges.calibration.selectors import run_figures
from judges.configs import services as config_services
from judges.models import Judgment, ModelPrice, Run
from judges.runs.importing import EXTERNAL
from tests.conftest import TEST_PROJECT
from tests.judges.helpers import CONTRACT_SPEC, MODEL, behavioral_spec, make_cases
from tests.judges.report_factories import make_config

migration = importlib.import_module("judges.migrations.0009_run_unknown_cost_judgments")

pytestmark = pytest.mark.django_db
SECOND = "claude-haiku-4-5-20251001"


@pytest.fixture
def eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.EVALHUB_CHUNK_CASES = 4


def start_run(client, config, capture) -> Run:
    data = {"dataset": "store-support", "repeats": 2, "concurrency": 2, "spend_cap_usd": "",
            "start_token": uuid.uuid4()}
    with capture(execute=True):
        assert client.post(reverse("judges:run_create", args=[TEST_PROJECT, config.pk]), data).status_code == 302
    return Run.objects.order_by("-pk").first()


COST = "<dt>Cost</dt><dd>"


def cost_shown(client, run, other) -> dict[str, str]:
    """The run's cost cell on the run list, its page, its report and compare."""
    def after(html: str, marker: str) -> str:
        return html.split(marker, 1)[1][:200]
    listing = client.get(reverse("judges:run_list", args=[TEST_PROJECT])).content.decode()
    compare = client.get(reverse("judges:run_compare", args=[TEST_PROJECT]) + f"?a={run.pk}&b={other.pk}").text
    return {
        "list": after(listing.split(f'href="{reverse("judges:run_detail", args=[TEST_PROJECT, run.pk])}"', 1)[1],
                      'data-testid="run-cost">'),
        "page": after(client.get(reverse("judges:run_detail", args=[TEST_PROJECT, run.pk])).text, COST),
        "report": after(client.get(reverse("judges:run_report", args=[TEST_PROJECT, run.pk])).text, COST),
        "compare": after(compare, "<tr><th>cost</th><td class=\"num\">"),
    }


def test_a_run_on_an_unpriced_model_is_unknown_on_every_page_never_zero(
    eager, lead_client, rubric, dataset, lead, fake_provider, django_capture_on_commit_callbacks
):
    make_cases(dataset, 4)
    unpriced = start_run(lead_client, config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead),
                         django_capture_on_commit_callbacks)
    free = start_run(lead_client, config_services.judge_config_save(rubric=rubric, spec=CONTRACT_SPEC, by=lead),
                     django_capture_on_commit_callbacks)
    unpriced.refresh_from_db()
    free.refresh_from_db()

    assert (unpriced.provider_calls, unpriced.cost_usd, unpriced.unknown_cost_judgments) == (8, Decimal(0), 8)
    assert (free.provider_calls, free.unknown_cost_judgments) == (0, 0)
    for where, cell in cost_shown(lead_client, unpriced, free).items():
        assert cell.startswith("unknown (model not priced)<"), where
    for where, cell in cost_shown(lead_client, free, unpriced).items():
        assert cell.startswith("$0 (no calls)<"), where
    # The report's JSON keeps raw numbers: unknown is null there, not 0.
    figures = run_figures(run=Run.objects.select_related("config__rubric").get(pk=unpriced.pk))
    assert (figures["cost_usd"], figures["unknown_cost_judgments"]) == (None, 8)


def test_a_run_partly_priced_shows_what_is_known_and_says_the_rest_is_not(
    eager, lead_client, rubric, dataset, lead, fake_provider, django_capture_on_commit_callbacks
):
    make_cases(dataset, 8)
    ModelPrice.objects.create(model=MODEL, input_per_mtok=1000, output_per_mtok=1000, updated_by=lead)
    second = {"role": "second_opinion", "provider": "anthropic", "model": SECOND,  # no price
              "base_url_env": "EVALHUB_JUDGE_ANTHROPIC_URL", "api_key_env": "EVALHUB_JUDGE_API_KEY",
              "when": {"mode": "sample", "share": 0.5}}
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(secondary=second), by=lead)
    run = start_run(lead_client, config, django_capture_on_commit_callbacks)
    run.refresh_from_db()

    unknown = Judgment.objects.filter(run=run, cost_usd__isnull=True).count()
    assert 0 < unknown < 16 and run.unknown_cost_judgments == unknown
    known = sum(Judgment.objects.filter(run=run, cost_usd__isnull=False).values_list("cost_usd", flat=True))
    assert run.cost_usd == known > 0
    page = lead_client.get(reverse("judges:run_detail", args=[TEST_PROJECT, run.pk])).content.decode()
    assert "<dt>Cost</dt><dd>$" in page and " + unpriced calls</dd>" in page


def test_the_migration_counts_the_judgments_of_unknown_cost_on_stored_runs(rubric, dataset, lead):
    a, b, c = make_cases(dataset, 3)
    config = make_config(rubric, lead, behavioral=True)
    unpriced, priced, imported = (Run.objects.create(config=config, dataset=dataset, created_by=lead) for _ in "abc")
    Judgment.objects.bulk_create([
        Judgment(run=unpriced, case=a, repeat=1, outcome="pass", layer="behavioral", cost_usd=None),
        Judgment(run=unpriced, case=b, repeat=1, outcome="fail", layer="behavioral", cost_usd=None),
        Judgment(run=unpriced, case=c, repeat=1, outcome="pass", layer="behavioral", cost_usd=Decimal("0"),
                 cached=True),
        Judgment(run=priced, case=a, repeat=1, outcome="pass", layer="behavioral", cost_usd=Decimal("0.01")),
        # Another tool's verdicts: evalhub made no call, so nothing of unknown cost.
        Judgment(run=imported, case=a, repeat=1, outcome="pass", layer=EXTERNAL, cost_usd=None),
    ])

    migration.count_unpriced(apps, None)

    counted = dict(Run.objects.values_list("pk", "unknown_cost_judgments"))
    assert counted == {unpriced.pk: 2, priced.pk: 0, imported.pk: 0}
