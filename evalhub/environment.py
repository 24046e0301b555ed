"""Every environment variable evalhub reads, with its default and meaning: the one table settings.py reads
through (env_str refuses a name that is not here) and the documentation's settings page is generated from
(scripts/docs_hooks.py). A new setting is a new row, or start-up fails naming it."""

from dataclasses import dataclass


@dataclass(frozen=True)
class Variable:
    name: str
    default: str  # as a reader sees it
    meaning: str
    group: str


_ROWS: list[tuple[str, str, str]] = []
_GROUPS: dict[str, str] = {}


def _group(title: str, *rows: tuple[str, str, str]) -> None:
    for row in rows:
        _ROWS.append(row)
        _GROUPS[row[0]] = title


_group(
    "Storage and queue",
    ("DATABASE_URL", "SQLite file `var/evalhub.sqlite3`",
     "`postgres://user@host:5432/name` uses PostgreSQL through psycopg 3"),
    ("DATABASE_CONN_MAX_AGE", "`0`", "seconds a PostgreSQL connection is kept between requests"),
    ("CELERY_BROKER_URL", "Celery's filesystem transport in `var/broker/`",
     "`redis://host:6379/0` uses Redis, `amqp://user:password@host:5672//` RabbitMQ"),
    ("CELERY_VISIBILITY_TIMEOUT", "`600`", "Redis redelivers an unacknowledged task after this many seconds"),
    ("EVALHUB_DATA_DIR", "`var/`", "the SQLite file, the broker's folders, the secret key"),
)
_group(
    "Django",
    ("DJANGO_SECRET_KEY", "a random key kept in `var/secret_key`", "set it in production"),
    ("DJANGO_DEBUG", "`0`", "`1` shows Django's technical error pages; never in production"),
    ("DJANGO_ALLOWED_HOSTS", "`localhost,127.0.0.1`", "comma-separated host names the server answers for"),
    ("DJANGO_CSRF_TRUSTED_ORIGINS", "none", "comma-separated origins, e.g. `https://evalhub.example.com`"),
    ("EVALHUB_LOG_LEVEL", "`INFO`", "the root logger's level"),
)
_group(
    "Serving a team",
    ("EVALHUB_HTTPS", "`0`", "`1`: cookies only over HTTPS, HTTP redirected to HTTPS, HSTS"),
    ("EVALHUB_HSTS_SECONDS", "one year", "with `EVALHUB_HTTPS=1`"),
    ("EVALHUB_HSTS_INCLUDE_SUBDOMAINS", "`1`", "with `EVALHUB_HTTPS=1`"),
    ("EVALHUB_HSTS_PRELOAD", "`1`", "with `EVALHUB_HTTPS=1`"),
    ("EVALHUB_BEHIND_PROXY", "`0`",
     "`1`: trust the proxy's `X-Forwarded-Proto` and `X-Forwarded-For` (the address login throttling counts)"),
    ("EVALHUB_PROXY_COUNT", "`1`", "proxies in front of evalhub that each append to `X-Forwarded-For`"),
    ("EVALHUB_LOGIN_FAILURE_LIMIT", "`5`", "wrong passwords for one username from one address before a lockout"),
    ("EVALHUB_LOGIN_COOLOFF_MINUTES", "`15`", "how long a lockout lasts"),
)
_group(
    "Projects and mail",
    ("EVALHUB_PROJECT", "none",
     "the project a management command's slugs belong to (as `--project`); needed with more than one project"),
    ("EVALHUB_DEFAULT_PROJECT", "`default`", "the project a single-team install's data moves into when it migrates"),
    ("EVALHUB_INVITATION_DAYS", "`7`", "how long an invitation into a project may wait to be accepted"),
    ("EMAIL_BACKEND", "`smtp` with `EMAIL_HOST`, else none",
     "`smtp`, `console` (prints mails) or `none` (the members page shows the invitation link instead)"),
    ("EMAIL_HOST", "none", "the SMTP server for invitations and monitor messages"),
    ("EMAIL_PORT", "`25`", "its port"),
    ("EMAIL_HOST_USER", "none", "its user"),
    ("EMAIL_HOST_PASSWORD", "none", "its password"),
    ("EMAIL_USE_TLS", "`0`", "STARTTLS (set this or `EMAIL_USE_SSL`, not both)"),
    ("EMAIL_USE_SSL", "`0`", "TLS from the first byte"),
    ("EMAIL_TIMEOUT", "`10`", "seconds an SMTP exchange may take"),
    ("DEFAULT_FROM_EMAIL", "`evalhub <evalhub@localhost>`", "the sender of evalhub's mail"),
)
_group(
    "Imports and traces",
    ("EVALHUB_IMPORT_MAX_BYTES", "200 MB", "the largest file an import accepts"),
    ("EVALHUB_OTLP_MAX_BYTES", "20 MB", "the largest OTLP request body, unpacked"),
    ("EVALHUB_OTLP_TRACE_WAIT_SECONDS", "`60`",
     "how long a trace whose root span has not come yet waits before it is given up"),
    ("EVALHUB_OTLP_MAX_SPANS", "`10000`", "spans (or log records) in one OTLP request"),
    ("EVALHUB_OTLP_MAX_ATTRIBUTES", "`128`", "attributes of one span, event, link, resource or scope"),
    ("EVALHUB_OTLP_MAX_EVENTS", "`128`", "events of one span, and links"),
    ("EVALHUB_OTLP_MAX_ARRAY", "`1000`", "values of one array or key-value list attribute"),
    ("EVALHUB_OTLP_MAX_DEPTH", "`8`", "arrays and key-value lists inside one another"),
    ("EVALHUB_OTLP_MAX_VALUES", "`200000`", "attribute values of every kind in one request"),
    ("EVALHUB_OTLP_MAX_REQUEST_WAITING", "`1000`",
     "traces without their root span one request may leave waiting (413 over it)"),
    ("EVALHUB_OTLP_MAX_WAITING", "`10000`",
     "traces waiting for their root span one dataset may hold (429 with Retry-After over it)"),
    ("EVALHUB_OTLP_GIVE_UP_BATCH", "`500`", "waiting traces given up in one short transaction"),
    ("EVALHUB_OTLP_CONCURRENCY", "`1`", "OTLP requests one server process receives at once (429 to the others)"),
    ("EVALHUB_VERDICT_EXPORT_TIMEOUT_SECONDS", "`10`",
     "how long one send of verdicts to a project's OTLP endpoint may take before it is retried"),
    ("EVALHUB_OUTBOUND_ALLOW_PRIVATE", "`0`",
     "`1`: evalhub may send exports and webhooks to private, loopback and link-local addresses"),
)
_group(
    "Judging",
    ("EVALHUB_JUDGE_ENV_ALLOW", "empty",
     "comma-separated variable names a judge config may name besides `OPENAI_*`, `ANTHROPIC_*`, `EVALHUB_JUDGE_*`"),
    ("EVALHUB_CHUNK_CASES", "`20`", "cases a run marks done together"),
    ("EVALHUB_EDITOR_TIMEOUT_SECONDS", "`120`", "how long a judge improvement's editor may take to answer"),
    ("EVALHUB_RUN_LEASE_SECONDS", "`120`", "a run held by a worker that stopped answering is taken back after this"),
    ("EVALHUB_RUN_WINDOW_SECONDS", "`60`", "how long one task works a run before it queues the run again"),
    ("EVALHUB_SWEEP_SECONDS", "`30`", "how often the sweep (a worker started with `--beat`) requeues such runs"),
    ("EVALHUB_DRIFT_INTERVAL_SECONDS", "`86400`",
     "how often the drift check re-judges every promoted rubric's dataset"),
    ("EVALHUB_DRIFT_FRESH_SHARE", "`0.05`",
     "the share of unchanged cases each drift check re-judges fresh (at least 20; `0` turns it off)"),
    ("EVALHUB_TRAFFIC_INTERVAL_SECONDS", "`300`", "how often traffic datasets' new cases are judged"),
    ("EVALHUB_MONITOR_INTERVAL_SECONDS", "`60`",
     "how often monitors hand new cases to their judge and deliver messages (a case is judged within this "
     "and the provider's time)"),
)

