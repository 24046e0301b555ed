"""DJANGO_DEBUG=0 serving a team: the secure settings come from the environment, and check --deploy agrees.

Settings are read once, at start-up, so each case runs manage.py in a subprocess with its own environment.
"""

import os
import secrets
import subprocess
import sys

from django.conf import settings

SERVING = {
    "DJANGO_DEBUG": "0",
    "DJANGO_SECRET_KEY": secrets.token_urlsafe(50),
    "DJANGO_ALLOWED_HOSTS": "evalhub.example.com",
    "EVALHUB_HTTPS": "1",
    "EVALHUB_BEHIND_PROXY": "1",
}


def served_environment(**env: str) -> dict[str, str]:
    """This environment plus `env`, less what only tests set (the browser tests' async-unsafe switch,
    which check --deploy rightly refuses)."""
    return {**{k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}, **env}


def _manage(*args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=settings.BASE_DIR, env=served_environment(**env),
        capture_output=True, text=True, timeout=120,
    )


def test_it_passes_the_deploy_check_when_served_over_https():
    result = _manage("check", "--deploy", "--fail-level", "WARNING", **SERVING)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


def test_it_fails_the_deploy_check_over_plain_http():
    """The check the test above passes is a real one: over plain HTTP the cookies are not secure."""
    result = _manage("check", "--deploy", "--fail-level", "WARNING", **{**SERVING, "EVALHUB_HTTPS": "0"})
    assert result.returncode != 0
    for warning in ("security.W004", "security.W008", "security.W012", "security.W016"):
        assert warning in result.stderr


READ_REQUEST = """
from axes.helpers import get_client_ip_address
from django.test import RequestFactory
request = RequestFactory().get("/", REMOTE_ADDR="127.0.0.1", HTTP_X_FORWARDED_FOR="6.6.6.6, 203.0.113.9",
                               HTTP_X_FORWARDED_PROTO="https", SERVER_NAME="evalhub.example.com")
print(get_client_ip_address(request), request.is_secure())
"""


def test_it_reads_the_client_address_and_https_from_the_proxy_only_behind_one():
    behind = _manage("shell", "-v", "0", "-c", READ_REQUEST, **SERVING)
    assert behind.stdout.split() == ["203.0.113.9", "True"], behind.stderr  # not the address the client sent
    direct = _manage("shell", "-v", "0", "-c", READ_REQUEST, **{**SERVING, "EVALHUB_BEHIND_PROXY": "0"})
    assert direct.stdout.split() == ["127.0.0.1", "False"], direct.stderr


def test_it_counts_proxies_from_the_right():
    # A CDN, then our proxy: the CDN appended the client's address, our proxy the CDN's.
    chain = READ_REQUEST.replace("6.6.6.6, 203.0.113.9", "6.6.6.6, 203.0.113.9, 198.51.100.7")
    two = _manage("shell", "-v", "0", "-c", chain, **SERVING, EVALHUB_PROXY_COUNT="2")
    assert two.stdout.split() == ["203.0.113.9", "True"], two.stderr
