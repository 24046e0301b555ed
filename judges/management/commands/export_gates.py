import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from judges.promotion.gate_config import gate_config


class Command(BaseCommand):
    help = "Write the gate config CI reads (the same JSON as GET /api/gates): stdout, or --output FILE."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--output", "-o", metavar="FILE", help="write here instead of stdout")

    def handle(self, *args, output: str | None, **options) -> None:
        config = gate_config()
        text = json.dumps(config, indent=2, ensure_ascii=False) + "\n"
        if not output or output == "-":
            self.stdout.write(text, ending="")
            return
        try:
            Path(output).write_text(text, encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"Cannot write {output}: {exc.strerror or exc}") from None
        count = len(config["rubrics"])
        self.stderr.write(self.style.SUCCESS(f"Wrote the gate config ({count} rubric(s)) to {output}."))
