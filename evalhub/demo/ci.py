"""The demo's CI environment: what the README's CI lines read when they run against the demo.

scripts/start.sh writes it after load_demo, once the dashboard's address and the stand-in's are known
(the stand-in's port changes on each start): `<data dir>/demo/ci.env`, a shell file that sets the
dashboard's address, an API token of the store-support project with every scope (what the README's CI lines
use), a read-only token of the code-review project (to see that those lines leave it alone), and the variables
the demo's judge configs name. The tokens are new on each start (the previous demo tokens are revoked), shown
nowhere else, and the file is readable by its owner only.
"""

import os
import shlex
import tempfile
from pathlib import Path

from django.conf import settings
from django.db import transaction

from evalhub.demo.judges import DEMO_KEY_ENV, DEMO_URL_ENV
from evalhub.demo.projects import ADMIN, CODE_PROJECT, STORE_PROJECT
from evalhub.members.services import token_create, token_revoke
from evalhub.models import Project, Scope, User

CI_TOKEN_NAME = "demo: the README's CI lines (scripts/start.sh)"
# Every scope, so each of the README's API and CI lines works against the demo as written.
CI_SCOPES = list(Scope.values)
URL_ENV, TOKEN_ENV = "EVALHUB_URL", "EVALHUB_TOKEN"
# The second project's token: reads only, so no line can change that project through it.
CODE_TOKEN_NAME = "demo: code-review, read only (scripts/start.sh)"
CODE_SCOPES = [Scope.CASES_READ.value, Scope.RUNS_READ.value, Scope.GATES_READ.value, Scope.POLICIES_READ.value]
CODE_TOKEN_ENV = "EVALHUB_CODE_REVIEW_TOKEN"


def ci_env_path() -> Path:
    return Path(settings.DATA_DIR) / "demo" / "ci.env"


def _reissue(*, project_slug: str, name: str, scopes: list[str], by: User) -> str:
    """A new token of the project named `name`, the project's earlier ones of that name revoked (both audited, as
    on the project's Tokens page); the plain token."""
    project = Project.objects.filter(slug=project_slug).first()
    if project is None:
        raise ValueError(f"No project {project_slug!r}: load the demo first (manage.py load_demo)")
    for token in project.tokens.filter(name=name, revoked_at__isnull=True):
        token_revoke(token=token, by=by)
    _, raw = token_create(project=project, name=name, scopes=scopes, by=by)
    return raw


def write_ci_env(*, server: str, path: Path, by_username: str = ADMIN) -> Path:
    """Issue the demo's CI tokens (revoking the ones before) and write `path` (mode 0600) for a shell to source."""
    missing = [name for name in (DEMO_URL_ENV, DEMO_KEY_ENV) if not os.environ.get(name)]
    if missing:
        raise ValueError(f"{' and '.join(missing)} not set: start the scripted stand-in first (scripts/start.sh does)")
    by = User.objects.get(username=by_username)
    with transaction.atomic():
        store = _reissue(project_slug=STORE_PROJECT, name=CI_TOKEN_NAME, scopes=CI_SCOPES, by=by)
        code = _reissue(project_slug=CODE_PROJECT, name=CODE_TOKEN_NAME, scopes=CODE_SCOPES, by=by)
    variables = {URL_ENV: server.rstrip("/"), TOKEN_ENV: store, CODE_TOKEN_ENV: code,
                 DEMO_URL_ENV: os.environ[DEMO_URL_ENV], DEMO_KEY_ENV: os.environ[DEMO_KEY_ENV]}
    text = "# The demo's CI environment, written by scripts/start.sh on each start: `. var/demo/ci.env`\n" + "".join(
        f"export {name}={shlex.quote(value)}\n" for name, value in variables.items()
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, partial = tempfile.mkstemp(dir=path.parent, prefix=".ci-env-")  # mode 0600 from the start
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(partial, path)
    return path
