"""The bias probes on the pages: the report's panel (start, follow, moved cases with their variants),
the self-preference warning, the config page's table, and probes kept out of run lists and the chart."""

import re

import pytest
from django.urls import reverse

from judges.calibration.charts import rubric_versions_chart
from judges.configs import services as config_services
from judges.models import Run
from judges.runs.variants import INJECTED_INSTRUCTION, PADDING_BEFORE
from labeling.models import Case
from tests.conftest import TEST_PROJECT
from tests.judges.helpers import behavioral_spec
from tests.judges.probes.factories import make_probe
from tests.judges.promotion_factories import evidence_run
from tests.judges.report_factories import label, make_cases, make_config, make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(rubric, dataset, lead, reviewer) -> Run:
    return evidence_run(rubric, dataset, lead, reviewer)


def report(client, run) -> str:
    response = client.get(reverse("judges:run_report", args=[TEST_PROJECT, run.pk]))
    assert response.status_code == 200
    return response.content.decode()


def panel(html: str) -> str:
    start = html.index('id="probes"')
    return html[start:html.index("</section>", start)]


def start_url(run) -> str:
    return reverse("judges:probes_start", args=[TEST_PROJECT, run.pk])


def panel_url(run) -> str:
    return reverse("judges:probes_panel", args=[TEST_PROJECT, run.pk])


HTMX = {"HX-Request": "true"}


def test_the_probe_pages_are_for_leads_only(reviewer_client, run):
    assert reviewer_client.post(start_url(run), {"kinds": ["verbosity"]}).status_code == 403
    assert reviewer_client.get(panel_url(run), headers=HTMX).status_code == 403
    assert not Run.objects.filter(parent=run).exists()


def test_a_finished_runs_report_offers_every_probe(lead_client, run):
    page = report(lead_client, run)
    assert '<summary><h2>Bias probes</h2> <span class="fold-key">none finished</span>' in page  # the panel's fold
    html = panel(page)
    for kind in ("verbosity", "sycophancy", "injection"):
        assert f'name="kinds" value="{kind}"' in html
    assert f'action="{start_url(run)}"' in html and f'hx-post="{start_url(run)}"' in html
    assert "hx-trigger" not in html  # nothing at work: no polling


def test_starting_probes_queues_them_and_goes_back_to_the_panel(lead_client, run, lead):
    response = lead_client.post(start_url(run), {"kinds": ["verbosity", "injection"]})
    assert response.status_code == 302
    assert response["Location"] == reverse("judges:run_report", args=[TEST_PROJECT, run.pk]) + "#probes"
    probes = list(Run.objects.filter(parent=run).order_by("pk"))
    assert [(p.probe, p.status, p.created_by) for p in probes] == [
        ("verbosity", "queued", lead), ("injection", "queued", lead),
    ]
    assert probes[0].total == 80 and probes[1].total == 40  # 40 cases × K=2; injection: the 20 human fails
    html = panel(report(lead_client, run))
    assert f'hx-get="{panel_url(run)}"' in html and 'hx-trigger="every 2s"' in html  # followed while at work
    assert f'href="{reverse("judges:run_detail", args=[TEST_PROJECT, probes[0].pk])}"' in html
    assert '<progress max="80" value="0">' in html
    # A probe at work cannot be asked for again.
    assert 'value="verbosity" disabled' in html and 'value="sycophancy" checked' in html


def test_with_htmx_the_start_answers_with_the_panel(lead_client, run):
    response = lead_client.post(start_url(run), {"kinds": ["sycophancy"]}, headers=HTMX)
    html = response.content.decode()
    assert response.status_code == 200 and html.lstrip().startswith('<section class="card probes" id="probes"')
    probe = Run.objects.get(parent=run)
    assert f"Started: sycophancy (run {probe.pk})" in html and 'hx-trigger="every 2s"' in html


def test_a_refused_start_says_why_and_starts_nothing(lead_client, run):
    response = lead_client.post(start_url(run), {}, headers=HTMX)
    assert 'data-testid="probe-error">Choose at least one probe.' in response.content.decode()
    response = lead_client.post(start_url(run), {"kinds": ["nonsense"]}, follow=True)
    assert "Unknown probe nonsense" in response.content.decode()
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    html = panel(report(lead_client, run))
    assert "name=\"kinds\"" not in html and "they can start once it has finished" in html
    assert not Run.objects.filter(parent=run).exists()


def test_the_polled_panel_stops_when_no_probe_is_at_work(lead_client, run):
    probe = make_probe(run, "verbosity", moved=0, status=Run.Status.RUNNING)
    assert lead_client.get(panel_url(run), headers=HTMX).status_code == 200
    Run.objects.filter(pk=probe.pk).update(status=Run.Status.FINISHED)
    response = lead_client.get(panel_url(run), headers=HTMX)
    assert response.status_code == 286 and "hx-trigger" not in response.content.decode()
    # Without htmx the panel lives on the report.
    assert lead_client.get(panel_url(run))["Location"].endswith("#probes")


