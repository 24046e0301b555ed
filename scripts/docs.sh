#!/usr/bin/env bash
# Serves the documentation site from docs/ on http://127.0.0.1:8001 (MkDocs, Material theme), rebuilding as
# pages change; `bash scripts/docs.sh build` writes it to var/site/ instead. The test command builds it with
# --strict, so a broken link fails CI.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
. scripts/_env.sh
ensure_venv "$root"
if [ "${1:-serve}" = "build" ]; then
  exec .venv/bin/python -m mkdocs build --strict
fi
exec .venv/bin/python -m mkdocs serve --dev-addr "${DOCS_ADDR:-127.0.0.1:8001}"
