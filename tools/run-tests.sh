#!/usr/bin/env bash
# The test suite: unit tests, lint, the molecule scenario and the end-to-end run against a fresh
# test host. Extra arguments go to pytest (e.g. -m "not slow" for the quick part only).
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO_ROOT"
tools/bootstrap.sh
export PATH=$REPO_ROOT/.venv/bin:$PATH
# A per-checkout temp dir: pytest prunes old runs in the shared default one.
# --durations: the slowest tests, for keeping the whole run inside CI's time limit.
exec pytest --basetemp "$REPO_ROOT/.cache/pytest" --durations=30 "$@"
