"""The receiver as it is served: gunicorn in its own processes on the test database (rows the test writes are
committed: transactional_db), with settings of the test's choosing, and the resident memory of its one worker."""

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from django.conf import settings
from django.db import connection


def database_url() -> str:
    db = connection.settings_dict  # the test database pytest-django made
    auth = db["USER"] + (f":{db['PASSWORD']}" if db["PASSWORD"] else "")
    return f"postgres://{auth}@{db['HOST'] or '127.0.0.1'}:{db['PORT'] or 5432}/{db['NAME']}"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Served:
    def __init__(self, base: str, process: subprocess.Popen, log: Path) -> None:
        self.base, self.process, self.log = base, process, log

    def worker_rss_mb(self) -> float:
        """The resident memory of gunicorn's one worker (the master's child), in MB."""
        children = Path(f"/proc/{self.process.pid}/task/{self.process.pid}/children").read_text().split()
        status = Path(f"/proc/{children[0]}/status").read_text()
        return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS:"))) / 1024


@contextmanager
def gunicorn(tmp_path: Path, *, workers: int = 1, threads: int = 2, timeout: int = 120, **env: str) -> Iterator[Served]:
    """gunicorn serving evalhub on a free port with DATABASE_URL the test database (unless `env` says otherwise)
    and `env` on top; stopped (its process group) on the way out."""
    port = free_port()
    environment = {k: v for k, v in os.environ.items() if k != "DJANGO_ALLOW_ASYNC_UNSAFE"}
    environment |= {"DATABASE_URL": database_url(), "EVALHUB_DATA_DIR": str(tmp_path), "DJANGO_DEBUG": "0",
                    "DJANGO_ALLOWED_HOSTS": "127.0.0.1"} | env
    log = tmp_path / "gunicorn.log"
    command = [sys.executable, "-m", "gunicorn", "evalhub.wsgi:application", f"--bind=127.0.0.1:{port}",
               f"--workers={workers}", f"--threads={threads}", f"--timeout={timeout}", "--no-control-socket"]
    with open(log, "wb") as out:
        process = subprocess.Popen(command, cwd=settings.BASE_DIR, env=environment, stdout=out,
                                   stderr=subprocess.STDOUT, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(240):
            if process.poll() is not None:
                raise AssertionError(f"gunicorn exited with {process.returncode}:\n{log.read_text()}")
            try:
                httpx.get(f"{base}/accounts/login/", timeout=2)
                break
            except httpx.TransportError:
                time.sleep(0.25)
        else:
            raise AssertionError(f"gunicorn did not answer on {base}:\n{log.read_text()}")
        yield Served(base, process, log)
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
