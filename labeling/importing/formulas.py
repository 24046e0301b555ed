"""Spreadsheet formulas in CSV cells (OWASP's "CSV injection"): made text when a CSV is written, restored when
one is read, so a CSV export is safe to open in a spreadsheet and still imports again unchanged.

A cell a spreadsheet would run as a formula starts with = + - @ a tab or a CR; one that starts with apostrophes
and then one of those is written with one more apostrophe too, so that reading takes exactly one off a cell
that starts with an apostrophe followed (after any further apostrophes) by one of them. The two are inverse for
every string (tests/labeling/importing/test_formulas.py): the only cell read differently from before is a
hand-written one such as `'=1`, which is read as `=1`, as a spreadsheet saving it would have written it.
"""

import re
from typing import Any

# What makes Excel, LibreOffice or Google Sheets read a cell as a formula (OWASP, "CSV injection").
FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
_NEUTRALISED = re.compile("'*[" + re.escape("".join(FORMULA_STARTS)) + "]")


def neutralise_formula(value: Any) -> Any:
    """A text cell a spreadsheet would run as a formula, prefixed with an apostrophe so it shows as text."""
    if isinstance(value, str) and _NEUTRALISED.match(value):
        return "'" + value
    return value


def restore_formula(cell: str) -> str:
    """A cell as it was before neutralise_formula (the identity on every cell that function leaves alone)."""
    if cell.startswith("'") and _NEUTRALISED.match(cell):
        return cell[1:]
    return cell
