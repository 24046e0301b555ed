"""The reviewer's hot path over HTTP: "label this case and get the next", with 100,000 cases and 200,000 labels.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/evalhub python benchmarks/bench_labeling.py

It uses a database of its own on DATABASE_URL's server (`evalhub_bench_labeling` unless --database
says otherwise): created, migrated, filled, and dropped at the end (--keep keeps it). The data, written
with SQL through the real triggers (so CaseTally and Label.stale are what the app would have):
- one dataset of N cases (default 100,000) with traces; two rubrics (3 labels per case, and 1);
- 200,000 labels of the first rubric from 20 reviewers: 60 % of the cases have all three, 20 % one,
  20 % none (labeling went in case order, as the queue serves it); 300 labeled cases changed since
  (900 labels stopped counting), 100 lead requests, 20 skips per reviewer.
The app then runs in a WSGI server in this process (one thread, persistent database connection, as
production would run with DATABASE_CONN_MAX_AGE) and 8 reviewers label through it with htmx POSTs,
one after another, each taking the case the previous response served. For every request the server
side records its own time and its query count (a WSGI wrapper: response headers X-Server-Ms,
X-Queries); the client records the round trip. It prints the median and p95 of both, the query
counts, and the same for the full queue page and the progress panel, and writes
benchmarks/results/bench_labeling.json. Target: "label and next" p95 under 25 ms server time, and one
query count for every request.
"""

import argparse
import json
import os
import random
import re
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks._benchdb import (  # noqa: E402  (after ROOT is on the path)
    bench_database,
    bench_project,
    settle_after_bulk_load,
)

REVIEWERS = 20
LABELERS = 8
CASE_FIELD = re.compile(r'name="case" value="(\d+)"')
HASH_FIELD = re.compile(r'name="content_hash" value="([0-9a-f]{64})"')

FILL_SQL = """
INSERT INTO labeling_case (dataset_id, external_id, input, output, trace, golden_answer, expected_behaviour,
                           expected_tool, expected_tool_argument, category, metadata, split, content_hash,
                           created_at, content_changed_at)
SELECT %(dataset)s, 'case-' || lpad(g::text, 6, '0'),
       'Hi, I bought shoes (order ORD-' || g || ') ' || (g %% 60) || ' days ago. Can I return them?',
       'Your order ORD-' || g || ' is within our 30-day return window; I have started the return for you.',
       jsonb_build_object('toolCalls', jsonb_build_array(jsonb_build_object(
           'name', 'lookup_order', 'argument', jsonb_build_object('order_id', 'ORD-' || g),
           'result', jsonb_build_object('status', 'delivered', 'days_since_delivery', g %% 60))),
         'retrievedSources', jsonb_build_array('policy/returns'),
         'context', 'Returns are accepted within 30 days of delivery, unused, in the original packaging.'),
       'Returns are accepted within 30 days of delivery.', 'Check the delivery date before promising a return.',
       'lookup_order', jsonb_build_object('order_id', 'ORD-' || g),
       (ARRAY['policy', 'tools', 'combined', 'edge', 'adversarial'])[1 + g %% 5],
       '{"agent_model": "gpt-4o-mini-2024-07-18"}'::jsonb, CASE WHEN g %% 10 < 3 THEN 'holdout' ELSE 'dev' END,
       md5('case-' || g) || md5('content-' || g), now(), now()
FROM generate_series(1, %(cases)s) g;
"""

LABELS_SQL = """
INSERT INTO labeling_label (case_id, rubric_id, reviewer_id, verdict, note, content_hash, stale, created_at,
                            updated_at)
SELECT c.id, %(rubric)s, r.ids[1 + ((c.n + k) %% %(reviewers)s)],
       CASE WHEN (c.n * 7 + k) %% 10 < 7 THEN 'pass' ELSE 'fail' END, '', c.content_hash, false,
       now() - interval '1 day', now() - interval '1 day'
FROM (SELECT id, content_hash, row_number() OVER (ORDER BY id) AS n FROM labeling_case WHERE dataset_id = %(dataset)s) c
CROSS JOIN (SELECT array_agg(id ORDER BY id) AS ids FROM evalhub_user WHERE username LIKE 'bench-r%%') r
CROSS JOIN generate_series(0, 2) k
WHERE (c.n <= %(full)s) OR (c.n <= %(full)s + %(single)s AND k = 0);
"""


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def summary(samples: list[dict]) -> dict:
    def stat(key: str) -> dict:
        values = [sample[key] for sample in samples]
        return {"median": round(statistics.median(values), 2), "p95": round(percentile(values, 0.95), 2)}

    counts: dict[int, int] = {}
    for sample in samples:
        counts[sample["queries"]] = counts.get(sample["queries"], 0) + 1
    return {
        "requests": len(samples), "server_ms": stat("server_ms"), "server_cpu_ms": stat("cpu_ms"),
        "sql_ms": stat("sql_ms"), "round_trip_ms": stat("round_trip_ms"),
        "queries": {str(count): n for count, n in sorted(counts.items())},
    }


