"""A proposal's candidate versions are named apart from the lead's own, and the newest-version rule names the
lead's newer version as such (not "a candidate")."""

import pytest
from django.urls import reverse

from judges.models import JudgeConfig, Proposal, ProposalCandidate
from tests.conftest import TEST_PROJECT
from tests.judges.report_factories import make_cases, make_config, make_run

pytestmark = pytest.mark.django_db


def test_a_candidate_is_named_by_its_proposal_and_a_leads_version_by_its_number(lead_client, rubric, dataset, lead):
    # Before: "run 13 has v2 (a candidate v5 exists)", v5 being the lead's own; candidates only "proposed".
    own = make_config(rubric, lead, note="own")
    cases = make_cases(dataset, [("a", "policy")])
    run = make_run(own, dataset, lead, {cases[0]: ["pass"]})
    proposal = Proposal.objects.create(rubric=rubric, run=run, editor={"model": "stand-in-editor"}, created_by=lead)
    candidate = make_config(rubric, lead, note="candidate")
    JudgeConfig.objects.filter(pk=candidate.pk).update(proposal="proposed")
    candidate.refresh_from_db()
    ProposalCandidate.objects.create(proposal=proposal, index=1, name="cite the window", change="guidance",
                                     config=candidate)
    assert candidate.candidate_name == f"candidate c1 of proposal {proposal.pk}" and own.candidate_name == ""
    page = lead_client.get(reverse("judges:config_detail", args=[TEST_PROJECT, candidate.pk])).content.decode()
    assert f"candidate c1 of proposal {proposal.pk}, proposed" in page
