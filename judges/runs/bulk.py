"""Writing many rows at once through PostgreSQL's COPY, for what a run records by the thousand.

`bulk_create` builds a model instance per row, prepares each field's value and sends one INSERT whose
every value psycopg first binds into the statement's text, in Python: for a drift check's 60,000
judgments that work, not the database's, is most of the time. `copy_rows` streams plain rows (the values
as the columns hold them; JSON wrapped by `jsonb`) with no statement to build, in COPY's binary format: an
embedding's bytes go as they are (the text format spells each byte out, and the server reads it back) and
numbers need no formatting. Rows that would break a unique constraint are left out when asked, like
bulk_create's `ignore_conflicts`: the rows go straight into the table, and only when one conflicts (another
worker wrote the same key meanwhile: rare) is that COPY undone and the rows sent again through a temporary
table and an INSERT … ON CONFLICT DO NOTHING (each row written twice over, which a COPY straight into the
table does not cost the database). SQLite (the embedded default) has no COPY: there the same rows go through
bulk_create.
"""

from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connection, models, transaction
from psycopg.errors import UniqueViolation
from psycopg.types.json import Jsonb


def jsonb(value: Any) -> Jsonb | None:
    """A JSON column's value as Django's JSONField saves it (None stays SQL null, as a nullable field's)."""
    if value is None:
        return None
    if not value and type(value) in _EMPTY:  # most judgments' checks, calls and costs: no encoder run for them
        return _EMPTY[type(value)]
    return Jsonb(value)


# An empty list and dict, their JSON written once (never changed: copy_rows only reads them).
_EMPTY: dict[type, Jsonb] = {list: Jsonb([], dumps=lambda _: "[]"), dict: Jsonb({}, dumps=lambda _: "{}")}


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
    if not ignore_conflicts:
        with transaction.atomic(), connection.cursor() as cursor:
            _copy(cursor, table, columns, rows)
        return len(rows)
    try:
        with transaction.atomic(), connection.cursor() as cursor:  # a savepoint inside a caller's transaction
            _copy(cursor, table, columns, rows)
    except UniqueViolation:  # a row's key is there already: every row again, leaving those out
        with transaction.atomic(), connection.cursor() as cursor:
            target = quote(f"copy_{model._meta.db_table}")
            cursor.execute(f"CREATE TEMPORARY TABLE {target} AS SELECT {columns} FROM {table} WITH NO DATA")
            _copy(cursor, target, columns, rows)
            cursor.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {target} ON CONFLICT DO NOTHING")
            cursor.execute(f"DROP TABLE {target}")
    return len(rows)


# The columns' types (the binary format sends each value as its column's type) by (table, columns): the
# built-in types' OIDs are the same in every database.
_column_types: dict[tuple[str, str], list[int]] = {}


def _copy(cursor, table: str, columns: str, rows: list[Sequence[Any]]) -> None:
    """COPY the rows into `table` in the binary format."""
    types = _column_types.get((table, columns))
    if types is None:
        cursor.execute(f"SELECT {columns} FROM {table} LIMIT 0")
        types = _column_types[(table, columns)] = [column.type_code for column in cursor.description]
    with cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN (FORMAT BINARY)") as copy:
        copy.set_types(types)
        for row in rows:
            copy.write_row(row)
