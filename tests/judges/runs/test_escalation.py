"""The escalation step in the app's runs (docs/judging.md): the rotating sample walks the dataset run after
run, a cached primary verdict still gets its second opinion, the adjudicator decides a disagreement and the
pages show who decided and each judge's calls. Runs work eagerly in-process against the stand-in over HTTP.
"""

from django.urls import reverse

from judges.configs import services as config_services
from judges.models import Judgment, ModelPrice
from judges.runs.selectors import calls_by_judge
from tests.conftest import TEST_PROJECT
from tests.judges.helpers import MODEL, behavioral_spec, make_cases
from tests.judges.runs.test_views import eager, start_run, start_url  # noqa: F401 (a fixture)

SECOND = "claude-haiku-4-5-20251001"
ADJUDICATOR = "claude-opus-4-1-20250805"


def judge_of(model: str) -> dict:
    return {"provider": "anthropic", "model": model, "base_url_env": "EVALHUB_JUDGE_ANTHROPIC_URL",
            "api_key_env": "EVALHUB_JUDGE_API_KEY"}


def test_runs_walk_the_rotating_sample_and_the_estimate_counts_each_runs_draw(
    eager, lead_client, rubric, dataset, lead, fake_provider, django_capture_on_commit_callbacks  # noqa: F811
):
    make_cases(dataset, 6)
    spec = behavioral_spec(second_opinion={**judge_of(SECOND), "when": [{"mode": "sample", "share": 0.5}]})
    config = config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)
    drawn = []
    for turn in range(2):
        estimate = lead_client.get(start_url(config), {"dataset": dataset.slug, "repeats": 1}).context["estimate"]
        fake_provider.reset()
        run = start_run(lead_client, config, django_capture_on_commit_callbacks, repeats=1)
        asked = set(Judgment.objects.filter(run=run).exclude(secondary_outcome="")
                    .values_list("case__external_id", flat=True))
        assert len(asked) == 3 and estimate.second_calls == (3, 3)  # ⌈0.5 · 6⌉, as the run asked
        # The second run's primary verdicts come from the cache; its drawn cases still get a second opinion.
        assert fake_provider.stats()["by_model"] == ({MODEL: 6, SECOND: 3} if turn == 0 else {SECOND: 3})
        drawn.append(asked)
    assert drawn[0] | drawn[1] == {f"c{i:03}" for i in range(6)}  # every case within ⌈1 / 0.5⌉ runs


def test_the_adjudicator_decides_and_the_pages_show_who_and_each_judges_calls(
    eager, lead_client, rubric, dataset, lead, fake_provider, django_capture_on_commit_callbacks  # noqa: F811
):
    make_cases(dataset, 3)
    for model, price in ((MODEL, 1), (SECOND, 2), (ADJUDICATOR, 10)):
        ModelPrice.objects.create(model=model, input_per_mtok=price, output_per_mtok=price, updated_by=lead)
    fake_provider.control(model=SECOND, rule={"kind": "always_fail"})
    fake_provider.control(model=ADJUDICATOR, rule={"kind": "always_fail"})
    spec = behavioral_spec(second_opinion=judge_of(SECOND), adjudicator=judge_of(ADJUDICATOR))
    config = config_services.judge_config_save(rubric=rubric, spec=spec, by=lead)
    estimate = lead_client.get(start_url(config), {"dataset": dataset.slug, "repeats": 1}).context["estimate"]
    labels = [label for label, _, _ in estimate.others]
    assert [calls for _, _, calls in estimate.others] == [(3, 3), (0, 3)]  # the adjudicator as a range
    assert labels[1].startswith(f"adjudicator {ADJUDICATOR}")

    run = start_run(lead_client, config, django_capture_on_commit_callbacks, repeats=1)

    judgments = list(Judgment.objects.filter(run=run))
    assert {(j.outcome, j.judge, j.contested) for j in judgments} == {("fail", "adjudicator", True)}
    assert {role: o["outcome"] for role, o in judgments[0].opinions.items()} == {
        "primary": "pass", "second_opinion": "fail", "adjudicator": "fail"}
    by_judge = {role: calls for role, calls, _ in calls_by_judge(run=run)}
    assert by_judge == {"primary": 3, "second_opinion": 3, "adjudicator": 3}
    page = lead_client.get(reverse("judges:run_detail", args=[TEST_PROJECT, run.pk])).content.decode()
    assert "primary 3 ($" in page and "adjudicator 3 ($" in page
