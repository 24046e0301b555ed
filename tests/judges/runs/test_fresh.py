"""Fresh repeats (docs/judging.md, "Fresh repeats"): a run started with "judge again, ignoring cached verdicts"
asks every judgment anew, numbers its repeats from 1 like any run, and caches under keys salted with the run, so
it reuses no cached verdict and overwrites none. Started from the form, worked eagerly in-process, judged through
the real SDK over HTTP against the stand-in.
"""

import pytest

from judges.configs import services as config_services
from judges.configs.cases import engine_case
from judges.engine import cache_key
from judges.models import CachedJudgment, Judgment
from tests.judges.helpers import behavioral_spec, make_cases
from tests.judges.runs.test_views import eager, start_run, start_url  # noqa: F401 (eager is a fixture)

CASES, REPEATS = 4, 2
SHIPPED = {"kind": "answer_contains", "text": "shipped"}


def test_a_fresh_run_asks_anew_and_leaves_the_cache_as_it_was(lead_client, rubric, dataset, lead, fake_provider,
                                                                eager, django_capture_on_commit_callbacks):  # noqa: F811
    cases = [case for case in make_cases(dataset, CASES + 2) if case.output][:CASES]  # make_cases empties some
    dataset.cases.exclude(pk__in=[c.pk for c in cases]).delete()
    # The stand-in's verdicts turn over after the first run's calls.
    fake_provider.control(rule={"kind": "after_calls", "calls": CASES * REPEATS, "rule": SHIPPED,
                                "then": {"kind": "not", "rule": SHIPPED}})
    config = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    first = start_run(lead_client, config, django_capture_on_commit_callbacks, repeats=REPEATS)
    first.refresh_from_db()
    assert first.provider_calls == CASES * REPEATS and not first.fresh
    stored = dict(CachedJudgment.objects.values_list("key", "judgment"))

    page = lead_client.get(start_url(config), {"dataset": dataset.slug, "repeats": REPEATS, "fresh": "on"})
    assert "Judge again, ignoring cached verdicts" in page.content.decode()
    assert page.context["estimate"].cached == 0  # a fresh run finds nothing cached
    fresh = start_run(lead_client, config, django_capture_on_commit_callbacks, repeats=REPEATS, fresh="on")
    fresh.refresh_from_db()
    assert fresh.fresh and (fresh.provider_calls, fresh.cache_hits) == (CASES * REPEATS, 0)
    judgments = Judgment.objects.filter(run=fresh)
    assert sorted(judgments.values_list("repeat", flat=True)) == sorted(list(range(1, REPEATS + 1)) * CASES)
    assert set(judgments.values_list("outcome", flat=True)) == {"fail"}  # the changed model's verdicts
    # The cached entries are as the first run left them; the fresh run's sit under keys salted with it.
    after = dict(CachedJudgment.objects.values_list("key", "judgment"))
    assert {key: after[key] for key in stored} == stored
    salted = {cache_key(engine_case(case), config.config_hash, r, f"run:{fresh.pk}")
              for case in cases for r in range(1, REPEATS + 1)}
    assert set(after) - set(stored) == salted

    # An ordinary run afterwards still replays the first run's verdicts: the fresh one overwrote nothing.
    again = start_run(lead_client, config, django_capture_on_commit_callbacks, repeats=REPEATS)
    again.refresh_from_db()
    assert (again.provider_calls, again.cache_hits) == (0, CASES * REPEATS)
    assert set(Judgment.objects.filter(run=again).values_list("outcome", flat=True)) == {"pass"}


@pytest.mark.django_db
def test_an_unsalted_key_is_as_it_always_was():
    case = {"input": "q", "output": "a"}
    assert cache_key(case, "h" * 64, 1) == cache_key(case, "h" * 64, 1, "")
    assert cache_key(case, "h" * 64, 1, "run:7") not in (cache_key(case, "h" * 64, 1), cache_key(case, "h" * 64, 1,
                                                                                                 "run:8"))
