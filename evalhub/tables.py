"""Text search and sorting of a table, read from the query string the same way on every page.

A page names the sort keys it offers (`sort=key` ascending, `sort=-key` descending) and the ORM fields
each stands for; anything else falls back to the page's default, so a crafted URL can neither order by
an arbitrary field nor fail.
"""

from collections.abc import Mapping
from dataclasses import dataclass

from django.http import HttpRequest, QueryDict

# A longer search is cut, not refused: nobody types more, and the query stays cheap.
SEARCH_MAX_CHARS = 200


@dataclass(frozen=True)
class TableQuery:
    search: str
    sort: str  # a whitelisted key, "-" first for descending
    ordering: tuple  # the ORM fields (or ordering expressions) for order_by()
    keep: str  # the query string without sort and page, for the sort links

    @property
    def sort_key(self) -> str:
        return self.sort.removeprefix("-")

    @property
    def descending(self) -> bool:
        return self.sort.startswith("-")


def table_query(
    request: HttpRequest, *, sorts: Mapping[str, tuple], default: str, search_param: str = "q"
) -> TableQuery:
    """The table's search text and sort from the request. `sorts` maps a key to its ascending ORM
    fields, the first sorting and the rest breaking ties; descending reverses the first.
    `default` is a key, with "-" for descending."""
    sort = request.GET.get("sort", "")
    if sort.removeprefix("-") not in sorts:
        sort = default
    fields = sorts[sort.removeprefix("-")]
    if sort.startswith("-"):  # the first field is reversed; the rest break ties the same way both ways
        first = fields[0]
        if isinstance(first, str):
            first = first.removeprefix("-") if first.startswith("-") else f"-{first}"
        else:  # an expression such as F("x").asc(nulls_first=True)
            first = first.copy()
            first.reverse_ordering()
        fields = (first, *fields[1:])
    keep: QueryDict = request.GET.copy()
    for name in ("sort", "page"):
        keep.pop(name, None)
    search = request.GET.get(search_param, "").strip()[:SEARCH_MAX_CHARS]
    return TableQuery(search=search, sort=sort, ordering=fields, keep=keep.urlencode())
