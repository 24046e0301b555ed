"""The README's demo lines and the CI tutorial's, run as written against the demo as `bash scripts/start.sh`
leaves it; then the documentation's screenshots, taken from that demo.

start.sh itself starts the demo here (the stand-in, migrate, load_demo, demo_ci_env, a worker, runserver with
the documented defaults: DEBUG off, no collectstatic) on a free port, with the test database and a data folder
of its own. Every ```bash block of README.md, then of docs/ci-tutorial.md, on the line after `<!-- run-against-demo -->` then runs, in
order, in one `bash` with `set -euo pipefail`, from a folder laid out like the checkout (`.venv`, `scripts`, and
`var` the demo's data folder), with no variable of this process but PATH: what the lines need comes from
what the demo wrote. A README edit that breaks a marked line fails here; mark new lines the same way.

The rows start.sh writes are committed (transactional_db), and its processes stop before they are flushed.
"""

import os
import re
import signal
import stat
import subprocess
import time

import httpx
import pytest
from django.conf import settings

from evalhub.demo.projects import DEMO_PASSWORD
from judges.models import CiResult, JudgeConfig, Run
from labeling.models import Case
from tests.browser.helpers import browser_page
from tests.evalhub.test_deploy_settings import served_environment
from tests.evalhub.test_serve import _database_url, _free_port

pytestmark = pytest.mark.worker

MARK = "<!-- run-against-demo -->"
BLOCK_RE = re.compile(r"^" + re.escape(MARK) + r"\n```bash\n(.*?)^```$", re.M | re.S)


DEMO_PAGES = ("README.md", "docs/ci-tutorial.md")  # in the order a reader runs them


def readme_demo_lines() -> str:
    lines = []
    for page in DEMO_PAGES:
        text = (settings.BASE_DIR / page).read_text()
        blocks = BLOCK_RE.findall(text)
        marks = re.findall(r"^" + re.escape(MARK) + r"$", text, re.M)
        assert blocks and len(blocks) == len(marks), f"{page}: a {MARK} line is not followed by a ```bash block"
        lines.extend(blocks)
    return "\n".join(lines)


@pytest.fixture
def demo(transactional_db, tmp_path):
    """scripts/start.sh in its own process group; yields (base URL, data folder, log) and stops it all."""
    port, data = _free_port(), tmp_path / "var"
    env = served_environment(DATABASE_URL=_database_url(), EVALHUB_DATA_DIR=str(data), PORT=str(port))
    env.pop("DJANGO_DEBUG", None)  # the documented default: off
    log = tmp_path / "start.log"
    with open(log, "wb") as out:
        process = subprocess.Popen(["bash", "scripts/start.sh"], cwd=settings.BASE_DIR, env=env, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(360):  # load_demo judges its runs and a CI check: a minute or more on a busy machine
            if process.poll() is not None:
                pytest.fail(f"start.sh exited with {process.returncode}:\n{log.read_text()}")
            try:
                if httpx.get(f"{base}/accounts/login/", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.5)
        else:
            pytest.fail(f"start.sh did not answer on {base}:\n{log.read_text()}")
        yield base, data, log
    finally:
        os.killpg(process.pid, signal.SIGTERM)  # start.sh's trap stops the stand-in and the worker
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        time.sleep(0.5)  # runserver's reloaded child and the worker's pool leave after their parents
        if subprocess.run(["pgrep", "-g", str(process.pid)], capture_output=True).returncode == 0:
            os.killpg(process.pid, signal.SIGKILL)


def _log_in(client: httpx.Client, username: str) -> None:
    page = client.get("/accounts/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    response = client.post("/accounts/login/", data={
        "username": username, "password": DEMO_PASSWORD, "csrfmiddlewaretoken": token, "next": "/"})
    assert response.status_code == 302, response.text[:500]


