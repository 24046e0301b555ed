"""Policy documents: named versions that never change, pages to write the next one with its
diff and read the history, and GET /api/policies/<slug> (policies:read) returning the very text and sha256."""

import hashlib

import pytest
from django.urls import reverse

from evalhub.models import ApiToken, Role, Scope
from labeling.models import LabelingRefused, PolicyDocument
from labeling.policies.services import policy_write
from tests.conftest import TEST_PROJECT, make_user, store_project

pytestmark = pytest.mark.django_db

RETURNS_V1 = "Refunds within 30 days.\nReceipts required.\n"
RETURNS_V2 = "Refunds within 14 days.\nReceipts required.\n"


@pytest.fixture
def returns(lead) -> PolicyDocument:
    policy_write(project=store_project(), slug="returns", text=RETURNS_V1, by=lead)
    return policy_write(project=store_project(), slug="returns", text=RETURNS_V2, by=lead)


def test_it_numbers_versions_and_hashes_their_text(lead, returns):
    assert [(p.version, p.sha256) for p in PolicyDocument.objects.filter(slug="returns").order_by("version")] == [
        (1, hashlib.sha256(RETURNS_V1.encode()).hexdigest()), (2, hashlib.sha256(RETURNS_V2.encode()).hexdigest()),
    ]
    # Writing what the newest says again makes no version; a textarea's \r\n is the same text.
    again = policy_write(project=store_project(), slug="returns", text=RETURNS_V2.replace("\n", "\r\n"), by=lead)
    assert again.pk == returns.pk
    assert PolicyDocument.objects.filter(slug="returns").count() == 2


def test_a_version_never_changes(returns):
    returns.text = "rewritten"
    with pytest.raises(ValueError, match="never changes"):
        returns.save()
    assert PolicyDocument.objects.get(pk=returns.pk).text == RETURNS_V2


def test_it_refuses_an_empty_policy(lead):
    with pytest.raises(LabelingRefused):
        policy_write(project=store_project(), slug="empty", text="  \n", by=lead)


def test_the_admin_shows_policies_but_never_writes_them(client, admin_user, returns):
    client.force_login(admin_user)
    url = reverse("admin:labeling_policydocument_change", args=[returns.pk])
    assert client.get(url).status_code == 200
    client.post(url, {"slug": "returns", "version": 2, "text": "changed"})
    assert PolicyDocument.objects.get(pk=returns.pk).text == RETURNS_V2
    assert client.get(reverse("admin:labeling_policydocument_add")).status_code == 403


def test_every_member_reads_the_history_and_any_version(reviewer_client, returns):
    response = reviewer_client.get(reverse("labeling:policy_detail", args=[TEST_PROJECT, "returns"]) + "?version=1")
    assert response.status_code == 200
    assert "30 days" in response.text and "superseded by v2" in response.text
    response = reviewer_client.get(reverse("labeling:policy_detail", args=[TEST_PROJECT, "returns"]))
    assert "-Refunds within 30 days." in response.text and "+Refunds within 14 days." in response.text
    assert reviewer_client.get(reverse("labeling:policy_list", args=[TEST_PROJECT])).status_code == 200
    url = reverse("labeling:policy_detail", args=[TEST_PROJECT, "returns"])
    assert reviewer_client.get(url + "?version=9").status_code == 404
    assert reviewer_client.get(reverse("labeling:policy_detail", args=[TEST_PROJECT, "nope"])).status_code == 404


def test_only_leads_write(reviewer_client, returns):
    assert reviewer_client.get(reverse("labeling:policy_write", args=[TEST_PROJECT, "returns"])).status_code == 403
    create = reverse("labeling:policy_create", args=[TEST_PROJECT])
    assert reviewer_client.post(create, {"slug": "x", "text": "y"}).status_code == 403
    assert not PolicyDocument.objects.filter(slug="x").exists()


