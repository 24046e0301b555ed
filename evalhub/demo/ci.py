"""The demo's CI environment: what the README's CI lines read when they run against the demo.

scripts/start.sh writes it after load_demo, once the dashboard's address and the stand-in's are known
(the stand-in's port changes on each start): `<data dir>/demo/ci.env`, a shell file that sets the
dashboard's address, an API token with every scope, and the variables the demo's judge
configs name. The token is new on each start (the previous demo token is revoked), shown nowhere else,
and the file is readable by its owner only.
"""

import os
import shlex
import tempfile
from pathlib import Path

from django.conf import settings
from django.db import transaction

from evalhub.demo.judges import DEMO_KEY_ENV, DEMO_URL_ENV
from evalhub.models import ApiToken, Scope, User

CI_TOKEN_NAME = "demo: the README's CI lines (scripts/start.sh)"
# Every scope, so each of the README's API and CI lines works against the demo as written.
CI_SCOPES = list(Scope.values)
URL_ENV, TOKEN_ENV = "EVALHUB_URL", "EVALHUB_TOKEN"


def ci_env_path() -> Path:
    return Path(settings.DATA_DIR) / "demo" / "ci.env"


def write_ci_env(*, server: str, path: Path, by_username: str = "ada") -> Path:
    """Issue the demo's CI token (revoking the one before) and write `path` (mode 0600) for a shell to source."""
    missing = [name for name in (DEMO_URL_ENV, DEMO_KEY_ENV) if not os.environ.get(name)]
    if missing:
        raise ValueError(f"{' and '.join(missing)} not set: start the scripted stand-in first (scripts/start.sh does)")
    with transaction.atomic():
        for token in ApiToken.objects.filter(name=CI_TOKEN_NAME, revoked_at__isnull=True):
            token.revoke()
        _, raw = ApiToken.issue(name=CI_TOKEN_NAME, scopes=CI_SCOPES,
                                created_by=User.objects.get(username=by_username))
    variables = {URL_ENV: server.rstrip("/"), TOKEN_ENV: raw,
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
