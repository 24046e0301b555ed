"""Labeling as a team: N reviewers at once over HTTP against gunicorn, and whether a label is wasted.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalhub .venv/bin/python benchmarks/bench_labeling_team.py

Each reviewer is an HTTP client of its own (it signs in through the login form: a real session and its
CSRF token) that sends the htmx "label this case and get the next" request as fast as the page comes
back, labeling the case the previous response served. The app runs in gunicorn (--workers processes of
--threads threads, persistent database connections). The dataset has 2,000 cases and a rubric that
asks two labels per case. Legs:
- PostgreSQL (a database of its own on DATABASE_URL's server, `evalhub_bench_team`, dropped at the
  end): 5 reviewers × 100 labels, then 20 × 50, then 20 until every case has its two labels (4,000:
  a reviewer who finds nothing asks again shortly; labels cleared between legs);
- SQLite, the embedded default (a fresh folder; the filesystem broker; the worker scripts/start.sh
  starts): a contract-only run alone, timed; then another (same size, other checks: nothing cached)
  while 5 reviewers label for as long as it goes (and 100 labels each at least).
Per leg it reports labels per second, the median and p95 round trip of label-and-next, error
responses, the wasted labels (beyond what each case needed: labels_per_case plus a lead's requests),
the cases left under-labeled and over-labeled, and for SQLite "database is locked" in the logs and the
run's time beside its time alone. Writes benchmarks/results/bench_labeling_team.json.
Target: 0 wasted labels, no case over-labeled, no error response, no lock error.
"""

import argparse
import asyncio
import json
import os
import re
import socket
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

ROOT = Path(__file__).resolve().parent.parent
PASSWORD = "bench-password"
PROJECT, DATASET, RUBRIC, RUN_DATASET = "bench-team", "team", "team-policy", "team-runs"
LABELS_PER_CASE = 2
# Two contract-only configs of the same cost but different hashes, so the second run hits no cache.
RUN_SPECS = [{"layers": ["contract"], "contract_checks": ["answer_present", "expected_tool"]},
             {"layers": ["contract"], "contract_checks": ["answer_present", "no_tool_when_none_expected"]}]
CASE_FIELD = re.compile(r'name="case" value="(\d+)"')
HASH_FIELD = re.compile(r'name="content_hash" value="([0-9a-f]{64})"')


# --- Run in a child process, with the target database's environment ----------------------------------


def fill(cases: int, reviewers: int, run_cases: int) -> None:
    """Migrate; a lead, reviewers, the labeling dataset and rubric, and the run dataset with its configs."""
    import django

    django.setup()
    from django.contrib.auth.hashers import make_password
    from django.core.management import call_command

    from evalhub.models import Membership, Project, Role, User
    from judges.configs import services
    from labeling.models import Case, Dataset, Rubric, case_split, labeled_content_hash

    call_command("migrate", verbosity=0)
    password = make_password(PASSWORD)
    lead = User.objects.create(username="bench-lead", password=password)
    team = User.objects.bulk_create(User(username=f"bench-r{i:02d}", password=password) for i in range(reviewers))
    project = Project.objects.create(slug=PROJECT, name=PROJECT)
    Membership.objects.bulk_create([Membership(project=project, user=lead, role=Role.LEAD)]
                                   + [Membership(project=project, user=user, role=Role.REVIEWER) for user in team])
    rubric = Rubric.objects.create(project=project, slug=RUBRIC, name="Does the answer follow the return policy?",
                                   criteria="Pass when the 30-day window is stated correctly.",
                                   labels_per_case=LABELS_PER_CASE)
    for slug, count in ((DATASET, cases), (RUN_DATASET, run_cases)):
        dataset = Dataset.objects.create(project=project, slug=slug, name=slug)
        dataset.reviewers.add(*team)

        def case(i: int, dataset=dataset, slug=slug) -> Case:
            external_id, question = f"{slug}-{i:05d}", f"Hi, I bought shoes (order ORD-{i}). Can I return them?"
            answer = f"Your order ORD-{i} is within our 30-day return window; I have started the return."
            trace = {"toolCalls": [{"name": "lookup_order", "argument": {"order_id": f"ORD-{i}"},
                                    "result": {"status": "delivered"}}], "retrievedSources": ["policy/returns"]}
            return Case(dataset=dataset, external_id=external_id, input=question, output=answer, trace=trace,
                        golden_answer="Returns are accepted within 30 days.", expected_tool="lookup_order",
                        category="policy", split=case_split(external_id),
                        content_hash=labeled_content_hash(input=question, output=answer, trace=trace))

        Case.objects.bulk_create((case(i) for i in range(count)), batch_size=1000)
    for spec in RUN_SPECS:
        services.judge_config_save(rubric=rubric, by=lead, spec=spec)


