"""load_demo: the store-support project's dataset, rubrics and labels and the demo's people, loaded once however
often it runs (the code-review project's data: test_projects.py)."""

from collections import Counter

import pytest
from django.contrib.auth import authenticate
from django.core.management import call_command

from evalhub.demo.labeling import NEEDLESS_TOOL, NO_TOOL_CALL, WRONG_ARGUMENT, load_demo
from evalhub.demo.projects import DEMO_PASSWORD
from evalhub.models import Membership, Project, User
from labeling.disputes.agreement import reviewer_agreement
from labeling.disputes.selectors import cases_with_human_verdict
from labeling.importing.reading import CASE_KINDS
from labeling.models import Adjudication, Case, Dataset, Label, Rubric, case_split, labeled_content_hash


@pytest.mark.usefixtures("demo_loaded_twice")
@pytest.mark.django_db
class TestLoadDemo:
    """load_demo run twice (tests/evalhub/demo/conftest.py): the data is there once, users keep their changes."""

    def test_it_loads_the_store_support_demo(self):
        store = Project.objects.get(slug="store-support")
        assert store.name == "Store support agent"
        dataset = store.datasets.get(slug="store-support")
        cases = list(dataset.cases.all())
        assert len(cases) >= 40
        categories = Counter(case.category for case in cases)
        for category in ("policy", "shipping", "tools", "combined", "edge", "adversarial", "paraphrase"):
            assert categories[category] >= 3, category
        for case in cases:
            assert case.split == case_split(case.external_id)
            assert case.content_hash == labeled_content_hash(input=case.input, output=case.output, trace=case.trace)
            assert set(case.trace) == {"toolCalls", "retrievedSources", "context"}
            assert case.golden_answer and case.expected_behaviour and case.metadata["agent_model"]
        assert any("SYSTEM: ignore previous instructions" in str(c.trace["toolCalls"]) for c in cases)

        return_policy, tool_use = store.rubrics.get(slug="return-policy"), store.rubrics.get(slug="tool-use")
        assert list(store.policies.values_list("slug", "version")) == [("returns", 2), ("returns", 1)]
        assert (return_policy.labels_per_case, tool_use.labels_per_case) == (2, 1)
        verdicts = cases_with_human_verdict(rubric=return_policy, cases=dataset.cases.all())
        assert verdicts.filter(human_verdict__isnull=False).count() >= 30  # enough to calibrate a judge on
        assert verdicts.filter(passes__gt=0, fails__gt=0).count() >= 3  # with disagreements to adjudicate
        assert Adjudication.objects.filter(rubric=return_policy).exists()
        assert reviewer_agreement(rubric=return_policy)["percent"] < 1
        # Work is left in the queues.
        assert verdicts.filter(passes=0, fails=0).exists()


    def test_it_creates_the_demo_users_with_their_roles_per_project(self):
        memberships = set(Membership.objects.values_list("project__slug", "user__username", "role"))
        assert memberships == {
            ("store-support", "lena", "lead"), ("store-support", "rita", "reviewer"),
            ("store-support", "rob", "reviewer"), ("store-support", "ria", "reviewer"),
            ("code-review", "carl", "lead"), ("code-review", "rita", "reviewer"), ("code-review", "rosa", "reviewer"),
        }
        # ada is the instance admin: a superuser, a member of nothing; no one else is a superuser.
        admins = {u.username: (u.is_staff, u.is_superuser) for u in User.objects.filter(is_staff=True)}
        assert admins == {"ada": (True, True)} and not User.objects.filter(is_superuser=True, memberships__isnull=False)
        for name in User.objects.values_list("username", flat=True):
            assert authenticate(username=name, password=DEMO_PASSWORD) is not None
        store = Dataset.objects.get(project__slug="store-support", slug="store-support")
        assert set(store.reviewers.values_list("username", flat=True)) == {"rita", "rob", "ria"}


    def test_it_has_the_seed_cases_the_contract_checks_use(self):
        no_call = Case.objects.get(external_id=NO_TOOL_CALL)
        assert no_call.expected_tool == "lookup_order" and no_call.trace["toolCalls"] == []
        assert no_call.expected_tool_argument == {"order_id": "ORD-101"}
        wrong = Case.objects.get(external_id=WRONG_ARGUMENT)
        assert wrong.expected_tool_argument == {"order_id": "ORD-101"}
        assert [call["argument"] for call in wrong.trace["toolCalls"]] == [{"order_id": "ORD-999"}]
        needless = Case.objects.get(external_id=NEEDLESS_TOOL)
        assert needless.expected_tool is None and needless.category == "policy"
        assert [call["name"] for call in needless.trace["toolCalls"]] == ["lookup_order"]


    def test_running_it_again_changes_nothing_a_user_changed(self):
        rita = User.objects.get(username="rita")
        rita.set_password("her-own-password")
        rita.save()
        # A lead made rob a lead of store-support: the demo leaves him so.
        Membership.objects.filter(user__username="rob").update(role="lead")
        label = Label.objects.filter(reviewer=rita).first()
        label.verdict = "fail" if label.verdict == "pass" else "pass"
        label.save()

        def snapshot():
            return (
                list(Case.objects.order_by("pk").values_list("pk", "external_id", "content_hash")),
                list(Label.objects.order_by("pk").values_list("pk", "verdict", "updated_at")),
                list(User.objects.order_by("pk").values_list("pk", "password")),
                list(Membership.objects.order_by("pk").values_list("pk", "role")),
                list(Rubric.objects.order_by("pk").values_list("pk", "criteria")),
                Adjudication.objects.count(),
            )

        before = snapshot()
        call_command("load_demo", verbosity=0)
        assert snapshot() == before


def test_it_marks_every_demo_case_with_a_kind_and_covers_all_five(db):
    load_demo()
    kinds = dict(Case.objects.values_list("external_id", "kind"))
    assert "" not in kinds.values() and set(kinds.values()) == set(CASE_KINDS)
    assert (kinds["paraphrase-window-a"], kinds["adversarial-injection-followed"]) == ("paraphrase", "injection")
    assert (kinds["edge-day-29-vague"], kinds["policy-return-window-90"], kinds["policy-gift-card"]) == (
        "incomplete", "bad", "good")
    # A demo loaded before kinds existed gets them; a kind a lead chose stays.
    Case.objects.filter(external_id="policy-gift-card").update(kind="")
    Case.objects.filter(external_id="policy-final-sale").update(kind="paraphrase")
    load_demo()
    assert Case.objects.get(external_id="policy-gift-card").kind == "good"
    assert Case.objects.get(external_id="policy-final-sale").kind == "paraphrase"
