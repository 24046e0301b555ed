"""Which environment variables a judge may read. One function decides, for the app and the CI command.

A config names the variables that hold its endpoint and its key; whoever can save a config (or
hand CI a gate config) could otherwise name any secret of the process, which the SDK would send to
the provider as a bearer token. Allowed: the providers' usual names, any `EVALHUB_JUDGE_*` name,
and names the operator adds; some names are refused even when the operator lists them.
"""

import re
from collections.abc import Iterable
from typing import Any

from .config import JudgeConfig
from .credentials import secret_kinds

ALLOWED_ENV_NAMES: tuple[str, ...] = ("OPENAI_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL")
ALLOWED_ENV_PREFIX = "EVALHUB_JUDGE_"
# The app's and the CI runner's own secrets. Compared without case: some platforms ignore it.
NEVER_ALLOWED_ENV_NAMES: tuple[str, ...] = ("DATABASE_URL",)
NEVER_ALLOWED_ENV_PREFIXES: tuple[str, ...] = (
    "DJANGO_",
    "CELERY_",
    "EVALHUB_",
    "GITHUB_",
    "ACTIONS_",
    "RUNNER_",
    "CI_",
)
_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def is_never_allowed(name: str) -> bool:
    upper = name.upper()
    if upper.startswith(ALLOWED_ENV_PREFIX):
        return False
    return upper in NEVER_ALLOWED_ENV_NAMES or upper.startswith(NEVER_ALLOWED_ENV_PREFIXES)


def parse_env_allow(text: str) -> tuple[str, ...]:
    """The names of a comma-separated list (EVALHUB_JUDGE_ENV_ALLOW); ValueError names a bad one."""
    names = tuple(n.strip() for n in text.split(",") if n.strip())
    for name in names:
        if not _NAME_RE.match(name):
            raise ValueError(f"{name!r} is not an environment variable name")
    return names


def _shown(name: str) -> str:
    # A key pasted where a name belongs can look like a name (ghp_…): never echo what looks like one.
    if name != name.upper() or secret_kinds(name):
        return "the variable it names"
    return name


def env_name_refusals(config: JudgeConfig | dict[str, Any], *, extra_allowed: Iterable[str] = ()) -> list[str]:
    """One message per environment variable the config names that a judge may not read; [] when all may.

    Each message starts with the field (`api_key_env`, `secondary.base_url_env`…), like the config's
    own validation errors. `extra_allowed` is the operator's list (EVALHUB_JUDGE_ENV_ALLOW, --allow-env).
    """
    cfg = JudgeConfig.from_dict(config)
    extra = set(extra_allowed)
    fields = [("base_url_env", cfg.base_url_env), ("api_key_env", cfg.api_key_env)]
    if cfg.secondary is not None:
        fields += [("secondary.base_url_env", cfg.secondary.base_url_env)]
        fields += [("secondary.api_key_env", cfg.secondary.api_key_env)]
    for part in ("fallback", "second_opinion", "adjudicator"):
        judge = getattr(cfg, part)
        if judge is not None:
            fields += [(f"{part}.base_url_env", judge.base_url_env), (f"{part}.api_key_env", judge.api_key_env)]
    if cfg.semantic is not None:
        fields += [("semantic.base_url_env", cfg.semantic.base_url_env)]
        fields += [("semantic.api_key_env", cfg.semantic.api_key_env)]
    refusals = []
    for field, name in fields:
        if name is None:
            continue  # the provider's usual variable, which is allowed
        if is_never_allowed(name):
            refusals.append(
                f"{field}: {_shown(name)} is never allowed: a judge may not read the app's or the CI runner's "
                f"variables ({', '.join(NEVER_ALLOWED_ENV_NAMES)}, "
                f"{', '.join(p + '*' for p in NEVER_ALLOWED_ENV_PREFIXES)} but {ALLOWED_ENV_PREFIX}*), even when listed"
            )
        elif name not in ALLOWED_ENV_NAMES and not name.startswith(ALLOWED_ENV_PREFIX) and name not in extra:
            refusals.append(
                f"{field}: {_shown(name)} is not an allowed variable: use {', '.join(ALLOWED_ENV_NAMES)}, "
                f"a name starting {ALLOWED_ENV_PREFIX}, or one the operator allows "
                f"(EVALHUB_JUDGE_ENV_ALLOW on the server, --allow-env in CI)"
            )
    return refusals