def test_the_report_shows_what_each_probe_moved_with_the_variant_judged(lead_client, run, rubric):
    # Untrusted text: an answer with markup must come back escaped inside the variant.
    Case.objects.filter(dataset=run.dataset, external_id="case-001").update(output="<b>Returns</b> in 30 days.")
    verbosity = make_probe(run, "verbosity", moved=3)
    injection = make_probe(run, "injection", moved=2)
    html = panel(report(lead_client, run))

    row = html[html.index('data-probe="verbosity"'):html.index('data-probe="sycophancy"')]
    assert '<td class="num">40</td>' in row and 'data-testid="moved-share-verbosity">7.5 %' in row
    assert 'data-testid="moved-injection">2 <span class="muted">(1 to pass)</span>' in html  # case-000 passed
    moved = html[html.index('data-testid="moved-cases-verbosity"'):html.index('data-testid="moved-cases-injection"')]
    assert re.findall(r'data-case="([^"]+)"', moved) == ["case-000", "case-001", "case-002"]
    case_001 = Case.objects.get(external_id="case-001")
    assert f'href="{reverse("labeling:case_detail", args=[TEST_PROJECT, case_001.pk])}"' in moved
    assert PADDING_BEFORE in moved and "&lt;b&gt;Returns&lt;/b&gt; in 30 days." in moved and "<b>Returns" not in moved
    assert f"probe run {verbosity.pk}" in moved
    assert INJECTED_INSTRUCTION in html[html.index('data-testid="moved-cases-injection"'):]
    assert f"probe run {injection.pk}" in html
    assert 'data-testid="probe-moved">Largest share of verdicts a probe moved: <strong>7.5 %</strong>' in html
    assert "No promotion rule reads it yet" in html


@pytest.mark.parametrize("moved", [1, 30])
def test_the_reports_query_count_does_not_grow_with_moved_cases(lead_client, run, moved, django_assert_num_queries):
    make_probe(run, "verbosity", moved=moved)
    make_probe(run, "sycophancy", moved=moved)
    make_probe(run, "injection", moved=0, status=Run.Status.RUNNING)
    # session, user, the project door's memberships (the navigation's switcher too), run; evidence key,
    # judgments counted per case, human verdicts, the not-evaluated judgments, reviewer labels, the newest finished
    # probes and their judgments counted per case, changed cases, newest version (rules), the page's repeats; the
    # probe runs and the variants of the moved cases listed; the agent models (the run's judge has a model:
    # self-preference), and whether the stand-in served the run (one check, whatever the cases).
    with django_assert_num_queries(18):
        html = report(lead_client, run)
    assert html.count('data-case="case-0') >= moved


def test_a_probe_run_is_not_listed_among_runs_nor_drawn_as_its_versions_run(lead_client, run, rubric):
    probe = make_probe(run, "verbosity", moved=4)
    listed = lead_client.get(reverse("judges:run_list", args=[TEST_PROJECT])).content.decode()
    assert f'href="{reverse("judges:run_detail", args=[TEST_PROJECT, run.pk])}"' in listed
    assert f'href="{reverse("judges:run_detail", args=[TEST_PROJECT, probe.pk])}"' not in listed
    [column] = rubric_versions_chart(rubric=rubric).columns
    assert column["run"] == run.pk and column["probes"]["verbosity"]["moved"] == 4
    page = lead_client.get(reverse("judges:config_list", args=[TEST_PROJECT, rubric.slug])).content.decode()
    table = page[page.index('data-testid="version-probes"'):]
    assert f'href="{reverse("judges:run_report", args=[TEST_PROJECT, run.pk])}#probes"' in table
    assert '<td class="num" data-probe="verbosity">10.0 % <span class="muted">(4 of 40)</span></td>' in table
    # The probe's own page says what it is; its report cannot be probed again.
    detail = lead_client.get(reverse("judges:run_detail", args=[TEST_PROJECT, probe.pk])).content.decode()
    assert "Bias probe <strong>verbosity</strong>" in detail
    assert f"itself a verbosity probe of run {run.pk}" in panel(report(lead_client, probe))


def test_it_warns_when_the_judge_and_the_agent_share_a_model_family(lead_client, rubric, dataset, lead, reviewer):
    cases = make_cases(dataset, [("m1", "policy"), ("m2", "policy"), ("m3", "policy")])
    for case, agent in zip(cases, ["gpt-4o-2024-08-06", "gpt-4o-2024-08-06", "claude-3-5-haiku-20241022"],
                           strict=True):
        Case.objects.filter(pk=case.pk).update(metadata={"agent_model": agent})
        label(case, rubric, reviewer, "pass")
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)  # gpt-4o-mini: openai
    run = make_run(config, dataset, lead, {case: ["pass"] for case in cases})
    warning = panel(report(lead_client, run))
    assert 'data-testid="self-preference">Self-preference' in warning
    assert "openai model family" in warning and "most of the cases (2 of 3: gpt-4o-2024-08-06)" in warning
    detail = lead_client.get(reverse("judges:config_detail", args=[TEST_PROJECT, config.pk])).content.decode()
    assert "Self-preference: the judge gpt-4o-mini-2024-07-18 is of the openai model family" in detail
    # Another family's judge: no warning.
    Case.objects.filter(dataset=dataset).update(metadata={"agent_model": "claude-3-5-haiku-20241022"})
    assert "self-preference" not in panel(report(lead_client, run))


def test_a_contract_only_config_has_no_self_preference(lead_client, rubric, dataset, lead, reviewer):
    [case] = make_cases(dataset, [("k1", "policy")])
    Case.objects.filter(pk=case.pk).update(metadata={"agent_model": "gpt-4o"})
    run = make_run(make_config(rubric, lead), dataset, lead, {case: ["pass"]})
    assert "self-preference" not in panel(report(lead_client, run))



def test_the_admin_lists_probes_with_the_run_they_measure(client, admin_user, run):
    probe = make_probe(run, "injection", moved=1)
    client.force_login(admin_user)
    html = client.get(reverse("admin:judges_run_changelist") + "?probe__exact=injection").content.decode()
    # (a row's link carries the changelist's filters after the path)
    assert f'href="{reverse("admin:judges_run_change", args=[probe.pk])}' in html
    assert f'href="{reverse("admin:judges_run_change", args=[run.pk])}' not in html
    assert "<td class=\"field-probe\">injected instruction</td>" in html
