"""`manage.py synthesize_cases`: the work in the command's own process, what it wrote and cost on stdout, a
failed job or a bad request as a CommandError that writes nothing."""

import pytest
from django.core.management import CommandError, call_command

from judges.models import SynthesisJob
from labeling.models import Case, Dataset, Rubric
from labeling.policies.services import policy_write
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


def test_it_names_the_project_and_keeps_to_it(fake_provider, lead, dataset, rubric, other_project, other_lead,
                                             capsys):
    return_policy(lead)
    ours = behavioral_config(rubric, lead)
    their_rubric = Rubric.objects.create(project=other_project, slug="tone", name="Tone?", criteria="Polite.")
    theirs = behavioral_config(their_rubric, other_lead)
    Dataset.objects.create(project=other_project, slug="their-data", name="Theirs")
    with pytest.raises(CommandError, match="more than one project: name one with --project SLUG. Projects: shopnest, "
                                           "store."):
        call_command("synthesize_cases", dataset.slug, "--n", "3", "--policy", "returns")
    with pytest.raises(CommandError, match="No dataset 'their-data' in project store"):
        call_command("synthesize_cases", "their-data", "--project", "store", "--n", "3")
    # Another project's judge config is not an editor here: as unknown as one that does not exist.
    with pytest.raises(CommandError, match=f"No judge config {theirs.pk} in project store"):
        call_command("synthesize_cases", dataset.slug, "--project", "store", "--n", "3", "--policy", "returns",
                     "--editor-config", str(theirs.pk))
    # A policy document of another project is not this project's, however it is named.
    policy_write(project=other_project, slug="their-policy", text="Theirs.", by=other_lead)
    with pytest.raises(CommandError, match="No policy document their-policy"):
        call_command("synthesize_cases", dataset.slug, "--project", "store", "--n", "3", "--policy", "their-policy",
                     "--editor-config", str(ours.pk))
    fake_provider.control(model=EDITOR_MODEL, script=[SCRIPT])
    call_command("synthesize_cases", dataset.slug, "--project", "store", "--n", "3", "--policy", "returns",
                 "--editor-config", str(ours.pk), "--editor-model", EDITOR_MODEL)
    assert "wrote 3 case(s) into store-support" in capsys.readouterr().out
    assert Case.objects.filter(dataset__project=other_project).count() == 0
