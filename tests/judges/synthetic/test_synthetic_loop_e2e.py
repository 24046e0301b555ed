"""End to end, the loop a synthetic case goes round: the editor (the stand-in, scripted) writes cases with no
answer; the labeling queue never serves them; the installed `evalhub-gate cases` fetches them, a scripted agent
answers, `evalhub-gate check --post-cases` judges the answers and brings each back as a new case
`<ref>/<external_id>` that reviewers label like any traffic, while the synthetic case stays without an answer."""

import json
import re

import pytest

from evalhub.models import ApiToken, Scope
from judges.synthetic.services import synthesis_start, synthesis_work
from labeling.models import Case
from labeling.queue.selectors import next_case
from tests.conftest import PASSWORD, store_project
from tests.judges.gate.test_pipeline_e2e import gate, scripted_agent
from tests.judges.gate.test_post_cases_e2e import observe
from tests.judges.synthetic.helpers import (
    EDITOR_MODEL,
    SCRIPT,
    behavioral_config,
    return_policy,
    stand_in_editor,
    with_policies,
)
from tests.labeling.queue_helpers import make_case

pytestmark = pytest.mark.django_db(transaction=True)


def test_synthetic_cases_go_to_the_pipeline_never_to_reviewers_and_come_back_answered(
    live_server, fake_provider, lead, reviewer, dataset, rubric, tmp_path, client
):
    return_policy(lead)
    with_policies(dataset, "returns")
    observe(rubric, behavioral_config(rubric, lead), lead)
    fake_provider.control(rule={"kind": "answer_contains", "text": "30 days"})
    fake_provider.control(model=EDITOR_MODEL, script=[SCRIPT])
    answered = make_case(dataset, "answered-1")
    job = synthesis_start(dataset=dataset, n=10, types=["adversarial", "near_miss", "ordinary"],
                          editor=stand_in_editor(), seed=3, by=lead, queue=False)
    synthesis_work(job_id=job.pk)
    synthetic = set(Case.objects.filter(dataset=dataset, metadata__has_key="synthetic")
                    .values_list("external_id", flat=True))
    assert len(synthetic) == 3

    # The labeling queue serves only the answered case: a synthetic one has nothing to judge yet.
    assert next_case(dataset=dataset, rubric=rubric, reviewer=reviewer) == answered
    client.login(username=reviewer.username, password=PASSWORD)
    queue = client.get(f"/p/store/label/{dataset.slug}/{rubric.slug}/").content.decode()
    assert re.findall(r'name="case" value="(\d+)"', queue) == [str(answered.pk)]

    # The pipeline fetches them, answers them and posts the answers back.
    token = ApiToken.issue(project=store_project(), name="ci",
                           scopes=[Scope.CASES_READ, Scope.GATES_READ, Scope.CASES_WRITE, Scope.RESULTS_WRITE],
                           created_by=lead)[1]
    done = gate(tmp_path, "cases", "--server", live_server.url, "--dataset", dataset.slug, "--out", "cases.jsonl",
                token=token)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = {line["external_id"]: line for line in map(json.loads, (tmp_path / "cases.jsonl").read_text().splitlines())}
    assert synthetic <= set(lines) and not any("output" in line for line in lines.values())
    first = lines[sorted(synthetic)[0]]
    assert first["expected_behaviour"] and first["metadata"]["synthetic"]["seed"] == 3
    scripted_agent(tmp_path / "cases.jsonl", tmp_path / "outputs.jsonl")
    done = gate(tmp_path, "check", "--config", f"{live_server.url}/api/gates", "--cases", "cases.jsonl",
                "--outputs", "outputs.jsonl", "--no-cache", "--post-cases", dataset.slug, "--ref", "pr-7",
                token=token)
    assert done.returncode == 0, done.stdout + done.stderr

    # Each answer came back as a new case; the synthetic cases stay without one, the template for the next ref.
    posted = {c.metadata["ci"]["external_id"]: c for c in Case.objects.filter(external_id__startswith="pr-7/")}
    assert set(posted) == synthetic | {"answered-1"}
    for external_id in synthetic:
        case = posted[external_id]
        assert case.external_id == f"pr-7/{external_id}" and "30 days" in case.output
        assert case.split == Case.objects.get(dataset=dataset, external_id=external_id).split
    assert set(Case.objects.filter(external_id__in=synthetic).values_list("output", flat=True)) == {None}

    # Reviewers now get the posted answers, never the synthetic cases.
    served = set()
    for _ in range(len(posted) + 1):
        case = next_case(dataset=dataset, rubric=rubric, reviewer=reviewer)
        assert case is None or case.external_id not in synthetic
        if case is None:
            break
        served.add(case.external_id)
        case.labels.create(rubric=rubric, reviewer=reviewer, verdict="pass", content_hash=case.content_hash)
    assert served == {c.external_id for c in posted.values()} | {"answered-1"}