def test_a_lead_sees_the_diff_then_saves_the_next_version(lead_client, returns):
    url = reverse("labeling:policy_write", args=[TEST_PROJECT, "returns"])
    shown = lead_client.post(url, {"text": RETURNS_V2 + "No refunds on sale items.\n", "action": "diff"})
    assert "+No refunds on sale items." in shown.text
    assert PolicyDocument.objects.filter(slug="returns").count() == 2  # the diff saves nothing

    response = lead_client.post(url, {"text": RETURNS_V2 + "No refunds on sale items.\n", "action": "save"})

    assert response.status_code == 302
    assert PolicyDocument.objects.filter(slug="returns").order_by("-version").first().version == 3


def test_a_lead_creates_a_policy_and_cannot_reuse_a_slug(lead_client, returns):
    create = reverse("labeling:policy_create", args=[TEST_PROJECT])
    response = lead_client.post(create, {"slug": "tools", "text": "Never refund twice."})
    assert response.status_code == 302 and PolicyDocument.objects.get(slug="tools").version == 1
    assert PolicyDocument.objects.get(slug="tools").project.slug == TEST_PROJECT
    response = lead_client.post(create, {"slug": "returns", "text": "other"})
    assert response.status_code == 200
    assert response.context["form"].errors["slug"] == [
        "This project has a policy with this slug: write its next version from its page."]


def test_the_list_page_costs_the_same_however_many_policies(lead, client, django_assert_num_queries):
    client.force_login(lead)
    for n in (1, 5):
        for i in range(n):
            policy_write(project=store_project(), slug=f"p{n}-{i}", text=f"text {i}", by=lead)
        # session, user, the membership (+ project), the user's projects (the menu), then the policies with their
        # newest version and count in one query
        with django_assert_num_queries(4):
            assert client.get(reverse("labeling:policy_list", args=[TEST_PROJECT])).status_code == 200


# ---- the API ------------------------------------------------------------------------------------------

def _get(client, token: str, query: str = "", slug: str = "returns"):
    return client.get(reverse("labeling:api_policy", args=[slug]) + query, headers={"Authorization": f"Bearer {token}"})


@pytest.fixture
def policy_token(lead) -> str:
    return ApiToken.issue(project=store_project(), name="agent", scopes=[Scope.POLICIES_READ], created_by=lead)[1]


def test_the_api_returns_the_newest_or_a_chosen_version(client, returns, policy_token):
    newest = _get(client, policy_token).json()
    assert (newest["version"], newest["text"], newest["sha256"]) == (2, RETURNS_V2, returns.sha256)
    first = _get(client, policy_token, "?version=1").json()
    assert (first["version"], first["text"]) == (1, RETURNS_V1)
    assert first["sha256"] == hashlib.sha256(first["text"].encode()).hexdigest()


@pytest.mark.parametrize(("query", "slug", "status"), [
    ("", "unknown", 404), ("?version=7", "returns", 404), ("?version=0", "returns", 400),
    ("?version=two", "returns", 400), ("?version=99999999999999", "returns", 400), ("?v=1", "returns", 400),
])
def test_the_api_answers_bad_requests_in_json(client, returns, policy_token, query, slug, status):
    response = _get(client, policy_token, query, slug)
    assert response.status_code == status
    assert response.json()["error"]


def test_the_api_needs_the_policies_scope(client, lead, returns):
    other = ApiToken.issue(project=store_project(), name="ci", scopes=[Scope.GATES_READ, Scope.CASES_READ],
                           created_by=lead)[1]
    response = _get(client, other)
    assert response.status_code == 403 and "policies:read" in response.json()["error"]
    assert client.get(reverse("labeling:api_policy", args=["returns"])).status_code == 401


# ---- projects: a policy is its project's; another project's is unknown, to pages and tokens alike --------------------


@pytest.fixture
def theirs(other_lead) -> PolicyDocument:
    """Another project's policy of the same slug, with its own text and numbering."""
    return policy_write(project=other_lead.memberships.get().project, slug="returns", text="ShopNest: 60 days.\n",
                        by=other_lead)


