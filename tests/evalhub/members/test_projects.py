"""The projects page at "/" (the picker) and the instance admin's new-project form."""

import pytest
from django.urls import reverse

from evalhub.members import services
from evalhub.models import MemberEvent, Membership, Project, Role
from labeling.models import Dataset, Rubric
from tests.conftest import TEST_PROJECT, make_user

pytestmark = pytest.mark.django_db


def test_a_member_of_several_projects_picks_one_with_their_role_and_counts(
        client, project, other_project, dataset, other_dataset, rubric):
    user = make_user("mia", role=Role.REVIEWER)
    Membership.objects.create(project=other_project, user=user, role=Role.LEAD)
    Dataset.objects.create(project=other_project, slug="x", name="X")
    Project.objects.create(slug="hidden", name="Not mine")
    client.force_login(user)

    response = client.get(reverse("home"))

    assert response.status_code == 200
    shown = {p.slug: (p.my_role, p.datasets_count, p.rubrics_count, p.members_count)
             for p in response.context["projects"]}
    assert shown == {TEST_PROJECT: (Role.REVIEWER, 2, 1, 1), "shopnest": (Role.LEAD, 1, 0, 1)}
    body = response.content.decode()
    assert "Not mine" not in body and reverse("members:members", args=["shopnest"]) in body
    assert reverse("members:members", args=[TEST_PROJECT]) not in body  # a reviewer there


def test_a_member_of_one_project_lands_in_it(client, reviewer):
    client.force_login(reviewer)
    response = client.get(reverse("home"))
    assert response.status_code == 302 and response["Location"] == reverse("project_home", args=[TEST_PROJECT])


def test_a_member_of_one_project_with_an_invitation_waiting_stays_to_answer_it(client, reviewer, other_lead,
                                                                              other_project):
    services.invitation_create(project=other_project, invitee="rita", role=Role.REVIEWER, by=other_lead)
    client.force_login(reviewer)

    response = client.get(reverse("home"))

    assert response.status_code == 200 and 'data-testid="invitations"' in response.content.decode()


def test_a_user_in_no_project_is_told_to_ask_for_an_invitation(client, db):
    client.force_login(make_user("nobody", role=None))

    response = client.get(reverse("home"))

    assert response.status_code == 200
    assert "You are not a member of any project yet; ask a lead to invite you." in response.content.decode()
    assert response.context["project_form"] is None


def test_the_instance_admin_sees_every_project_and_the_new_project_form(client, admin_user, project, other_project):
    client.force_login(admin_user)

    response = client.get(reverse("home"))

    assert {p.slug for p in response.context["projects"]} == {TEST_PROJECT, "shopnest"}
    assert all(p.my_role == Role.LEAD for p in response.context["projects"])
    assert 'data-testid="project-form"' in response.content.decode()


@pytest.mark.parametrize("n", [1, 5])
def test_the_picker_reads_a_fixed_number_of_queries(client, admin_user, django_assert_num_queries, n):
    for i in range(n):
        made = Project.objects.create(slug=f"p{i}", name=f"P{i}")
        Dataset.objects.create(project=made, slug="d", name="D")
        Rubric.objects.create(project=made, slug="r", name="R", criteria="?")
    client.force_login(admin_user)
    # session, user, the projects with their counts, the invitations waiting
    with django_assert_num_queries(4):
        client.get(reverse("home"))


def test_the_instance_admin_creates_a_project_with_its_first_lead(client, admin_user):
    make_user("bea", role=None)
    client.force_login(admin_user)

    response = client.post(reverse("members:project_create"),
                           {"name": "Checkout agent", "slug": "checkout", "description": "", "lead": "bea"})

    made = Project.objects.get(slug="checkout")
    assert response["Location"] == reverse("members:members", args=["checkout"])
    assert Membership.objects.get(project=made).user.username == "bea"
    assert MemberEvent.objects.get(project=made).kind == MemberEvent.Kind.ADDED


@pytest.mark.parametrize(("data", "field"), [
    ({"slug": "STORE", "lead": "lena"}, "slug"),
    ({"slug": "fresh", "lead": "no-such-user"}, "lead"),
])
def test_a_slug_clash_or_an_unknown_lead_is_a_field_error(client, admin_user, project, lead, data, field):
    client.force_login(admin_user)

    response = client.post(reverse("members:project_create"), {"name": "Another", "description": "", **data})

    assert response.status_code == 200 and set(response.context["form"].errors) == {field}
    assert Project.objects.count() == 1


def test_only_the_instance_admin_creates_projects(client, lead, project):
    client.force_login(lead)
    url = reverse("members:project_create")

    assert client.get(url).status_code == 403
    assert client.post(url, {"name": "Mine", "slug": "mine", "lead": "lena"}).status_code == 403
    assert not Project.objects.filter(slug="mine").exists()
