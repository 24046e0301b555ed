"""Whether a label counts is one rule in three places: the Python Q (labeling.models.label_counts), the
stored Label.stale the triggers keep (migration 0003_queue_triggers) and the raw-SQL queue reads
(LABEL_STOPPED_COUNTING_SQL), and its definition, the label's content hash equal to the case's. On a
seeded set, written every way that changes a hash, the three select the same labels."""

from django.db import connection
from django.db.models import F

from labeling.disputes.selectors import cases_with_human_verdict
from labeling.models import LABEL_STOPPED_COUNTING_SQL, Case, Label, labeled_content_hash
from labeling.queue.selectors import CHANGED, next_case
from tests.labeling.queue_helpers import change_content, give_label, make_cases


def _sql_ids(where: str) -> set[int]:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT l.id FROM labeling_label l JOIN labeling_case c ON c.id = l.case_id WHERE {where}")
        return {row[0] for row in cursor.fetchall()}


def _seed(dataset, rubric, reviewer, second_reviewer) -> None:
    cases = make_cases(dataset, 6)
    for i, case in enumerate(cases):
        give_label(case, rubric, reviewer, verdict="pass" if i % 2 else "fail")
        if i < 4:
            give_label(case, rubric, second_reviewer, verdict="fail")
    change_content(cases[0], "A new answer.")  # a re-import: both labels stop counting
    new_hash = labeled_content_hash(input=cases[1].input, output="Updated in bulk.", trace=cases[1].trace)
    Case.objects.filter(pk=cases[1].pk).update(output="Updated in bulk.", content_hash=new_hash)
    Label.objects.filter(case=cases[1], reviewer=reviewer).update(content_hash=new_hash)  # one relabeled
    Label.objects.filter(case=cases[2], reviewer=second_reviewer).update(content_hash="0" * 64)  # against nothing


def test_the_python_rule_the_stored_flag_and_the_hashes_select_the_same_labels(
    dataset, rubric, reviewer, second_reviewer
):
    _seed(dataset, rubric, reviewer, second_reviewer)
    every = set(Label.objects.values_list("pk", flat=True))
    counting = set(Label.objects.counting().values_list("pk", flat=True))
    by_hashes = set(Label.objects.filter(content_hash=F("case__content_hash")).values_list("pk", flat=True))
    stopped = LABEL_STOPPED_COUNTING_SQL.format(label="l")
    assert counting == by_hashes == _sql_ids(f"NOT {stopped}") == _sql_ids("l.content_hash = c.content_hash")
    assert set(Label.objects.stopped_counting().values_list("pk", flat=True)) == _sql_ids(stopped) == every - counting
    assert len(every - counting) == 4  # the seed changed something, so the test compares two non-empty sets


def test_the_human_verdict_and_the_queue_read_the_same_rule(dataset, rubric, reviewer, second_reviewer):
    _seed(dataset, rubric, reviewer, second_reviewer)
    tallies = {case.pk: case.passes + case.fails for case in cases_with_human_verdict(rubric=rubric)}
    per_case = {pk: 0 for pk in tallies}
    for case_id in Label.objects.counting().values_list("case_id", flat=True):
        per_case[case_id] += 1
    assert tallies == per_case
    case = next_case(dataset=dataset, rubric=rubric, reviewer=reviewer)
    assert case.queue_reason == CHANGED
    assert case.own_label.pk in set(Label.objects.stopped_counting().values_list("pk", flat=True))
