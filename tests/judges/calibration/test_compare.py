"""/runs/compare/?a=&b=: two runs' figures side by side, and the cases whose verdict changed."""

import pandas as pd
import pytest
from django.urls import reverse

from judges.calibration.metrics import case_counts
from judges.calibration.views import case_verdicts, verdict_changes
from tests.conftest import TEST_PROJECT
from tests.judges.report_factories import label, make_cases, make_config, make_run


@pytest.fixture
def pair(dataset, rubric, reviewer, lead):
    cases = {c.external_id: c for c in make_cases(dataset, [(e, "policy") for e in ("c1", "c2", "c3", "c4")])}
    for external_id, verdict in (("c1", "pass"), ("c2", "fail"), ("c3", "pass"), ("c4", "fail")):
        label(cases[external_id], rubric, reviewer, verdict)
    a = make_run(make_config(rubric, lead), dataset, lead, {
        cases["c1"]: ["fail", "fail"],  # wrong …
        cases["c2"]: ["fail", "fail"],  # right …
        cases["c3"]: ["pass", "pass"],  # unchanged
        cases["c4"]: ["pass", "fail"],  # a tie
    })
    b = make_run(make_config(rubric, lead, note="v2"), dataset, lead, {
        cases["c1"]: ["pass", "pass"],  # … fixed
        cases["c2"]: ["pass", "fail"],  # … now a tie: broken
        cases["c3"]: ["pass", "pass"],
        cases["c4"]: ["fail", "fail"],  # tie → fail: fixed
    })
    return {"a": a, "b": b, "cases": cases}


def compare_url(a, b) -> str:
    return reverse("judges:run_compare", args=[TEST_PROJECT]) + f"?a={a.pk}&b={b.pk}"


def frame(rows):
    """A run's cases frame, counted from (case_id, external_id, repeat, outcome, human) judgments."""
    return case_counts(pd.DataFrame(rows, columns=["case_id", "external_id", "repeat", "outcome", "human"]))


def test_the_majority_of_evaluated_repeats_is_a_runs_verdict():
    verdicts = case_verdicts(frame([
        (1, "x1", 1, "pass", "pass"), (1, "x1", 2, "pass", "pass"), (1, "x1", 3, "fail", "pass"),
        (2, "x2", 1, "pass", None), (2, "x2", 2, "fail", None),
        (3, "x3", 1, "not_evaluated", "fail"), (3, "x3", 2, "fail", "fail"),
        (4, "x4", 1, "not_evaluated", "fail"),
    ]))
    assert verdicts["verdict"].to_dict() == {1: "pass", 2: "tie", 3: "fail", 4: "not_evaluated"}


def test_it_lists_only_changed_cases_with_their_effect():
    a = frame([(1, "x1", 1, "fail", "pass"), (2, "x2", 1, "fail", "fail"), (3, "x3", 1, "pass", "pass"),
               (5, "x5", 1, "pass", "pass")])
    b = frame([(1, "x1", 1, "pass", "pass"), (2, "x2", 1, "pass", "fail"), (3, "x3", 1, "pass", "pass"),
               (4, "x4", 1, "fail", "pass")])
    changes = verdict_changes(a, b)
    # x3 unchanged; x4 and x5 were judged by one run only.
    assert [(c["external_id"], c["verdict_a"], c["verdict_b"], c["effect"]) for c in changes] == [
        ("x1", "fail", "pass", "fixed"), ("x2", "fail", "pass", "broken"),
    ]


def test_it_has_no_changes_between_empty_runs():
    assert verdict_changes(frame([]), frame([])) == []


def test_it_is_for_leads_only(reviewer_client, pair):
    assert reviewer_client.get(compare_url(pair["a"], pair["b"])).status_code == 403


def test_it_offers_a_choice_of_runs_without_parameters(lead_client, pair):
    html = lead_client.get(reverse("judges:run_compare", args=[TEST_PROJECT])).content.decode()
    assert 'data-testid="compare-form"' in html and f'<option value="{pair["b"].pk}"' in html
    assert 'data-testid="compare-figures"' not in html


def test_it_answers_404_for_an_unknown_or_bad_run(lead_client, pair):
    url = reverse("judges:run_compare", args=[TEST_PROJECT])
    assert lead_client.get(url + f"?a={pair['a'].pk}&b=999999").status_code == 404
    assert lead_client.get(url + f"?a={pair['a'].pk}&b=x").status_code == 404


