"""The audit log shows each entry's values whole: a proposal's entries keep plain values (not [old, new]),
a thresholds change keeps its old and new value."""

import pytest
from django.urls import reverse

from judges.models import RubricEvent
from tests.conftest import TEST_PROJECT

pytestmark = pytest.mark.django_db


def test_a_proposal_entry_shows_its_values_whole_and_a_change_its_old_and_new(lead_client, rubric, lead):
    # Before: "editor_model: s → t", "status: f → i", "candidates: 2 → 3" (the first two characters, or items).
    RubricEvent.objects.create(rubric=rubric, kind=RubricEvent.Kind.PROPOSAL, by=lead, reason="Improvement finished.",
                               changes={"editor_model": "stub-editor-1", "status": "finished", "candidates": [2, 3],
                                        "kept": None})
    RubricEvent.objects.create(rubric=rubric, kind=RubricEvent.Kind.THRESHOLDS, by=lead, reason="Stricter.",
                               changes={"min_agreement": [0.8, 0.85]})
    page = lead_client.get(reverse("judges:audit_log", args=[TEST_PROJECT])).content.decode()
    assert '<span class="mono">editor_model</span>: <strong>stub-editor-1</strong>' in page
    assert '<span class="mono">status</span>: <strong>finished</strong>' in page
    assert '<span class="mono">candidates</span>: <strong>2, 3</strong>' in page
    assert '<span class="mono">kept</span>: <strong>—</strong>' in page
    assert '<span class="mono">min_agreement</span>: 0.8 → <strong>0.85</strong>' in page
    assert "s → <strong>t</strong>" not in page
