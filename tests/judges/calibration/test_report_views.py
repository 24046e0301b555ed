"""The run report page /runs/<id>/report/: figures, rules, filters, links, and a query count that stays put."""

import pytest
from django.urls import reverse

from judges.models import Run
from labeling.models import Case
from tests.conftest import TEST_PROJECT
from tests.judges.report_factories import label, make_cases, make_config, make_run


@pytest.fixture
def report(dataset, rubric, reviewer, lead):
    """A judge with a model: a1 agreed, a2 flipped (a false fail), a3 two false passes, a4 one not evaluated."""
    a1, a2, a3, a4 = make_cases(dataset, [("a1", "policy"), ("a2", "policy"), ("a3", "tools"), ("a4", "tools")])
    for case, verdict in ((a1, "pass"), (a2, "pass"), (a3, "fail"), (a4, "fail")):
        label(case, rubric, reviewer, verdict)
    run = make_run(make_config(rubric, lead, behavioral=True), dataset, lead, {
        a1: ["pass", "pass"], a2: ["pass", "fail"], a3: ["pass", "pass"], a4: ["fail", "not_evaluated"],
    }, reasons={("a3", 1): "<script>alert('x')</script> looks fine"})
    return {"run": run, "cases": {c.external_id: c for c in (a1, a2, a3, a4)}}


def url(run, **params) -> str:
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return reverse("judges:run_report", args=[TEST_PROJECT, run.pk]) + (f"?{query}" if query else "")


def shown_cases(response) -> set[str]:
    html = response.content.decode()
    start = html.index('id="disagreements"')
    table = html[start:html.index("</table>", start)]
    return {external_id for external_id in ("a1", "a2", "a3", "a4") if f'data-case="{external_id}"' in table}


def test_it_is_for_leads_only(client, reviewer_client, report):
    assert reviewer_client.get(url(report["run"])).status_code == 403
    client.logout()
    response = client.get(url(report["run"]))
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_it_answers_404_for_an_unknown_run(lead_client):
    assert lead_client.get(reverse("judges:run_report", args=[TEST_PROJECT, 999999])).status_code == 404


def test_it_shows_the_figures_with_one_decimal(lead_client, report):
    response = lead_client.get(url(report["run"]))
    assert response.status_code == 200
    html = response.content.decode()
    # 4 matching of 7 evaluated judgments.
    assert 'data-testid="agreement">57.1 %<' in html
    assert 'data-testid="false-pass">2<' in html
    assert 'data-testid="false-fail">1<' in html
    assert 'data-testid="coverage">87.5 %<' in html
    assert "floor 80 %" in html and "ceiling 100 %" in html
    assert "<title id=\"band-title\">Agreement 57.1 %" in html


def test_it_says_why_the_judge_may_not_be_promoted(lead_client, report):
    html = lead_client.get(url(report["run"])).content.decode()
    assert "Not promotable: 5 of 12 rules not met" in html
    assert '<tr class="rule-unmet" data-rule="min_cases">' in html
    assert '<tr class="rule-unmet" data-rule="agreement_floor">' in html
    assert "≥ 80.0 %" in html
    assert '<tr class="rule-met" data-rule="not_stale">' in html


def test_it_says_may_be_promoted_when_every_rule_holds(lead_client, dataset, rubric, reviewer, lead):
    cases = make_cases(dataset, [(f"p{i:02}", "policy") for i in range(30)])
    judgments = {}
    for i, case in enumerate(cases):
        verdict = "pass" if i % 2 else "fail"
        label(case, rubric, reviewer, verdict)
        wrong = "fail" if verdict == "pass" else "pass"
        # Cases 1 (human pass) and 2 (human fail) wrong on both repeats: 56 of 60, no flip.
        judgments[case] = [wrong, wrong] if i in (1, 2) else [verdict, verdict]
    run = make_run(make_config(rubric, lead), dataset, lead, judgments)
    html = lead_client.get(url(run)).content.decode()
    assert "May be promoted: every rule is met" in html
    assert 'data-testid="agreement">93.3 %<' in html
    assert "rule-unmet" not in html


def test_it_names_the_stale_reasons(lead_client, report, rubric, lead):
    make_config(rubric, lead, note="newer")
    html = lead_client.get(url(report["run"])).content.decode()
    assert 'data-testid="stale"' not in html  # a newer version is a candidate, not staleness
    assert "v1 (a newer version v2 exists)" in html
    rubric.criteria = "Edited."
    rubric.save(update_fields=["criteria"])
    html = lead_client.get(url(report["run"])).content.decode()
    assert 'data-testid="stale"' in html
    assert "the rubric&#x27;s criteria were edited after this run&#x27;s config was saved" in html


def test_it_lists_disagreements_with_each_repeat_and_links_to_the_case(lead_client, report):
    response = lead_client.get(url(report["run"]))
    assert shown_cases(response) == {"a2", "a3"}
    html = response.content.decode()
    a3 = report["cases"]["a3"]
    assert reverse("labeling:case_detail", args=[TEST_PROJECT, a3.pk]) in html
    assert "pass because of a2/1" in html and "fail because of a2/2" in html


