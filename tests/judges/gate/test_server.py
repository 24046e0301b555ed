"""The gate's HTTP client and redirects: the bearer token goes only to the origin it was given for.

The installed `evalhub-gate` (its own process) against two loopback servers started here, A and B, that
record every request's method, path and Authorization header. A answers with a redirect; a redirect to
another origin (B: the same host, another port) is refused before B is asked anything, a redirected POST
is never "posted", and a redirect within A's own origin is followed for a GET.
"""

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.judges.gate.test_cli import GOOD, PASS_RULE, gate_rubric

GATE = Path(sys.executable).parent / "evalhub-gate"  # installed by [project.scripts]
TOKEN = "evh_redirect-test-token"


class Recorder:
    """Answers each path with what `routes` says (else 404), and remembers every request."""

    def __init__(self) -> None:
        self.routes: dict[str, tuple[int, dict[str, str], bytes]] = {}
        self.requests: list[dict] = []
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                recorder.requests.append(
                    {"method": self.command, "path": self.path, "authorization": self.headers.get("Authorization")}
                )
                status, headers, body = recorder.routes.get(self.path, (404, {}, b'{"error": "nothing here"}'))
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer  # noqa: N815 - the http.server API

            def log_message(self, *args) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def redirect(self, path: str, to: str, status: int = 302) -> None:
        self.routes[path] = (status, {"Location": to}, b"")

    def serve(self, path: str, body: object, content_type: str = "application/json") -> None:
        text = body if isinstance(body, str) else json.dumps(body)
        self.routes[path] = (200, {"Content-Type": content_type}, text.encode())

    def authorizations(self) -> list[str | None]:
        return [r["authorization"] for r in self.requests]


def _recorder() -> Iterator[Recorder]:
    recorder = Recorder()
    yield recorder
    recorder.httpd.shutdown()
    recorder.httpd.server_close()


@pytest.fixture
def a() -> Iterator[Recorder]:
    """The server the command is given."""
    yield from _recorder()


@pytest.fixture
def b() -> Iterator[Recorder]:
    """Another origin: the same host, another port."""
    yield from _recorder()

CONFIG = {"schema": "evalhub.gates/v1", "generated_at": "now", "rubrics": [gate_rubric()]}


@pytest.fixture
def workdir(tmp_path: Path, fake_provider) -> Path:
    fake_provider.control(rule=PASS_RULE)  # every GOOD output passes: the check itself exits 0
    (tmp_path / "outputs.jsonl").write_text("".join(json.dumps(c) + "\n" for c in GOOD))
    (tmp_path / "gates.json").write_text(json.dumps(CONFIG))
    return tmp_path


def gate(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    """Run the installed command as CI would: its own process, the token in EVALHUB_TOKEN."""
    # The judge's own EVALHUB_JUDGE_* variables stay (the fake provider's address and key); no other.
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "EVALHUB_")) or k.startswith("EVALHUB_JUDGE_")}
    env["EVALHUB_TOKEN"] = TOKEN
    return subprocess.run([str(GATE), *args], cwd=workdir, env=env, capture_output=True, text=True, timeout=120,
                          check=False)


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_config_redirect_to_another_origin_is_refused_and_the_token_stays_home(workdir, a, b, status):
    b.serve("/api/gates", CONFIG)
    a.redirect("/api/gates", f"{b.url}/api/gates", status)
    done = gate(workdir, "check", "--config", f"{a.url}/api/gates", "--outputs", "outputs.jsonl", "--no-cache")
    assert b.authorizations() == []  # refused before B is asked anything, so it never sees the token
    assert a.authorizations() == [f"Bearer {TOKEN}"]
    assert done.returncode == 2, done.stdout + done.stderr
    assert (f"evalhub-gate: error: reading the gate config from {a.url}/api/gates: the server answered {status}, "
            f"a redirect from {a.url} to another origin, {b.url}: refused, the token goes only to the origin it was "
            "given for" in done.stderr)
    assert "judged" not in done.stdout


def test_a_cases_redirect_to_another_origin_is_refused_and_writes_nothing(workdir, a, b):
    cases = "".join(json.dumps({k: v for k, v in c.items() if k != "output"}) + "\n" for c in GOOD)
    b.serve("/api/datasets/store/cases", cases, "application/jsonl")
    a.redirect("/api/datasets/store/cases", f"{b.url}/api/datasets/store/cases")
    done = gate(workdir, "cases", "--server", a.url, "--dataset", "store", "--out", "cases.jsonl")
    assert b.authorizations() == []
    assert a.authorizations() == [f"Bearer {TOKEN}"]
    assert done.returncode == 2, done.stdout + done.stderr
    assert (f"fetching the cases from {a.url}/api/datasets/store/cases: the server answered 302, a redirect from "
            f"{a.url} to another origin, {b.url}: refused" in done.stderr)
    assert not (workdir / "cases.jsonl").exists()
    assert [p.name for p in workdir.iterdir() if p.name.startswith(".cases-")] == []  # no partial file left


@pytest.mark.parametrize("to", ["itself", "another origin"])
def test_a_redirected_post_is_not_posted_and_exits_2(workdir, a, b, to):
    target = f"{a.url}/api/ci-results/" if to == "itself" else f"{b.url}/api/ci-results"
    a.redirect("/api/ci-results", target)
    a.serve("/api/ci-results/", {"id": 1})
    b.serve("/api/ci-results", {"id": 1})
    done = gate(workdir, "check", "--config", "gates.json", "--outputs", "outputs.jsonl", "--no-cache",
                "--post", f"{a.url}/api/ci-results")
    assert b.authorizations() == []
    assert "exit 0 (pass)" in done.stdout  # every case passed: only the report failed
    assert "results posted" not in done.stdout
    assert done.returncode == 2, done.stdout + done.stderr  # a report that could not be made (exit_code)
    assert (f"evalhub-gate: error: results not posted to {a.url}/api/ci-results: the server answered 302 "
            f"(a redirect to {target}); a POST is never redirected" in done.stderr)
    assert [(r["method"], r["path"]) for r in a.requests] == [("POST", "/api/ci-results")]  # not re-sent


def test_a_config_redirect_within_its_origin_is_followed_with_the_token(workdir, a):
    a.redirect("/gates", "/api/gates")  # relative: the same scheme, host and port
    a.serve("/api/gates", CONFIG)
    done = gate(workdir, "check", "--config", f"{a.url}/gates", "--outputs", "outputs.jsonl", "--no-cache")
    assert done.returncode == 0, done.stdout + done.stderr
    assert [(r["path"], r["authorization"]) for r in a.requests] == [
        ("/gates", f"Bearer {TOKEN}"), ("/api/gates", f"Bearer {TOKEN}"),
    ]
    assert "exit 0 (pass)" in done.stdout
