"""Writing many rows at once through PostgreSQL's COPY, for what a run records by the thousand.

`bulk_create` builds a model instance per row, prepares each field's value and sends one INSERT whose
every value psycopg first binds into the statement's text, in Python: for a drift check's 60,000
judgments that work, not the database's, is most of the time. `copy_rows` streams plain rows (the values
as the columns hold them; JSON wrapped by `jsonb`) with no statement to build. Rows that would break a
unique constraint are left out when asked, like bulk_create's `ignore_conflicts`: they go through a
temporary table and an INSERT … ON CONFLICT DO NOTHING. SQLite (the embedded default) has no COPY: there
the same rows go through bulk_create.
"""

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connection, models, transaction
from psycopg.types.json import Jsonb


def jsonb(value: Any) -> Jsonb | None:
    """A JSON column's value as Django's JSONField saves it (None stays SQL null, as a nullable field's)."""
    return None if value is None else Jsonb(value)


def _plain(value: Any) -> Any:
    """A value as a model field takes it: a JSON column's wrapped value unwrapped."""
    return value.obj if isinstance(value, Jsonb) else value


def copy_rows(
    model: type[models.Model], fields: Sequence[str], rows: Iterable[Sequence[Any]], *, ignore_conflicts: bool = False
) -> int:
    """Insert `rows` (values of `fields`, by attribute name: `run_id` for a foreign key) into the model's
    table by COPY; the primary key is the database's. Returns how many rows were sent."""
    rows = list(rows)
    if not rows:
        return 0
    if connection.vendor != "postgresql":
        model.objects.bulk_create(
            [model(**{name: _plain(value) for name, value in zip(fields, row, strict=True)}) for row in rows],
            ignore_conflicts=ignore_conflicts,
        )
        return len(rows)
    quote = connection.ops.quote_name
    table = quote(model._meta.db_table)
    columns = ", ".join(quote(model._meta.get_field(name).column) for name in fields)
    with transaction.atomic(), connection.cursor() as cursor:
        target = table
        if ignore_conflicts:
            target = quote(f"copy_{model._meta.db_table}")
            cursor.execute(f"CREATE TEMPORARY TABLE {target} AS SELECT {columns} FROM {table} WITH NO DATA")
        with cursor.cursor.copy(f"COPY {target} ({columns}) FROM STDIN") as copy:
            for row in rows:
                copy.write_row(row)
        if ignore_conflicts:
            cursor.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {target} ON CONFLICT DO NOTHING")
            cursor.execute(f"DROP TABLE {target}")
    return len(rows)
