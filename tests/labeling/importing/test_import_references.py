"""metadata.references, the semantic layer's other acceptable answers: judged content like the golden
answer (a change makes runs stale, labels keep counting), checked on import."""

from datetime import timedelta

from django.utils import timezone

from labeling.models import Case
from tests.labeling.importing.test_import_cases import case, jsonl, rejected, run


def test_changed_references_make_runs_stale_but_other_metadata_does_not(dataset):
    run(dataset, jsonl(case(external_id="a", metadata={"references": ["Within 30 days."], "agent_model": "x"})))
    long_ago = timezone.now() - timedelta(days=3)
    Case.objects.update(content_changed_at=long_ago)
    before = Case.objects.get()

    run(dataset, jsonl(case(external_id="a", metadata={"references": ["Within 30 days."], "agent_model": "y"})),
        update=True)
    assert Case.objects.get().content_changed_at == long_ago  # agent_model describes, a judge never sees it

    run(dataset, jsonl(case(external_id="a", metadata={"references": ["Thirty days."], "agent_model": "y"})),
        update=True)
    after = Case.objects.get()
    assert after.content_changed_at > long_ago  # the semantic layer compares against references: stale
    assert after.content_hash == before.content_hash  # reviewers judged input, output and trace only


def test_empty_references_are_no_references(dataset):
    run(dataset, jsonl(case(external_id="a")))
    long_ago = timezone.now() - timedelta(days=3)
    Case.objects.update(content_changed_at=long_ago)
    run(dataset, jsonl(case(external_id="a", metadata={"references": []})), update=True)
    assert Case.objects.get().content_changed_at == long_ago


def test_references_that_are_not_a_list_of_strings_are_refused(dataset):
    errors = rejected(dataset, jsonl(case(external_id="a", metadata={"references": "Within 30 days."}),
                                     case(external_id="b", metadata={"references": ["ok", 3]})))
    assert [(row, field) for row, field, _ in errors] == [(1, "metadata"), (2, "metadata")]
    assert "references must be a list of strings" in errors[0][2]
