from django.core.management.base import BaseCommand, CommandError

from evalhub.projects import add_project_argument, project_for_command
from evalhub.templatetags.display import usd
from judges.models import JudgeConfig, SynthesisJob
from judges.synthetic.services import SynthesisError, synthesis_editor, synthesis_start, synthesis_work
from judges.synthetic.writing import MAX_CASES, SYNTHETIC_TYPES


def _types(value: str) -> list[str]:
    return [part.strip() for part in value.split(",") if part.strip()]


class Command(BaseCommand):
    help = (
        "Have the editor model write N new inputs a customer could send (adversarial, near misses, ordinary), "
        "from the dataset's policy documents and those named, into the dataset as cases with no answer yet. "
        "The work runs here, in this process, as the page's job does in a worker."
    )

    def add_arguments(self, parser) -> None:
        add_project_argument(parser)
        parser.add_argument("dataset", help="the dataset's slug")
        parser.add_argument("--n", type=int, required=True, help=f"how many cases to ask for (1 to {MAX_CASES})")
        parser.add_argument("--policy", action="append", default=[], metavar="SLUG",
                            help="a policy document to write from, besides the dataset's own list (repeatable)")
        parser.add_argument("--types", type=_types, default=list(SYNTHETIC_TYPES),
                            help=f"comma-separated, among {','.join(SYNTHETIC_TYPES)} (default: all)")
        parser.add_argument("--seed", type=int, default=None, help="varies the cases (default: a fresh one)")
        parser.add_argument("--from-failed-dev", action="store_true",
                            help="also show the editor the dataset's dev cases the reviewers failed (never holdout)")
        parser.add_argument("--editor-config", type=int, default=None, metavar="CONFIG_ID",
                            help="the project's judge config whose primary writes (default: its newest config with a "
                                 "model)")
        parser.add_argument("--editor-model", default="", metavar="MODEL", help="another pinned model for it")

    def handle(self, *args, dataset: str, n: int, policy: list[str], types: list[str], seed: int | None,
               from_failed_dev: bool, editor_config: int | None, editor_model: str, **options) -> None:
        project = project_for_command(options["project"])
        target = project.datasets.filter(slug=dataset).first()
        if target is None:
            raise CommandError(f"No dataset {dataset!r} in project {project.slug}.")
        config = None
        if editor_config is not None:
            config = (JudgeConfig.objects.select_related("rubric")
                      .filter(pk=editor_config, rubric__project=project, external=False).first())
            if config is None:
                raise CommandError(f"No judge config {editor_config} in project {project.slug}.")
        try:
            editor = synthesis_editor(project=project, config=config, model=editor_model)
            job = synthesis_start(dataset=target, n=n, types=types, editor=editor, policies=policy,
                                  from_failed_dev=from_failed_dev, seed=seed, by=None, queue=False)
        except SynthesisError as error:
            raise CommandError(str(error)) from None
        estimate = ("unknown (the model has no price)" if job.estimate_usd is None
                    else f"at most {usd(job.estimate_usd)}")
        self.stdout.write(f"synthesis {job.pk}: editor {editor.model} ({editor.provider}), seed {job.seed}, "
                          f"policies {', '.join(f'{p["slug"]} v{p["version"]}' for p in job.policies)}; "
                          f"estimated cost {estimate}")
        synthesis_work(job_id=job.pk)
        job.refresh_from_db()
        cost = "unknown (the model has no price)" if job.cost_usd is None else usd(job.cost_usd)
        if job.status != SynthesisJob.Status.FINISHED:
            raise CommandError(f"synthesis {job.pk} failed, nothing written: {job.error} (cost {cost})")
        self.stdout.write(
            f"wrote {job.written} case(s) into {target.slug}; dropped {job.duplicates} duplicate(s) of existing "
            f"inputs" + (f"; left out {job.beyond_n} beyond the {job.n} asked for" if job.beyond_n else "")
            + f"; cost {cost}"
        )
        for external_id in job.external_ids:
            self.stdout.write(external_id)
