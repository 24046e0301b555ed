"""The judgment and embedding caches are each project's own (docs/projects.md): the same config judging cases of
identical content in two projects answers the second project from its own calls, never from the first's cache,
while a run again in the same project is answered whole from the cache. The estimate counts the same way."""

import pytest

from judges.configs import services as config_services
from judges.models import CachedEmbedding, CachedJudgment
from judges.runs import services
from judges.runs.selectors import run_estimate
from labeling.models import Dataset, Rubric
from tests.judges.helpers import behavioral_spec, give_golden_answers, make_cases, semantic_spec


@pytest.fixture
def eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True
    settings.EVALHUB_CHUNK_CASES = 4


@pytest.fixture
def theirs(other_project, rubric, dataset):
    """The other project's rubric and dataset under the same slugs and words as the tests' project's."""
    return (
        Rubric.objects.create(project=other_project, slug=rubric.slug, name=rubric.name, criteria=rubric.criteria),
        Dataset.objects.create(project=other_project, slug=dataset.slug, name=dataset.name),
    )


def judged(config, dataset, lead, capture):
    with capture(execute=True):
        run = services.run_start(config=config, dataset=dataset, repeats=2, concurrency=2, spend_cap_usd=None,
                                 by=lead)
    run.refresh_from_db()
    return run


def test_another_project_makes_its_own_calls_and_a_run_again_in_one_project_makes_none(
    eager, rubric, dataset, lead, theirs, other_lead, fake_provider, django_capture_on_commit_callbacks,
):
    their_rubric, their_dataset = theirs
    make_cases(dataset, 6)
    make_cases(their_dataset, 6)  # the same content, case by case
    ours = config_services.judge_config_save(rubric=rubric, spec=behavioral_spec(), by=lead)
    their_config = config_services.judge_config_save(rubric=their_rubric, spec=behavioral_spec(), by=other_lead)
    assert ours.config_hash == their_config.config_hash  # the same judge: only the project tells the caches apart

    first = judged(ours, dataset, lead, django_capture_on_commit_callbacks)
    assert (first.provider_calls, first.cache_hits) == (12, 0) and fake_provider.stats()["total"] == 12
    # Nothing of project A's cache counts for B, in the estimate or in the run.
    assert run_estimate(config=their_config, dataset=their_dataset, repeats=2).cached == 0

    theirs_first = judged(their_config, their_dataset, other_lead, django_capture_on_commit_callbacks)
    assert (theirs_first.provider_calls, theirs_first.cache_hits) == (12, 0)
    assert fake_provider.stats()["total"] == 24  # its own calls, every one
    kept = {project: CachedJudgment.objects.filter(project=project).count()
            for project in (rubric.project, their_rubric.project)}
    assert kept == {rubric.project: 12, their_rubric.project: 12}  # the same keys, kept once per project
    assert run_estimate(config=their_config, dataset=their_dataset, repeats=2).cached == 12

    theirs_again = judged(their_config, their_dataset, other_lead, django_capture_on_commit_callbacks)
    assert (theirs_again.provider_calls, theirs_again.cache_hits, theirs_again.done) == (0, 12, 12)
    assert fake_provider.stats()["total"] == 24
    ours_again = judged(ours, dataset, lead, django_capture_on_commit_callbacks)
    assert (ours_again.provider_calls, ours_again.cache_hits) == (0, 12)


def test_another_project_embeds_for_itself(
    eager, rubric, dataset, lead, theirs, other_lead, fake_provider, django_capture_on_commit_callbacks,
):
    their_rubric, their_dataset = theirs
    give_golden_answers(make_cases(dataset, 6))
    give_golden_answers(make_cases(their_dataset, 6))
    ours = config_services.judge_config_save(rubric=rubric, spec=semantic_spec(), by=lead)
    their_config = config_services.judge_config_save(rubric=their_rubric, spec=semantic_spec(), by=other_lead)

    def embeddings() -> int:
        return fake_provider.stats()["by_endpoint"].get("embeddings", 0)

    judged(ours, dataset, lead, django_capture_on_commit_callbacks)
    calls = embeddings()
    assert calls == 1 and CachedEmbedding.objects.filter(project=rubric.project).count() == 8
    # The estimate of the other project's run finds none of A's stored embeddings: every text is new to it.
    assert run_estimate(config=their_config, dataset=their_dataset, repeats=2).embedding_calls[0] == 1

    theirs_first = judged(their_config, their_dataset, other_lead, django_capture_on_commit_callbacks)
    assert embeddings() == calls + 1 and theirs_first.provider_calls == 1
    assert CachedEmbedding.objects.filter(project=their_rubric.project).count() == 8

    judged(ours, dataset, lead, django_capture_on_commit_callbacks)  # A again: its judgments and embeddings cached
    assert embeddings() == calls + 1
