"""The 403 and 404 pages (DEBUG is off in tests, so Django renders them as in production)."""

from django.urls import reverse

from tests.conftest import TEST_PROJECT


def test_it_says_why_a_reviewer_is_refused_and_offers_a_way_back(reviewer_client):
    came_from = "http://testserver" + reverse("labeling:queue_start", args=[TEST_PROJECT])
    response = reviewer_client.get(reverse("labeling:dataset_list", args=[TEST_PROJECT]),
                                   headers={"Referer": came_from})
    assert response.status_code == 403
    body = response.content.decode()
    assert "Only the project&#x27;s leads may do this." in body  # the reason access.lead_required gives
    assert "rita" in body and "reviewer" in body
    assert f'href="{came_from}"' in body
    assert f'href="{reverse("home")}"' in body
    assert 'class="topbar"' in body  # the site's look, not a bare "403 Forbidden"


def test_it_explains_a_missing_page(reviewer_client):
    response = reviewer_client.get("/no/such/page/")
    assert response.status_code == 404
    body = response.content.decode()
    assert "There is nothing here" in body and "<code>/no/such/page/</code>" in body
    assert f'href="{reverse("home")}"' in body
    assert 'class="topbar"' in body


def test_it_shows_a_dataset_the_reviewer_may_not_see_as_missing(reviewer_client, other_dataset, rubric):
    response = reviewer_client.get(reverse("labeling:queue", args=[TEST_PROJECT, other_dataset.slug, rubric.slug]))
    assert response.status_code == 404
    assert "There is nothing here" in response.content.decode()


def test_it_shows_another_projects_page_as_missing(client, other_lead, project):
    client.force_login(other_lead)
    response = client.get(reverse("labeling:queue_start", args=[TEST_PROJECT]))
    assert response.status_code == 404
    assert "There is nothing here" in response.content.decode()


def test_it_offers_no_way_back_to_another_site(reviewer_client):
    response = reviewer_client.get("/no/such/page/", headers={"Referer": "https://evil.example/phish"})
    assert response.status_code == 404
    assert "evil.example" not in response.content.decode()


def test_it_offers_anonymous_users_the_login_page(client, db):
    response = client.get("/no/such/page/")
    assert response.status_code == 404
    body = response.content.decode()
    assert f'href="{reverse("login")}"' in body
    assert 'class="mainnav"' not in body


def test_it_explains_a_form_sent_without_its_token(reviewer, db):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(reviewer)
    response = client.post(reverse("logout"))
    assert response.status_code == 403
    body = response.content.decode()
    assert "This form could not be sent" in body and "Nothing was changed." in body
