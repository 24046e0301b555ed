"""demo_ci_env: write the demo's CI environment (evalhub/demo/ci.py); scripts/start.sh runs it after load_demo."""

from django.core.management.base import BaseCommand, CommandError

from evalhub.demo.ci import CI_SCOPES, CODE_SCOPES, ci_env_path, write_ci_env
from evalhub.demo.projects import CODE_PROJECT, STORE_PROJECT


class Command(BaseCommand):
    help = (f"Issue new API tokens for the demo's CI lines (revoking the previous ones): one of {STORE_PROJECT} with "
            f"every scope, one of {CODE_PROJECT} that only reads; write them, the dashboard's address and the "
            "stand-in's variables to <data dir>/demo/ci.env (mode 0600).")

    def add_arguments(self, parser) -> None:
        parser.add_argument("--server", required=True, help="the dashboard's address, e.g. http://127.0.0.1:8000")

    def handle(self, *args, **options) -> None:
        try:
            path = write_ci_env(server=options["server"], path=ci_env_path())
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"CI environment for the README's CI lines in {path} (readable by you only): the "
                          f"dashboard's address, a new token of {STORE_PROJECT} ({', '.join(CI_SCOPES)}), a new "
                          f"token of {CODE_PROJECT} ({', '.join(CODE_SCOPES)}) and the stand-in's variables.")
