"""What the browser tests share: launching headless Chromium, screenshots, logging in."""

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.db import connections

from tests.conftest import PASSWORD, TEST_PROJECT

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]
SHOTS = Path(os.environ.get("EVALHUB_SHOTS", "/tmp/shots"))
VIEWPORT = {"width": 1400, "height": 1000}
# The tests' project's pages live under it: f"{live_server.url}{STORE}/runs/3/" (docs/projects.md).
STORE = f"/p/{TEST_PROJECT}"


@contextmanager
def browser_page(*, capture_csp: bool = False, **context_options) -> Iterator:
    """A page in a fresh Chromium context; `context_options` go to `new_context` (viewport, JavaScript).

    With capture_csp, `page.csp_errors` collects the console's Content-Security-Policy violations (Chromium
    reports an inline script or style there).
    """
    if not os.path.exists(CHROMIUM):
        pytest.fail(f"{CHROMIUM} is missing: install Debian's chromium (scripts/test.sh does) to run browser tests.")
    from playwright.sync_api import sync_playwright

    # Playwright runs the test body in a context of its own, where Django opens a fresh connection:
    # close the one opened before, or it stays open and the test database cannot be dropped.
    connections.close_all()
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        context = browser.new_context(**context_options)
        try:
            page = context.new_page()
            if capture_csp:
                page.csp_errors = []
                page.on("console", lambda message: "Content Security Policy" in message.text
                        and page.csp_errors.append(message.text))
            yield page
        finally:
            context.close()
            browser.close()
            connections.close_all()


def shot(page, name: str, *, full_page: bool = True, caret: str = "hide") -> None:
    """A screenshot of the page in SHOTS (caret="hide" is Playwright's default)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SHOTS / name), full_page=full_page, caret=caret)


def log_in(page, live_server, username: str, password: str = PASSWORD, *, lands_on: str | None = "") -> None:
    """Log in through the login form; then wait for the page the user lands on: `lands_on` (a path), any page
    but the login form (""; the home page sends a member of one project into it), or None: don't wait."""
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    if lands_on:
        page.wait_for_url(f"{live_server.url}{lands_on}")
    elif lands_on is not None:
        page.wait_for_url(lambda url: "/accounts/login/" not in url)


@contextmanager
def celery_worker(tmp_path: Path, name: str, **env: str) -> Iterator[subprocess.Popen]:
    """A real Celery worker (with beat) on the test database and this test's Redis db, stopped afterwards.

    `env` adds the variables a test's judges name. Chunks of 5 cases, so progress moves visibly."""
    if not settings.CELERY_BROKER_URL.startswith("redis"):
        pytest.fail("This test needs CELERY_BROKER_URL=redis://… (scripts/test.sh sets it).")
    redis.Redis.from_url(settings.CELERY_BROKER_URL).flushdb()  # no message of an earlier test
    db = settings.DATABASES["default"]
    environ = {
        **os.environ,
        "DATABASE_URL": f"postgres://{db['USER']}@{db['HOST']}:{db['PORT']}/{db['NAME']}",
        "CELERY_BROKER_URL": settings.CELERY_BROKER_URL,
        "EVALHUB_DATA_DIR": str(tmp_path / "worker"),  # its own beat schedule file
        "EVALHUB_CHUNK_CASES": "5",
        **env,
    }
    environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    root = Path(__file__).resolve().parents[2]
    with open(tmp_path / "worker.log", "w") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "celery", "-A", "evalhub", "worker", "--beat", "--pool=solo", "-Q", "celery",
             f"--hostname={name}@%h", "--loglevel=INFO"],
            cwd=root, env=environ, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
        )
        try:
            yield proc
        finally:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
