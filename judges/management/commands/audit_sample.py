from django.core.management.base import BaseCommand, CommandError

from judges.estimates.services import AuditSampleError, audit_sample_draw
from judges.models import AuditDraw, Run


class Command(BaseCommand):
    help = (
        "Draw cases of a run at random for human labels (its audit sample; a second draw adds to it) and "
        "print their external ids, one a line, in the order the labeling queue serves them."
    )

    def add_arguments(self, parser) -> None:
        parser.add_argument("run", type=int, help="the run's id")
        parser.add_argument("--size", type=int, required=True, help="how many cases to draw")
        parser.add_argument("--method", choices=AuditDraw.Method.values, default=AuditDraw.Method.UNIFORM,
                            help="uniform (default), or active: more of the cases the judge is unsure of")
        parser.add_argument("--seed", type=int, default=None, help="the random seed (default: a fresh one)")

    def handle(self, *args, run: int, size: int, method: str, seed: int | None, **options) -> None:
        target = Run.objects.select_related("config").filter(pk=run).first()
        if target is None:
            raise CommandError(f"No run {run}.")
        try:
            drawn = audit_sample_draw(run=target, size=size, method=method, seed=seed, by=None)
        except AuditSampleError as error:
            raise CommandError(str(error)) from None
        for external_id in drawn.external_ids:
            self.stdout.write(external_id)