def serve(app):
    """The app in a one-thread WSGI server (a persistent connection, like a production worker)."""
    from django.core.servers.basehttp import WSGIRequestHandler, WSGIServer
    from django.db import connection

    class Quiet(WSGIRequestHandler):
        def log_message(self, *args) -> None:
            pass

    def timed_app(environ, start_response):
        queries, sql_seconds = 0, 0.0

        def count(execute, sql, params, many, context):
            nonlocal queries, sql_seconds
            queries += 1
            started = time.perf_counter()
            try:
                return execute(sql, params, many, context)
            finally:
                sql_seconds += time.perf_counter() - started

        captured = {}

        def keep(status, headers, exc_info=None):
            captured["status"], captured["headers"] = status, headers

        started, cpu = time.perf_counter(), time.thread_time()
        with connection.execute_wrapper(count):
            result = app(environ, keep)
            body = b"".join(result)
            if hasattr(result, "close"):
                result.close()  # request_finished: the connection is kept (CONN_MAX_AGE) or closed here
        elapsed, cpu = (time.perf_counter() - started) * 1000, (time.thread_time() - cpu) * 1000
        headers = [*captured["headers"], ("X-Server-Ms", f"{elapsed:.3f}"), ("X-Queries", str(queries)),
                   ("X-Cpu-Ms", f"{cpu:.3f}"), ("X-Sql-Ms", f"{sql_seconds * 1000:.3f}")]
        start_response(captured["status"], headers)
        return [body]

    httpd = WSGIServer(("127.0.0.1", 0), Quiet, ipv6=False)
    httpd.set_app(timed_app)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd, f"http://127.0.0.1:{httpd.server_address[1]}"


def login(base: str, username: str):
    import httpx

    client = httpx.Client(base_url=base, timeout=30)
    client.get("/accounts/login/")
    token = client.cookies["csrftoken"]
    response = client.post("/accounts/login/", data={"username": username, "password": "bench-password",
                                                    "csrfmiddlewaretoken": token})
    assert response.status_code == 302, f"login failed for {username}"
    client.headers["X-CSRFToken"] = client.cookies["csrftoken"]
    return client


def request(client, method: str, url: str, **kwargs):
    started = time.perf_counter()
    response = client.request(method, url, **kwargs)
    round_trip = (time.perf_counter() - started) * 1000
    assert response.status_code == 200, f"{method} {url}: {response.status_code}"
    return response, {
        "server_ms": float(response.headers["X-Server-Ms"]), "round_trip_ms": round_trip,
        "cpu_ms": float(response.headers["X-Cpu-Ms"]), "sql_ms": float(response.headers["X-Sql-Ms"]),
        "queries": int(response.headers["X-Queries"]),
    }


