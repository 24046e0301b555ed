from django.core.management.base import BaseCommand, CommandError

from judges.models import Run


class RunFiguresCommand(BaseCommand):
    """A command that prints one run's figures: a readable summary, or with --json the API's JSON."""

    def add_arguments(self, parser) -> None:
        parser.add_argument("run", type=int, help="the run's id")
        parser.add_argument("--json", action="store_true", dest="as_json", help="print the figures as JSON (unrounded)")

    @staticmethod
    def run_or_error(run_id: int) -> Run:
        run = Run.objects.select_related("config__rubric", "dataset").filter(pk=run_id).first()
        if run is None:
            raise CommandError(f"No run {run_id}.")
        return run
