import pytest
from django.core.exceptions import ImproperlyConfigured
from django.urls import reverse

from evalhub.models import ApiToken, Scope, hash_token
from tests.conftest import TEST_PROJECT


@pytest.mark.parametrize(("url_name", "args"), [
    ("home", []), ("labeling:dataset_list", [TEST_PROJECT]), ("labeling:rubric_list", [TEST_PROJECT]),
    ("members:members", [TEST_PROJECT]), ("password_change", []),
])
def test_it_sends_anonymous_users_to_login(client, db, url_name, args):
    response = client.get(reverse(url_name, args=args))
    assert response.status_code == 302
    assert response["Location"].startswith(reverse("login"))


@pytest.mark.parametrize("url_name", ["labeling:dataset_list", "labeling:rubric_list", "members:members",
                                      "members:tokens"])
def test_it_refuses_lead_pages_to_reviewers(reviewer_client, url_name):
    assert reviewer_client.get(reverse(url_name, args=[TEST_PROJECT])).status_code == 403


def test_it_shows_reviewers_only_their_datasets(reviewer_client, dataset, other_dataset, rubric):
    response = reviewer_client.get(reverse("home"), follow=True)
    assert response.redirect_chain == [(reverse("project_home", args=[TEST_PROJECT]), 302),
                                       (reverse("labeling:queue_start", args=[TEST_PROJECT]), 302)]
    body = response.content.decode()
    assert dataset.name in body
    assert other_dataset.name not in body


def test_it_gives_leads_an_overview_in_constant_queries(lead_client, dataset, rubric, django_assert_num_queries):
    # session, user, the door's membership, rubrics, their evidence events and latest CI results, open disputes,
    # labeling progress, datasets with counts, runs, the runs with an audit sample (no
    # evidence here: its checks add a fixed few; tests/evalhub/test_home.py shows the count does not grow with
    # rubrics), and the project's monitors with their newest window (tests/judges/monitoring)
    with django_assert_num_queries(12):
        body = lead_client.get(reverse("project_home", args=[TEST_PROJECT])).content.decode()
    assert dataset.name in body and rubric.name in body


def test_it_logs_in_and_out(client, reviewer):
    response = client.post(reverse("login"), {"username": "rita", "password": "correct-horse-battery"})
    assert response.status_code == 302
    assert client.get(reverse("labeling:queue_start", args=[TEST_PROJECT])).status_code == 200
    client.post(reverse("logout"))
    assert client.get(reverse("home")).status_code == 302


def test_it_stores_only_the_hash_of_a_token(project, lead):
    token, raw = ApiToken.issue(project=project, name="ci", scopes=[Scope.GATES_READ], created_by=lead)
    token.refresh_from_db()
    assert raw.startswith("evh_") and len(raw) > 40
    assert token.token_hash == hash_token(raw)
    assert raw not in (token.token_hash, token.prefix, str(token.scopes))


def test_a_token_is_made_on_its_projects_page_not_in_the_admin(client, admin_user):
    client.force_login(admin_user)
    # The admin lists tokens and revokes them; making one is the Tokens page's (shown once, audited there:
    # tests/evalhub/members/test_tokens_page.py).
    assert client.get(reverse("admin:evalhub_apitoken_add")).status_code == 403


def test_it_fails_loudly_on_a_bad_database_url(monkeypatch):
    from evalhub import settings as settings_module

    monkeypatch.setenv("DATABASE_URL", "mysql://root@localhost/evalhub")
    with pytest.raises(ImproperlyConfigured, match="DATABASE_URL"):
        settings_module._database()


def test_it_fails_loudly_on_a_bad_broker_url(monkeypatch):
    from evalhub import settings as settings_module

    monkeypatch.setenv("CELERY_BROKER_URL", "sqs://key@localhost//")
    with pytest.raises(ImproperlyConfigured, match="CELERY_BROKER_URL"):
        settings_module._broker()


@pytest.mark.parametrize("raw", ["0", "-5"])
def test_a_wait_of_no_time_is_refused_at_start(monkeypatch, raw):
    from evalhub import settings as settings_module

    monkeypatch.setenv("EVALHUB_OTLP_TRACE_WAIT_SECONDS", raw)
    with pytest.raises(ImproperlyConfigured, match="EVALHUB_OTLP_TRACE_WAIT_SECONDS=.*at least 1"):
        settings_module.env_int("EVALHUB_OTLP_TRACE_WAIT_SECONDS", 60, minimum=1)


@pytest.mark.parametrize(
    ("url", "options"),
    [("redis://127.0.0.1:6379/3", {"visibility_timeout": 600}), ("amqp://guest:guest@127.0.0.1:5672//", {})],
)
def test_it_takes_a_redis_or_a_rabbitmq_broker(monkeypatch, url, options):
    from evalhub import settings as settings_module

    monkeypatch.setenv("CELERY_BROKER_URL", url)
    monkeypatch.delenv("CELERY_VISIBILITY_TIMEOUT", raising=False)
    assert settings_module._broker() == (url, options)
