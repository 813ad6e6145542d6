#!/usr/bin/env bash
# Test hosts for vllm-fleet: podman containers booted with systemd, built from an
# mmdebstrap image (no registry), reached over SSH on a loopback port.
#
#   tools/testhost.sh image                       build the image if it is missing
#                                                 (VLLM_FLEET_TESTHOST_SUITE=trixie: a Debian 13 image)
#   tools/testhost.sh up NAME SSH_PORT API_PORT   create/start NAME (reused if present)
#                                                 (VLLM_FLEET_TESTHOST_IMAGE: start it from another
#                                                 image, e.g. the golden one of tests/harness/golden.py)
#   tools/testhost.sh down NAME                   remove NAME
#   tools/testhost.sh key                         print the SSH private key path
set -euo pipefail

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
STATE_DIR=${VLLM_FLEET_STATE_DIR:-$REPO_ROOT/.cache/testhost}
SUITE=${VLLM_FLEET_TESTHOST_SUITE:-bookworm}
IMAGE=localhost/vllm-fleet-testhost:$SUITE
HOST_IMAGE=${VLLM_FLEET_TESTHOST_IMAGE:-$IMAGE}
SSH_KEY=$STATE_DIR/id_ed25519
SHM_SIZE=${VLLM_FLEET_TESTHOST_SHM:-2g}
PACKAGES=systemd,systemd-sysv,dbus,openssh-server,python3,iproute2,sudo,ca-certificates

log() { printf '[testhost] %s\n' "$*" >&2; }

ensure_key() {
  mkdir -p "$STATE_DIR"
  [[ -f $SSH_KEY ]] || ssh-keygen -q -t ed25519 -N '' -C vllm-fleet-testhost -f "$SSH_KEY"
}

# The apt sources the image uses are the controller's own (deb822 or one-line files).
host_apt_sources() {
  local f
  for f in /etc/apt/sources.list.d/*.sources /etc/apt/sources.list; do
    [[ -s $f ]] && grep -qE '^\s*(Types:|deb )' "$f" && { echo "$f"; return; }
  done
  log "no apt sources found on this machine; set them up first"; exit 1
}

# The same mirrors for another Debian release (e.g. trixie on a bookworm controller): the host's
# sources with its codename replaced, so bookworm-updates/-security become SUITE-updates/-security.
suite_apt_sources() {
  local src host_codename out
  src=$(host_apt_sources)
  host_codename=$(. /etc/os-release && echo "${VERSION_CODENAME:-}")
  if [[ -z $host_codename || $host_codename == "$SUITE" ]]; then echo "$src"; return; fi
  out="$STATE_DIR/sources-$SUITE"
  sed -E "s/\b$host_codename\b/$SUITE/g" "$src" > "$out"
  echo "$out"
}

# Podman's defaults fail here (crun + hybrid cgroups, nofile above the hard limit).
ensure_containers_conf() {
  local conf=/etc/containers/containers.conf
  [[ -f $conf ]] && grep -q 'runtime *= *"runc"' "$conf" && return
  log "writing $conf (runc runtime, ulimits within the hard limit)"
  mkdir -p /etc/containers
  cat > "$conf" <<CONF
[containers]
default_ulimits = ["nofile=$(ulimit -Hn):$(ulimit -Hn)", "nproc=32768:32768"]

[engine]
runtime = "runc"
CONF
}

build_image() {
  mkdir -p "$STATE_DIR"
  ensure_containers_conf
  if podman image exists "$IMAGE"; then log "image $IMAGE present"; return; fi
  local tar="$STATE_DIR/rootfs-$SUITE.tar" hook="$STATE_DIR/customize.sh"
  cat > "$hook" <<HOOK
#!/bin/sh
set -e
root="\$1"
# minbase has no /etc/hosts: without one, fact gathering waits on DNS.
printf '127.0.0.1 localhost\n::1 localhost\n' > "\$root/etc/hosts"
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
  cp /usr/local/share/ca-certificates/*.crt "\$root/usr/local/share/ca-certificates/"
  chroot "\$root" update-ca-certificates >/dev/null
fi
HOOK
  chmod +x "$hook"
  log "building $IMAGE with mmdebstrap (about 30-60 s)"
  mmdebstrap --quiet --variant=minbase --include="$PACKAGES" \
    --customize-hook="$hook \"\$1\"" "$SUITE" "$tar" "$(suite_apt_sources)"
  podman import --change 'CMD ["/sbin/init"]' --change 'STOPSIGNAL SIGRTMIN+3' "$tar" "$IMAGE" >/dev/null
  rm -f "$tar"
}

wait_for_boot() {
  # An exec right after `podman run` can fail while the container is still starting (its error
  # is hidden here); it is retried until systemd reports the boot done or 120 s have passed.
  local name=$1 state="" deadline=$((SECONDS + 120))
  while (( SECONDS < deadline )); do
    state=$(timeout 120 podman exec "$name" systemctl is-system-running --wait 2>/dev/null || true)
    case $state in
      running|degraded) log "$name booted ($state)"; return 0 ;;
    esac
    sleep 1
  done
  log "$name did not boot: '$state'"; podman exec "$name" systemctl --failed --no-pager >&2 || true; exit 1
}

wait_for_ssh() {
  local port=$1 _attempt
  for _attempt in $(seq 1 60); do
    ssh -q -o BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null \
      -o ConnectTimeout=2 -i "$SSH_KEY" -p "$port" root@127.0.0.1 true && return
    sleep 1
  done
  log "ssh on 127.0.0.1:$port did not answer"; exit 1
}

up() {
  local name=$1 ssh_port=$2 api_port=$3
  ensure_key
  build_image
  if podman container exists "$name"; then
    [[ $(podman inspect -f '{{.State.Running}}' "$name") == true ]] || podman start "$name" >/dev/null
    log "reusing $name"
  else
    log "creating $name from $HOST_IMAGE (ssh 127.0.0.1:$ssh_port, api 127.0.0.1:$api_port)"
    podman run -d --name "$name" --hostname "$name" --systemd=always \
      --shm-size="$SHM_SIZE" --cap-add=SYS_PTRACE --ulimit "nofile=$(ulimit -Hn):$(ulimit -Hn)" --ulimit nproc=32768:32768 \
      -p "127.0.0.1:$ssh_port:22" -p "127.0.0.1:$api_port:8000" \
      "$HOST_IMAGE" /sbin/init >/dev/null
    podman exec "$name" sh -c "printf '127.0.1.1 %s\n' '$name' >> /etc/hosts"
  fi
  # The key belongs to this checkout (.cache), not to the image, which other checkouts share.
  podman exec -i "$name" sh -c 'install -d -m 0700 /root/.ssh && cat > /root/.ssh/authorized_keys && chmod 0600 /root/.ssh/authorized_keys' < "$SSH_KEY.pub"
  wait_for_boot "$name"
  wait_for_ssh "$ssh_port"
}

# Test hosts are thrown away: no stop timeout to wait out.
down() { podman rm -f -t 0 "$1" >/dev/null 2>&1 || true; }

case ${1:-} in
  image) build_image ;;
  up) [[ $# -eq 4 ]] || { echo "usage: $0 up NAME SSH_PORT API_PORT" >&2; exit 2; }; up "$2" "$3" "$4" ;;
  down) [[ $# -eq 2 ]] || { echo "usage: $0 down NAME" >&2; exit 2; }; down "$2" ;;
  key) ensure_key; echo "$SSH_KEY" ;;
  *) sed -n '2,9p' "$0" >&2; exit 2 ;;
esac
