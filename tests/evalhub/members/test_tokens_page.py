"""The tokens page: a project's tokens listed, a new one shown once, a revocation final and audited."""

import pytest
from django.urls import reverse

from evalhub.members import services
from evalhub.models import ApiToken, MemberEvent, Scope, hash_token
from labeling.models import Dataset
from tests.conftest import TEST_PROJECT

pytestmark = pytest.mark.django_db


def _url(name: str = "members:tokens", *args) -> str:
    return reverse(name, args=[TEST_PROJECT, *args])


def test_a_new_token_is_of_this_project_and_shown_once(lead_client, project):
    response = lead_client.post(_url("members:token_create"),
                                {"name": "ci", "scopes": [Scope.GATES_READ, Scope.RESULTS_WRITE]})

    assert response.status_code == 200 and response["Cache-Control"] == "no-store"
    raw = response.context["plain_token"]
    assert raw.startswith("evh_") and raw in response.content.decode()
    token = ApiToken.objects.get()
    assert token.project == project and token.token_hash == hash_token(raw) and token.created_by.username == "lena"
    assert token.scopes == [Scope.GATES_READ, Scope.RESULTS_WRITE]
    page = lead_client.get(_url()).content.decode()
    assert raw not in page and token.prefix in page
    event = MemberEvent.objects.get(kind=MemberEvent.Kind.TOKEN_CREATED)
    assert event.subject == "ci" and raw not in event.detail


def test_a_token_needs_a_name_and_a_scope(lead_client, project):
    response = lead_client.post(_url("members:token_create"), {"name": "", "scopes": []})

    assert response.status_code == 200 and not ApiToken.objects.exists()
    assert set(response.context["form"].errors) == {"name", "scopes"}


def test_it_lists_this_projects_tokens_only(lead_client, project, other_project, lead, other_lead):
    services.token_create(project=project, name="ours", scopes=[Scope.RUNS_READ], by=lead)
    services.token_create(project=other_project, name="theirs", scopes=[Scope.RUNS_READ], by=other_lead)

    response = lead_client.get(_url())

    assert [token.name for token in response.context["tokens"]] == ["ours"]
    assert "theirs" not in response.content.decode()


def test_it_revokes_a_token_for_good_and_says_so(lead_client, project, lead, client):
    token, raw = services.token_create(project=project, name="ci", scopes=[Scope.GATES_READ], by=lead)

    response = lead_client.post(_url("members:token_revoke", token.pk), follow=True)

    token.refresh_from_db()
    assert token.revoked_at is not None and "is revoked" in response.content.decode()
    assert client.get(reverse("api_token"), headers={"Authorization": f"Bearer {raw}"}).status_code == 401
    lead_client.post(_url("members:token_revoke", token.pk))  # again: nothing more to audit
    assert MemberEvent.objects.filter(kind=MemberEvent.Kind.TOKEN_REVOKED).count() == 1


def test_a_token_of_another_project_is_404(lead_client, other_project, other_lead):
    theirs, _ = services.token_create(project=other_project, name="theirs", scopes=[Scope.GATES_READ], by=other_lead)

    assert lead_client.post(_url("members:token_revoke", theirs.pk)).status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None


def test_a_token_made_here_answers_for_this_project_only(lead_client, client, project, dataset, other_project):
    Dataset.objects.create(project=other_project, slug="theirs", name="Theirs")
    response = lead_client.post(_url("members:token_create"), {"name": "reader", "scopes": [Scope.CASES_READ]})
    headers = {"Authorization": f"Bearer {response.context['plain_token']}"}

    assert client.get(reverse("labeling:api_dataset", args=[dataset.slug]), headers=headers).status_code == 200
    assert client.get(reverse("labeling:api_dataset", args=["theirs"]), headers=headers).status_code == 404


@pytest.mark.parametrize("n", [1, 6])
def test_it_reads_a_fixed_number_of_queries_however_many_tokens(lead_client, project, lead, n,
                                                                 django_assert_num_queries):
    for i in range(n):
        services.token_create(project=project, name=f"t{i}", scopes=[Scope.RUNS_READ], by=lead)
    # session, user, the door's memberships (the navigation's too), the tokens with their creators
    with django_assert_num_queries(4):
        assert lead_client.get(_url()).status_code == 200
