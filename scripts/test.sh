#!/usr/bin/env bash
# Type-checks with mypy, then runs the whole test suite against PostgreSQL and Redis on 127.0.0.1 (installing
# what is missing).
# Extra arguments go to pytest, e.g. scripts/test.sh tests/labeling -x
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
. scripts/_env.sh
ensure_venv "$root"
ensure_chromium
ensure_postgres_and_redis
export DATABASE_URL="${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/evalhub}"
export CELERY_BROKER_URL="${TEST_CELERY_BROKER_URL:-redis://127.0.0.1:6379/0}"
export EVALHUB_DATA_DIR="${EVALHUB_DATA_DIR:-$root/var/test}"
# The type check first ([tool.mypy] in pyproject.toml says which files): a type error stops the run.
echo "Type check: mypy over the files in pyproject.toml [tool.mypy]"
if ! .venv/bin/python -m mypy; then
  echo "Type check failed: fix the errors above; the tests did not run." >&2
  exit 1
fi
# Two processes by file (pytest-xdist): a module's fixtures stay in one process; tests/conftest.py gives each its
# own Redis database. EVALHUB_TEST_PROCESSES=0 runs them in this process.
exec .venv/bin/python -m pytest -n "${EVALHUB_TEST_PROCESSES:-2}" --dist loadfile "$@"
