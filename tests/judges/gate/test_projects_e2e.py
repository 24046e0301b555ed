"""End to end, two projects with a rubric of the same slug (docs/projects.md): the installed `evalhub-gate` against
a live server judges with the token's project's gate config, corrects the pass rate with that project's evidence
only, and posts its results back to that project; results judged with another project's gate config, and cases
posted to another project's dataset, are refused (exit 2) and nothing is written."""

import json

import pytest

from evalhub.models import ApiToken, Project, Role, Scope
from judges.configs.services import judge_config_save
from judges.models import CiResult, RubricEvent, Run
from judges.promotion.gate_config import gate_config
from labeling.models import Case, Dataset, Rubric
from tests.conftest import make_user, store_project
from tests.judges.gate.test_pipeline_e2e import gate

pytestmark = pytest.mark.django_db(transaction=True)

SCOPES = [Scope.GATES_READ, Scope.RESULTS_WRITE, Scope.CASES_WRITE]
# The evidence's case counts of each project: TPR 0.9 / TFR 0.8 at the store, 0.6 / 0.95 at shopnest.
COUNTS = {"store": {"tp": 90, "fn": 10, "fp": 20, "tn": 80}, "shopnest": {"tp": 60, "fn": 40, "fp": 5, "tn": 95}}


def observed(project: Project, lead) -> tuple[Rubric, Dataset, str]:
    """The project's safety rubric at observe, its evidence snapshot holding the project's own case counts (written
    directly: the promotion rules are not this test's), its dataset, and a CI token of the project."""
    rubric = Rubric.objects.create(project=project, slug="safe-actions", name="No refund tool",
                                   criteria=f"Fail on a refund ({project.slug}).")
    config = judge_config_save(rubric=rubric, by=lead, spec={
        "layers": ["contract"], "contract_checks": ["answer_present", "forbidden_tools"],
        "forbidden_tools": ["issue_refund"],
    })
    dataset = Dataset.objects.create(project=project, slug=f"{project.slug}-traffic", name="CI traffic")
    evidence = Run.objects.create(config=config, dataset=dataset, status=Run.Status.FINISHED, created_by=lead)
    counts = COUNTS[project.slug]
    RubricEvent.objects.create(rubric=rubric, kind=RubricEvent.Kind.PROMOTE, from_stage="draft", to_stage="observe",
                               run=evidence, figures={"n": 200, "cases": counts, "cases_single": counts},
                               reason="observe", by=lead)
    Rubric.objects.filter(pk=rubric.pk).update(stage=Rubric.Stage.OBSERVE)
    token = ApiToken.issue(project=project, name="ci", scopes=SCOPES, created_by=lead)[1]
    return rubric, dataset, token


@pytest.fixture
def world(tmp_path):
    store = store_project()
    shopnest = Project.objects.create(slug="shopnest", name="ShopNest support bot")
    ours = observed(store, make_user("lena", role=Role.LEAD))
    theirs = observed(shopnest, make_user("otto", role=Role.LEAD, project=shopnest))
    with open(tmp_path / "outputs.jsonl", "w") as fh:
        for i in range(10):
            calls = [{"name": "issue_refund", "argument": {}, "result": "ok"}] if i < 8 else []
            fh.write(json.dumps({"external_id": f"case-{i}", "input": "Refund me?", "output": "Done.",
                                 "trace": {"toolCalls": calls}}) + "\n")
    return {"store": store, "ours": ours, "theirs": theirs}


def test_each_project_gates_with_its_own_config_and_evidence_and_posts_to_itself(live_server, world, tmp_path):
    (rubric, _, _), (their_rubric, _, their_token) = world["ours"], world["theirs"]
    done = gate(tmp_path, "check", "--config", f"{live_server.url}/api/gates", "--outputs", "outputs.jsonl",
                "--no-cache", "--json", "results.json", "--post", f"{live_server.url}/api/ci-results",
                token=their_token)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "results.json").read_text())
    assert results["project"] == "shopnest"
    [item] = results["rubrics"]
    # The pass rate is corrected with shopnest's evidence (TPR 0.6, TFR 0.95), never the store's (0.9, 0.8).
    rate = item["pass_rate"]
    assert (rate["status"], rate["true_pass_rate"], rate["true_fail_rate"]) == ("ok", 0.6, 0.95)
    assert (item["passed"], item["failed"]) == (2, 8)
    [stored] = CiResult.objects.all()
    assert stored.rubric == their_rubric != rubric


def test_results_judged_with_another_projects_gate_config_are_refused(live_server, world, tmp_path):
    their_token = world["theirs"][2]
    # The store project's gate config as a file (export_gates --project store), posted with a token of shopnest,
    # whose rubric has the same slug: refused whole, the message naming both projects.
    (tmp_path / "store.json").write_text(json.dumps(gate_config(project=world["store"])))
    done = gate(tmp_path, "check", "--config", "store.json", "--outputs", "outputs.jsonl", "--no-cache",
                "--post", f"{live_server.url}/api/ci-results", token=their_token)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "HTTP 403" in done.stderr
    assert "project 'store', and this token is of project 'shopnest'" in done.stderr
    assert not CiResult.objects.exists()


def test_cases_are_never_posted_to_another_projects_dataset(live_server, world, tmp_path):
    our_dataset, their_token = world["ours"][1], world["theirs"][2]
    done = gate(tmp_path, "check", "--config", f"{live_server.url}/api/gates", "--outputs", "outputs.jsonl",
                "--no-cache", "--post-cases", our_dataset.slug, "--ref", "pr-1", token=their_token)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "HTTP 404" in done.stderr and "Fail on a refund (store)" not in done.stdout + done.stderr
    assert not Case.objects.exists() and not Run.objects.filter(source=Run.Source.CI).exists()
