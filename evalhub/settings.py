"""evalhub settings: one module, read from the environment.

Unset DATABASE_URL and CELERY_BROKER_URL give the embedded default (SQLite, and Celery on kombu's
filesystem transport in a folder beside the database). A bad value stops start-up with a message
that names the variable.
"""

import os
import re
import secrets
from datetime import timedelta
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from evalhub.environment import documented

BASE_DIR = Path(__file__).resolve().parent.parent


def env_str(name: str, default: str = "") -> str:
    documented(name)  # every variable read here has its row in evalhub/environment.py, the settings page's source
    return os.environ.get(name, default).strip()


def env_bool(name: str, default: bool = False) -> bool:
    raw = env_str(name).lower()
    if not raw:
        return default
    if raw in {"1", "true", "yes", "on"}:
        return True
    if raw in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name}={raw!r} is not a boolean: use 1/0, true/false, yes/no or on/off.")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    raw = env_str(name)
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a whole number.") from None
    if minimum is not None and value < minimum:
        raise ImproperlyConfigured(f"{name}={raw!r}: it must be at least {minimum}.")
    return value


def env_share(name: str, default: float) -> float:
    """A fraction from 0 to 1."""
    raw = env_str(name)
    if not raw:
        return default
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not 0 <= value <= 1:
        raise ImproperlyConfigured(f"{name}={raw!r} is not a fraction from 0 to 1 (0.05 is 5 %).")
    return value


def env_names(name: str) -> tuple[str, ...]:
    """A comma-separated list of environment variable names (blank entries dropped)."""
    names = tuple(n.strip() for n in env_str(name).split(",") if n.strip())
    bad = [n for n in names if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", n)]
    if bad:
        raise ImproperlyConfigured(f"{name}: {', '.join(map(repr, bad))} is not an environment variable name.")
    return names


DATA_DIR = Path(env_str("EVALHUB_DATA_DIR") or BASE_DIR / "var")
DATA_DIR.mkdir(parents=True, exist_ok=True)


def _secret_key() -> str:
    """DJANGO_SECRET_KEY, else a random key kept in a file of the data folder (never in the database)."""
    if key := env_str("DJANGO_SECRET_KEY"):
        return key
    key_file = DATA_DIR / "secret_key"
    if not key_file.exists():
        key_file.write_text(secrets.token_urlsafe(50))
        key_file.chmod(0o600)
    return key_file.read_text().strip()


SECRET_KEY = _secret_key()
DEBUG = env_bool("DJANGO_DEBUG", False)
ALLOWED_HOSTS = [h.strip() for h in env_str("DJANGO_ALLOWED_HOSTS", "localhost,127.0.0.1").split(",") if h.strip()]
CSRF_TRUSTED_ORIGINS = [o.strip() for o in env_str("DJANGO_CSRF_TRUSTED_ORIGINS").split(",") if o.strip()]

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "axes",
    "evalhub",
    "labeling",
    "judges",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    # Static files straight from the web process, compressed and cached forever (hashed names).
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    # A NUL character in the path, the query or a form is 400 before any view reads it (evalhub/params.py).
    "evalhub.params.NulRefusedMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Every page needs login; API views opt out and authenticate with a token instead.
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    # Last, as django-axes asks: turns a login refused for too many failures into the lockout page.
    "axes.middleware.AxesMiddleware",
]

ROOT_URLCONF = "evalhub.urls"
WSGI_APPLICATION = "evalhub.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "django.template.context_processors.csp",
                "evalhub.context_processors.project",
            ],
        },
    },
]


# SQLite serves a team and a run at once (the web server's threads and the worker's processes all
# write): the write-ahead log lets reads go on while one connection writes; a writer waits up to
# `timeout` seconds for the lock instead of failing at once with "database is locked"; and every
# transaction takes the write lock when it begins (IMMEDIATE), so none fails half-way when it turns
# from reading to writing after another writer got in first (the one case no timeout can wait out).
SQLITE_OPTIONS = {
    "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL",
    "transaction_mode": "IMMEDIATE",
    "timeout": 30,
}


