"""A benchmark's own PostgreSQL database on DATABASE_URL's server: created, migrated, and dropped at the end."""

import os
import sys
from collections.abc import Iterator
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
