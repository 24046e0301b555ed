"""`manage.py improve_judge` takes exactly what the page's form takes: a value out of the form's bounds is a
CommandError naming the option, never a database error, and starts no job."""

import pytest
from django.core.management import CommandError, call_command

from evalhub.models import Role
from judges.management.acting_user import acting_user
from judges.models import Proposal
from tests.conftest import make_user
from tests.judges.report_factories import make_config, make_run

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(("option", "value", "said"), [
    ("--seed", "99999999999", "--seed: Ensure this value is less than or equal to 2147483647"),
    ("--max-cost-usd", "1e9", "--max-cost-usd: Ensure this value is less than or equal to 100000"),
    ("--max-cost-usd", "abc", "--max-cost-usd: Enter a number"),
    ("--candidates", "0", "--candidates: Ensure this value is greater than or equal to 1"),
])
def test_a_value_the_form_refuses_is_a_command_error(dataset, rubric, lead, option, value, said):
    run = make_run(make_config(rubric, lead, behavioral=True), dataset, lead, {})

    with pytest.raises(CommandError, match=said):
        call_command("improve_judge", str(run.pk), option, value, "--queue")
    assert not Proposal.objects.exists()


# ---- who acts: a lead of the run's project, or the instance admin ------------------------------------------


def test_the_acting_user_is_a_lead_of_the_runs_project(dataset, rubric, lead, reviewer, other_lead):
    run = make_run(make_config(rubric, lead, behavioral=True), dataset, lead, {})
    for stranger in (other_lead, reviewer):  # a lead of another project, a reviewer of this one
        with pytest.raises(CommandError, match=f"{stranger.username} is not a lead of project store"):
            call_command("improve_judge", str(run.pk), "--by", stranger.username, "--queue")
    with pytest.raises(CommandError, match="No user 'nobody'"):
        call_command("improve_judge", str(run.pk), "--by", "nobody", "--queue")
    assert not Proposal.objects.exists()


def test_without_by_it_is_the_projects_first_lead_never_another_projects(project, other_project, admin_user):
    otto = make_user("otto", role=Role.LEAD, project=other_project)  # made first: the lowest id of any lead
    lena = make_user("lena", role=Role.LEAD)
    make_user("rita")
    assert otto.pk < lena.pk
    assert acting_user(None, project=project) in (lena, admin_user)
    assert acting_user(None, project=project) == min((lena, admin_user), key=lambda user: user.pk)
    assert acting_user("ada", project=other_project) == admin_user  # the instance admin leads every project


def test_a_project_with_no_lead_says_so(other_project):
    with pytest.raises(CommandError, match="No lead of project shopnest exists"):
        acting_user(None, project=other_project)