def start_run(config_version: int, repeats: int) -> None:
    """Start a contract-only run of the run dataset; print its id."""
    import django

    django.setup()
    from evalhub.models import Project, User
    from judges.runs import services

    project = Project.objects.get(slug=PROJECT)
    config = project.rubrics.get(slug=RUBRIC).judge_configs.get(version=config_version)
    run = services.run_start(config=config, dataset=project.datasets.get(slug=RUN_DATASET), repeats=repeats,
                             concurrency=4, spend_cap_usd=None, by=User.objects.get(username="bench-lead"))
    print(run.pk)


def child(env: dict, *args: str) -> str:
    done = subprocess.run([sys.executable, __file__, *args], cwd=ROOT, env=env, capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"{args[0]} failed:\n{done.stderr}")
    return done.stdout


# --- Processes: the server and the worker -------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextmanager
def process(command: list[str], env: dict, log: Path):
    proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    try:
        yield proc
    finally:
        proc.terminate()
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def gunicorn(env: dict, log: Path, *, workers: int, threads: int):
    import httpx

    port = free_port()
    command = [sys.executable, "-m", "gunicorn", "evalhub.wsgi:application", f"--bind=127.0.0.1:{port}",
               f"--workers={workers}", f"--threads={threads}", "--no-control-socket"]
    with process(command, env, log):
        base = f"http://127.0.0.1:{port}"
        for _ in range(300):
            try:
                if httpx.get(f"{base}/accounts/login/", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            sys.exit(f"gunicorn did not answer:\n{log.read_text()[-3000:]}")
        yield base


@contextmanager
def worker(env: dict, log: Path):
    command = [sys.executable, "-m", "celery", "-A", "evalhub", "worker", "--beat", "--concurrency=2",
               "--loglevel=INFO"]
    with process(command, env, log):
        for _ in range(300):
            if "ready" in log.read_text():
                break
            time.sleep(0.2)
        else:
            sys.exit(f"the worker did not start:\n{log.read_text()[-3000:]}")
        yield


# --- The reviewers ------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def team_labels(base: str, usernames: list[str], *, at_least: int = 0, keep_going=lambda: False,
                      on_start=lambda: None, until_empty: bool = False) -> dict:
    """Sign every reviewer in, then all label at once: each `at_least` labels, and on while keep_going().

    on_start() is called as they start (after signing in, which is slow on purpose: PBKDF2). With
    until_empty they go on until every reviewer's queue is empty (one that finds nothing now asks again
    shortly: a case on another's screen may still need them), and stop once all found it empty after
    the last label given."""
    import httpx

    queue = f"/p/{PROJECT}/label/{DATASET}/{RUBRIC}/"
    latencies: list[float] = []
    errors: list[str] = []
    reconnects = 0
    labels_given = 0
    empty_since: dict[int, int] = {}  # reviewer → labels_given when they last found their queue empty
    ready, start = asyncio.Barrier(len(usernames) + 1), asyncio.Event()

    async def send(client: httpx.AsyncClient, method: str, url: str, **kwargs) -> httpx.Response:
        """One request; sent again once if the server had closed the idle connection (gunicorn keeps one
        alive 2 s), as a browser does: the server never saw it."""
        nonlocal reconnects
        try:
            return await client.request(method, url, **kwargs)
        except httpx.RemoteProtocolError:
            reconnects += 1
            return await client.request(method, url, **kwargs)

    async def sign_in(username: str) -> httpx.AsyncClient:
        client = httpx.AsyncClient(base_url=base, timeout=60)
        await send(client, "GET", "/accounts/login/")
        response = await send(client, "POST", "/accounts/login/", data={
            "username": username, "password": PASSWORD, "csrfmiddlewaretoken": client.cookies["csrftoken"]})
        if response.status_code != 302:
            sys.exit(f"{username} could not sign in: {response.status_code}")
        client.headers["X-CSRFToken"] = client.cookies["csrftoken"]
        return client

    async def label(me: int, client: httpx.AsyncClient) -> int:
        nonlocal labels_given
        page = (await send(client, "GET", queue)).text
        await ready.wait()
        await start.wait()
        given = 0
        while given < at_least or keep_going() or until_empty:
            case, digest = CASE_FIELD.search(page), HASH_FIELD.search(page)
            if case is None:
                if not until_empty:
                    return given  # nothing left for this reviewer
                empty_since[me] = labels_given
                if len(empty_since) == len(usernames) and set(empty_since.values()) == {labels_given}:
                    return given
                await asyncio.sleep(0.2)
                page = (await send(client, "GET", queue)).text
                continue
            empty_since.pop(me, None)
            started = time.perf_counter()
            try:
                response = await send(client, "POST", f"{queue}label/", headers={"HX-Request": "true"}, data={
                    "case": case.group(1), "content_hash": digest.group(1), "verdict": "pass", "note": ""})
            except httpx.HTTPError as exc:
                response = None
                errors.append(repr(exc))
            else:
                latencies.append((time.perf_counter() - started) * 1000)
                if response.status_code != 200:
                    errors.append(f"{response.status_code}: {response.text[:200]}")
            if response is None or response.status_code != 200:
                page = (await send(client, "GET", queue)).text  # start again from the queue page
                continue
            given += 1
            labels_given += 1
            page = response.text
        return given

    clients = await asyncio.gather(*(sign_in(name) for name in usernames))
    tasks = [asyncio.create_task(label(i, client)) for i, client in enumerate(clients)]
    await ready.wait()  # every reviewer has its first case on screen
    on_start()
    started = time.perf_counter()
    start.set()
    given = await asyncio.gather(*tasks)
    seconds = time.perf_counter() - started
    for client in clients:
        await client.aclose()
    return {
        "reviewers": len(usernames), "labels": sum(given), "seconds": round(seconds, 2),
        "labels_per_second": round(sum(given) / seconds, 1),
        "latency_ms": {"median": round(statistics.median(latencies), 1), "p95": round(percentile(latencies, 0.95), 1)},
        "error_responses": len(errors), "errors_seen": errors[:5], "idle_connections_reopened": reconnects,
    }


