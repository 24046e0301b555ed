#!/usr/bin/env bash
# Mutation testing of the contract code ([tool.mutmut] in pyproject.toml): mutmut makes small wrong
# changes to the metrics, the promotion rules, the CI command's stages and exit codes, the engine's
# validation, contract checks and prompt, runs the fast tests against each, and prints the mutants no
# test killed. The survivors that were read are listed, with why, in scripts/mutation-equivalent.md.
# Not run in CI. Extra arguments go to `mutmut run`, e.g. a glob of mutant names:
#   scripts/mutation.sh "judges.calibration.rules*"
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
. scripts/_env.sh
ensure_venv "$root"
# The fast tests touch no database, but the test settings insist on PostgreSQL being named.
export DATABASE_URL="${TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/evalhub}"
export CELERY_BROKER_URL="${TEST_CELERY_BROKER_URL:-redis://127.0.0.1:6379/0}"
export EVALHUB_DATA_DIR="${EVALHUB_DATA_DIR:-$root/var/test}"
# Two children: the machine is shared. mutmut keeps its results in mutants/, so a second run redoes
# only what changed.
rm -rf mutants/tests  # mutmut copies the tests once; a fresh copy runs the tests as they are now
.venv/bin/mutmut run --max-children "${MUTATION_CHILDREN:-2}" "$@" || true
echo
echo "== surviving mutants (mutmut show NAME prints the change; scripts/mutation-equivalent.md lists the equivalent ones)"
.venv/bin/mutmut results --all false 2>/dev/null || .venv/bin/mutmut results
