"""End to end: calibrate a judge for real, promote it to gate through the pages, and run the installed
CI command against the live server.

The judge is the fake provider (a scripted stand-in over HTTP, not a model): it passes an answer that
contains "30 days". The reviewers' labels agree with that on 36 of 40 cases, so the evidence run
(K = 2, through the real run machinery, eagerly) lands at 90 % agreement. A lead logs in over HTTP and
promotes the rubric observe → warn → gate; then `evalhub-gate`, the console script installed with the
package, fetches the gate config with a token and exits 0, 1, 3 and 2 in their situations.
"""

import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import httpx
import pytest

from evalhub.models import ApiToken, Role, Scope
from judges.calibration.selectors import run_figures
from judges.configs import services as config_services
from judges.models import CiResult, RubricEvent, Run
from judges.runs import services
from labeling.models import Case, Dataset, Label, Rubric, case_split, labeled_content_hash
from tests.conftest import PASSWORD, make_user, store_project

pytestmark = pytest.mark.django_db(transaction=True)

GOOD = "Yes: returns are accepted within 30 days of delivery."
BAD = "Sorry, we never take anything back."
GATE = Path(sys.executable).parent / "evalhub-gate"  # installed by [project.scripts]


@pytest.fixture
def eager(settings):
    settings.CELERY_TASK_ALWAYS_EAGER = True  # the run machinery works in-process: no broker, no worker


@pytest.fixture
def world(eager, fake_provider):
    """A rubric, 40 labelled cases, a behavioral judge on the fake provider, and its finished run."""
    lead = make_user("lena", role=Role.LEAD)
    rita = make_user("rita")
    rubric = Rubric.objects.create(project=store_project(),
        slug="return-policy", name="Does the answer follow the return policy?",
        criteria="Pass when the answer states the 30-day return window correctly.",
    )
    dataset = Dataset.objects.create(project=store_project(), slug="store-support", name="Store support")
    dataset.reviewers.add(rita)
    cases = []
    for i in range(40):
        external_id = f"case-{i:03}"
        question, output = "Can I return my shoes?", GOOD if i % 2 == 0 else BAD
        cases.append(Case(
            dataset=dataset, external_id=external_id, input=question, output=output, category="policy",
            split=case_split(external_id), content_hash=labeled_content_hash(input=question, output=output, trace={}),
        ))
    cases = Case.objects.bulk_create(cases)
    # The humans agree with the scripted judge except on four cases (two each way): 90 % agreement.
    disagree = {0, 2, 1, 3}
    Label.objects.bulk_create([
        Label(case=case, rubric=rubric, reviewer=rita, content_hash=case.content_hash,
              verdict=("pass" if (i % 2 == 0) != (i in disagree) else "fail"))
        for i, case in enumerate(cases)
    ])
    fake_provider.control(rule={"kind": "answer_contains", "text": "30 days"})
    config = config_services.judge_config_save(rubric=rubric, by=lead, spec={
        "layers": ["behavioral"], "provider": "openai-compatible", "model": "gpt-4o-mini-2024-07-18",
        "base_url_env": "EVALHUB_JUDGE_OPENAI_URL",
        "api_key_env": "EVALHUB_JUDGE_API_KEY", "params": {"temperature": 0},
        "timeout_s": 5, "max_attempts": 1,
    })
    run = services.run_start(config=config, dataset=dataset, repeats=2, concurrency=4, spend_cap_usd=None, by=lead)
    run.refresh_from_db()
    assert run.status == Run.Status.FINISHED and run.done == 80
    figures = run_figures(run=Run.objects.select_related("config__rubric").get(pk=run.pk))
    assert (figures["n"], figures["agreement"], figures["coverage"]) == (40, 0.9, 1.0)
    return {"lead": lead, "rubric": rubric, "run": run, "fake": fake_provider}


class Browser:
    """A lead's session over real HTTP: log in, then submit the pages' own forms with their CSRF token."""

    def __init__(self, base_url: str) -> None:
        self.http = httpx.Client(base_url=base_url, follow_redirects=False, timeout=30)

    def _token(self, path: str) -> str:
        page = self.http.get(path)
        assert page.status_code == 200, page.status_code
        return re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)

    def log_in(self, username: str) -> None:
        response = self.http.post("/accounts/login/", data={
            "username": username, "password": PASSWORD, "csrfmiddlewaretoken": self._token("/accounts/login/"),
        })
        assert response.status_code == 302, response.text

    def submit(self, page: str, action: str, data: dict) -> httpx.Response:
        return self.http.post(action, data={**data, "csrfmiddlewaretoken": self._token(page)})


def gate(tmp_path: Path, *args: str, token: str | None = None) -> subprocess.CompletedProcess:
    """Run the installed command as CI would: its own process, the token in EVALHUB_TOKEN."""
    # The judge's own EVALHUB_JUDGE_* variables stay (the fake provider's address and key); no other.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "EVALHUB_")) or k.startswith("EVALHUB_JUDGE_")}
    if token:
        env["EVALHUB_TOKEN"] = token
    return subprocess.run([str(GATE), "check", *args], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120, check=False)