def _database() -> dict[str, Any]:
    url = env_str("DATABASE_URL")
    if not url:
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": DATA_DIR / "evalhub.sqlite3", "OPTIONS": SQLITE_OPTIONS}
    scheme = urlsplit(url).scheme
    if scheme not in {"postgres", "postgresql", "sqlite"}:
        raise ImproperlyConfigured(
            f"DATABASE_URL has the scheme {scheme!r}; evalhub supports postgres:// (psycopg 3) or sqlite://."
        )
    try:
        database = dj_database_url.parse(url, conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 0))
    except ValueError as exc:
        raise ImproperlyConfigured(f"DATABASE_URL could not be read: {exc}") from None
    if database["ENGINE"] == "django.db.backends.sqlite3":
        database["OPTIONS"] = {**SQLITE_OPTIONS, **database.get("OPTIONS", {})}
    return cast(dict[str, Any], database)  # dj_database_url's DBConfig, a TypedDict


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "evalhub.User"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# Login throttling (django-axes): after EVALHUB_LOGIN_FAILURE_LIMIT wrong passwords for one username from
# one address, that pair is locked out for EVALHUB_LOGIN_COOLOFF_MINUTES (or until an admin resets it:
# `manage.py axes_reset_username NAME`, or Admin › Access attempts); a successful login resets the count.
AUTHENTICATION_BACKENDS = [
    "evalhub.backends.LoginThrottleBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("EVALHUB_LOGIN_FAILURE_LIMIT", 5)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("EVALHUB_LOGIN_COOLOFF_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "evalhub.views.login_locked_out"

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = DATA_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)  # WhiteNoise warns about a missing folder before the first collectstatic
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    # collectstatic (scripts/serve.sh runs it) writes hashed, compressed copies that WhiteNoise serves;
    # before it ran, the source folders are served under plain names (evalhub/static_storage.py).
    "staticfiles": {"BACKEND": "evalhub.static_storage.StaticStorage"},
}
WHITENOISE_USE_FINDERS = DEBUG or not (STATIC_ROOT / "staticfiles.json").exists()

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False  # htmx reads no cookie: the token travels in hx-headers on <body>.
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
# Agent outputs are untrusted text: no inline script may run, whatever slips into a page.
SECURE_CSP = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'", "data:"],
    "object-src": ["'none'"],
    "base-uri": ["'none'"],
    "frame-ancestors": ["'none'"],
    "form-action": ["'self'"],
}

