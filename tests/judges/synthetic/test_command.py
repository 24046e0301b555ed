"""`manage.py synthesize_cases`: the work in the command's own process, what it wrote and cost on stdout, a
failed job or a bad request as a CommandError that writes nothing."""

import pytest
from django.core.management import CommandError, call_command

from judges.models import SynthesisJob
from labeling.models import Case
from tests.judges.synthetic.helpers import EDITOR_MODEL, SCRIPT, behavioral_config, return_policy

pytestmark = pytest.mark.django_db


def test_it_writes_the_cases_and_says_what_it_dropped_and_cost(fake_provider, lead, dataset, rubric, capsys):
    return_policy(lead)
    config = behavioral_config(rubric, lead)
    fake_provider.control(model=EDITOR_MODEL, script=[SCRIPT])

    call_command("synthesize_cases", dataset.slug, "--n", "3", "--policy", "returns", "--types",
                 "adversarial,near_miss,ordinary", "--seed", "5", "--editor-config", str(config.pk),
                 "--editor-model", EDITOR_MODEL)

    out = capsys.readouterr().out
    job = SynthesisJob.objects.get()
    assert f"synthesis {job.pk}: editor {EDITOR_MODEL} (openai-compatible), seed 5, policies returns v1" in out
    assert "estimated cost unknown (the model has no price)" in out
    assert "wrote 3 case(s) into store-support; dropped 0 duplicate(s) of existing inputs; left out 1 beyond the 3 " \
           "asked for; cost unknown (the model has no price)" in out
    assert set(out.split()) >= set(job.external_ids) and job.created_by is None

    fake_provider.control(model=EDITOR_MODEL, script=[{"cases": "none"}])
    with pytest.raises(CommandError, match="failed, nothing written: MalformedEditorAnswer"):
        call_command("synthesize_cases", dataset.slug, "--n", "3", "--policy", "returns", "--editor-model",
                     EDITOR_MODEL)
    with pytest.raises(CommandError, match="lists no policy document"):
        call_command("synthesize_cases", dataset.slug, "--n", "3")
    with pytest.raises(CommandError, match="No judge config 999"):
        call_command("synthesize_cases", dataset.slug, "--n", "3", "--editor-config", "999")
    with pytest.raises(CommandError, match="The seed is a whole number from 0 to 2147483647, not 2147483648"):
        call_command("synthesize_cases", dataset.slug, "--n", "3", "--policy", "returns", "--seed", str(2**31),
                     "--editor-model", EDITOR_MODEL)
    assert Case.objects.count() == 3
