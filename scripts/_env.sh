# Shared by scripts/start.sh, scripts/test.sh and .ci/run: find Python 3.12+, keep .venv installed.
# shellcheck shell=bash

find_python() {
  local candidate version
  for candidate in python3.13 python3.12 python3; do
    if command -v "$candidate" >/dev/null 2>&1 \
      && "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' >/dev/null 2>&1; then
      command -v "$candidate"; return 0
    fi
  done
  # pyenv keeps other versions beside the default one; their shims refuse unless selected.
  if command -v pyenv >/dev/null 2>&1; then
    for version in $(pyenv versions --bare 2>/dev/null | grep -E '^3\.(1[2-9]|[2-9][0-9])(\.|$)' | sort -rV); do
      candidate="$(pyenv root)/versions/$version/bin/python3"
      if [ -x "$candidate" ]; then echo "$candidate"; return 0; fi
    done
  fi
  return 1
}

ensure_venv() {
  # Creates .venv with Python 3.12+ and installs the project with its dev extra when pyproject changed. The dev
  # extra includes the server extra (the dashboard's dependencies): a bare install is the CI client only.
  local root="$1" python stamp
  if [ ! -x "$root/.venv/bin/python" ]; then
    if ! python="$(find_python)"; then
      echo "evalhub needs Python 3.12 or newer (Django 6), and none was found." >&2
      echo "Install one (for example 'pyenv install 3.12') and run this again." >&2
      exit 2
    fi
    echo "Creating .venv with $("$python" --version) ($python)"
    "$python" -m venv "$root/.venv"
  fi
  stamp="$root/.venv/.evalhub-installed"
  if [ ! -f "$stamp" ] || [ "$root/pyproject.toml" -nt "$stamp" ]; then
    "$root/.venv/bin/python" -m pip install --quiet --upgrade pip
    "$root/.venv/bin/python" -m pip install --quiet -e "$root[dev]"
    touch "$stamp"
  fi
}

ensure_postgres_and_redis() {
  if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
    echo "Starting PostgreSQL"
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | sort -V | tail -n 1)" main start
  fi
  if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
    echo "Starting Redis"
    mkdir -p /var/lib/redis /var/log/redis
    redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
      --dir /var/lib/redis --logfile /var/log/redis/ci.log
  fi
  for _ in $(seq 1 30); do
    pg_isready -q -h 127.0.0.1 -p 5432 && redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && return 0
    sleep 1
  done
  echo "PostgreSQL or Redis did not come up on 127.0.0.1." >&2
  exit 2
}

ensure_chromium() {
  # The browser tests drive Debian's Chromium; Playwright cannot download its own here.
  if [ ! -x /usr/bin/chromium ]; then
    echo "Installing Debian's chromium for the browser tests"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
  fi
}
