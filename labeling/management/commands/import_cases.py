from django.core.exceptions import ValidationError
from django.core.management.base import BaseCommand, CommandError
from django.core.validators import validate_slug
from django.db import transaction

from evalhub.models import Project, User
from evalhub.projects import add_project_argument, project_for_command
from labeling.datasets.forms import RESERVED_SLUGS
from labeling.importing import ImportRejected
from labeling.importing.cases import cases_import
from labeling.management.commands._files import (
    FORMAT_CHOICES,
    open_input,
    report_rejection,
    resolve_format,
)
from labeling.models import Rubric
from labeling.otlp.services import otlp_file_import

OTLP = "otlp"  # a file of OTLP/JSON lines (docs/otlp.md): one case a trace


class Command(BaseCommand):
    help = (
        "Import cases from a JSONL or CSV file into a dataset of a project (created if missing). All or nothing: "
        "any bad line rejects the file, and every error is listed with its line number. --format otlp reads "
        "OTLP/JSON lines (the OpenTelemetry Collector's file exporter): one case a trace."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("dataset", help="the dataset's slug")
        parser.add_argument("file", help="a .jsonl or .csv file; - reads stdin (with --format)")
        add_project_argument(parser)
        parser.add_argument("--format", choices=[*FORMAT_CHOICES, OTLP],
                            help="instead of the file's extension; otlp: OTLP/JSON lines, one case a trace")
        parser.add_argument("--update", action="store_true",
                            help="update cases whose external_id exists already (otherwise an error)")
        parser.add_argument("--name", help="the dataset's name, if this creates it")
        parser.add_argument("--rubric", help="the rubric a humanVerdict column answers (required when rows carry one)")
        parser.add_argument("--by", metavar="USER",
                            help="the reviewer whose labels the humanVerdict column becomes (required with it)")

    def handle(self, *args, dataset: str, file: str, format: str | None, update: bool, name: str | None,
               rubric: str | None, by: str | None, **options) -> None:
        try:
            validate_slug(dataset)
        except ValidationError:
            raise CommandError(f"{dataset!r} is not a valid slug (letters, digits, - and _).") from None
        if dataset in RESERVED_SLUGS:  # the dataset's pages would be the page that creates one
            raise CommandError(f"{dataset!r} is reserved; choose another slug.")
        project = project_for_command(options["project"])
        fmt = None if format == OTLP else resolve_format(file, format)
        answers, reviewer = self._verdict_owner(project, rubric, by)
        if fmt is None and answers is not None:
            raise CommandError("--rubric and --by take human verdicts from case rows; traces carry none.")
        try:
            # The dataset is created in the same transaction: a rejected file leaves no empty dataset.
            with open_input(file) as stream, transaction.atomic():
                target, created = project.datasets.get_or_create(slug=dataset, defaults={"name": name or dataset})
                if fmt is None:
                    result = otlp_file_import(dataset=target, stream=stream, update=update)
                else:
                    result = cases_import(dataset=target, stream=stream, fmt=fmt, update=update, rubric=answers,
                                          by=reviewer)
        except ImportRejected as rejected:
            raise report_rejection(self, file, rejected) from None
        made = " (a new dataset)" if created else ""
        self.stdout.write(self.style.SUCCESS(f"Imported {file} into {dataset} of {project.slug}{made}: {result}."))

    @staticmethod
    def _verdict_owner(project: Project, rubric: str | None, by: str | None) -> tuple[Rubric | None, User | None]:
        """The rubric and the reviewer a humanVerdict column is imported as, both of the project: both named, or
        neither."""
        if (rubric is None) != (by is None):
            raise CommandError("--rubric and --by go together: the rubric a humanVerdict answers, and whose labels "
                               "they become.")
        if rubric is None:
            return None, None
        found = project.rubrics.filter(slug=rubric).first()
        if found is None:
            raise CommandError(f"No rubric {rubric!r} in the project {project.slug}.")
        user = User.objects.filter(username=by, is_active=True).first()
        if user is None:
            raise CommandError(f"No active user {by!r}.")
        if user.role_in(project) is None:
            raise CommandError(f"{by!r} is not a member of the project {project.slug}: their labels would count "
                               "in a project they cannot open.")
        return found, user
