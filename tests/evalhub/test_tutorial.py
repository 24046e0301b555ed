"""docs/your-own-agent.md, followed step by step on a fresh instance: the pages it names, posted as a person
fills them, and its command, run as written. A step the page describes that the product no longer does fails
here, so the tutorial cannot drift from the product."""

import json
import re
import shlex
import uuid

import pytest
from django.conf import settings
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from evalhub.models import ApiToken, Invitation, Membership, Role, Scope, User
from judges.models import JudgeConfig, Run
from labeling.models import Case, Dataset, Rubric
from tests.conftest import PASSWORD
from tests.judges.helpers import MODEL

TUTORIAL = settings.BASE_DIR / "docs" / "your-own-agent.md"
GOLDEN = settings.BASE_DIR / "examples" / "shopnest" / "golden.jsonl"
HTMX = {"HX-Request": "true"}


def _step(number: int) -> str:
    text = TUTORIAL.read_text()
    match = re.search(rf"^## {number}\. (.*?)(?=^## |\Z)", text, re.M | re.S)
    assert match, f"the tutorial has no step {number}"
    return match.group(0)


def _client(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True


@pytest.mark.django_db(transaction=True)
def test_the_ten_steps_of_the_tutorial_take_a_golden_set_to_a_judge_in_ci(fake_provider, eager, tmp_path,
                                                                        django_capture_on_commit_callbacks):
    assert len(re.findall(r"^## \d+\. ", TUTORIAL.read_text(), re.M)) == 10
    admin = User.objects.create_superuser("admin", "admin@example.com", PASSWORD)
    you = User.objects.create_user("you", password=PASSWORD)
    nina, omar = (User.objects.create_user(name, password=PASSWORD) for name in ("nina", "omar"))

    # 1. The admin makes the project and names you its lead.
    assert "New project" in _step(1)
    response = _client(admin).post(reverse("members:project_create"),
                                   {"name": "ShopNest", "slug": "shopnest", "description": "", "lead": "you"})
    assert response.status_code == 302, response.content[:2000]
    lead = _client(you)
    assert Membership.objects.get(user=you, project__slug="shopnest").role == Role.LEAD

    # 2. A dataset, on the New dataset page with its defaults.
    assert "New dataset" in _step(2) and "shopnest-golden" in _step(2)
    form = lead.get(reverse("labeling:dataset_create", args=["shopnest"])).context["form"]
    data = {name: field.initial for name, field in form.fields.items() if field.initial is not None}
    data.update(slug="shopnest-golden", name="ShopNest golden set", description="")
    assert lead.post(reverse("labeling:dataset_create", args=["shopnest"]), data).status_code == 302

    # 3. The import, as the page's shell line says (run from the checkout).
    line = re.search(r"^\.venv/bin/python manage\.py (import_cases .*)$", _step(3), re.M).group(1)
    call_command(*shlex.split(line))
    dataset = Dataset.objects.get(project__slug="shopnest", slug="shopnest-golden")
    golden = [json.loads(row) for row in GOLDEN.read_text().splitlines()]
    assert dataset.cases.count() == len(golden) == 40

    # 4. The rubric, two labels a case.
    assert "Labels per case" in _step(4)
    response = lead.post(reverse("labeling:rubric_create", args=["shopnest"]), {
        "slug": "resolves-request", "name": "Does the answer resolve the customer's request correctly?",
        "criteria": "Pass when the answer does what the customer asked and matches the golden answer.",
        "labels_per_case": 2})
    assert response.status_code == 302, response.content[:2000]
    rubric = Rubric.objects.get(project__slug="shopnest", slug="resolves-request")

    # 5. Reviewers: invited by username, they accept, the lead ticks their dataset.
    assert "Members" in _step(5)
    for reviewer in (nina, omar):
        lead.post(reverse("members:invite", args=["shopnest"]), {"invitee": reviewer.username, "role": Role.REVIEWER})
        invitation = Invitation.objects.get(project__slug="shopnest", invitee=reviewer.username)
        assert _client(reviewer).post(reverse("members:invitation_accept", args=[invitation.pk])).status_code == 302
        membership = Membership.objects.get(project__slug="shopnest", user=reviewer)
        lead.post(reverse("members:datasets", args=["shopnest", membership.pk]), {"datasets": [dataset.pk]})
    assert set(dataset.reviewers.values_list("username", flat=True)) == {"nina", "omar"}

    # 6. Both reviewers label every case: a wrong answer fails, the golden one passes.
    by_id = {row["id"]: row for row in golden}
    queue_label = reverse("labeling:queue_label", args=["shopnest", dataset.slug, rubric.slug])
    for reviewer in (nina, omar):
        client = _client(reviewer)
        for case in Case.objects.filter(dataset=dataset):
            row = by_id[case.external_id]
            verdict = "pass" if row["answer"] == row["goldenAnswer"] else "fail"
            client.post(queue_label, {"case": case.pk, "content_hash": case.content_hash, "verdict": verdict,
                                      "note": ""}, headers=HTMX)
    assert rubric.labels.count() == 80

    # 7. A behavioral judge on the scripted stand-in, named by its environment variables.
    assert "environment variables" in _step(7)
    form = lead.get(reverse("judges:config_create", args=["shopnest", rubric.slug])).context["form"]
    data = {name: field.initial for name, field in form.fields.items() if field.initial is not None}
    data.update(layers=["behavioral"], contract_checks=[], provider="openai", model=MODEL,
                base_url_env="EVALHUB_JUDGE_OPENAI_URL", api_key_env="EVALHUB_JUDGE_API_KEY", action="save",
                params='{"temperature": 0, "max_tokens": 400}')
    data = {k: v for k, v in data.items() if v is not None}
    response = lead.post(reverse("judges:config_create", args=["shopnest", rubric.slug]), data)
    assert response.status_code == 302, response.context["form"].errors if response.context else response
    config = JudgeConfig.objects.get(rubric=rubric)

    # 8. A run of every case, twice (the stand-in fails answers shorter than 40 characters: the wrong ones).
    assert "twice" in _step(8)
    fake_provider.control(rule={"kind": "answer_min_length", "chars": 40})
    with django_capture_on_commit_callbacks(execute=True):
        response = lead.post(reverse("judges:run_create", args=["shopnest", config.pk]), {
            "dataset": dataset.slug, "repeats": 2, "concurrency": 4, "spend_cap_usd": "",
            "start_token": uuid.uuid4()})
    assert response.status_code == 302
    run = Run.objects.get(config=config)
    run.refresh_from_db()
    assert (run.status, run.done) == (Run.Status.FINISHED, 80)

    # 9. The report: agreement against the floor, false passes and false fails.
    report = lead.get(reverse("judges:run_report", args=["shopnest", run.pk])).content.decode()
    for words in ("Agreement", "False pass", "False fail"):
        assert words.lower() in report.lower(), words

    # 10. Observe needs no evidence; then the token of the Tokens page reads the gate config CI runs.
    assert "observe" in _step(10) and "Tokens" in _step(10)
    response = lead.post(reverse("judges:promotion_observe", args=["shopnest", rubric.slug]),
                         {"action": "enter", "config": config.pk, "reason": "CI runs it from day one."})
    assert response.status_code == 302
    _, raw = ApiToken.issue(project=dataset.project, name="ci", created_by=you,
                            scopes=[Scope.CASES_READ, Scope.GATES_READ, Scope.RESULTS_WRITE])
    gates = Client().get("/api/gates", headers={"Authorization": f"Bearer {raw}"}).json()
    assert gates["project"] == "shopnest"
    assert [(r["slug"], r["stage"]) for r in gates["rubrics"]] == [("resolves-request", "observe")]
