"""Writing many rows at once through PostgreSQL's COPY, for what a run records by the thousand.

`bulk_create` sends one INSERT whose every value psycopg first binds into the statement's text, in
Python: for a drift check's 60,000 judgments that binding, not the database, is most of the time. COPY
streams the same values, adapted as Django would save them (`get_db_prep_save`: JSON, decimals, times),
with no statement to build. What the rows would conflict with is skipped, like `ignore_conflicts=True`,
when asked: they go through a temporary table and an INSERT … ON CONFLICT DO NOTHING.
"""

from collections.abc import Iterable

from django.db import connection, models, transaction


def copy_create(model: type[models.Model], objs: Iterable[models.Model], *, ignore_conflicts: bool = False) -> int:
    """Insert `objs` (unsaved, their primary key left to the database) by COPY; returns how many were sent.
    With `ignore_conflicts`, rows that would break a unique constraint are left out, as bulk_create's."""
    objs = list(objs)
    if not objs:
        return 0
    fields = [f for f in model._meta.concrete_fields if not f.primary_key]
    table = connection.ops.quote_name(model._meta.db_table)
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    with transaction.atomic(), connection.cursor() as cursor:
        target = table
        if ignore_conflicts:
            target = connection.ops.quote_name(f"copy_{model._meta.db_table}")
            cursor.execute(f"CREATE TEMPORARY TABLE {target} AS SELECT {columns} FROM {table} WITH NO DATA")
        with cursor.cursor.copy(f"COPY {target} ({columns}) FROM STDIN") as copy:
            for obj in objs:
                copy.write_row([f.get_db_prep_save(f.pre_save(obj, True), connection) for f in fields])
        if ignore_conflicts:
            cursor.execute(f"INSERT INTO {table} ({columns}) SELECT {columns} FROM {target} ON CONFLICT DO NOTHING")
            cursor.execute(f"DROP TABLE {target}")
    return len(objs)
