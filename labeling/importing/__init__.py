"""Cases, labels (and judges' judgments) in from JSONL, CSV and the ingest API, all or nothing.

- `reading`: formats, reading files line by line, strict JSON, a case's fields and their checks, row
  errors. No Django: the CI command uses it too.
- `cases`: the cases import (files and the ingest API) and its bulk writes.
- `labels`: the labels import.
An import runs in three steps: read and check every row, collecting every error with its line
(index for the API); check the database in bulk inside the transaction; write in bulk in that one
transaction. Any error raises `ImportRejected` with the full list, and nothing is written.

The package imports only `reading` (no Django); import the writers from their modules.
"""

from labeling.importing.reading import (
    Format,
    ImportRejected,
    RowError,
    format_for,
    normalize_case_fields,
    parse_json,
)

__all__ = ["Format", "ImportRejected", "RowError", "format_for", "normalize_case_fields", "parse_json"]