# --- What the database holds --------------------------------------------------------------------------


def tallies(db) -> dict:
    """Labels per case against what each case needs (labels_per_case plus a lead's requests)."""
    rows = db.execute(f"""SELECT t.labels, r.labels_per_case + t.requested FROM labeling_casetally t
                          JOIN labeling_rubric r ON r.id = t.rubric_id JOIN labeling_dataset d ON d.id = t.dataset_id
                          WHERE r.slug = '{RUBRIC}' AND d.slug = '{DATASET}'""").fetchall()
    return {
        "labels_recorded": sum(labels for labels, _ in rows),
        "wasted_labels": sum(max(0, labels - need) for labels, need in rows),
        "cases_over_labeled": sum(labels > need for labels, need in rows),
        "cases_under_labeled": sum(0 < labels < need for labels, need in rows),
        "cases_done": sum(labels >= need for labels, need in rows),
    }


def clear_labels(db) -> None:
    db.execute("DELETE FROM labeling_label")  # the triggers bring every case's count back to 0
    db.execute("UPDATE labeling_casetally SET claimed_by_id = NULL, claimed_until = NULL")


def server_env(**extra: str) -> dict:
    env = {key: value for key, value in os.environ.items() if key not in {"DATABASE_URL", "CELERY_BROKER_URL"}}
    return env | {"DJANGO_SETTINGS_MODULE": "evalhub.settings", "DJANGO_DEBUG": "0",
                  "DJANGO_ALLOWED_HOSTS": "127.0.0.1", "DATABASE_CONN_MAX_AGE": "600", **extra}


