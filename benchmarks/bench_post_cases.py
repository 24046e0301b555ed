"""Posting CI traffic back: `evalhub-gate check --post-cases` sending N judged cases of one rubric to gunicorn.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalhub .venv/bin/python benchmarks/bench_post_cases.py

A database of its own on DATABASE_URL's server (`evalhub_bench_post`, dropped at the end), gunicorn (2
workers × 4 threads). The cases are judged first by a contract-only rubric through the engine's batch
(judge_all, as the command does; not timed), then posted with the command's own code (post_cases): a
chunk per request, each written whole by POST /api/datasets/<slug>/ci-runs. Per size (default 2,500 and
10,000 cases, each a new ref) it reports the wall time of the posting, the requests made, how much the
client's peak resident memory grew while posting (above what the judged results already hold) and the
gunicorn workers' peak resident memory. Then the 10,000 again under the same ref: nothing changes, and how long
that takes. Target: 10,000 cases in under 20 s; memory flat in the number of cases (the posting holds one
chunk at a time, the server one request). Writes benchmarks/results/bench_post_cases.json.
"""

import argparse
import io
import json
import os
import subprocess
import sys
import time
import resource
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from _benchdb import bench_database, bench_project  # noqa: E402

TARGET_S = 20.0


def _children(pid: int) -> list[int]:
    try:
        return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _peak_rss_mb(pids: list[int]) -> float:
    """The sum of the processes' peak resident memory (VmHWM), in MB."""
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return round(total / 1024, 1)


@contextmanager
def gunicorn(log: Path):
    import socket
    import urllib.request

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [sys.executable, "-m", "gunicorn", "evalhub.wsgi:application", f"--bind=127.0.0.1:{port}",
               "--workers=2", "--threads=4", "--timeout=120", "--no-control-socket"]
    proc = subprocess.Popen(command, cwd=ROOT, env=dict(os.environ), stdout=log.open("w"), stderr=subprocess.STDOUT,
                            start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(300):
            try:
                urllib.request.urlopen(f"{base}/accounts/login/", timeout=2)
                break
            except OSError:
                time.sleep(0.2)
        else:
            sys.exit(f"gunicorn did not answer:\n{log.read_text()[-3000:]}")
        yield base, proc
    finally:
        proc.terminate()
        proc.wait(20)


def setup() -> tuple[str, dict]:
    from evalhub.models import ApiToken, Scope, User
    from judges.configs.services import judge_config_save
    from labeling.models import Dataset, Rubric

    lead = User.objects.create_user(username="bench-lead", password="x")
    project = bench_project("bench-post-cases", leads=[lead])
    Dataset.objects.create(project=project, slug="ci-traffic", name="CI traffic")
    rubric = Rubric.objects.create(project=project, slug="safe-actions", name="No refund tool",
                                   criteria="Fail on a refund.")
    config = judge_config_save(rubric=rubric, by=lead, spec={
        "layers": ["contract"], "contract_checks": ["answer_present", "forbidden_tools", "no_secrets"],
        "forbidden_tools": ["issue_refund"],
    })
    token = ApiToken.issue(project=project, name="bench", scopes=[Scope.CASES_WRITE, Scope.RESULTS_WRITE],
                           created_by=lead)[1]
    judge = {**config.spec, "config_hash": config.config_hash}
    return token, judge


def judged(n: int, judge: dict):
    from judges.engine import JudgeConfig
    from judges.gate.config import GateRubric
    from judges.gate.judging import judge_all

    rubric = GateRubric(slug="safe-actions", stage="observe", fail_closed=False,
                        judge=JudgeConfig.from_dict(judge), prices={}, calibration=None)
    cases = [{"external_id": f"case-{i:06}", "input": f"Can I return order {i}?",
              "output": "Yes: returns are accepted within 30 days of delivery.", "category": "policy",
              "trace": {"toolCalls": [{"name": "issue_refund", "argument": {}, "result": "ok"}] if i % 10 == 0 else []},
              "golden_answer": "Within 30 days."} for i in range(n)]
    results = judge_all([rubric], cases, repeats=1, concurrency=4, cache=None, env={})
    return results, cases


def post(results, cases, base: str, token: str, ref: str) -> dict:
    from judges.gate import posting
    from judges.gate.posting import CaseSource, post_cases

    requests = []
    real = posting.post_case_chunk

    def counted(*args, **kwargs):
        requests.append(1)
        return real(*args, **kwargs)

    posting.post_case_chunk = counted
    out = io.StringIO()
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    started = time.perf_counter()
    try:
        post_cases(results, cases, server=base, dataset="ci-traffic", token=token,
                   source=CaseSource(ref=ref, branch="main", run_url=None), repeats=1, out=out, queues={})
    finally:
        seconds = time.perf_counter() - started
        posting.post_case_chunk = real
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss_before
    return {"cases": len(cases), "seconds": round(seconds, 2), "requests": len(requests),
            "client_peak_rss_growth_mb": round(grown / 1024, 1), "said": out.getvalue().strip()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2_500, 10_000])
    parser.add_argument("--database", default="evalhub_bench_post")
    args = parser.parse_args()
    results: dict = {"cpus": os.cpu_count(), "load_average_before": round(os.getloadavg()[0], 2), "legs": []}
    log = ROOT / "benchmarks" / "results" / "bench_post_cases.gunicorn.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    with bench_database(args.database, force_drop=True):
        token, judge = setup()
        with gunicorn(log) as (base, proc):
            for n in args.sizes:
                judged_results, cases = judged(n, judge)
                leg = post(judged_results, cases, base, token, ref=f"bench-{n}")
                leg["server_peak_rss_mb"] = _peak_rss_mb(_children(proc.pid))
                results["legs"].append(leg)
                print(json.dumps(leg))
            again = post(judged_results, cases, base, token, ref=f"bench-{args.sizes[-1]}")
            again["server_peak_rss_mb"] = _peak_rss_mb(_children(proc.pid))
            results["posted_again"] = again
            print(json.dumps(again))
        from judges.models import Judgment, Run
        results["ci_runs"] = Run.objects.filter(source="ci").count()
        results["judgments"] = Judgment.objects.count()
    largest = results["legs"][-1]
    results["load_average_after"] = round(os.getloadavg()[0], 2)
    results["target_met"] = largest["seconds"] < TARGET_S
    print(f"{largest['cases']:,} cases posted in {largest['seconds']} s with {largest['requests']} requests "
          f"(target < {TARGET_S:.0f} s: {'met' if results['target_met'] else 'MISSED'})")
    (ROOT / "benchmarks" / "results" / "bench_post_cases.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
