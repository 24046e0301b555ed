from django.core.management.base import BaseCommand, CommandError

from evalhub.projects import add_project_argument, project_for_command
from judges.management.acting_user import acting_user
from judges.runs.importing import judgments_import, tool_judgments_import
from judges.runs.tool_results import TOOLS
from labeling.importing import ImportRejected
from labeling.management.commands._files import FORMAT_CHOICES, open_input, report_rejection, resolve_format


class Command(BaseCommand):
    help = (
        "Import judgments made by another tool (external_id, repeat, verdict, scores, reason, judge) for one "
        "rubric as a finished run of an external judge config, and print the run's id. All or nothing. "
        "--format promptfoo reads `promptfoo eval -o results.json`; --format deepeval a DeepEval test run "
        "(test_run_*.json)."
    )

    def add_arguments(self, parser) -> None:
        add_project_argument(parser)
        parser.add_argument("dataset", help="the dataset's slug (its cases must exist)")
        parser.add_argument("file", help="a .jsonl or .csv file; - reads stdin (with --format)")
        parser.add_argument("--rubric", required=True, help="the rubric's slug (it must exist)")
        parser.add_argument("--format", choices=[*FORMAT_CHOICES, *TOOLS],
                            help="instead of the file's extension; promptfoo or deepeval for those tools' results")
        parser.add_argument("--match-var", metavar="NAME",
                            help="promptfoo, deepeval: what holds the case's external_id — a promptfoo test's var, a "
                                 "key of a DeepEval test case's additional_metadata, or `name` for its name "
                                 "(default: external_id)")
        parser.add_argument("--metric", metavar="NAME",
                            help="promptfoo, deepeval: take this assertion's (by its metric, else its type) or "
                                 "metric's verdict, not the whole test's")
        parser.add_argument("--by", help="the username recorded as the run's creator, a lead of the project (default: "
                                         "its first lead)")

    def handle(self, *args, dataset: str, file: str, rubric: str, format: str | None, by: str | None,
               match_var: str | None, metric: str | None, **options) -> None:
        project = project_for_command(options["project"])
        target = project.datasets.filter(slug=dataset).first()
        if target is None:
            raise CommandError(
                f"No dataset {dataset!r} in project {project.slug}: import its cases first (import_cases)."
            )
        question = project.rubrics.filter(slug=rubric).first()
        if question is None:
            raise CommandError(f"No rubric {rubric!r} in project {project.slug}: create it first (its criteria go into "
                               "the config).")
        if format not in TOOLS and (match_var or metric):
            raise CommandError("--match-var and --metric go with --format promptfoo or --format deepeval.")
        if format is None and file.lower().endswith(".json"):
            raise CommandError("A .json file is another tool's results: say --format promptfoo or --format deepeval.")
        user = acting_user(by, project=project)
        source_name = "stdin" if file == "-" else file
        try:
            if format in TOOLS:
                with open_input(file) as stream:
                    result = tool_judgments_import(
                        dataset=target, rubric=question, stream=stream, tool=format,
                        match_var=match_var or "external_id", metric=metric, source_name=source_name, by=user,
                    )
            else:
                fmt = resolve_format(file, format)
                with open_input(file) as stream:
                    result = judgments_import(dataset=target, rubric=question, stream=stream, fmt=fmt,
                                              source_name=source_name, by=user)
        except ImportRejected as rejected:
            raise report_rejection(self, file, rejected) from None
        self.stderr.write(self.style.SUCCESS(f"Imported {file} into {dataset} for {rubric}: {result}."))
        self.stdout.write(str(result.run.pk))  # the id alone on stdout, for scripts