def postgres_legs(args, folder: Path) -> dict:
    import psycopg

    base = os.environ.get("DATABASE_URL", "")
    if urlsplit(base).scheme not in {"postgres", "postgresql"}:
        sys.exit("Set DATABASE_URL=postgres://user@host:5432/name (or --skip-postgres).")
    server = urlsplit(base)
    admin_url = urlunsplit(server._replace(path="/postgres"))
    url = urlunsplit(server._replace(path=f"/{args.database}"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{args.database}"')
        conn.execute(f'CREATE DATABASE "{args.database}"')
    results = {}
    try:
        env = server_env(DATABASE_URL=url, EVALHUB_DATA_DIR=str(folder / "postgres"))
        child(env, "fill", str(args.cases), str(max(*args.teams, args.until_done)), "10")
        with psycopg.connect(url, autocommit=True) as db:
            db.execute("VACUUM ANALYZE")
            for n in args.teams:
                clear_labels(db)
                with gunicorn(env, folder / f"postgres-{n}.log", workers=args.workers, threads=args.threads) as base:
                    leg = asyncio.run(team_labels(base, [f"bench-r{i:02d}" for i in range(n)],
                                                  at_least=args.labels_each or {5: 100, 20: 50}.get(n, 50)))
                results[f"postgres_{n}"] = leg | tallies(db)
                report(f"PostgreSQL, {n} reviewers", results[f"postgres_{n}"])
            if args.until_done:
                n = args.until_done
                clear_labels(db)
                with gunicorn(env, folder / "postgres-done.log", workers=args.workers, threads=args.threads) as base:
                    leg = asyncio.run(team_labels(base, [f"bench-r{i:02d}" for i in range(n)], until_empty=True))
                results[f"postgres_{n}_until_done"] = leg | tallies(db)
                report(f"PostgreSQL, {n} reviewers until every queue is empty", results[f"postgres_{n}_until_done"])
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{args.database}" WITH (FORCE)')
    return results


def sqlite_leg(args, folder: Path) -> dict:
    data = folder / "sqlite"
    env = server_env(EVALHUB_DATA_DIR=str(data))
    child(env, "fill", str(args.cases), "5", str(args.run_cases))
    db = sqlite3.connect(data / "evalhub.sqlite3", isolation_level=None, timeout=60, check_same_thread=False)

    def run_status(run_id: int) -> str:
        return db.execute("SELECT status FROM judges_run WHERE id = ?", [run_id]).fetchone()[0]

    def timed_run(config_version: int) -> tuple[int, float]:
        started = time.perf_counter()
        run_id = int(child(env, "run", str(config_version), str(args.run_repeats)))
        while run_status(run_id) != "finished":
            time.sleep(0.2)
        return run_id, time.perf_counter() - started

    with worker(env, folder / "sqlite-worker.log"):
        _, alone = timed_run(1)
        print(f"SQLite: a contract-only run of {args.run_cases} cases × {args.run_repeats} alone: {alone:.1f} s")
        with gunicorn(env, folder / "sqlite-server.log", workers=args.workers, threads=args.threads) as base:

            async def together() -> tuple[dict, float]:
                run = []  # the second run starts as the reviewers do, and they label until it is finished

                def start_run() -> None:
                    run.append(asyncio.create_task(asyncio.to_thread(timed_run, 2)))

                leg = await team_labels(base, [f"bench-r{i:02d}" for i in range(5)], at_least=args.labels_each or 100,
                                        keep_going=lambda: not run[0].done(), on_start=start_run)
                return leg, (await run[0])[1]

            leg, beside = asyncio.run(together())
    logs = "".join(path.read_text() for path in folder.glob("sqlite-*.log"))
    result = leg | tallies(db) | {
        "run_judgments": args.run_cases * args.run_repeats, "run_alone_s": round(alone, 1),
        "run_beside_labeling_s": round(beside, 1), "database_is_locked_in_logs": logs.count("database is locked"),
    }
    report("SQLite, 5 reviewers beside a run", result)
    return result


def report(title: str, row: dict) -> None:
    print(f"{title}: {row['labels']} labels in {row['seconds']} s = {row['labels_per_second']} labels/s; "
          f"label-and-next median {row['latency_ms']['median']} ms, p95 {row['latency_ms']['p95']} ms; "
          f"{row['error_responses']} error responses; wasted labels {row['wasted_labels']}; "
          f"cases over-labeled {row['cases_over_labeled']}, under-labeled {row['cases_under_labeled']}, "
          f"done {row['cases_done']}")
    if "run_alone_s" in row:
        print(f"  the run: {row['run_beside_labeling_s']} s beside the labeling, {row['run_alone_s']} s alone; "
              f"'database is locked' in the logs: {row['database_is_locked_in_logs']}")
    for error in row["errors_seen"]:
        print(f"  error: {error}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=2000)
    parser.add_argument("--teams", type=int, nargs="+", default=[5, 20], help="reviewers at once, one leg each")
    parser.add_argument("--labels-each", type=int, default=0, help="labels per reviewer (default 100 for 5, 50 for 20)")
    parser.add_argument("--until-done", type=int, default=20, metavar="N",
                        help="then N reviewers label until every case has its labels (0: not)")
    parser.add_argument("--workers", type=int, default=2, help="gunicorn worker processes")
    parser.add_argument("--threads", type=int, default=8, help="gunicorn threads per worker")
    parser.add_argument("--run-cases", type=int, default=600, help="cases of the SQLite leg's run")
    parser.add_argument("--run-repeats", type=int, default=3)
    parser.add_argument("--database", default="evalhub_bench_team", help="the PostgreSQL legs' own database")
    parser.add_argument("--skip-postgres", action="store_true")
    parser.add_argument("--skip-sqlite", action="store_true")
    args = parser.parse_args()

    results: dict = {"cases": args.cases, "labels_per_case": LABELS_PER_CASE, "cpus": os.cpu_count(),
                     "gunicorn": {"workers": args.workers, "threads": args.threads},
                     "load_average_before": round(os.getloadavg()[0], 2)}
    with tempfile.TemporaryDirectory(prefix="bench-team-") as tmp:
        if not args.skip_postgres:
            results |= postgres_legs(args, Path(tmp))
        if not args.skip_sqlite:
            results["sqlite_5"] = sqlite_leg(args, Path(tmp))
    results["load_average_after"] = round(os.getloadavg()[0], 2)
    legs = [value for value in results.values() if isinstance(value, dict) and "wasted_labels" in value]
    results["target_met"] = all(
        leg["wasted_labels"] == 0 and leg["cases_over_labeled"] == 0 and leg["error_responses"] == 0
        and leg.get("database_is_locked_in_logs", 0) == 0 for leg in legs
    )
    print(f"target (0 wasted labels, none over-labeled, no error, no lock error): "
          f"{'met' if results['target_met'] else 'MISSED'}")
    out = ROOT / "benchmarks" / "results" / "bench_labeling_team.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    if sys.argv[1:2] == ["fill"]:
        fill(*map(int, sys.argv[2:5]))
    elif sys.argv[1:2] == ["run"]:
        start_run(*map(int, sys.argv[2:4]))
    else:
        main()
