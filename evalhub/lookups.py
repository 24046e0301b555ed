"""`field__among=values`: `field__in`, sent to PostgreSQL as one array (`= ANY(%s)`), not a parameter a value.

A worker asks for thousands of cases, keys or judgments at once. With `__in`, Django prepares and resolves each
value and psycopg binds each into the statement's text, scanning a statement of thousands of placeholders:
that work, in Python, costs more than the query. Here the values go as they are (already what the column holds:
ints for ids, strings for keys) in one array parameter. Other databases (SQLite) get `__in`'s SQL.
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
        return f"{lhs} = ANY(%s::{array_type}[])", (*lhs_params, list(self.rhs))


models.Field.register_lookup(Among)
models.ForeignObject.register_lookup(Among)  # a foreign key keeps lookups of its own
