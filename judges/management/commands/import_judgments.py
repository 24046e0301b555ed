from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError
from django.db.models import Q

from evalhub.models import Role
from judges.runs.importing import judgments_import
from labeling.importing import ImportRejected
from labeling.management.commands._files import FORMAT_CHOICES, open_input, report_rejection, resolve_format
from labeling.models import Dataset, Rubric


class Command(BaseCommand):
    help = (
        "Import judgments made by another tool (external_id, repeat, verdict, scores, reason, judge) for one "
        "rubric as a finished run of an external judge config, and print the run's id. All or nothing."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("dataset", help="the dataset's slug (its cases must exist)")
        parser.add_argument("file", help="a .jsonl or .csv file; - reads stdin (with --format)")
        parser.add_argument("--rubric", required=True, help="the rubric's slug (it must exist)")
        parser.add_argument("--format", choices=FORMAT_CHOICES, help="instead of the file's extension")
        parser.add_argument("--by", help="the username recorded as the run's creator (default: the first lead)")

    def handle(self, *args, dataset: str, file: str, rubric: str, format: str | None, by: str | None,
               **options) -> None:
        target = Dataset.objects.filter(slug=dataset).first()
        if target is None:
            raise CommandError(f"No dataset {dataset!r}: import its cases first (import_cases).")
        question = Rubric.objects.filter(slug=rubric).first()
        if question is None:
            raise CommandError(f"No rubric {rubric!r}: create it first (its criteria go into the config).")
        user = _user(by)
        fmt = resolve_format(file, format)
        try:
            with open_input(file) as stream:
                result = judgments_import(dataset=target, rubric=question, stream=stream, fmt=fmt,
                                          source_name="stdin" if file == "-" else file, by=user)
        except ImportRejected as rejected:
            raise report_rejection(self, file, rejected) from None
        self.stderr.write(self.style.SUCCESS(f"Imported {file} into {dataset} for {rubric}: {result}."))
        self.stdout.write(str(result.run.pk))  # the id alone on stdout, for scripts


def _user(username: str | None):
    User = get_user_model()
    if username:
        user = User.objects.filter(username=username).first()
        if user is None:
            raise CommandError(f"No user {username!r}.")
        return user
    user = (
        User.objects.filter(Q(is_superuser=True) | Q(role__in=[Role.LEAD, Role.ADMIN]))
        .order_by("pk").first()
    )
    if user is None:
        raise CommandError("No lead exists to record as the run's creator: create one, or pass --by USERNAME.")
    return user