def test_it_escapes_the_judges_reason(lead_client, report):
    html = lead_client.get(url(report["run"])).content.decode()
    assert "<script>alert" not in html
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; looks fine" in html


@pytest.mark.parametrize(("params", "expected"), [
    ({"only": "false_pass"}, {"a3"}),
    ({"only": "false_fail"}, {"a2"}),
    ({"only": "flips"}, {"a2"}),
    ({"category": "tools"}, {"a3"}),
    ({"category": "policy", "only": "false_pass"}, set()),
    ({"only": "nonsense"}, {"a2", "a3"}),  # an unknown filter is ignored, not an error
])
def test_it_filters_the_disagreements(lead_client, report, params, expected):
    assert shown_cases(lead_client.get(url(report["run"], **params))) == expected


def test_it_filters_by_split(lead_client, report):
    run = report["run"]
    for split in ("dev", "holdout"):
        expected = {e for e in ("a2", "a3") if report["cases"][e].split == split}
        response = lead_client.get(url(run, split=split))
        if any(c.split == split for c in report["cases"].values()):
            assert shown_cases(response) == expected


def test_it_swaps_only_the_table_for_htmx(lead_client, report):
    response = lead_client.get(
        url(report["run"], only="false_pass"), headers={"HX-Request": "true", "HX-Target": "disagreements"}
    )
    html = response.content.decode()
    assert "<html" not in html and 'id="disagreements"' in html
    assert shown_cases(response) == {"a3"}
    assert response["Vary"] and "HX-Request" in response["Vary"]


def test_it_lists_flips_and_not_evaluated_judgments(lead_client, report):
    html = lead_client.get(url(report["run"])).content.decode()
    flipped = html[html.index('data-testid="flipped"'):]
    assert "a2" in flipped[:flipped.index("</ul>")]
    not_evaluated = html[html.index('data-testid="not-evaluated"'):]
    assert "timeout" in not_evaluated[:not_evaluated.index("</table>")]


def test_it_shows_the_reviewers_agreement_beside_the_judge(lead_client, report, rubric, second_reviewer):
    # The second reviewer agrees on a1 and a2, disagrees on a4 (now a tie: no human verdict).
    for external_id, verdict in (("a1", "pass"), ("a2", "pass"), ("a4", "pass")):
        label(report["cases"][external_id], rubric, second_reviewer, verdict)
    html = lead_client.get(url(report["run"])).content.decode()
    assert 'data-testid="reviewer-agreement">66.7 %' in html
    # The judge: 3 of 6 on a1..a3, 50 %, below the humans' 66.7 %: nothing suspect.
    assert 'data-testid="agreement">50.0 %<' in html
    assert 'data-testid="suspect"' not in html


def test_one_pair_of_labels_is_too_few_to_call_a_judge_suspect(lead_client, report, rubric, second_reviewer):
    label(report["cases"]["a4"], rubric, second_reviewer, "pass")  # the only pair disagrees: 0 %
    html = lead_client.get(url(report["run"])).content.decode()
    assert 'data-testid="reviewer-agreement">0.0 %' in html
    # The judge's 50 % against the reviewers' 0 % on one case: a test needs 20 such cases
    # (tests/judges/promotion/test_judge_above_reviewers.py flags one that has them).
    assert 'data-testid="suspect"' not in html
    assert "does not apply: only 1 case with two or more labels (the test needs 20)" in html


@pytest.mark.parametrize("n", [4, 40])
def test_its_query_count_does_not_grow_with_cases(lead_client, dataset, rubric, reviewer, lead, n,
                                                  django_assert_num_queries):
    cases = make_cases(dataset, [(f"c{i:03}", "policy" if i % 2 else "tools") for i in range(n)])
    for i, case in enumerate(cases):
        label(case, rubric, reviewer, "pass" if i % 3 else "fail")
    run = make_run(make_config(rubric, lead), dataset, lead,
                   {case: ["pass", "fail" if i % 4 == 0 else "pass"] for i, case in enumerate(cases)})
    # session, user, the project door's memberships, the project's run with its config, rubric and dataset; the
    # evidence key; judgments counted per case, cases with their human verdicts, the not-evaluated judgments,
    # reviewer labels, changed cases, newest version (rules), each repeat of the page's rows, bias probes'
    # judgments and the probe runs (the agent models are read only for a model judge), whether the stand-in served
    # the run (Run.served_by_stand_in). (test_report_cache.py: the cached page.)
    with django_assert_num_queries(15):
        response = lead_client.get(url(run))
    assert response.status_code == 200


def test_it_handles_a_run_without_judgments(lead_client, dataset, rubric, lead):
    run = make_run(make_config(rubric, lead), dataset, lead, {}, status=Run.Status.RUNNING)
    html = lead_client.get(url(run)).content.decode()
    assert "the run has not finished" in html
    assert "no agreement yet" in html


def test_it_shows_not_counting_labels_as_no_human_verdict(lead_client, report):
    Case.objects.filter(pk=report["cases"]["a3"].pk).update(content_hash="f" * 64)
    assert shown_cases(lead_client.get(url(report["run"]))) == {"a2"}
