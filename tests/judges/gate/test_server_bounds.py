"""Every answer the installed `evalhub-gate` reads has a size bound and an overall deadline, and says which it
hit: a loopback server here answers too much (declared, or streamed without a length) or trickles a byte at a
time (the headers, or the body). The gate config, the cases and a posting's answer are each tried; the overall
deadline is shortened to 2 s by $EVALHUB_GATE_HTTP_DEADLINE_S (a per-read timeout would never end a trickle).
"""

import json
import os
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.judges.gate.test_cli import GOOD, PASS_RULE, gate_rubric

GATE = Path(sys.executable).parent / "evalhub-gate"  # installed by [project.scripts]
MIB = 1024 * 1024


class _Hostile(socketserver.BaseRequestHandler):
    """Reads the request, then answers as its path says: /trickle-head, /trickle-body, /huge-declared,
    /huge-streamed (the path's prefix; the rest of it is whatever the command asked for)."""

    def handle(self) -> None:
        data = b""
        while b"\r\n\r\n" not in data:
            more = self.request.recv(65536)
            if not more:
                return
            data += more
        path = data.split(b" ", 2)[1].decode()
        try:
            if path.startswith("/trickle-head"):
                self.request.sendall(b"HTTP/1.1 200 OK\r\n")
                self._trickle(b"X-Slow: " + b"a" * 10_000)
            elif path.startswith("/trickle-body"):
                self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                     b"Content-Length: 100000\r\n\r\n")
                self._trickle(b" " * 100_000)
            elif path.startswith("/huge-declared"):
                self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                     b"Content-Length: 314572800\r\n\r\n{")  # says 300 MiB; sends one byte
                time.sleep(5)
            elif path.startswith("/huge-streamed"):
                self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n")
                chunk = b" " * MIB
                for _ in range(300):  # 300 MiB with no length: read until it stops
                    self.request.sendall(chunk)
        except OSError:  # the command hung up: what it should do
            pass

    def _trickle(self, data: bytes) -> None:
        for byte in data:
            self.request.sendall(bytes([byte]))
            time.sleep(0.2)


@pytest.fixture
def hostile() -> Iterator[str]:
    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Hostile)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.fixture
def workdir(tmp_path: Path, fake_provider) -> Path:
    fake_provider.control(rule=PASS_RULE)
    (tmp_path / "outputs.jsonl").write_text("".join(json.dumps(c) + "\n" for c in GOOD))
    (tmp_path / "gates.json").write_text(json.dumps({"schema": "evalhub.gates/v1", "generated_at": "now",
                                                     "rubrics": [gate_rubric()]}))
    return tmp_path


def gate(workdir: Path, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("GITHUB_", "EVALHUB_")) or k.startswith("EVALHUB_JUDGE_")}
    env.update(EVALHUB_TOKEN="evh_bounds-test-token", EVALHUB_GATE_HTTP_DEADLINE_S="2")
    # Before: the trickles kept it waiting past this (90 s and more), the 300 MiB were read whole.
    return subprocess.run([str(GATE), *args], cwd=workdir, env=env, capture_output=True, text=True, timeout=60,
                          check=False)


def config(url: str) -> tuple[str, ...]:
    return ("check", "--config", f"{url}/api/gates", "--outputs", "outputs.jsonl")


def cases(url: str) -> tuple[str, ...]:
    return ("cases", "--server", url, "--dataset", "d", "--out", "cases.jsonl")


def post(url: str) -> tuple[str, ...]:
    return ("check", "--config", "gates.json", "--outputs", "outputs.jsonl", "--post", f"{url}/api/ci-results")


DEADLINE = "no whole answer within 2 s, the overall deadline"
SIZE = "the answer is larger than 64 MiB, the size bound of this answer"
# (what is read, where the server misbehaves, what the one line must say)
ANSWERS = {
    "config, trickled headers": (config, "/trickle-head", "reading the gate config from", DEADLINE),
    "config, trickled body": (config, "/trickle-body", "reading the gate config from", DEADLINE),
    "config, 300 MiB declared": (config, "/huge-declared", "reading the gate config from", SIZE),
    "config, 300 MiB streamed": (config, "/huge-streamed", "reading the gate config from", SIZE),
    "cases, trickled body": (cases, "/trickle-body", "fetching the cases from", DEADLINE),
    "posting, trickled answer": (post, "/trickle-body", "results not posted to", DEADLINE),
    "posting, 300 MiB answer": (post, "/huge-streamed", "results not posted to", SIZE),
}


@pytest.mark.parametrize("answer", list(ANSWERS))
def test_each_answer_read_is_bounded_and_says_which_bound_it_hit(workdir, hostile, answer):
    command, where, doing, says = ANSWERS[answer]

    done = gate(workdir, *command(hostile + where))

    assert done.returncode == 2, done.stdout + done.stderr
    [line] = done.stderr.splitlines()
    assert line.startswith(f"evalhub-gate: error: {doing}") and says in line, line
    assert not (workdir / "cases.jsonl").exists()
    assert not list(workdir.glob(".cases-*"))  # nothing half-written left behind


def test_a_cases_stream_past_its_own_bound_is_refused(workdir, hostile, monkeypatch):
    # The cases' bound is far larger than a JSON answer's (a dataset streams to a file): its size is its own.
    from judges.gate import server

    assert server.MAX_CASES_BYTES > server.MAX_ANSWER_BYTES
    done = gate(workdir, *cases(hostile + "/huge-declared"))
    assert done.returncode == 2 and "the answer is larger than" not in done.stderr  # 300 MiB: within the bound
    assert DEADLINE in done.stderr  # it then stalls: the deadline ends it