def test_it_shows_both_runs_figures_side_by_side(lead_client, pair):
    html = lead_client.get(compare_url(pair["a"], pair["b"])).content.decode()
    row = html[html.index('data-figure="agreement"'):]
    row = row[:row.index("</tr>")]
    # A: c1 0/2, c2 2/2, c3 2/2, c4 1/2 → 5/8; B: c1 2/2, c2 1/2, c3 2/2, c4 2/2 → 7/8.
    assert "62.5 %" in row and "87.5 %" in row and "+25.0 pts" in row


def test_it_compares_false_passes_and_fails_as_rates_with_their_counts(lead_client, dataset, rubric, reviewer, lead):
    # The same judge at K = 1 and K = 3: one false pass of 2 human-failed cases each time. As counts that is
    # 1 against 3; as rates it is 50 % both times.
    cases = make_cases(dataset, [(e, "policy") for e in ("f1", "f2", "p1")])
    for case, verdict in zip(cases, ("fail", "fail", "pass"), strict=True):
        label(case, rubric, reviewer, verdict)
    once = make_run(make_config(rubric, lead), dataset, lead, {cases[0]: ["pass"], cases[1]: ["fail"],
                                                                cases[2]: ["pass"]})
    thrice = make_run(make_config(rubric, lead, note="v2"), dataset, lead, {
        cases[0]: ["pass"] * 3, cases[1]: ["fail"] * 3, cases[2]: ["pass"] * 3})
    html = lead_client.get(compare_url(once, thrice)).content.decode()
    assert 'data-figure="false_pass"' not in html  # no raw count row to compare across K
    row = html[html.index('data-figure="false_pass_rate"'):]
    row = row[:row.index("</tr>")]
    assert row.count("50.0 %") == 2 and "+0.0 pts" in row
    assert '"counted-a">1 of 2 judgments<' in row and '"counted-b">3 of 6 judgments<' in row
    row = html[html.index('data-figure="false_fail_rate"'):]
    assert '"counted-a">0 of 1 judgment<' in row[:row.index("</tr>")]


def test_it_lists_the_changed_cases_with_links(lead_client, pair):
    html = lead_client.get(compare_url(pair["a"], pair["b"])).content.decode()
    table = html[html.index('data-testid="changes"'):]
    table = table[:table.index("</table>")]
    assert 'data-case="c1"' in table and 'data-case="c2"' in table and 'data-case="c4"' in table
    assert 'data-case="c3"' not in table
    # Each run's outcomes repeat by repeat, beside its verdict.
    c2 = table[table.index('data-case="c2"'):]
    c2 = c2[:c2.index("</tr>")]
    b_cell = c2.split('title="run B', 1)[1]
    assert c2.count('data-testid="repeat-a"') == c2.count('data-testid="repeat-b"') == 2  # side by side
    assert '<span class="badge verdict-fail" data-testid="repeat-a">fail</span><span class="badge verdict-fail"' in c2
    assert ('<span class="badge verdict-pass" data-testid="repeat-b">pass</span>'
            '<span class="badge verdict-fail" data-testid="repeat-b">fail</span>') in b_cell
    assert reverse("labeling:case_detail", args=[TEST_PROJECT, pair["cases"]["c1"].pk]) in table
    assert "<strong>2</strong> fixed" in html and "<strong>1</strong> broken" in html


@pytest.mark.parametrize("n", [3, 30])
def test_its_query_count_does_not_grow_with_cases(lead_client, dataset, rubric, reviewer, lead, n,
                                                  django_assert_num_queries):
    cases = make_cases(dataset, [(f"c{i:03}", "policy") for i in range(n)])
    for case in cases:
        label(case, rubric, reviewer, "pass")
    a = make_run(make_config(rubric, lead), dataset, lead, {case: ["pass", "fail"] for case in cases})
    b = make_run(make_config(rubric, lead, note="b"), dataset, lead, {case: ["pass", "pass"] for case in cases})
    # session, user, the project door's membership, the project's run choices;
    # per run: the run, its cases' judgment counts, human verdicts, the not-evaluated judgments, reviewer labels,
    # bias probes' judgments, changed cases, newest version (rules), its outcomes on the page's cases, and whether
    # the stand-in served it (Run.served_by_stand_in) — 4 + 2 × 10.
    with django_assert_num_queries(24):
        response = lead_client.get(compare_url(a, b))
    assert response.status_code == 200