def outputs(path: Path, answers: list[str]) -> str:
    path.write_text("".join(
        json.dumps({"external_id": f"pr-{i}", "input": "Can I return my shoes?", "output": answer,
                    "category": "policy"}) + "\n"
        for i, answer in enumerate(answers)
    ))
    return str(path)


def test_a_promoted_gate_runs_in_ci_with_its_three_outcomes(live_server, world, tmp_path):
    rubric, run, fake = world["rubric"], world["run"], world["fake"]
    assert GATE.exists(), "pip install -e . installs the evalhub-gate console script"

    # A lead promotes the rubric one stage at a time through the pages.
    lead = Browser(live_server.url)
    lead.log_in("lena")
    page = f"/p/store/rubrics/{rubric.slug}/promotion/"
    for stage in ("observe", "warn", "gate"):
        response = lead.submit(page, f"{page}promote/", {"to_stage": stage, "run": run.pk,
                                                          "reason": f"Run {run.pk}: 90 % agreement, K = 2."})
        assert response.status_code == 302, response.text
    rubric.refresh_from_db()
    assert rubric.stage == "gate"
    assert RubricEvent.objects.filter(kind="promote").count() == 3

    token = ApiToken.issue(project=store_project(), name="ci", scopes=[Scope.GATES_READ, Scope.RESULTS_WRITE],
                           created_by=world["lead"])[1]
    config_url = f"{live_server.url}/api/gates"
    post_url = f"{live_server.url}/api/ci-results"
    good = outputs(tmp_path / "good.jsonl", [GOOD] * 5)
    one_bad = outputs(tmp_path / "one-bad.jsonl", [GOOD] * 4 + [BAD])

    # 0: every case passes the gate. JUnit XML parses; the results are posted back.
    done = gate(tmp_path, "--config", config_url, "--outputs", good, "--junit", "junit.xml", "--post", post_url,
                "--cache-dir", "cache-0", token=token)
    assert done.returncode == 0, done.stdout + done.stderr
    assert token not in done.stdout + done.stderr
    suite = ET.parse(tmp_path / "junit.xml").getroot().find("testsuite")
    assert (suite.get("name"), suite.get("tests"), suite.get("failures")) == ("evalhub.return-policy", "5", "0")
    assert {p.get("name"): p.get("value") for p in suite.iter("property")}["config_hash"] == run.config.config_hash

    # 1: one case fails the gate.
    done = gate(tmp_path, "--config", config_url, "--outputs", one_bad, "--junit", "junit-1.xml", "--post", post_url,
                "--cache-dir", "cache-1", token=token)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "FAIL return-policy pr-4" in done.stdout
    testcases = ET.parse(tmp_path / "junit-1.xml").iter("testcase")
    assert [tc.get("name") for tc in testcases if tc.find("failure") is not None] == ["pr-4"]

    # 3: the judge cannot answer (HTTP 500 on every call): nothing failed, but nothing was judged.
    fake.control(fault="500")
    done = gate(tmp_path, "--config", config_url, "--outputs", good, "--post", post_url, "--cache-dir", "cache-3",
                token=token)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "NOT EVALUATED return-policy" in done.stdout

    # fail_closed (set through the page, audited) turns 3 into 1.
    response = lead.submit(page, f"{page}thresholds/", {
        "min_cases": 30, "min_repeats": 2, "agreement_floor": 0.8, "agreement_ceiling": 1.0,
        "min_true_pass_rate": 0.7, "min_true_fail_rate": 0.7, "max_flip_rate": 0.05, "min_coverage": 0.95,
        "fail_closed": "on", "reason": "Checkout: an unjudged change must not merge.",
    })
    assert response.status_code == 302, response.text
    done = gate(tmp_path, "--config", config_url, "--outputs", good, "--cache-dir", "cache-4", token=token)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "fail_closed: counts as fail" in done.stdout
    fake.control(fault=None)

    # 2: a broken config (a judge edited after calibration), a refused token, a token without the scope.
    config = httpx.get(config_url, headers={"Authorization": f"Bearer {token}"}).json()
    config["rubrics"][0]["judge"]["policy"] = "Edited by hand."
    (tmp_path / "edited.json").write_text(json.dumps(config))
    done = gate(tmp_path, "--config", "edited.json", "--outputs", good)
    assert done.returncode == 2 and "config_hash" in done.stderr
    done = gate(tmp_path, "--config", config_url, "--outputs", good, token="evh_not-a-token")
    assert done.returncode == 2 and "HTTP 401" in done.stderr and "evh_not-a-token" not in done.stderr
    read_only = ApiToken.issue(project=store_project(), name="ro", scopes=[Scope.RUNS_READ],
                               created_by=world["lead"])[1]
    done = gate(tmp_path, "--config", config_url, "--outputs", good, token=read_only)
    assert done.returncode == 2 and "HTTP 403" in done.stderr

    # What CI posted is on the rubric's promotion page: three runs, 9 passed, 1 failed, 5 not evaluated.
    assert list(CiResult.objects.order_by("id").values_list("outcome", flat=True)) == ["pass", "fail", "not_evaluated"]
    text = lead.http.get(page).text
    assert "3 CI runs" in text and "9 passed" in text and "1 failed" in text and "5 not evaluated" in text
    assert text.count('<g class="ci-bar">') == 3