VARIABLES: dict[str, Variable] = {
    name: Variable(name, default, meaning, _GROUPS[name]) for name, default, meaning in _ROWS
}

# Read by scripts/serve.sh and scripts/start.sh, not by settings.py: documented with the rest.
SCRIPT_VARIABLES: dict[str, Variable] = {
    v.name: v
    for v in (
        Variable("EVALHUB_BIND", "`127.0.0.1:8000`", "where gunicorn listens (`scripts/serve.sh`)", "Serving a team"),
        Variable("WEB_CONCURRENCY", "`2`", "gunicorn worker processes (`scripts/serve.sh`)", "Serving a team"),
        Variable("EVALHUB_WEB_THREADS", "`4`", "threads in each gunicorn worker (`scripts/serve.sh`)",
                 "Serving a team"),
        Variable("EVALHUB_WORKER_CONCURRENCY", "one per CPU", "Celery worker processes (`scripts/serve.sh`)",
                 "Serving a team"),
        Variable("PORT", "`8000`", "the port `scripts/start.sh` serves the demo on", "Storage and queue"),
    )
}


def documented(name: str) -> Variable:
    """The row of `name`; a KeyError names the table so an undocumented setting cannot slip in."""
    try:
        return VARIABLES[name]
    except KeyError:
        raise KeyError(f"{name} is read by settings.py but has no row in evalhub/environment.py") from None
