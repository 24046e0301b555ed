#!/usr/bin/env bash
# Sets evalhub up and starts it with demo data: the dashboard on http://127.0.0.1:8000, a background
# worker, and the scripted stand-in judge (not a model) on a free port, so the demo's behavioral
# configs run with no provider key (STAND_IN_PORT picks its port). Embedded default: SQLite and
# Celery's filesystem transport in ./var (EVALHUB_DATA_DIR), unless DATABASE_URL / CELERY_BROKER_URL are
# set. The demo holds two projects, store-support and code-review (evalhub/demo/). Writes var/demo/ci.env for
# the README's CI lines. Ctrl-C stops all three.
# DEBUG stays off (the documented default), so the demo shows evalhub's own error pages, as a team's
# server does; DJANGO_DEBUG=1 shows Django's technical pages instead.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
. scripts/_env.sh
ensure_venv "$root"
port="${PORT:-8000}"
data="${EVALHUB_DATA_DIR:-var}"
py=.venv/bin/python

if ! $py -c 'import socket, sys; socket.create_server(("127.0.0.1", int(sys.argv[1]))).close()' "$port" 2>/dev/null; then
  echo "Port $port is in use (or not a port): start with another, e.g. PORT=8001 bash scripts/start.sh" >&2
  exit 2
fi

mkdir -p "$data"
# A demo loaded before projects existed migrates into the store-support project, where load_demo looks for it.
export EVALHUB_DEFAULT_PROJECT="${EVALHUB_DEFAULT_PROJECT:-store-support}"
# The stand-in first: load_demo judges the demo's behavioral runs through it, and the worker and the
# server get the variables the demo configs name (EVALHUB_JUDGE_DEMO_URL / _KEY).
: >"$data/stand-in.log"
$py -u -m judges.testing.fake_provider --port "${STAND_IN_PORT:-0}" >"$data/stand-in.log" 2>&1 &
stand_in=$!
worker=""
trap 'kill $stand_in $worker 2>/dev/null || true' EXIT INT TERM
for _ in $(seq 100); do
  grep -q "listening on" "$data/stand-in.log" && break
  kill -0 "$stand_in" 2>/dev/null || break
  sleep 0.1
done
stand_in_url="$(grep -o 'listening on http://[^ ]*' "$data/stand-in.log" | cut -d' ' -f3 || true)"
if [ -z "$stand_in_url" ]; then
  cat "$data/stand-in.log" >&2
  echo "The scripted stand-in did not start (log $data/stand-in.log)." >&2
  exit 2
fi
export EVALHUB_JUDGE_DEMO_URL="$stand_in_url/v1" EVALHUB_JUDGE_DEMO_KEY="stand-in-needs-no-key"
echo "Scripted stand-in judge (not a model) on $stand_in_url (pid $stand_in, log $data/stand-in.log)."

$py manage.py migrate --noinput
$py manage.py load_demo
$py manage.py demo_ci_env --server "http://127.0.0.1:$port"

$py -m celery -A evalhub worker --beat --loglevel=INFO --concurrency=2 >"$data/worker.log" 2>&1 &
worker=$!
echo "Background worker started (pid $worker, log $data/worker.log)."
echo
echo "evalhub is starting on http://127.0.0.1:$port/"
echo "Log in as 'lena' (lead of store-support), 'carl' (lead of code-review), 'rita' (reviewer in both; 'rob' and"
echo "'ria' review store-support, 'rosa' code-review) or 'ada' (the instance admin). Demo password for all: evalhub-demo"
echo "The demo's behavioral configs (return-policy, fixes-test) run through the stand-in: start a run from a config's page."
echo "The README's CI lines run against this demo after '. $data/demo/ci.env' (its address, a token of each project, the stand-in's variables)."
echo
$py manage.py runserver "127.0.0.1:$port"
