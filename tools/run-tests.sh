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

# One pytest; a per-checkout temp dir (pytest prunes old runs in the shared default one).
# --durations: the slowest tests; the JUnit XML feeds tests/harness/phases.py.
lane() {
  local name=$1; shift
  pytest --basetemp "$REPO_ROOT/.cache/pytest-$name" --durations=30 \
    --junitxml "$REPO_ROOT/.cache/timings/junit-$name.xml" "$@"
}

status=0
rm -f .cache/timings/junit-*.xml
if [[ ${#args[@]} -eq 0 && ${VLLM_FLEET_TEST_LANES:-2} == 2 ]]; then
  # The whole suite in two lanes, side by side: the e2e host's tests (one host, one after the
  # other), and everything else, whose golden-image users wait for the e2e first deploy to
  # capture it (tests/harness/golden.py). Most of a test's time is one single-threaded process
  # (ansible, a vLLM start, a molecule step), so the two cores do two at once.
  # VLLM_FLEET_TEST_LANES=1 runs one pytest instead.
  mkdir -p .cache/golden
  lane hosts tests/e2e &
  hosts_pid=$!
  trap 'kill "$hosts_pid" "${rest_pid:-}" 2>/dev/null' INT TERM
  echo "$hosts_pid" > .cache/golden/capture-pending
  rest_log=.cache/timings/lane-rest.log
  echo "[run-tests] lane 'rest' (unit, integration, fleet) runs beside this one; its output: $rest_log"
  lane rest tests/unit tests/integration tests/fleet > "$rest_log" 2>&1 &
  rest_pid=$!
  wait "$hosts_pid" || status=$?
  echo "[run-tests] lane 'hosts' done (exit $status) after $(( $(date +%s) - ${start%.*} )) s"
  rest_status=0
  wait "$rest_pid" || rest_status=$?
  echo "[run-tests] lane 'rest' done (exit $rest_status) after $(( $(date +%s) - ${start%.*} )) s; its output:"
  cat "$rest_log"
  (( status != 0 )) || status=$rest_status
else
  lane main "${args[@]}" || status=$?
fi
[[ -z ${VLLM_FLEET_PHASES:-} ]] || printf 'pytest\t%s\t%s\n' "$start" "$(date +%s.%N)" >> "$VLLM_FLEET_PHASES"
exit $status
