import json

from django.core.management.base import BaseCommand, CommandError

from evalhub.projects import add_project_argument, project_for_command
from judges.promotion.gate_config import gate_config
from labeling.importing.files import write_whole


class Command(BaseCommand):
    help = (
        "Write a project's gate config CI reads (the same JSON as GET /api/gates with a token of the project): "
        "stdout, or --output FILE."
    )

    def add_arguments(self, parser) -> None:
        add_project_argument(parser)
        parser.add_argument("--output", "-o", metavar="FILE", help="write here instead of stdout")

    def handle(self, *args, output: str | None, **options) -> None:
        project = project_for_command(options["project"])
        config = gate_config(project=project)
        text = json.dumps(config, indent=2, ensure_ascii=False) + "\n"
        if not output or output == "-":
            self.stdout.write(text, ending="")
            return
        try:
            write_whole(output, [text])  # whole or not at all: a full disk leaves no truncated config
        except OSError as exc:
            raise CommandError(f"Cannot write {output}: {exc.strerror or exc}; nothing was written there.") from None
        count = len(config["rubrics"])
        self.stderr.write(self.style.SUCCESS(
            f"Wrote the gate config of project {project.slug} ({count} rubric(s)) to {output}."
        ))
