#!/usr/bin/env bash
# Sets evalhub up and starts it with demo data: the dashboard on http://127.0.0.1:8000 and a
# background worker. Embedded default: SQLite and Celery's filesystem transport in ./var, unless
# DATABASE_URL / CELERY_BROKER_URL are set. Ctrl-C stops both.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
. scripts/_env.sh
ensure_venv "$root"
export DJANGO_DEBUG="${DJANGO_DEBUG:-1}"
port="${PORT:-8000}"
py=.venv/bin/python

$py manage.py migrate --noinput
$py manage.py load_demo

mkdir -p var
$py -m celery -A evalhub worker --beat --loglevel=INFO --concurrency=2 >var/worker.log 2>&1 &
worker=$!
trap 'kill $worker 2>/dev/null || true' EXIT INT TERM
echo "Background worker started (pid $worker, log var/worker.log)."
echo
echo "evalhub is starting on http://127.0.0.1:$port/"
echo "Log in as lead 'lena' or reviewer 'rita', 'rob' or 'ria'; admin 'ada'. Demo password for all: evalhub-demo"
echo
$py manage.py runserver "127.0.0.1:$port"
