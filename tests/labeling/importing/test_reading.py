"""Reading lines, the strict JSON reading and the camelCase names (labeling.importing.reading): no
database, no Django."""

import hashlib
import io
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labeling.importing.reading import (
    MAX_JSON_DEPTH,
    RowError,
    _raw_lines,
    _text_lines,
    _TooLarge,
    case_split,
    labeled_content_hash,
    normalize_case_fields,
    parse_json,
    parse_json_items,
    validate_case,
)

HAZARDS = [
    ('{"external_id": "a", "input": "q", "external_id": "b"}', "the key 'external_id' is repeated"),
    ('{"score": NaN}', "NaN is not valid JSON"),
    ('{"score": Infinity}', "Infinity is not valid JSON"),
    ('{"score": -Infinity}', "-Infinity is not valid JSON"),
    ('{"score": 1e999}', "the number 1e999 is too large"),
    ('{"score": -' + "9" * 400 + '.0}', "is too large"),
    ('{"text": "\\ud800"}', "lone surrogate"),
    ('{"\\udfff": 1}', "lone surrogate"),
    ('{"text": "\\ude00\\ud83d"}', "lone surrogate"),  # a pair the wrong way round
    ("[" * (MAX_JSON_DEPTH + 1) + "]" * (MAX_JSON_DEPTH + 1), f"deeper than {MAX_JSON_DEPTH} levels"),
    ("[" * 100_000 + "]" * 100_000, f"deeper than {MAX_JSON_DEPTH} levels"),  # beyond Python's recursion limit
    ("1" * 5_000, "too many digits"),
]


@pytest.mark.parametrize(("text", "message"), HAZARDS, ids=[h[1][:20] + str(i) for i, h in enumerate(HAZARDS)])
def test_it_refuses_each_hazard_with_a_short_message(text, message):
    with pytest.raises(ValueError, match=message) as refused:
        parse_json(text)
    assert len(str(refused.value)) < 100


@pytest.mark.parametrize("text", [
    '{"text": "\\ud83d\\ude00", "k": "\\\\ud800"}',  # a surrogate pair is one character; an escaped backslash is text
    "[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH,
    '  {"a": 1.5e300, "b": -0.0, "c": [1, 2, {"d": null}], "e": "NaN and Infinity as text"}  ',
    '{"a": {"a": 1}, "b": [{"a": 1}, {"a": 2}]}',  # the same key in different objects
])
def test_it_reads_what_json_allows(text):
    assert parse_json(text) == json.loads(text)


def test_a_syntax_error_is_a_json_decode_error_with_its_position():
    with pytest.raises(json.JSONDecodeError):
        parse_json('{"a": 1} trailing')
    with pytest.raises(json.JSONDecodeError):
        parse_json('{"a": }')


def test_an_array_body_gives_each_item_its_index():
    errors: list[RowError] = []
    items = parse_json_items('[{"a": 1}, {"b": 1e999}, {"c": "\\ud800"}]', errors)
    # The overflow stops the reading of its item (where it ends is unknown), so the rest is not read.
    assert items == [(0, {"a": 1})]
    assert [(e.row, e.message) for e in errors] == [
        (1, "is not valid JSON: the number 1e999 is too large (it overflows a float)"),
    ]

    errors = []
    items = parse_json_items('[{"a": 1}, {"c": "\\ud800"}, ' + "[" * 64 + "]" * 64 + ', {"d": 2}]', errors)
    # A lone surrogate or a deep item is found after its item was read: the next items are read too.
    assert items == [(0, {"a": 1}), (3, {"d": 2})]
    assert [e.row for e in errors] == [1, 2]

    errors = []
    assert parse_json_items('{"a": 1}', errors) == [(0, {"a": 1})] and not errors
    assert parse_json_items("[]", errors) == [] and not errors
    parse_json_items('{"a": 1, "a": 2}', errors)
    assert [str(e) for e in errors] == ["file: the body is not valid JSON: the key 'a' is repeated in one object"]


def test_camel_case_names_become_the_case_fields():
    golden = {
        "id": "c1", "question": "Can I return it?", "answer": "Yes.", "goldenAnswer": "Yes, within 30 days.",
        "expectedBehavior": "cite the policy", "expectedTool": "lookup_order", "expectedToolArgument": {"id": 1},
        "expectedSource": "returns.md", "category": "policy",
    }
    assert normalize_case_fields(golden) == {
        "external_id": "c1", "input": "Can I return it?", "output": "Yes.", "golden_answer": "Yes, within 30 days.",
        "expected_behaviour": "cite the policy", "expected_tool": "lookup_order",
        "expected_tool_argument": {"id": 1}, "expected_source": "returns.md", "category": "policy",
    }
    assert normalize_case_fields({"expectedBehaviour": "x"}) == {"expected_behaviour": "x"}
    data, problems = validate_case(golden)
    assert problems == [] and data.external_id == "c1" and data.expected_tool_argument == {"id": 1}


@pytest.mark.parametrize(("obj", "message"), [
    ({"id": "a", "external_id": "b"}, "external_id is given twice, as 'id' and as 'external_id'"),
    ({"expectedBehaviour": "a", "expectedBehavior": "b"}, "expected_behaviour is given twice"),
    ({"output": "a", "answer": "b"}, "output is given twice, as 'output' and as 'answer'"),
])
def test_a_field_named_both_ways_is_an_error(obj, message):
    with pytest.raises(ValueError, match=message):
        normalize_case_fields(obj)
    data, problems = validate_case({"input": "q", **obj})
    assert data is None and len(problems) == 1 and message in problems[0][1]