def test_the_readme_demo_lines_run_as_written_against_the_started_demo(demo, tmp_path):
    """One start of the demo for all its checks: load_demo judges several runs, the test's slowest part."""
    base, data, log = demo
    lines = readme_demo_lines()
    assert ". var/demo/ci.env" in lines and "evalhub-gate check" in lines and "--max-cost-usd" in lines

    ci_env = data / "demo" / "ci.env"
    assert stat.S_IMODE(ci_env.stat().st_mode) == 0o600  # it holds a token
    assert "evh_" not in log.read_text()  # shown nowhere but in the file

    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for name, target in ((".venv", settings.BASE_DIR / ".venv"), ("scripts", settings.BASE_DIR / "scripts"),
                         ("var", data)):
        (checkout / name).symlink_to(target)
    posted_before = CiResult.objects.filter(rubric__project__slug="store-support").count()

    def code_review():  # what the lines must leave as it was: the second project's CI results, runs and cases
        return (list(CiResult.objects.filter(rubric__project__slug="code-review").values_list("pk", flat=True)),
                list(Run.objects.filter(dataset__project__slug="code-review").values_list("pk", "total")),
                Case.objects.filter(dataset__project__slug="code-review").count())

    code_review_before = code_review()
    assert code_review_before[0] and code_review_before[1]
    done = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + lines], cwd=checkout, capture_output=True, text=True, timeout=120,
        env={"PATH": os.environ["PATH"], "HOME": str(tmp_path), "LANG": "C.UTF-8"},
    )
    assert done.returncode == 0, f"{done.stdout}\n{done.stderr}\n--- start.sh:\n{log.read_text()[-3000:]}"
    assert "error" not in done.stderr
    assert '"slug": "returns", "version": 2' in done.stdout  # the policy the judge references
    assert "evalhub-gate: exit 0 (pass)" in done.stdout  # the scripted agent passes the demo's gate
    assert CiResult.objects.filter(rubric__project__slug="store-support").count() > posted_before  # --post arrived
    # The token is store-support's: the other project's dataset is not found, its gate config is its own, and
    # nothing of it changed.
    assert """{"error": "No dataset 'code-tasks'."}""" in done.stdout
    assert "code-review {'fixes-test': 'warn', 'safe-tools': 'gate'}" in done.stdout
    assert code_review() == code_review_before

    # The demo's policy story: the return-policy judges reference the returns policy the README fetched.
    newest = (JudgeConfig.objects.filter(rubric__project__slug="store-support", rubric__slug="return-policy")
              .order_by("-version").first())
    assert newest.spec["policy_ref"] == {"slug": "returns", "version": 2}
    assert "the 30th day after the delivery date is the last day" in newest.spec["policy"]
    with httpx.Client(base_url=base, timeout=30) as lena:
        _log_in(lena, "lena")
        policies = lena.get("/p/store-support/policies/")
        assert policies.status_code == 200 and 'href="/p/store-support/policies/returns/"' in policies.text
        returns = lena.get("/p/store-support/policies/returns/")
        assert returns.status_code == 200 and "the 30th day after the delivery date is the last day" in returns.text

        # DEBUG off and no collectstatic: the pages name the plain static files, and WhiteNoise serves them.
        stylesheet = re.search(r'href="(/static/css/app[^"]*\.css)"', returns.text).group(1)
        css = lena.get(stylesheet)
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")

        # evalhub's own error pages, not Django's technical ones.
        missing = lena.get("/no/such/page/")
        assert missing.status_code == 404 and "There is nothing here" in missing.text
        assert "URLconf" not in missing.text
    with httpx.Client(base_url=base, timeout=30) as rita:
        _log_in(rita, "rita")
        refused = rita.get("/p/store-support/datasets/")
        assert refused.status_code == 403 and "leads may do this." in refused.text
        # rita reviews in both projects: the home page lets her pick one.
        home = rita.get("/")
        assert 'href="/p/store-support/' in home.text and 'href="/p/code-review/' in home.text
    with httpx.Client(base_url=base, timeout=30) as carl:
        _log_in(carl, "carl")
        assert carl.get("/p/code-review/datasets/").status_code == 200
        assert carl.get("/p/store-support/datasets/").status_code == 404  # not his project: not there at all

    # The documentation's screenshots, from this demo: into docs/img/ with EVALHUB_DOCS_SCREENSHOTS=1 (then
    # commit them), elsewhere into the test's folder, so that taking them is tested on every run.
    folder = settings.BASE_DIR / "docs" / "img" if os.environ.get("EVALHUB_DOCS_SCREENSHOTS") else tmp_path
    report_run = (Run.objects.filter(dataset__project__slug="store-support", status=Run.Status.FINISHED,
                                     config__rubric__slug="return-policy").order_by("pk").first())
    for username, path, name in (
        ("lena", f"/p/store-support/runs/{report_run.pk}/report/", "report.png"),
        ("lena", "/p/store-support/promotion/", "promotion.png"),
        ("rita", "/p/store-support/label/", "label.png"),
    ):
        with browser_page(viewport={"width": 1280, "height": 900}) as page:
            page.goto(f"{base}/accounts/login/")
            page.fill("#id_username", username)
            page.fill("#id_password", DEMO_PASSWORD)
            page.click("button[type=submit]")
            page.wait_for_load_state()
            page.goto(f"{base}{path}")
            assert page.locator("h1").count() >= 1, path
            page.screenshot(path=str(folder / name), full_page=False)
        assert (folder / name).stat().st_size > 10_000, name  # a page, not a blank
