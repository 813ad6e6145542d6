#!/usr/bin/env bash
# The test suite: unit tests, lint, molecule scenarios (check → converge → idempotence → verify),
# the end-to-end run against a fresh test host and the fleet. Extra arguments go to pytest.
#
#   tools/run-tests.sh                 everything (what CI runs)
#   tools/run-tests.sh --quick         unit, module and lint tests only (no test hosts; a few minutes)
#   tools/run-tests.sh tests/fleet     one area; VLLM_FLEET_ROLL_REUSE=1 keeps and reuses the fleet's hosts
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO_ROOT"
tools/bootstrap.sh --test-images
export PATH=$REPO_ROOT/.venv/bin:$PATH
args=("$@")
if [[ ${1:-} == --quick ]]; then
  args=(-m "not slow" tests/unit tests/integration "${@:2}")
fi
mkdir -p .cache/timings
: > .cache/timings/tasks.jsonl  # this run's playbook tasks only
start=$(date +%s.%N)
status=0
# A per-checkout temp dir: pytest prunes old runs in the shared default one.
# --durations: the slowest tests; the JUnit XML feeds tests/harness/phases.py.
pytest --basetemp "$REPO_ROOT/.cache/pytest" --durations=30 --junitxml "$REPO_ROOT/.cache/timings/junit.xml" \
  "${args[@]}" || status=$?
[[ -z ${VLLM_FLEET_PHASES:-} ]] || printf 'pytest\t%s\t%s\n' "$start" "$(date +%s.%N)" >> "$VLLM_FLEET_PHASES"
exit $status
