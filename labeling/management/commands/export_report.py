from django.core.management.base import BaseCommand, CommandError

from evalhub.projects import add_project_argument, project_for_command
from labeling.datasets.exporting import report_export
from labeling.management.commands._files import write_output


class Command(BaseCommand):
    help = (
        "Export a report CSV of a dataset's cases (external_id, category, split, input, output) with "
        "their human verdict per rubric, one column per rubric that has labels on the dataset. Made for "
        "spreadsheets: a cell starting with =, +, -, @, a tab or CR is prefixed with an apostrophe."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("dataset", help="the dataset's slug")
        parser.add_argument("file", help="a .csv file; - writes to stdout")
        add_project_argument(parser)

    def handle(self, *args, dataset: str, file: str, **options) -> None:
        project = project_for_command(options["project"])
        target = project.datasets.filter(slug=dataset).first()
        if target is None:
            raise CommandError(f"No dataset {dataset!r} in the project {project.slug}.")
        pieces = write_output(file, report_export(dataset=target))
        if file != "-":
            done = f"Wrote the report of {pieces - 1} cases of {dataset} to {file}."
            self.stdout.write(self.style.SUCCESS(done))
