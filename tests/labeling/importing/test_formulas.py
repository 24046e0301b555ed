"""Neutralising spreadsheet formulas on export and restoring them on import are exact inverses, so a CSV export
is safe in a spreadsheet and still imports unchanged (labeling.importing.formulas)."""

import itertools

from hypothesis import given
from hypothesis import strategies as st

from labeling.importing.formulas import FORMULA_STARTS, neutralise_formula, restore_formula

# Every string of up to four characters over the characters that matter, and one that does not.
ALPHABET = ["'", *FORMULA_STARTS, "a"]
SMALL = ["".join(chars) for n in range(5) for chars in itertools.product(ALPHABET, repeat=n)]


def test_restoring_undoes_neutralising_for_every_short_string():
    assert all(restore_formula(neutralise_formula(s)) == s for s in SMALL)


def test_a_neutralised_cell_never_starts_a_formula():
    assert not [s for s in SMALL if neutralise_formula(s).startswith(FORMULA_STARTS)]


def test_a_cell_no_export_writes_differently_is_read_as_it_is():
    # Every cell an export writes unchanged is read unchanged: the only cells read differently are those an
    # export makes, an apostrophe in front of a neutralised start.
    assert all(restore_formula(s) == s for s in SMALL if neutralise_formula(s) == s)


@given(st.text())
def test_it_round_trips_any_text(text):
    assert restore_formula(neutralise_formula(text)) == text


def test_examples():
    assert neutralise_formula("=HYPERLINK(\"http://x\")") == "'=HYPERLINK(\"http://x\")"
    assert neutralise_formula("'=1") == "''=1" and restore_formula("''=1") == "'=1"
    assert neutralise_formula("it's") == "it's" and neutralise_formula("a - b") == "a - b"
    assert neutralise_formula(-5) == -5  # numbers are cells of their own in a spreadsheet
