"""`manage.py runserver` with the documented defaults (DEBUG off, no collectstatic): the pages and their static
files are served, not a 500 per page for a missing manifest entry (evalhub/static_storage.py)."""

import signal
import subprocess
import sys
import time

import httpx
import pytest
from django.conf import settings

from tests.evalhub.test_deploy_settings import served_environment
from tests.evalhub.test_serve import _database_url, _free_port


@pytest.fixture
def runserver(db, tmp_path):
    port = _free_port()
    env = served_environment(DATABASE_URL=_database_url(), EVALHUB_DATA_DIR=str(tmp_path), DJANGO_DEBUG="0")
    log = tmp_path / "runserver.log"
    with open(log, "wb") as out:
        process = subprocess.Popen([sys.executable, "manage.py", "runserver", "--noreload", f"127.0.0.1:{port}"],
                                   cwd=settings.BASE_DIR, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            if process.poll() is not None:
                pytest.fail(f"runserver exited with {process.returncode}:\n{log.read_text()}")
            try:
                httpx.get(base, timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.25)
        else:
            pytest.fail(f"runserver did not answer on {base}:\n{log.read_text()}")
        yield base
    finally:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:  # a loaded machine: what is checked is the serving, not the exit
            process.kill()
            process.wait()


def test_runserver_with_debug_off_and_no_collectstatic_serves_pages_and_static_files(runserver, tmp_path):
    assert not (tmp_path / "static" / "staticfiles.json").exists()  # collectstatic never ran here
    login = httpx.get(f"{runserver}/accounts/login/", timeout=30)
    assert login.status_code == 200, login.text[:500]
    assert 'href="/static/css/app.css"' in login.text  # the plain name: there is no manifest to hash it
    css = httpx.get(f"{runserver}/static/css/app.css", timeout=30)
    assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    assert css.text.startswith("/* evalhub")
