"""What the import/export commands share: opening FILE ("-" is stdin/stdout) and printing errors."""

import sys
from contextlib import contextmanager
from pathlib import Path

from django.core.management.base import CommandError

from labeling.importing import Format, ImportRejected, format_for

FORMAT_CHOICES = [f.value for f in Format]


def resolve_format(path: str, explicit: str | None, *, default: Format | None = None) -> Format:
    if explicit or path != "-":
        try:
            return format_for(path, explicit)
        except ValueError as exc:
            if default is None:
                raise CommandError(f"{exc} (--format jsonl|csv)") from None
            return default
    if default is None:
        raise CommandError("Reading from stdin: say which format with --format jsonl|csv.")
    return default


@contextmanager
def open_input(path: str):
    if path == "-":
        yield sys.stdin.buffer
        return
    if not Path(path).is_file():
        raise CommandError(f"No such file: {path}")
    with open(path, "rb") as stream:
        yield stream


def write_output(path: str, pieces) -> int:
    """Write an export's text pieces (one per line or row) to path ("-": stdout); returns how many."""
    count = 0
    if path == "-":
        for piece in pieces:
            sys.stdout.write(piece)
            count += 1
        return count
    # newline="": CSV rows end in \r\n already, and cells may hold line breaks of their own.
    with open(path, "w", encoding="utf-8", newline="") as out:
        for piece in pieces:
            out.write(piece)
            count += 1
    return count


def report_rejection(command, path: str, rejected: ImportRejected) -> CommandError:
    for error in rejected.errors:
        command.stderr.write(str(error))
    return CommandError(f"{path} was rejected with {len(rejected.errors)} error(s); nothing was written.")


NEUTRALISE_HELP = (
    "CSV only: make cells starting with =, +, -, @, a tab or CR text (a leading apostrophe), so a spreadsheet "
    "does not run them as formulas; such a file is for reading and does not import unchanged"
)


def check_neutralise(fmt: Format, neutralise_formulas: bool) -> None:
    if neutralise_formulas and fmt != Format.CSV:
        raise CommandError("--neutralise-formulas applies to CSV only (a spreadsheet runs no JSONL).")
