"""`field__among=values`: `field__in`, sent to PostgreSQL as one array (`= ANY(%s)`), not a parameter a value.

A worker asks for thousands of cases, keys or judgments at once. With `__in`, Django prepares and resolves each
value and psycopg binds each into the statement's text, scanning a statement of thousands of placeholders:
that work, in Python, costs more than the query. Here the values go as they are (already what the column holds:
ints for ids, strings for keys) as one parameter: ids and keys joined by commas into one text that PostgreSQL
splits (7 times cheaper than psycopg writing out an array of 4,000 keys), anything else as an array. Other
databases (SQLite) get `__in`'s SQL.
"""

from django.db import models
from django.db.models.lookups import In


class Among(models.Lookup):
    lookup_name = "among"
    prepare_rhs = False  # each value is what the column holds: nothing to prepare one by one

    def as_sql(self, compiler, connection):
        return In(self.lhs, list(self.rhs)).as_sql(compiler, connection)

    def as_postgresql(self, compiler, connection):
        lhs, lhs_params = self.process_lhs(compiler, connection)
        # The array cast to the column's type: psycopg sends a list of small ints as smallint[], and across types
        # the planner has no statistics for the column: it guesses every row matches and scans a run's judgments
        # whole for each group (a drift check took 12-14 s instead of 7).
        array_type = self.lhs.output_field.cast_db_type(connection)
        values = list(self.rhs)
        joined = _comma_joined(values, array_type)
        if joined is not None:
            return f"{lhs} = ANY(string_to_array(%s, ',')::{array_type}[])", (*lhs_params, joined)
        return f"{lhs} = ANY(%s::{array_type}[])", (*lhs_params, values)


_INTEGER_TYPES = ("bigint", "integer", "smallint")


def _comma_joined(values: list, array_type: str) -> str | None:
    """Ids or keys as one comma-separated text, for PostgreSQL's string_to_array (folded into a constant array
    when the statement is planned): psycopg writes a list out as an array literal value by value in Python,
    several times the cost of the query for thousands of keys. None where the values are neither ids nor keys
    without a comma (or are no more than one empty key, which string_to_array would read as no value): those
    go as an array."""
    if array_type in _INTEGER_TYPES:
        return ",".join(map(str, values)) if values else None  # not an int: the cast refuses it
    if array_type.startswith("varchar") or array_type == "text":
        joined = ",".join(values)
        return joined if joined and joined.count(",") == len(values) - 1 else None
    return None


models.Field.register_lookup(Among)
models.ForeignObject.register_lookup(Among)  # a foreign key keeps lookups of its own
