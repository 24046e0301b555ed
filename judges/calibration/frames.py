"""Query rows into pandas frames, fast: the calibration figures and the bias probes read 20,000 to
230,000 rows per page, and Django's per-value handling would cost as much as the queries themselves."""

from __future__ import annotations

import numpy as np
import pandas as pd
from django.db import connection
from django.db.models import QuerySet


def raw_rows(queryset: QuerySet) -> list[tuple]:
    """The queryset's rows as the database cursor gives them, for integer and text columns only (which
    need no conversion): Django would call a converter on each of 100,000 values."""
    sql, params = queryset.query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return cursor.fetchall()


def typed_frame(rows: list[tuple], columns: list[str], *, integers: tuple[str, ...]) -> pd.DataFrame:
    """rows as a frame, column by column with the types the query gives: `from_records` would infer each
    column's type value by value, a third of the time it takes to read 100,000 rows."""
    values = list(zip(*rows, strict=True)) if rows else [()] * len(columns)
    return pd.DataFrame({
        column: np.array(value, dtype=np.int64 if column in integers else object)
        for column, value in zip(columns, values, strict=True)
    })
