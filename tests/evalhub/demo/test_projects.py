"""The demo's two projects: the code-review project's own data, and nothing shared with store-support
(docs/projects.md): runs, labels, queues and caches pair a rubric with its own project's cases only, each token
sees only its project, and a reviewer of both gets the two queues apart."""

import pytest
from django.db.models import F
from django.urls import reverse

from evalhub.demo.ci import CODE_TOKEN_ENV, TOKEN_ENV, write_ci_env
from evalhub.demo.code_review import CASES, CONTRACT_NOTE, CONTRACT_SPEC, FORBIDDEN_TOOLS
from evalhub.demo.judges import DEMO_KEY_ENV, DEMO_URL_ENV, noted_run
from evalhub.models import ApiToken, MemberEvent, Project, Role, User
from judges.models import CachedJudgment, CiResult, JudgeConfig, Run
from judges.runs.services import RunError
from labeling.models import CaseTally, Dataset, Label

STORE, CODE = "store-support", "code-review"


def _tokens(tmp_path, monkeypatch) -> dict[str, str]:
    """The demo's CI environment as start.sh writes it, read back: {variable: value}."""
    monkeypatch.setenv(DEMO_URL_ENV, "http://127.0.0.1:9/v1")
    monkeypatch.setenv(DEMO_KEY_ENV, "stand-in-needs-no-key")
    path = write_ci_env(server="http://testserver", path=tmp_path / "ci.env")
    pairs = (line.removeprefix("export ").split("=", 1) for line in path.read_text().splitlines() if "=" in line)
    return {name: value.strip("'") for name, value in pairs}


def _get(client, path: str, token: str):
    return client.get(path, headers={"Authorization": f"Bearer {token}"})


