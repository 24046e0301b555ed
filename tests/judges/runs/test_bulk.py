"""copy_create, the COPY the worker records with: rows saved as Django would save them, and rows that would
break a unique constraint left out when asked (as bulk_create's ignore_conflicts)."""

import pytest

from judges.models import CachedEmbedding, CachedJudgment
from judges.runs.bulk import copy_create

pytestmark = pytest.mark.django_db


def test_rows_go_in_as_saved_and_a_conflict_is_left_out_when_asked():
    CachedEmbedding.objects.create(key="a" * 64, vector=[1.0, 2.0])
    sent = copy_create(CachedEmbedding, [CachedEmbedding(key="a" * 64, vector=[9.0]),
                                         CachedEmbedding(key="b" * 64, vector=[0.5, -0.25])], ignore_conflicts=True)
    assert sent == 2
    assert dict(CachedEmbedding.objects.values_list("key", "vector")) == {"a" * 64: [1.0, 2.0], "b" * 64: [0.5, -0.25]}
    judgment = {"outcome": "pass", "reason": 'quotes " and \\ and a tab\tand\nlines', "scores": None}
    copy_create(CachedJudgment, [CachedJudgment(key="c" * 64, judgment=judgment)])
    assert CachedJudgment.objects.get(key="c" * 64).judgment == judgment


def test_without_ignore_conflicts_a_conflict_is_an_error():
    CachedEmbedding.objects.create(key="a" * 64, vector=[1.0])
    with pytest.raises(Exception, match="duplicate key"):
        copy_create(CachedEmbedding, [CachedEmbedding(key="a" * 64, vector=[2.0])])