def shown_case(html: str) -> tuple[str, str] | None:
    case, digest = CASE_FIELD.search(html), HASH_FIELD.search(html)
    return (case.group(1), digest.group(1)) if case and digest else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", type=int, default=100_000)
    parser.add_argument("--requests", type=int, default=600, help="measured label-and-next requests")
    parser.add_argument("--database", default="evalhub_bench_labeling", help="the benchmark's own database name")
    parser.add_argument("--keep", action="store_true", help="keep the benchmark database afterwards")
    args = parser.parse_args()

    # A persistent connection, as production runs with DATABASE_CONN_MAX_AGE; FORCE: the server thread's
    # connection may still be open at the end.
    env = {"DATABASE_CONN_MAX_AGE": "600", "DJANGO_ALLOWED_HOSTS": "127.0.0.1"}
    with bench_database(args.database, keep=args.keep, env=env, force_drop=True):
        from django.core.handlers.wsgi import WSGIHandler
        from django.db import connection, connections

        from evalhub.models import User
        from labeling.disputes import services
        from labeling.models import Case, CaseTally, Dataset, Label, Rubric, Skip

        httpd = None
        try:
            started = time.perf_counter()
            lead = User.objects.create_user("bench-lead", password="bench-password")
            reviewers = [User.objects.create_user(f"bench-r{i:02d}", password="bench-password")
                         for i in range(REVIEWERS)]
            project = bench_project(leads=[lead], reviewers=reviewers)
            dataset = Dataset.objects.create(project=project, slug="bench", name="Bench")
            dataset.reviewers.add(*reviewers)
            rubric = Rubric.objects.create(project=project, slug="bench-policy",
                                           name="Does the answer follow the return policy?",
                                           criteria="Pass when the 30-day window is stated correctly.",
                                           labels_per_case=3)
            Rubric.objects.create(project=project, slug="bench-tone", name="Is the tone polite?", criteria="…")
            full, single = int(args.cases * 0.6), int(args.cases * 0.2)
            with connection.cursor() as cursor:
                cursor.execute(FILL_SQL, {"dataset": dataset.pk, "cases": args.cases})
                print(f"  cases written in {time.perf_counter() - started:.0f} s")
                cursor.execute(LABELS_SQL, {"dataset": dataset.pk, "rubric": rubric.pk, "reviewers": REVIEWERS,
                                            "full": full, "single": single})
                print(f"  labels written in {time.perf_counter() - started:.0f} s")
                # 300 labeled cases changed since they were labeled (a re-import): their labels stop counting.
                cursor.execute("UPDATE labeling_case SET content_hash = md5(content_hash) || md5(external_id) "
                               "WHERE dataset_id = %s AND id %% 200 = 0 AND id <= (SELECT min(id) FROM labeling_case "
                               "WHERE dataset_id = %s) + %s", [dataset.pk, dataset.pk, full])
            rng = random.Random(7)
            ids = list(Case.objects.filter(dataset=dataset).values_list("pk", flat=True))
            for case in Case.objects.filter(pk__in=rng.sample(ids[:full], 100)):
                services.request_another_label(case=case, rubric=rubric, by=lead)
            Skip.objects.bulk_create([Skip(case_id=case_id, rubric=rubric, reviewer=reviewer)
                                      for reviewer in reviewers for case_id in rng.sample(ids[full:], 20)],
                                     ignore_conflicts=True)
            settle_after_bulk_load()
            labels, stale = Label.objects.count(), Label.objects.filter(stale=True).count()
            assert CaseTally.objects.filter(rubric=rubric).count() == args.cases
            print(f"{args.cases:,} cases, {labels:,} labels ({stale} changed since labeled), {REVIEWERS} reviewers, "
                  f"filled in {time.perf_counter() - started:.0f} s; database {args.database}")
            connections.close_all()

            httpd, base_url = serve(WSGIHandler())
            clients = [login(base_url, reviewer.username) for reviewer in reviewers[:LABELERS]]

            def label_and_next(rubric_slug: str, count: int) -> list[dict]:
                """Each labeler labels the case the previous response served them, in turn."""
                queue = f"/p/{project.slug}/label/{dataset.slug}/{rubric_slug}/"
                current = [shown_case(request(client, "GET", queue)[0].text) for client in clients]
                samples: list[dict] = []
                rounds = 0
                while len(samples) < count:
                    for i, client in enumerate(clients):
                        if current[i] is None:
                            continue
                        case_id, digest = current[i]
                        response, sample = request(client, "POST", f"{queue}label/", headers={"HX-Request": "true"},
                                                   data={"case": case_id, "content_hash": digest,
                                                         "verdict": rng.choice(["pass", "fail"]), "note": ""})
                        current[i] = shown_case(response.text)
                        if rounds >= 5:  # the first rounds warm up: plans, caches, pages in memory
                            samples.append(sample)
                    rounds += 1
                return samples

            load_before = os.getloadavg()[0]
            three = label_and_next(rubric.slug, args.requests)
            one = label_and_next("bench-tone", args.requests // 2)
            queue = f"/p/{project.slug}/label/{dataset.slug}/{rubric.slug}/"
            page = [request(clients[i % LABELERS], "GET", queue)[1] for i in range(60)]
            progress = [request(clients[i % LABELERS], "GET", f"{queue}progress/", headers={"HX-Request": "true"})[1]
                        for i in range(60)]
            load_after = os.getloadavg()[0]

            results = {
                "cases": args.cases, "labels": labels, "stale_labels": stale, "reviewers": REVIEWERS,
                "cpus": os.cpu_count(), "load_average": [round(load_before, 2), round(load_after, 2)],
                "label_and_next_3_per_case": summary(three),
                "label_and_next_1_per_case": summary(one),
                "queue_page": summary(page),
                "progress_panel": summary(progress),
            }
            print(f"  machine: {os.cpu_count()} CPUs, load average {load_before:.1f} before, {load_after:.1f} after")
            for name, title in (("label_and_next_3_per_case", "label and get the next (rubric of 3 labels a case)"),
                                ("label_and_next_1_per_case", "label and get the next (rubric of 1 label a case)"),
                                ("queue_page", "the queue page (full GET, with progress)"),
                                ("progress_panel", "the progress panel (htmx GET after each label)")):
                row = results[name]
                print(f"  {title}: {row['requests']} requests")
                print(f"      server median {row['server_ms']['median']:6.2f} ms, "
                      f"p95 {row['server_ms']['p95']:6.2f} ms "
                      f"(of which SQL median {row['sql_ms']['median']:5.2f} ms, server CPU median "
                      f"{row['server_cpu_ms']['median']:5.2f} ms); "
                      f"round trip median {row['round_trip_ms']['median']:6.2f}"
                      f" ms, p95 {row['round_trip_ms']['p95']:6.2f} ms; queries per request {row['queries']}")
            p95 = max(results[name]["server_ms"]["p95"] for name in ("label_and_next_3_per_case",
                                                                      "label_and_next_1_per_case"))
            results["target_p95_under_25_ms"] = p95 < 25
            print(f"  target: label-and-next p95 {p95:.2f} ms {'under' if p95 < 25 else 'OVER'} 25 ms")
            out = ROOT / "benchmarks" / "results" / "bench_labeling.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(results, indent=2) + "\n")
        finally:
            if httpd is not None:
                httpd.shutdown()


if __name__ == "__main__":
    main()
