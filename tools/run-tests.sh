#!/usr/bin/env bash
# The test suite: unit tests, lint, molecule scenarios (check → converge → idempotence → verify),
# the end-to-end run against a fresh test host and the fleet. Extra arguments go to pytest.
#
#   tools/run-tests.sh                 everything (what CI runs), in two lanes side by side
#   tools/run-tests.sh --quick         unit, module and lint tests only (no test hosts), in two lanes
#   tools/run-tests.sh tests/fleet     one area; VLLM_FLEET_ROLL_REUSE=1 keeps and reuses the fleet's hosts
#   VLLM_FLEET_TEST_LANES=1 tools/run-tests.sh    everything in one pytest
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO_ROOT"
tools/bootstrap.sh --test-images
export PATH=$REPO_ROOT/.venv/bin:$PATH
mkdir -p .cache/timings
: > .cache/timings/tasks.jsonl  # this run's playbook tasks only
: > .cache/timings/faults.jsonl  # this run's fault matrix rows (tests/harness/faults.py)
rm -f .cache/timings/junit-*.xml
start=$(date +%s.%N)

# One pytest; a per-lane temp dir (pytest prunes old runs in the shared default one).
# --durations: the slowest tests; the JUnit XML feeds tests/harness/phases.py.
lane() {
  local name=$1; shift
  pytest --basetemp "$REPO_ROOT/.cache/pytest-$name" --durations=30 \
    --junitxml "$REPO_ROOT/.cache/timings/junit-$name.xml" "$@"
}

elapsed() { echo "$(( $(date +%s) - ${start%.*} )) s"; }

# Two pytest processes side by side, the arguments of each in LANE1 and LANE2: most of a test's
# time is one single-threaded process (ansible, a vLLM start, a molecule step, ansible-lint), so
# the two cores run two at once. The second lane's output follows the first's. With PENDING set,
# the first lane's PID goes there: tests/harness/golden.py waits while it names a live process.
two_lanes() {
  local first=$1 second=$2 log=.cache/timings/lane-$2.log first_status=0 second_status=0
  lane "$first" "${LANE1[@]}" &
  local first_pid=$!
  [[ -z ${PENDING:-} ]] || { mkdir -p "$(dirname "$PENDING")"; echo "$first_pid" > "$PENDING"; }
  echo "[run-tests] lane '$second' (${LANE2[*]}) runs beside this one; its output: $log"
  lane "$second" "${LANE2[@]}" > "$log" 2>&1 &
  local second_pid=$!
  trap 'kill "$first_pid" "$second_pid" 2>/dev/null' INT TERM
  wait "$first_pid" || first_status=$?
  echo "[run-tests] lane '$first' done (exit $first_status) after $(elapsed)"
  wait "$second_pid" || second_status=$?
  echo "[run-tests] lane '$second' done (exit $second_status) after $(elapsed); its output:"
  cat "$log"
  return $(( first_status != 0 ? first_status : second_status ))
}

status=0
if [[ ${1:-} == --quick && $# -eq 1 ]]; then
  LANE1=(-m "not slow" tests/unit) LANE2=(-m "not slow" tests/integration)
  two_lanes unit integration || status=$?
elif [[ ${1:-} == --quick ]]; then
  lane quick -m "not slow" tests/unit tests/integration "${@:2}" || status=$?
elif [[ $# -eq 0 && ${VLLM_FLEET_TEST_LANES:-2} == 2 ]]; then
  # The e2e host's tests, one after the other, then the GLM-5 host's; and everything else. The
  # golden image's users (ordered last in their lane, tests/conftest.py) wait for the e2e first
  # deploy's capture. tests/unit runs inside tests/integration/test_ansible_test.py (ansible-test
  # units on the installed collection), not a second time on its own.
  LANE1=(tests/e2e tests/glm5) LANE2=(tests/integration tests/fleet)
  PENDING=.cache/golden/capture-pending two_lanes hosts rest || status=$?
else
  lane main "$@" || status=$?
fi
[[ ! -s .cache/timings/faults.jsonl ]] || python -m tests.harness.faults
[[ -z ${VLLM_FLEET_PHASES:-} ]] || printf 'pytest\t%s\t%s\n' "$start" "$(date +%s.%N)" >> "$VLLM_FLEET_PHASES"
exit $status
