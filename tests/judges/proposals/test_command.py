"""`manage.py improve_judge` takes exactly what the page's form takes: a value out of the form's bounds is a
CommandError naming the option, never a database error, and starts no job."""

import pytest
from django.core.management import CommandError, call_command

from judges.models import Proposal
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