def test_the_same_slug_in_two_projects_is_two_policies(returns, theirs):
    assert (returns.version, theirs.version) == (2, 1) and returns.project != theirs.project
    again = policy_write(project=theirs.project, slug="returns", text="ShopNest: 90 days.\n", by=theirs.created_by)
    assert again.version == 2 and PolicyDocument.objects.filter(project=store_project()).count() == 2


def test_the_pages_show_the_projects_policies_only(lead_client, returns, theirs):
    listing = lead_client.get(reverse("labeling:policy_list", args=[TEST_PROJECT]))
    assert [policy.pk for policy in listing.context["policies"]] == [returns.pk]
    detail = lead_client.get(reverse("labeling:policy_detail", args=[TEST_PROJECT, "returns"]))
    assert [version.pk for version in detail.context["history"]] == [returns.pk, returns.pk - 1]
    assert "60 days" not in detail.text


def test_a_slug_of_another_project_is_free_to_create_and_not_revealed(lead_client, theirs):
    response = lead_client.post(reverse("labeling:policy_create", args=[TEST_PROJECT]),
                                {"slug": "returns", "text": "Ours: 30 days."})
    assert response.status_code == 302
    assert PolicyDocument.objects.get(project=store_project(), slug="returns").version == 1
    assert PolicyDocument.objects.filter(project=theirs.project).count() == 1


def test_a_member_of_another_project_gets_404_on_every_policy_page(client, returns, other_lead):
    client.force_login(other_lead)
    for url in (reverse("labeling:policy_list", args=[TEST_PROJECT]),
                reverse("labeling:policy_create", args=[TEST_PROJECT]),
                reverse("labeling:policy_detail", args=[TEST_PROJECT, "returns"]),
                reverse("labeling:policy_write", args=[TEST_PROJECT, "returns"])):
        assert client.get(url).status_code == 404, url
    assert client.post(reverse("labeling:policy_write", args=[TEST_PROJECT, "returns"]),
                       {"text": "Hijacked", "action": "save"}).status_code == 404
    # Under their own project the store's policy does not exist.
    assert client.get(reverse("labeling:policy_detail", args=["shopnest", "returns"])).status_code == 404
    assert PolicyDocument.objects.filter(project=store_project()).count() == 2


def test_a_reviewer_of_another_project_reads_only_their_own(client, returns, theirs):
    sam = make_user("sam", role=Role.REVIEWER, project=theirs.project)
    client.force_login(sam)
    assert client.get(reverse("labeling:policy_detail", args=["shopnest", "returns"])).status_code == 200
    assert client.get(reverse("labeling:policy_detail", args=[TEST_PROJECT, "returns"])).status_code == 404


def test_a_token_reads_its_projects_policy_only(client, returns, theirs, other_lead, policy_token):
    assert _get(client, policy_token).json()["text"] == RETURNS_V2
    their_token = ApiToken.issue(project=theirs.project, name="agent", scopes=[Scope.POLICIES_READ],
                                 created_by=other_lead)[1]
    assert _get(client, their_token).json()["text"] == "ShopNest: 60 days.\n"
    # Version 2 is the store's only: for ShopNest's token it is missing, as of any policy of theirs.
    missing = _get(client, their_token, "?version=2")
    assert missing.status_code == 404 and missing.json() == {"error": "The policy 'returns' has no version 2."}
    only_ours = policy_write(project=store_project(), slug="store-only", text="Ours.", by=returns.created_by)
    unknown, never = _get(client, their_token, slug=only_ours.slug), _get(client, their_token, slug="never-written")
    assert unknown.status_code == never.status_code == 404
    assert unknown.json() == {"error": "No policy 'store-only'."}
    assert never.json() == {"error": "No policy 'never-written'."}
    assert _get(client, their_token, "?version=1", slug="store-only").json() == {"error": "No policy 'store-only'."}
