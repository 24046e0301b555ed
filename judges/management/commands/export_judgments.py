from django.core.management.base import BaseCommand, CommandError

from judges.models import Run
from judges.runs.exporting import judgments_export
from labeling.importing import Format
from labeling.management.commands._files import (
    FORMAT_CHOICES,
    RAW_FORMULAS_HELP,
    check_raw_formulas,
    resolve_format,
    write_output,
)


class Command(BaseCommand):
    help = "Export a run's judgments as JSONL or CSV, the format import_judgments reads."

    def add_arguments(self, parser) -> None:
        parser.add_argument("run", type=int, help="the run's id")
        parser.add_argument("file", help="a .jsonl or .csv file; - writes to stdout")
        parser.add_argument("--format", choices=FORMAT_CHOICES, help="instead of the file's extension")
        parser.add_argument("--raw-formulas", action="store_true", help=RAW_FORMULAS_HELP)

    def handle(self, *args, run: int, file: str, format: str | None, raw_formulas: bool,
               **options) -> None:
        target = Run.objects.select_related("config").filter(pk=run).first()
        if target is None:
            raise CommandError(f"No run {run}.")
        fmt = resolve_format(file, format, default=Format.JSONL)
        check_raw_formulas(fmt, raw_formulas)
        pieces = write_output(file, judgments_export(run=target, fmt=fmt, neutralise_formulas=not raw_formulas))
        if file != "-":
            rows = pieces - (fmt == Format.CSV)
            self.stdout.write(self.style.SUCCESS(f"Exported {rows} judgments of run {run} to {file}."))
