"""What the import/export commands share: opening FILE ("-" is stdin/stdout) and printing errors."""

import sys
from contextlib import contextmanager
from pathlib import Path

from django.core.management.base import CommandError

from labeling.importing import Format, ImportRejected, format_for
from labeling.importing.files import write_whole

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
    """Write an export's text pieces (one per line or row) to path ("-": stdout), whole or not at all (a full disk
    leaves no truncated file: labeling.importing.files); returns how many."""
    if path == "-":
        count = 0
        for piece in pieces:
            sys.stdout.write(piece)
            count += 1
        return count
    try:
        return write_whole(path, pieces)
    except OSError as exc:
        raise CommandError(f"Cannot write {path}: {exc.strerror or exc}; nothing was written there.") from None


def report_rejection(command, path: str, rejected: ImportRejected) -> CommandError:
    for error in rejected.errors:
        command.stderr.write(str(error))
    return CommandError(f"{path} was rejected with {len(rejected.errors)} error(s); nothing was written.")


RAW_FORMULAS_HELP = (
    "CSV only: write cells starting with =, +, -, @, a tab or CR as they are. By default they are made text (a "
    "leading apostrophe, which importing takes off again) so that a spreadsheet opening the file runs no formula; "
    "a raw file is for a program, never for a spreadsheet"
)


def check_raw_formulas(fmt: Format, raw_formulas: bool) -> None:
    if raw_formulas and fmt != Format.CSV:
        raise CommandError("--raw-formulas applies to CSV only (JSONL holds no spreadsheet formulas).")