@pytest.mark.usefixtures("demo_loaded_twice")
@pytest.mark.django_db
class TestTwoProjects:
    """load_demo run twice (tests/evalhub/demo/conftest.py): two projects, each loaded once, sharing nothing."""

    def test_the_code_review_project_holds_a_coding_agents_data(self):
        code = Project.objects.get(slug=CODE)
        assert code.name == "Code assistant"
        assert list(code.datasets.values_list("slug", flat=True)) == ["code-tasks"]
        cases = list(code.datasets.get().cases.all())
        assert 30 <= len(cases) == len(CASES) <= 40
        tools = {call["name"] for case in cases for call in case.trace["toolCalls"]}
        assert {"read_file", "edit_file", "run_tests", "delete_branch", "force_push"} <= tools
        assert {case.expected_tool for case in cases} == {"run_tests"}
        assert {case.kind for case in cases} == {"good", "bad", "incomplete", "injection", "paraphrase"}
        assert list(code.policies.values_list("slug", "version")) == [("patch-rules", 1)]
        assert dict(code.rubrics.values_list("slug", "stage")) == {"fixes-test": "warn", "safe-tools": "gate"}
        # The contract judge forbids the destructive git tools; the behavioral one reads the project's policy.
        contract = JudgeConfig.objects.get(rubric__project=code, note=CONTRACT_NOTE)
        assert contract.spec["forbidden_tools"] == FORBIDDEN_TOOLS and contract.deterministic
        behavioral = JudgeConfig.objects.get(rubric__project=code, rubric__slug="fixes-test")
        assert behavioral.spec["policy_ref"] == {"slug": "patch-rules", "version": 1}
        assert "scripted stand-in" in behavioral.runs.get().judgments.first().reason
        # Its CI history: one check's results, a gate and a warn rubric.
        assert set(CiResult.objects.filter(rubric__project=code).values_list("rubric__slug", "stage")) == {
            ("fixes-test", "warn"), ("safe-tools", "gate")}

    def test_the_two_projects_share_nothing(self):
        store, code = Project.objects.get(slug=STORE), Project.objects.get(slug=CODE)
        for project in (store, code):
            assert Run.objects.filter(dataset__project=project).exists()
            assert Label.objects.filter(rubric__project=project).exists()
            assert CachedJudgment.objects.filter(project=project).exists()
            assert CiResult.objects.filter(rubric__project=project).exists()
        # Each rubric's runs, labels and queue rows only on its own project's cases.
        assert not Run.objects.exclude(config__rubric__project=F("dataset__project")).exists()
        assert not Label.objects.exclude(rubric__project=F("case__dataset__project")).exists()
        assert not CaseTally.objects.exclude(rubric__project=F("case__dataset__project")).exists()
        # Each judge config's policy is its own project's.
        for config in JudgeConfig.objects.select_related("rubric__project").exclude(spec__policy_ref=None):
            assert config.rubric.project.policies.filter(slug=config.spec["policy_ref"]["slug"]).exists()
        assert not store.policies.filter(slug="patch-rules").exists() and not code.policies.filter(slug="returns")
        # Each dataset's reviewers and each audited member are members of its project.
        for dataset in Dataset.objects.prefetch_related("reviewers"):
            assert all(u.role_in(dataset.project) == Role.REVIEWER for u in dataset.reviewers.all()), dataset.slug
        # ada created the project with carl as its lead; carl invited the reviewers, who joined.
        assert set(MemberEvent.objects.filter(project=code).values_list("kind", "subject", "by__username")) == {
            ("added", "carl", "ada"), ("invited", "rita", "carl"), ("joined", "rita", "rita"),
            ("invited", "rosa", "carl"), ("joined", "rosa", "rosa")}

    def test_a_rubric_never_judges_the_other_projects_dataset(self):
        carl = User.objects.get(username="carl")
        fixes_test = Project.objects.get(slug=CODE).rubrics.get(slug="fixes-test")
        store_cases = Dataset.objects.get(project__slug=STORE, slug="store-support")
        configs = JudgeConfig.objects.count()
        with pytest.raises(RunError, match="another project"):
            noted_run(rubric=fixes_test, dataset=store_cases, by=carl, note="cross", spec=CONTRACT_SPEC)
        assert JudgeConfig.objects.count() == configs

    def test_each_token_sees_only_its_project(self, client, tmp_path, monkeypatch):
        env = _tokens(tmp_path, monkeypatch)
        store, code = env[TOKEN_ENV], env[CODE_TOKEN_ENV]
        assert set(ApiToken.objects.filter(revoked_at=None).values_list("project__slug", flat=True)) == {STORE, CODE}
        assert set(MemberEvent.objects.filter(kind="token_created").values_list("project__slug", flat=True)) == {
            STORE, CODE}

        gates = {name: _get(client, "/api/gates", token).json() for name, token in (("store", store), ("code", code))}
        assert gates["store"]["project"] == STORE and gates["code"]["project"] == CODE
        assert {r["slug"] for r in gates["store"]["rubrics"]} == {"tool-use", "return-policy", "grounded-answer"}
        assert {r["slug"] for r in gates["code"]["rubrics"]} == {"fixes-test", "safe-tools"}

        assert _get(client, "/api/datasets/code-tasks/cases", store).status_code == 404
        assert _get(client, "/api/datasets/store-support/cases", code).status_code == 404
        mine = _get(client, "/api/datasets/code-tasks/cases", code)
        assert mine.status_code == 200 and len(b"".join(mine.streaming_content).splitlines()) == len(CASES)
        assert _get(client, "/api/policies/patch-rules", store).status_code == 404
        assert _get(client, "/api/policies/returns", code).status_code == 404
        assert _get(client, "/api/policies/patch-rules", code).status_code == 200
        # code-review's demo token only reads: it cannot post results.
        posted = client.post("/api/ci-results", data={}, content_type="application/json",
                             headers={"Authorization": f"Bearer {code}"})
        assert posted.status_code == 403

        # A new start revokes both earlier tokens.
        _tokens(tmp_path, monkeypatch)
        assert _get(client, "/api/gates", store).status_code == 401
        assert _get(client, "/api/gates", code).status_code == 401

    def test_the_demo_people_open_only_their_projects(self):
        people = {u.username: u for u in User.objects.all()}
        projects = {name: set(Project.objects.for_user(people[name]).values_list("slug", flat=True))
                    for name in ("lena", "carl", "rita", "rob", "rosa", "ada")}
        assert projects == {"lena": {STORE}, "carl": {CODE}, "rita": {STORE, CODE}, "rob": {STORE},
                            "rosa": {CODE}, "ada": {STORE, CODE}}

    def test_rita_sees_both_projects_queues_apart(self, client):
        rita = User.objects.get(username="rita")
        store, code = Project.objects.get(slug=STORE), Project.objects.get(slug=CODE)
        assert set(store.datasets.visible_to(rita, role=rita.role_in(store)).values_list("slug", flat=True)) == {
            "store-support", "ci-traffic"}
        assert set(code.datasets.visible_to(rita, role=rita.role_in(code)).values_list("slug", flat=True)) == {
            "code-tasks"}

        client.force_login(rita)
        store_queues = client.get(reverse("labeling:queue_start", args=[STORE])).content.decode()
        code_queues = client.get(reverse("labeling:queue_start", args=[CODE])).content.decode()
        assert reverse("labeling:queue", args=[STORE, "store-support", "return-policy"]) in store_queues
        assert "code-tasks" not in store_queues and "fixes-test" not in store_queues
        assert reverse("labeling:queue", args=[CODE, "code-tasks", "fixes-test"]) in code_queues
        assert "store-support</span>" not in code_queues and "return-policy" not in code_queues
        # A dataset or rubric named under the other project is not there.
        assert client.get(reverse("labeling:queue", args=[CODE, "code-tasks", "fixes-test"])).status_code == 200
        assert client.get(reverse("labeling:queue", args=[STORE, "code-tasks", "fixes-test"])).status_code == 404
        assert client.get(reverse("labeling:queue", args=[CODE, "code-tasks", "tool-use"])).status_code == 404

    def test_a_lead_of_one_project_finds_nothing_of_the_other(self, client):
        client.force_login(User.objects.get(username="carl"))
        assert client.get(reverse("labeling:dataset_list", args=[CODE])).status_code == 200
        assert client.get(reverse("labeling:dataset_list", args=[STORE])).status_code == 404
        assert client.get(reverse("labeling:policy_detail", args=[STORE, "returns"])).status_code == 404
