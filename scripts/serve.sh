#!/usr/bin/env bash
# Serves evalhub to a team: gunicorn runs the web app (WhiteNoise serves its static files), a Celery
# worker does the runs, Celery beat schedules the sweeps; three processes, with PostgreSQL and Redis
# named by DATABASE_URL and CELERY_BROKER_URL. It migrates and collects the static files first.
# SIGTERM or Ctrl-C stops all three, and so does any one of them stopping.
#
#   scripts/serve.sh                  all three, for one host
#   scripts/serve.sh web|worker|beat  only that one, for a process manager that runs each on its own
#
# Settings come from the environment (docs/serving.md, docs/settings.md). DJANGO_DEBUG is always 0 here.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
. scripts/_env.sh
ensure_venv "$root"
export DJANGO_DEBUG=0
py=.venv/bin/python
role="${1:-all}"

case "$role" in all|web|worker|beat) ;; *) echo "usage: scripts/serve.sh [web|worker|beat]" >&2; exit 2 ;; esac
for name in DATABASE_URL CELERY_BROKER_URL; do
  if [ -z "${!name:-}" ]; then
    echo "scripts/serve.sh needs $name (PostgreSQL and Redis serve a team; scripts/start.sh runs without them)." >&2
    exit 2
  fi
done

web() {
  # gthread: a long export or a slow page holds a thread, not the worker's heartbeat. No control socket:
  # evalhub does not use gunicornc, and every gunicorn of a user would share its path in $HOME.
  exec "$py" -m gunicorn evalhub.wsgi:application --bind "${EVALHUB_BIND:-127.0.0.1:8000}" \
    --worker-class gthread --workers "${WEB_CONCURRENCY:-2}" --threads "${EVALHUB_WEB_THREADS:-4}" \
    --timeout 120 --graceful-timeout 30 --access-logfile - --error-logfile - --no-control-socket
}
worker() {
  exec "$py" -m celery -A evalhub worker --loglevel=INFO ${EVALHUB_WORKER_CONCURRENCY:+--concurrency "$EVALHUB_WORKER_CONCURRENCY"}
}
beat() {
  exec "$py" -m celery -A evalhub beat --loglevel=INFO
}

if [ "$role" = all ] || [ "$role" = web ]; then
  "$py" manage.py check --deploy   # prints what is not yet safe to serve (HTTPS off, say); it stops nothing
  "$py" manage.py migrate --noinput
  "$py" manage.py collectstatic --noinput --verbosity 0
fi
if [ "$role" != all ]; then
  "$role"
fi

pids=()
stop() {
  trap - INT TERM EXIT
  kill -TERM "${pids[@]}" 2>/dev/null || true
  wait || true
}
trap 'stop; exit 143' INT TERM
trap stop EXIT
worker & pids+=($!)
beat & pids+=($!)
web & pids+=($!)
echo "evalhub: web on ${EVALHUB_BIND:-127.0.0.1:8000} (pid ${pids[2]}), worker (pid ${pids[0]}), beat (pid ${pids[1]})"
set +e
wait -n "${pids[@]}"
status=$?
echo "evalhub: a process stopped (exit $status); stopping the others" >&2
exit "$status"
