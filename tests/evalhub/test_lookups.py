"""`field__among`: the same rows as `field__in` (one array parameter on PostgreSQL), ids and keys alike."""

import pytest

from judges.models import CachedJudgment
from labeling.models import Case
from tests.judges.helpers import make_cases

pytestmark = pytest.mark.django_db


def test_among_finds_what_in_finds(dataset):
    cases = make_cases(dataset, 4)
    wanted = [cases[2].pk, cases[0].pk, cases[0].pk, 10**12]  # out of order, twice over, one that is nowhere
    assert sorted(Case.objects.filter(pk__among=wanted).values_list("pk", flat=True)) == sorted(
        Case.objects.filter(pk__in=wanted).values_list("pk", flat=True)) == sorted([cases[0].pk, cases[2].pk])
    assert not Case.objects.filter(pk__among=[]).exists()
    CachedJudgment.objects.bulk_create(CachedJudgment(key=key, judgment={}) for key in ("a" * 64, "b'" * 32))
    assert set(CachedJudgment.objects.filter(key__among={"b'" * 32, "c" * 64}).values_list("key", flat=True)) == {
        "b'" * 32}
