#!/usr/bin/env bash
# Set up this machine as a vllm-fleet controller and test-host builder (idempotent):
# Debian packages (podman, runc, mmdebstrap, rsync, ssh, systemd-analyze; shellcheck for ansible-test
# sanity), podman's config, and the controller venv (.venv, Python 3.12) from requirements-controller.txt.
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VENV=$REPO_ROOT/.venv
APT_PACKAGES=(podman runc mmdebstrap uidmap slirp4netns rsync openssh-client iproute2 apt-utils gnupg systemd shellcheck)

log() { printf '[bootstrap] %s\n' "$*" >&2; }

# With VLLM_FLEET_PHASES set (.ci/run sets it), each step's start and end are appended there.
timed() {
  local name=$1 start; shift
  start=$(date +%s.%N)
  "$@"
  [[ -z ${VLLM_FLEET_PHASES:-} ]] || printf '%s\t%s\t%s\n' "$name" "$start" "$(date +%s.%N)" >> "$VLLM_FLEET_PHASES"
}

as_root() { if [[ $(id -u) -eq 0 ]]; then "$@"; else sudo "$@"; fi; }

install_apt_packages() {
  local missing=() pkg
  for pkg in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed' || missing+=("$pkg")
  done
  [[ ${#missing[@]} -eq 0 ]] && return
  log "installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
}

# pyenv's shims answer `command -v` for versions that are installed but not selected: try each.
find_python312() {
  local candidate
  for candidate in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.12*/bin/python3.12 python3.12; do
    if "$candidate" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 12))' >/dev/null 2>&1; then
      echo "$candidate"; return
    fi
  done
  log "Python 3.12 not found (install it, e.g. with pyenv)"; exit 1
}

install_controller_venv() {
  local stamp=$VENV/.requirements.sha256 want
  want=$(sha256sum "$REPO_ROOT/requirements-controller.txt" | cut -d' ' -f1)
  [[ -f $stamp && $(cat "$stamp") == "$want" ]] && return
  log "installing the controller venv in $VENV"
  [[ -x $VENV/bin/python ]] || "$(find_python312)" -m venv "$VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check -r "$REPO_ROOT/requirements-controller.txt"
  echo "$want" > "$stamp"
}

# The checkout is the collection vllm_fleet.fleet: linked where the venv's Ansible and Python find
# installed collections (site-packages/ansible_collections), as `pip install` of a collection puts it.
link_collection() {
  local site target
  site=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  target=$site/ansible_collections/vllm_fleet/fleet
  [[ $(readlink "$target" 2>/dev/null) == "$REPO_ROOT" ]] && return
  mkdir -p "$(dirname "$target")"
  ln -sfn "$REPO_ROOT" "$target"
}

# The cpu profile's wheelhouse is downloaded for the test host's Python (Debian 12: 3.11).
check_wheelhouse_python() {
  python3.11 -c 'import sys' >/dev/null 2>&1 || { log "python3.11 is needed to download the cpu wheelhouse"; exit 1; }
}

# The test-host images need podman only: they are built while the venv installs. --test-images
# (the test runs) adds the Debian 13 image of the nvidia_driver scenario.
build_images() {
  "$REPO_ROOT/tools/testhost.sh" image
  if [[ $WITH_TEST_IMAGES == 1 ]]; then VLLM_FLEET_TESTHOST_SUITE=trixie "$REPO_ROOT/tools/testhost.sh" image; fi
}

# promtool (prometheus's rule checker and rule unit tester) for the tests, taken out of Debian's
# prometheus package without installing it (no Prometheus server on the controller).
install_promtool() {
  local tools=$REPO_ROOT/.cache/tools work
  [[ -x $tools/promtool ]] && return
  log "extracting promtool from Debian's prometheus package into $tools"
  work=$(mktemp -d) && chmod 0755 "$work"  # apt downloads as _apt
  (cd "$work" && apt-get download -qq prometheus >/dev/null) || { as_root apt-get update -qq; (cd "$work" && apt-get download -qq prometheus >/dev/null); }
  dpkg-deb -x "$work"/prometheus_*.deb "$work/root"
  mkdir -p "$tools"
  install -m 0755 "$work/root/usr/bin/promtool" "$tools/promtool"
  rm -rf "$work"
}

WITH_TEST_IMAGES=0
[[ ${1:-} == --test-images ]] && WITH_TEST_IMAGES=1
timed "bootstrap: Debian packages" install_apt_packages
timed "bootstrap: test-host images (beside the venv)" build_images &
images=$!
timed "bootstrap: controller venv" install_controller_venv
link_collection
check_wheelhouse_python
if [[ $WITH_TEST_IMAGES == 1 ]]; then timed "bootstrap: promtool" install_promtool; fi
wait "$images" || { log "building the test-host images failed"; exit 1; }
