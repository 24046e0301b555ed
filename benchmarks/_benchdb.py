"""What the database benchmarks share: a PostgreSQL database of their own on DATABASE_URL's server (created,
migrated, and dropped at the end), the cases and run they bulk-load into it, and their timing helpers."""

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit, urlunsplit


@contextmanager
def bench_database(name: str, *, keep: bool = False, env: dict[str, str] | None = None,
                   force_drop: bool = False) -> Iterator[None]:
    """Create database `name` (dropping an old one), point Django at it, set up Django and migrate; drop it
    on the way out unless `keep`.

    `env` is set before Django is set up (settings read it). `force_drop` drops the database even while a
    connection is still open (DROP ... WITH (FORCE)), for a benchmark that serves requests from a thread.
    Exits if DATABASE_URL is not PostgreSQL: the benchmarks measure PostgreSQL.
    """
    base = os.environ.get("DATABASE_URL", "")
    if urlsplit(base).scheme not in {"postgres", "postgresql"}:
        sys.exit("Set DATABASE_URL=postgres://user@host:5432/name: the benchmark measures PostgreSQL.")
    import psycopg

    server = urlsplit(base)
    admin_url = urlunsplit(server._replace(path="/postgres"))
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}"')
        conn.execute(f'CREATE DATABASE "{name}"')
    os.environ["DATABASE_URL"] = urlunsplit(server._replace(path=f"/{name}"))
    os.environ.update(env or {})
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "evalhub.settings")

    import django

    django.setup()
    from django.core.management import call_command
    from django.db import connections

    try:
        call_command("migrate", verbosity=0)
        # Pages name the content-hashed static files collectstatic writes, as scripts/serve.sh serves them.
        call_command("collectstatic", interactive=False, verbosity=0)
        yield
    finally:
        connections.close_all()
        if not keep:
            with psycopg.connect(admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}"' + (" WITH (FORCE)" if force_drop else ""))


def settle_after_bulk_load() -> None:
    """Do now what autovacuum and the checkpointer do to a real database after a bulk load (statistics,
    the visibility map, the load's WAL flushed), so that they do not run in the background of the timings."""
    from django.db import connection

    with connection.cursor() as cursor:
        cursor.execute("VACUUM ANALYZE")
        cursor.execute("CHECKPOINT")


def bench_project(slug: str = "bench", *, leads=(), reviewers=()):
    """The benchmark's project (every dataset, rubric and token belongs to one), with `leads` and `reviewers` (users)
    as its members; created the first time."""
    from evalhub.models import Membership, Project, Role

    project, _ = Project.objects.get_or_create(slug=slug, defaults={"name": slug})
    Membership.objects.bulk_create(
        [Membership(project=project, user=user, role=Role.LEAD) for user in leads]
        + [Membership(project=project, user=user, role=Role.REVIEWER) for user in reviewers],
        ignore_conflicts=True,
    )
    return project


CATEGORIES = ("policy", "tools", "combined", "edge", "adversarial")


def bulk_cases(dataset, n_cases: int, question: Callable[[int], str], answer: Callable[[int], str], *,
               created_at) -> list:
    """`n_cases` cases `case-000000`, … in the five categories in turn, written with bulk_create; case i's
    input is question(i) and its output answer(i)."""
    from labeling.models import Case, case_split, labeled_content_hash

    cases = []
    for i in range(n_cases):
        external_id = f"case-{i:06d}"
        text, output = question(i), answer(i)
        cases.append(Case(
            dataset=dataset, external_id=external_id, input=text, output=output, category=CATEGORIES[i % 5],
            split=case_split(external_id), content_hash=labeled_content_hash(input=text, output=output, trace={}),
            created_at=created_at, content_changed_at=created_at,
        ))
    return Case.objects.bulk_create(cases, batch_size=5000)


def finished_run(*, rubric, dataset, lead, repeats: int, judgments: int, started_at):
    """A finished run of a contract-only config of `rubric` (its judgments are the benchmark's to write)."""
    from datetime import timedelta

    from judges.configs import services as config_services
    from judges.models import Run

    config = config_services.judge_config_save(rubric=rubric, spec={"layers": ["contract"],
                                                             "contract_checks": ["answer_present"]}, by=lead)
    return Run.objects.create(config=config, dataset=dataset, repeats=repeats, status=Run.Status.FINISHED,
                              created_by=lead, started_at=started_at, finished_at=started_at + timedelta(minutes=30),
                              total=judgments, done=judgments)


def timed(fn, times: int) -> list[float]:
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - started)
    return samples


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