# Serving a team (scripts/serve.sh): over HTTPS, cookies go only over HTTPS and browsers are told to
# come back only over HTTPS; behind a reverse proxy that ends TLS, its X-Forwarded-Proto says the
# request was HTTPS (the proxy must set it, overwriting what a client sent) and X-Forwarded-For whose
# address a login came from.
EVALHUB_HTTPS = env_bool("EVALHUB_HTTPS", False)
EVALHUB_BEHIND_PROXY = env_bool("EVALHUB_BEHIND_PROXY", False)
if EVALHUB_HTTPS:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = True
    SECURE_HSTS_SECONDS = env_int("EVALHUB_HSTS_SECONDS", 365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("EVALHUB_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("EVALHUB_HSTS_PRELOAD", True)
if EVALHUB_BEHIND_PROXY:
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    # Each proxy appends the address it saw to X-Forwarded-For, so with N proxies the client's address
    # is the N-th entry from the right (ipware counts the proxies listed there: N - 1); entries to its
    # left are whatever the client sent and are ignored.
    AXES_IPWARE_META_PRECEDENCE_ORDER = ["HTTP_X_FORWARDED_FOR", "REMOTE_ADDR"]
    AXES_IPWARE_PROXY_COUNT = max(env_int("EVALHUB_PROXY_COUNT", 1), 1) - 1
    IPWARE_STRICT = False  # a client-sent X-Forwarded-For makes the chain longer: still use our entry

# Uploads: the import page enforces its own limit with a clear message (labeling.importing).
EVALHUB_IMPORT_MAX_BYTES = env_int("EVALHUB_IMPORT_MAX_BYTES", 200 * 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
FILE_UPLOAD_MAX_MEMORY_SIZE = 10 * 1024 * 1024
# The OTLP receiver (docs/otlp.md): a request's body as sent and unpacked (a batch of 512 spans with their
# messages is a few MB), and how long a trace whose root span has not come is kept waiting for it.
EVALHUB_OTLP_MAX_BYTES = env_int("EVALHUB_OTLP_MAX_BYTES", 20 * 1024 * 1024, minimum=1)
# The wait is also the give-up task's period: 0 would run it without a pause.
EVALHUB_OTLP_TRACE_WAIT_SECONDS = env_int("EVALHUB_OTLP_TRACE_WAIT_SECONDS", 60, minimum=1)
# Requests evalhub sends to addresses a project chose (evalhub/outbound.py) go only to public addresses unless
# this is set (a private network where the OTLP backend or the webhook receiver lives; the tests).
EVALHUB_OUTBOUND_ALLOW_PRIVATE = env_bool("EVALHUB_OUTBOUND_ALLOW_PRIVATE", False)
# How long one send of exported verdicts (judges/export) may take before it is retried.
EVALHUB_VERDICT_EXPORT_TIMEOUT_SECONDS = env_int("EVALHUB_VERDICT_EXPORT_TIMEOUT_SECONDS", 10, minimum=1)


def _broker() -> tuple[str, dict]:
    url = env_str("CELERY_BROKER_URL")
    if not url:
        # No broker server: kombu's filesystem transport in folders beside the database.
        folder = DATA_DIR / "broker"
        for sub in ("queue", "processed", "control"):
            (folder / sub).mkdir(parents=True, exist_ok=True)
        return "filesystem://", {
            "data_folder_in": str(folder / "queue"),
            "data_folder_out": str(folder / "queue"),
            "processed_folder": str(folder / "processed"),
            # kombu's default is ./control, beside wherever a process was started
            "control_folder": str(folder / "control"),
            "store_processed": False,
        }
    scheme = urlsplit(url).scheme
    if scheme in {"amqp", "amqps"}:
        # RabbitMQ redelivers an unacknowledged task as soon as its worker's connection drops.
        return url, {}
    if scheme not in {"redis", "rediss"}:
        raise ImproperlyConfigured(
            f"CELERY_BROKER_URL has the scheme {scheme!r}; evalhub uses redis:// (rediss://) or amqp:// (amqps://)."
        )
    # Redis redelivers an unacknowledged task only after visibility_timeout; run leases are shorter
    # still, so this only bounds how long a lost message waits.
    return url, {"visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 600)}


CELERY_BROKER_URL, CELERY_BROKER_TRANSPORT_OPTIONS = _broker()
CELERY_TASK_ALWAYS_EAGER = False  # eager mode is for unit tests only, set by their fixtures
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# Environment variables a judge config may name beyond OPENAI_*/ANTHROPIC_* keys and URLs and
# EVALHUB_JUDGE_* (judges.engine.envnames; the app's own, DJANGO_* and the like, stay refused).
EVALHUB_JUDGE_ENV_ALLOW = env_names("EVALHUB_JUDGE_ENV_ALLOW")

# Run work (judges.runs.worker): a task holds the run's lease, extending it every second while alive, and
# works the run's cases, read ahead a chunk at a time, for a window of time before it queues the run again.
EVALHUB_CHUNK_CASES = env_int("EVALHUB_CHUNK_CASES", 20)
# How long a judge improvement's editor may take to answer (docs/improving.md): it writes more than a verdict.
EVALHUB_EDITOR_TIMEOUT_SECONDS = env_int("EVALHUB_EDITOR_TIMEOUT_SECONDS", 120, minimum=1)
EVALHUB_RUN_LEASE_SECONDS = env_int("EVALHUB_RUN_LEASE_SECONDS", 120)
EVALHUB_RUN_WINDOW_SECONDS = env_int("EVALHUB_RUN_WINDOW_SECONDS", 60)
EVALHUB_SWEEP_SECONDS = env_int("EVALHUB_SWEEP_SECONDS", 30)
# The sweep requeues runs whose lease ran out; a worker started with -B (scripts/start.sh) runs it.
# The drift check (docs/promotion.md) judges each promoted rubric's current cases; daily by default.
EVALHUB_DRIFT_INTERVAL_SECONDS = env_int("EVALHUB_DRIFT_INTERVAL_SECONDS", 24 * 60 * 60)
# Each drift check also re-judges this share of the unchanged cases fresh (at least 20 of them; 0 turns it off):
# a model changed behind its pinned name shows only that way (docs/promotion.md, "Fresh drift sample").
EVALHUB_DRIFT_FRESH_SHARE = env_share("EVALHUB_DRIFT_FRESH_SHARE", 0.05)
# How often traffic judging looks for new cases of the (rubric, dataset) pairs a lead turned on.
EVALHUB_TRAFFIC_INTERVAL_SECONDS = env_int("EVALHUB_TRAFFIC_INTERVAL_SECONDS", 5 * 60)
CELERY_BEAT_SCHEDULE = {
    "sweep-runs": {"task": "judges.sweep_runs", "schedule": float(EVALHUB_SWEEP_SECONDS)},
    "drift-check": {"task": "judges.drift_check", "schedule": float(EVALHUB_DRIFT_INTERVAL_SECONDS)},
    "traffic-judge": {"task": "judges.traffic_judge", "schedule": float(EVALHUB_TRAFFIC_INTERVAL_SECONDS)},
    "sweep-proposals": {"task": "judges.sweep_proposals", "schedule": float(EVALHUB_SWEEP_SECONDS)},
    # Gives up the OTLP traces whose wait ran out, so no trace waits on when nothing more is sent.
    "otlp-give-up": {"task": "labeling.otlp_give_up", "schedule": float(EVALHUB_OTLP_TRACE_WAIT_SECONDS)},
}
# Production monitoring (docs/monitoring.md): new cases reach the judge within this many seconds of arriving.
EVALHUB_MONITOR_INTERVAL_SECONDS = env_int("EVALHUB_MONITOR_INTERVAL_SECONDS", 60, minimum=1)
CELERY_BEAT_SCHEDULE["monitor-tick"] = {"task": "judges.monitor_tick", "schedule": float(EVALHUB_MONITOR_INTERVAL_SECONDS)}
CELERY_BEAT_SCHEDULE["monitor-deliver"] = {"task": "judges.monitor_deliver",
                                           "schedule": float(EVALHUB_MONITOR_INTERVAL_SECONDS)}
CELERY_BEAT_SCHEDULE_FILENAME = str(DATA_DIR / "celerybeat-schedule")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("EVALHUB_LOG_LEVEL", "INFO")},
    # The SDKs' HTTP clients log every request at INFO: a line per judgment is noise, not news.
    # django-axes logs every successful login at INFO too; failures and lockouts come at WARNING.
    "loggers": {name: {"level": "WARNING"} for name in ("httpx", "httpx2", "httpcore", "openai", "anthropic", "axes")},
}

# Projects (docs/projects.md): a single-team install's data migrates into one project of this slug.
EVALHUB_DEFAULT_PROJECT = env_str("EVALHUB_DEFAULT_PROJECT") or "default"
# How long an invitation into a project may wait to be accepted.
EVALHUB_INVITATION_DAYS = env_int("EVALHUB_INVITATION_DAYS", 7, minimum=1)
# E-mail: an invitation by e-mail address is mailed its link (docs/projects.md, "Invitations") when a mailer is set:
# SMTP when EMAIL_HOST is set, the console (the web process's output) with EMAIL_BACKEND=console or DJANGO_DEBUG=1.
# With none, no mail is sent: the members page shows each link once in any case, for the lead to pass on.
MAIL_BACKENDS = {
    "console": "django.core.mail.backends.console.EmailBackend",
    "smtp": "django.core.mail.backends.smtp.EmailBackend",
}


def _mailers() -> dict[str, Any]:
    """Django's MAILERS: empty when no mail is to be sent."""
    backend = env_str("EMAIL_BACKEND").lower() or ("smtp" if env_str("EMAIL_HOST") else "console" if DEBUG else "none")
    if backend == "none":
        return {}
    if backend not in MAIL_BACKENDS:
        raise ImproperlyConfigured(f"EMAIL_BACKEND={backend!r}: use smtp, console or none.")
    if backend == "console":
        return {"default": {"BACKEND": MAIL_BACKENDS[backend]}}
    use_tls, use_ssl = env_bool("EMAIL_USE_TLS", False), env_bool("EMAIL_USE_SSL", False)
    if use_tls and use_ssl:
        raise ImproperlyConfigured("EMAIL_USE_TLS and EMAIL_USE_SSL: set one of them, not both.")
    return {"default": {"BACKEND": MAIL_BACKENDS[backend], "OPTIONS": {
        "host": env_str("EMAIL_HOST", "localhost"), "port": env_int("EMAIL_PORT", 25, minimum=1),
        "username": env_str("EMAIL_HOST_USER"), "password": env_str("EMAIL_HOST_PASSWORD"),
        "use_tls": use_tls, "use_ssl": use_ssl, "timeout": env_int("EMAIL_TIMEOUT", 10, minimum=1),
    }}}


# Set only with a mailer: Django's deploy check rightly calls the console no way to send mail, and a MAILERS
# without a default one a mistake; evalhub.members.services sends nothing without it.
if _mailer_settings := _mailers():
    MAILERS = _mailer_settings
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "evalhub <evalhub@localhost>")

# What the OTLP receiver takes (docs/otlp.md, "Limits"). What one request may hold, checked before its values are
# built (413 over them): spans, attributes of a span, event or link (the OTel SDK's default, 128), events and links
# of a span, values of one array attribute, their nesting, and attribute values in all.
EVALHUB_OTLP_MAX_SPANS = env_int("EVALHUB_OTLP_MAX_SPANS", 10_000, minimum=1)
EVALHUB_OTLP_MAX_ATTRIBUTES = env_int("EVALHUB_OTLP_MAX_ATTRIBUTES", 128, minimum=1)
EVALHUB_OTLP_MAX_EVENTS = env_int("EVALHUB_OTLP_MAX_EVENTS", 128, minimum=1)
EVALHUB_OTLP_MAX_ARRAY = env_int("EVALHUB_OTLP_MAX_ARRAY", 1_000, minimum=1)
EVALHUB_OTLP_MAX_DEPTH = env_int("EVALHUB_OTLP_MAX_DEPTH", 8, minimum=1)
EVALHUB_OTLP_MAX_VALUES = env_int("EVALHUB_OTLP_MAX_VALUES", 200_000, minimum=1)
# Traces waiting for their root span (as the Collector's groupbytrace bounds num_traces): what one request may add
# (413 over it) and what one dataset may hold (429 with Retry-After over it, until the wait of the oldest runs out).
EVALHUB_OTLP_MAX_REQUEST_WAITING = env_int("EVALHUB_OTLP_MAX_REQUEST_WAITING", 1_000, minimum=1)
EVALHUB_OTLP_MAX_WAITING = env_int("EVALHUB_OTLP_MAX_WAITING", 10_000, minimum=1)
# Traces given up in one transaction (each a short one), so no give-up holds a dataset's lock for long.
EVALHUB_OTLP_GIVE_UP_BATCH = env_int("EVALHUB_OTLP_GIVE_UP_BATCH", 500, minimum=1)
CELERY_BEAT_SCHEDULE["otlp-give-up"]["options"] = {"expires": float(EVALHUB_OTLP_TRACE_WAIT_SECONDS)}
# OTLP requests one server process receives at once (the others: 429, retry in 1 s), so a busy exporter leaves the
# process's other threads to everyone else's requests (scripts/serve.sh runs 4 threads a process).
EVALHUB_OTLP_CONCURRENCY = env_int("EVALHUB_OTLP_CONCURRENCY", 1, minimum=1)
