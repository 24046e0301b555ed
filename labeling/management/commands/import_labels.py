from django.core.management.base import BaseCommand, CommandError

from evalhub.projects import add_project_argument, project_for_command
from labeling.importing import ImportRejected
from labeling.importing.labels import labels_import
from labeling.management.commands._files import (
    FORMAT_CHOICES,
    open_input,
    report_rejection,
    resolve_format,
)


class Command(BaseCommand):
    help = (
        "Import reviewers' labels (external_id, reviewer, verdict, note) for one rubric of the dataset's project. "
        "The rubric is created as a draft if missing; reviewers new to evalhub get accounts (no usable password) "
        "as reviewers of the project, and are assigned to the dataset; an account that is not a member of the "
        "project is refused, and so is a reviewer of the project not assigned to the dataset unless "
        "--assign-reviewers. A reviewer's existing label is revised. All or nothing."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("dataset", help="the dataset's slug (it must exist)")
        parser.add_argument("file", help="a .jsonl or .csv file; - reads stdin (with --format)")
        parser.add_argument("--rubric", required=True, help="the rubric's slug")
        parser.add_argument("--format", choices=FORMAT_CHOICES, help="instead of the file's extension")
        parser.add_argument("--assign-reviewers", action="store_true",
                            help="assign the project's reviewers the file names to the dataset (it opens its cases to "
                                 "them; audited); without it such a reviewer is refused")
        add_project_argument(parser)

    def handle(self, *args, dataset: str, file: str, rubric: str, format: str | None, assign_reviewers: bool,
               **options) -> None:
        project = project_for_command(options["project"])
        target = project.datasets.filter(slug=dataset).first()
        if target is None:
            raise CommandError(f"No dataset {dataset!r} in the project {project.slug}: import its cases first "
                               "(import_cases).")
        fmt = resolve_format(file, format)
        try:
            with open_input(file) as stream:
                result = labels_import(dataset=target, rubric_slug=rubric, stream=stream, fmt=fmt,
                                       assign_reviewers=assign_reviewers)
        except ImportRejected as rejected:
            raise report_rejection(self, file, rejected) from None
        self.stdout.write(self.style.SUCCESS(f"Imported {file} into {dataset} for {rubric}: {result}."))
