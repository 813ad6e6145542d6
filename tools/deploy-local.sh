#!/usr/bin/env bash
# The main job on this machine: set up the controller, create (or reuse) the local systemd test
# host, and run site.yml against it with the cpu profile. Extra arguments go to ansible-playbook.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO_ROOT"
tools/bootstrap.sh
tools/testhost.sh up vllm-fleet-local 2222 8000
export PATH=$REPO_ROOT/.venv/bin:$PATH
exec ansible-playbook site.yml -i inventory/local "$@"
