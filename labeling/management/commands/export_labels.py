from django.core.management.base import BaseCommand, CommandError

from evalhub.projects import add_project_argument, project_for_command
from labeling.datasets.exporting import labels_export
from labeling.importing import Format
from labeling.management.commands._files import (
    FORMAT_CHOICES,
    RAW_FORMULAS_HELP,
    check_raw_formulas,
    resolve_format,
    write_output,
)


class Command(BaseCommand):
    help = "Export one rubric's labels on a dataset as JSONL or CSV, the format import_labels reads."

    def add_arguments(self, parser) -> None:
        parser.add_argument("dataset", help="the dataset's slug")
        parser.add_argument("file", help="a .jsonl or .csv file; - writes to stdout")
        parser.add_argument("--rubric", required=True, help="the rubric's slug")
        add_project_argument(parser)
        parser.add_argument("--format", choices=FORMAT_CHOICES, help="instead of the file's extension")
        parser.add_argument("--raw-formulas", action="store_true", help=RAW_FORMULAS_HELP)

    def handle(self, *args, dataset: str, file: str, rubric: str, format: str | None, raw_formulas: bool,
               **options) -> None:
        project = project_for_command(options["project"])
        target = project.datasets.filter(slug=dataset).first()
        if target is None:
            raise CommandError(f"No dataset {dataset!r} in the project {project.slug}.")
        question = project.rubrics.filter(slug=rubric).first()
        if question is None:
            raise CommandError(f"No rubric {rubric!r} in the project {project.slug}.")
        fmt = resolve_format(file, format, default=Format.JSONL)
        check_raw_formulas(fmt, raw_formulas)
        pieces = write_output(file, labels_export(dataset=target, rubric=question, fmt=fmt,
                                                  neutralise_formulas=not raw_formulas))
        if file != "-":
            rows = pieces - (fmt == Format.CSV)
            done = f"Exported {rows} labels of {rubric} on {dataset} to {file}."
            self.stdout.write(self.style.SUCCESS(done))
