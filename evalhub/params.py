"""What a request's ids, numbers and text may be: the one rule every view and API reads them by.

- Text: a NUL character is refused with 400 wherever it comes, in the path, the query string or a form
  field (`NulRefusedMiddleware`); PostgreSQL cannot store or compare text holding one. JSON bodies are
  checked by their API with `has_nul`, so the API answers in its own error format.
- An id is plain ASCII digits that fit a bigint (`object_id`); anything else names no object, so a page
  answers 404 as for an id that does not exist.
- A number is plain ASCII digits (or a decimal, for `real_number`) within the range its column or meaning
  allows; anything else is 400 with a message naming the parameter (`whole_number`, `real_number`).
"""

from collections.abc import Callable
from typing import Any

from django.core.exceptions import BadRequest
from django.http import Http404, HttpRequest, HttpResponse, QueryDict

MAX_ID = 2**63 - 1  # a bigint primary key
MAX_INT = 2**31 - 1  # an integer column
_FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def has_nul(value: Any) -> bool:
    """Whether a string, or any string in a JSON value (keys too), holds a NUL character."""
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_nul(v) for v in value)
    return False


def whole(value: str | None, *, low: int = 0, high: int = MAX_INT) -> int | None:
    """The whole number low … high that plain ASCII digits spell, or None: `²` (which str.isdigit takes),
    `-1`, ` 1`, `1e3` and 5,000 digits (which int() refuses) are none."""
    if value is None or not (0 < len(value) <= len(str(high)) and value.isascii() and value.isdigit()):
        return None
    number = int(value)
    return number if low <= number <= high else None


def object_id(value: str | None) -> int | None:
    """An id from a query string or form: a whole number 1 … MAX_ID in plain ASCII digits, else None."""
    return whole(value, low=1, high=MAX_ID)


def object_id_or_404(value: str | None) -> int:
    """`object_id`, or 404: a malformed id names no object, like an id that does not exist."""
    number = object_id(value)
    if number is None:
        raise Http404("No such object.")
    return number


def whole_number(value: str, *, name: str, low: int = 0, high: int = MAX_INT) -> int:
    """A whole number low … high in plain ASCII digits, or 400 saying what `name` must be."""
    number = whole(value, low=low, high=high)
    if number is None:
        raise BadRequest(f"{name} must be a whole number from {low} to {high}.")
    return number


def real_number(value: str, *, name: str, low: float, high: float) -> float:
    """A finite decimal number low … high (ASCII digits, one point, no exponent), or 400 naming `name`."""
    digits = value.replace(".", "", 1)
    if not (0 < len(value) <= 32 and digits.isascii() and digits.isdigit()) or not low <= float(value) <= high:
        raise BadRequest(f"{name} must be a number from {low:g} to {high:g}.")
    return float(value)


class NulRefused(BadRequest):
    """A NUL character in the request: `field` names where (None for the path)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def refuse_nul(query: QueryDict, *, where: str = "parameter") -> None:
    """NulRefused (400) for a NUL character in a query's names or values: the middleware's rule, for a query
    string a form carries inside a field (a page's filters, sent back with a form)."""
    for key, values in query.lists():
        if "\x00" in key or any("\x00" in value for value in values):
            name = key.replace("\x00", "\\0")
            raise NulRefused(f"The {where} {name!r} holds a NUL character.", name)


class NulRefusedMiddleware:
    """400 for a NUL character in the path, a query parameter or a form field, before any view reads it.

    Form fields are read only from form posts (an API reads its own JSON body, see `has_nul`); CSRF's check
    reads those fields anyway, so nothing is parsed here that would not be.
    """

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if "\x00" in request.path:
            raise NulRefused("The address holds a NUL character.")
        refuse_nul(request.GET)
        if request.method == "POST" and request.content_type in _FORM_TYPES:
            refuse_nul(request.POST, where="form field")
        return self.get_response(request)
