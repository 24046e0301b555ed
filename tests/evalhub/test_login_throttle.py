"""Login throttling (django-axes): a lockout after too many wrong passwords, and its reset."""

import pytest
from django.core.management import call_command
from django.urls import reverse

from tests.conftest import PASSWORD, TEST_PROJECT


def _log_in(client, password: str):
    return client.post(reverse("login"), {"username": "rita", "password": password})


def test_it_locks_a_username_out_after_too_many_failures_until_reset(client, reviewer, settings):
    settings.AXES_FAILURE_LIMIT = 3
    for _ in range(2):
        assert _log_in(client, "wrong").status_code == 200  # the login form again, with its error
    locked = _log_in(client, "wrong")
    assert locked.status_code == 429
    assert "Too many failed logins" in locked.content.decode()
    assert "After 3 wrong passwords for <strong>rita</strong>" in locked.content.decode()

    # Locked: even the right password is refused, and no session is made.
    assert _log_in(client, PASSWORD).status_code == 429
    assert client.get(reverse("labeling:queue_start", args=[TEST_PROJECT])).status_code == 302

    call_command("axes_reset_username", "rita", stdout=None)
    assert _log_in(client, PASSWORD).status_code == 302
    assert client.get(reverse("labeling:queue_start", args=[TEST_PROJECT])).status_code == 200


def test_it_forgets_failures_after_a_successful_login(client, reviewer, settings):
    settings.AXES_FAILURE_LIMIT = 3
    _log_in(client, "wrong")
    _log_in(client, "wrong")
    assert _log_in(client, PASSWORD).status_code == 302
    client.post(reverse("logout"))
    _log_in(client, "wrong")
    _log_in(client, "wrong")
    assert _log_in(client, PASSWORD).status_code == 302


def test_it_locks_out_the_admin_login_too(client, admin_user, settings):
    settings.AXES_FAILURE_LIMIT = 2
    for _ in range(2):
        client.post(reverse("admin:login"), {"username": "ada", "password": "wrong"})
    response = client.post(reverse("admin:login"), {"username": "ada", "password": PASSWORD})
    assert response.status_code == 429


@pytest.mark.parametrize("login", ["force_login", "login"])
def test_it_leaves_the_test_clients_logins_working(client, reviewer, login):
    if login == "force_login":
        client.force_login(reviewer)
    else:
        assert client.login(username="rita", password=PASSWORD)
    assert client.get(reverse("labeling:queue_start", args=[TEST_PROJECT])).status_code == 200
