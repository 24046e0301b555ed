"""The SVG charts: geometry from figures (pure), and the versions chart on a rubric's config page."""

import re

import pytest
from django.urls import reverse

from judges.calibration.charts import BAND_PAD, BAND_WIDTH, PLOT, agreement_band, versions_chart
from judges.calibration.selectors import version_figures
from judges.models import Run
from tests.conftest import TEST_PROJECT
from tests.judges.report_factories import label, make_cases, make_config, make_run


def test_the_band_places_floor_ceiling_and_value_on_one_scale():
    band = agreement_band(agreement=0.9, ci95=[0.85, 0.94], floor=0.8, ceiling=1.0)
    # The axis runs from 50 % to 100 % over the usable width.
    usable = BAND_WIDTH - 2 * BAND_PAD
    assert band.track == {"x": BAND_PAD, "width": usable}
    assert band.floor["x"] == pytest.approx(BAND_PAD + 0.6 * usable, abs=0.1)
    assert band.ceiling["x"] == pytest.approx(BAND_PAD + usable, abs=0.1)
    assert band.value["x"] == pytest.approx(BAND_PAD + 0.8 * usable, abs=0.1)
    assert band.value["ci_x"] == pytest.approx(BAND_PAD + 0.7 * usable, abs=0.1)
    assert band.value["ok"] is True
    assert band.floor["label"] == "floor 80 %" and band.ceiling["label"] == "ceiling 100 %"
    assert band.title == "Agreement 90.0 % (95 % CI 85.0 % – 94.0 %) against the floor 80 % and the ceiling 100 %"
    assert [t["label"] for t in band.ticks] == ["50 %", "60 %", "70 %", "80 %", "90 %", "100 %"]


def test_the_band_widens_down_to_a_low_agreement_and_marks_it_bad():
    band = agreement_band(agreement=0.31, ci95=[0.22, 0.41], floor=0.8, ceiling=1.0)
    assert band.ticks[0]["label"] == "20 %"
    assert band.value["ok"] is False
    assert band.value["ci_x"] >= band.track["x"]


def test_the_band_marks_100_percent_as_not_ok():
    assert agreement_band(agreement=1.0, ci95=[0.9, 1.0], floor=0.8, ceiling=1.0).value["ok"] is False


def test_the_band_without_agreement_has_no_value():
    band = agreement_band(agreement=None, ci95=None, floor=0.8, ceiling=1.0)
    assert band.value is None and band.title.startswith("No agreement yet")


def _figures(agreement, tpr=0.9, tfr=0.8, flip=0.02):
    return {"agreement": agreement, "agreement_ci95": [agreement - 0.05, agreement + 0.04],
            "true_pass_rate": tpr, "true_fail_rate": tfr, "flip_rate": flip}


def test_the_versions_chart_maps_rates_to_heights_and_breaks_lines_at_missing_runs():
    chart = versions_chart(versions=[
        {"version": 1, "run": 10, "figures": _figures(0.7)},
        {"version": 2, "run": None, "figures": None},
        {"version": 3, "run": 12, "figures": _figures(0.85)},
        {"version": 4, "run": 13, "figures": _figures(0.9)},
    ], floor=0.8, ceiling=1.0)
    height = chart.height - PLOT["top"] - PLOT["bottom"]
    agreement = chart.series[0]
    assert agreement["key"] == "agreement"
    assert [p["label"] for p in agreement["points"]] == ["70.0 %", "85.0 %", "90.0 %"]
    assert agreement["points"][0]["y"] == pytest.approx(PLOT["top"] + 0.3 * height, abs=0.1)
    # v2 has no run: v1 stands alone, v3–v4 are one segment.
    assert len(agreement["segments"]) == 2 and len(agreement["segments"][1].split()) == 2
    assert chart.floor["y"] == pytest.approx(PLOT["top"] + 0.2 * height, abs=0.1)
    assert chart.ceiling["y"] == PLOT["top"]
    assert [c["note"] for c in chart.columns] == ["", "no run", "", ""]
    assert len(chart.whiskers) == 3
    assert "v1 70.0 %, v3 85.0 %, v4 90.0 %" in chart.title
    assert not chart.empty


def test_the_versions_chart_is_empty_without_runs():
    chart = versions_chart(versions=[{"version": 1, "run": None, "figures": None}], floor=0.8, ceiling=1.0)
    assert chart.empty


# ---- the figures per version, from the database ---------------------------------------------------


@pytest.fixture
def versions(dataset, rubric, reviewer, lead):
    cases = make_cases(dataset, [(f"c{i}", "policy") for i in range(4)])
    for i, case in enumerate(cases):
        label(case, rubric, reviewer, "pass" if i % 2 else "fail")
    v1 = make_config(rubric, lead)
    old = make_run(v1, dataset, lead, {case: ["pass", "pass"] for case in cases})  # agreement 1/2
    Run.objects.filter(pk=old.pk).update(finished_at=old.finished_at.replace(year=2000))
    newest_v1 = make_run(v1, dataset, lead, {  # agreement 3/4: the newest finished run of v1
        case: ["pass" if i % 2 else "fail"] * 2 if i else ["pass", "pass"] for i, case in enumerate(cases)
    })
    make_run(v1, dataset, lead, {cases[0]: ["fail"]}, status=Run.Status.RUNNING)  # unfinished: ignored
    v2 = make_config(rubric, lead, note="v2")  # no run
    return {"v1": v1, "v2": v2, "newest_v1": newest_v1}


def test_it_takes_each_versions_newest_finished_run(versions, rubric):
    rows = version_figures(rubric=rubric)
    assert [(r["version"], r["run"]) for r in rows] == [(1, versions["newest_v1"].pk), (2, None)]
    assert rows[0]["figures"]["agreement"] == pytest.approx(6 / 8)
    assert rows[1]["figures"] is None


def test_it_reads_the_versions_figures_in_constant_queries(versions, rubric, dataset, lead,
                                                          django_assert_num_queries):
    # configs with their newest finished run, those runs, their judgments counted per case, the human
    # verdicts, the not-evaluated judgments, and their bias probes' judgments
    with django_assert_num_queries(6):
        version_figures(rubric=rubric)
    v3 = make_config(rubric, lead, note="v3")
    make_run(v3, dataset, lead, {case: ["pass"] for case in dataset.cases.all()})
    with django_assert_num_queries(6):
        assert len(version_figures(rubric=rubric)) == 3


def test_the_rubric_config_page_shows_the_chart(lead_client, versions, rubric):
    html = lead_client.get(reverse("judges:config_list", args=[TEST_PROJECT, rubric.slug])).content.decode()
    chart = html[html.index('data-testid="versions-chart"'):]
    chart = chart[:chart.index("</section>")]
    assert re.search(r"<title id=\"versions-chart-title\">Agreement per config version against the floor 80 % "
                     r"and the ceiling 100 %: v1 75.0 %</title>", chart)
    assert "floor 80 %" in chart and "ceiling 100 %" in chart and "no run" in chart
    assert reverse("judges:run_report", args=[TEST_PROJECT, versions["newest_v1"].pk]) in chart
    assert "style=" not in chart  # the CSP forbids inline styles: presentation attributes only