# The split rule (docs/cases.md) worked by hand: sha256("abc") and sha256("") are the standard test vectors
# (ba7816bf… and e3b0c442…); the others were read off `sha256sum`. First 8 hex digits as an integer, mod 100.
@pytest.mark.parametrize(("external_id", "first8", "split"), [
    ("abc", "ba7816bf", "holdout"),  # 3128432319 % 100 = 19
    ("", "e3b0c442", "holdout"),  # 3820012610 % 100 = 10
    ("case-21", "7aaacc68", "holdout"),  # 2058013800 % 100 = 0: the lowest holdout
    ("case-34", "fd50c671", "holdout"),  # 4249929329 % 100 = 29: the highest holdout
    ("case-57", "f39f4b12", "dev"),  # 4087302930 % 100 = 30: the lowest dev
    ("case-42", "bfe6ffb7", "dev"),  # 3219586999 % 100 = 99
    ("case-1", "ba225b98", "dev"),  # 3122813848 % 100 = 48
    ("case-4", "a2ea4a2d", "holdout"),  # 2733263405 % 100 = 5
])
def test_the_split_follows_designs_rule_on_known_ids(external_id, first8, split):
    assert hashlib.sha256(external_id.encode()).hexdigest()[:8] == first8  # the fixture itself is right
    assert case_split(external_id) == split


def test_about_three_in_ten_cases_are_holdout():
    splits = [case_split(f"case-{i}") for i in range(10_000)]
    assert set(splits) == {"holdout", "dev"}
    # The ids are fixed, so this is deterministic; 0.28–0.32 is over four standard deviations of a
    # binomial(10 000, 0.3) share either side, so any fair hash passes and a wrong cut-off (20, 40) does not.
    assert 0.28 < splits.count("holdout") / len(splits) < 0.32


def test_the_labeled_content_hash_of_a_known_case_is_its_known_digest():
    # printf '%s' '["Can I return shoes?","Yes — within 30 days.",{"toolCalls":[{"argument":{"order":42},
    # "name":"lookup_order"}]}]' | sha256sum  (one line; UTF-8 kept as it is, not escaped)
    trace = {"toolCalls": [{"name": "lookup_order", "argument": {"order": 42}}]}
    digest = labeled_content_hash(input="Can I return shoes?", output="Yes — within 30 days.", trace=trace)
    assert digest == "da723ecbb24f4179bdd07bf0d5465a455479307ee705a34506c4e593cd62e653"


# Pieces that matter at a chunk boundary: newlines alone and in CRLF, a byte-order mark, a UTF-8
# character (whole, and its first byte alone), a byte that is never UTF-8, plain text.
PIECES = [b"\n", b"\r\n", b"\r", b"\xef\xbb\xbf", b"\xc3\xa9", b"\xc3", b"\xff", b"a", b'{"k": 1}', b"\n\n"]
CONTENT = st.lists(st.sampled_from(PIECES), max_size=24).map(b"".join)


class Trickle:
    """A binary stream cut where told: each read gives the next piece, never more than asked for (a
    pipe or an upload may give less)."""

    def __init__(self, content: bytes, cuts: list[int]) -> None:
        self.content, self.cuts, self.position = content, sorted(set(cuts)), 0

    def read(self, size: int) -> bytes:
        end = next((cut for cut in self.cuts if cut > self.position), len(self.content))
        piece = self.content[self.position:min(end, self.position + size)]
        self.position += len(piece)
        return piece


def split_reading(content: bytes) -> list[tuple[int, bytes]]:
    """What the reader must give, from bytes.split over the whole content: each line with its newline,
    a last line without one as it is, numbered from 1."""
    *complete, last = content.split(b"\n")
    return list(enumerate([raw + b"\n" for raw in complete] + ([last] if last else []), 1))


def text_reading(stream) -> tuple[list, list[RowError], set[int]]:
    errors: list[RowError] = []
    bad_lines: set[int] = set()
    return list(_text_lines(stream, 1 << 30, errors, bad_lines)), errors, bad_lines


@settings(max_examples=100, deadline=None, derandomize=True)
@given(content=CONTENT)
def test_lines_read_in_chunks_of_every_size_are_the_lines_of_bytes_split(content):
    whole = text_reading(io.BytesIO(content))  # one read: bytes.split over the whole file
    for size in range(1, len(content) + 2):
        cuts = list(range(size, len(content), size))
        assert list(_raw_lines(Trickle(content, cuts), 1 << 30)) == split_reading(content), size
        # The byte-order mark, UTF-8 errors with their columns and the line numbers, the same too.
        assert text_reading(Trickle(content, cuts)) == whole, size


@settings(max_examples=200, deadline=None, derandomize=True)
@given(content=CONTENT, cuts=st.lists(st.integers(0, 200), max_size=12))
def test_lines_cut_anywhere_are_the_lines_of_bytes_split(content, cuts):
    assert list(_raw_lines(Trickle(content, cuts), 1 << 30)) == split_reading(content)
    assert text_reading(Trickle(content, cuts)) == text_reading(io.BytesIO(content))


@settings(max_examples=100, deadline=None, derandomize=True)
@given(content=CONTENT.filter(bool), cuts=st.lists(st.integers(0, 200), max_size=12))
def test_the_size_limit_holds_however_the_file_is_cut(content, cuts):
    assert list(_raw_lines(Trickle(content, cuts), len(content))) == split_reading(content)
    with pytest.raises(_TooLarge):
        list(_raw_lines(Trickle(content, cuts), len(content) - 1))


def test_one_line_over_many_chunks_is_one_line():
    line = b"x" * 10_000 + b"\r\n"
    content = b"\xef\xbb\xbf" + line + line[:-2]  # a BOM, a CRLF line, a last line with no newline
    lines, errors, _ = text_reading(Trickle(content, list(range(7, len(content), 7))))
    assert lines == [(1, line.decode()), (2, line[:-2].decode())] and errors == []
