"""The golden test host: a podman image of a test host that python_env, vllm and model have
converged (venv installed from the wheelhouse, demo model placed), with no service state and no
secrets. The from-scratch path is proven once (the e2e first deploy, whose host is captured here);
molecule and the fleet start from this image, and their runs assert that python_env and model
then report no change.

The image is keyed by a hash of everything that shapes a converged host: the roles and code that
build it, the pins, the demo model, the base image and this recipe. A key change builds a new one.

    python -m tests.harness.golden [--build]   print the image for this checkout (build it with --build)
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
BASE_IMAGE = "localhost/vllm-fleet-testhost:bookworm"
REPOSITORY = "localhost/vllm-fleet-golden"
RECORDS = REPO_ROOT / ".cache" / "golden"
WHEELHOUSE = REPO_ROOT / ".cache" / "wheelhouse"
# What a host converged by python_env and model depends on (directories are hashed file by file).
# The demo profile has no patch series, so the vllm role leaves the venv as installed. Anything
# missed here shows up as a change by python_env or model on a golden host, which the tests assert.
KEY_INPUTS = ["roles/python_env", "roles/model", "plugins/modules/model_fetch.py", "plugins/modules/model_profile_check.py",
              "plugins/modules/gguf_model_check.py", "plugins/module_utils/model_download.py", "plugins/module_utils/model_fetch.py",
              "plugins/module_utils/model_profile.py", "plugins/module_utils/model_store.py", "plugins/module_utils/gguf_files.py",
              "plugins/filter", "files/models/demo-qwen3", "inventory/local", "playbooks/deploy.yml",
              "tools/testhost.sh", "tests/harness/golden.py"]
# The roles the image holds the result of; a run on a golden host must report none of them changed.
CONVERGED_ROLES = ("python_env", "model")
BUILD_HOST = "vllm-fleet-golden-build"
# While this file names a live process (tools/run-tests.sh writes the e2e lane's pytest), that
# lane's first deploy is about to capture the image: ensure() waits for it instead of converging
# a second host from scratch on the same two cores. The first deploy removes it when done.
PENDING = RECORDS / "capture-pending"
PENDING_WAIT_SECONDS = 2700

# What vllm_service made (unit, env files with the API key, releases, the service user's home and
# caches), the SSH host keys and the controller's key: left out of the export that becomes the
# image, so no layer of it holds them. (/tmp, /run and the journal are tmpfs in these hosts, and
# /etc/hosts is podman's per container: none of them is exported.)
SCRUB_PATHS = ["etc/systemd/system/multi-user.target.wants/vllm.service", "etc/systemd/system/vllm.service",
               "etc/systemd/system/vllm.service.d", "etc/vllm-fleet", "opt/vllm-fleet/releases", "var/lib/vllm",
               "etc/ssh/ssh_host_*", "root/.ssh/authorized_keys", "root/.ansible"]
# Run in the exported image: the service account goes, each host gets its own machine id and SSH
# host keys at boot. The wheels lose their mtimes, as on a host restored by a tool that keeps none:
# python_env must still find them in place (it compares names and sizes), which every run on a
# golden host asserts.
RESET_IDENTITY = r"""
set -e
find /opt/vllm-fleet/wheelhouse -type f -exec touch -d @946684800 {} +
if getent passwd vllm >/dev/null; then userdel vllm; fi
if getent group vllm >/dev/null; then groupdel vllm; fi
: > /etc/machine-id
mkdir -p /etc/systemd/system/ssh.service.d
printf '[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n' \
  > /etc/systemd/system/ssh.service.d/host-keys.conf
"""
# Run in the exported image too: image layers keep whole-second mtimes, so re-hash each placed model
# file against its manifest and record the mtime it has now (the model role then sees the verified
# set as placed instead of re-copying it).
REFRESH_MANIFESTS = r"""
import hashlib, json, pathlib
for manifest in pathlib.Path("/var/lib/vllm-fleet/models").glob("*/versions/*/.vllm-fleet-manifest.json"):
    data = json.loads(manifest.read_text())
    for name, entry in data["files"].items():
        path, digest = manifest.parent / name, hashlib.sha256()
        with path.open("rb") as stream:
            for chunk in iter(lambda: stream.read(1 << 23), b""):
                digest.update(chunk)
        if digest.hexdigest() != entry["sha256"]:
            raise SystemExit(f"{path}: sha256 differs from its manifest")
        entry["mtime_ns"] = path.stat().st_mtime_ns
    manifest.write_text(json.dumps(data, indent=1, sort_keys=True))
"""
IMAGE_CONFIG = ["--change", 'CMD ["/sbin/init"]', "--change", "STOPSIGNAL SIGRTMIN+3"]


def podman(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    try:
        done = subprocess.run(["podman", *args], capture_output=True, text=True, check=False)
    except FileNotFoundError:  # no podman on this machine (tools/bootstrap.sh installs it)
        done = subprocess.CompletedProcess(["podman", *args], 127, "", "podman is not installed")
    if check and done.returncode != 0:
        raise RuntimeError(f"podman {args[0]} failed (exit {done.returncode}): {done.stderr.strip()[-2000:]}")
    return done


def _tracked_files(paths: list[str]) -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", *paths],
                            cwd=REPO_ROOT, check=True, capture_output=True).stdout
    return sorted(REPO_ROOT / name for name in listed.decode().split("\0") if name)


def key() -> str:
    digest = hashlib.sha256()
    base = podman("image", "inspect", "--format", "{{.Id}}", BASE_IMAGE, check=False).stdout.strip()
    digest.update(f"base {base}\n".encode())
    for path in _tracked_files(KEY_INPUTS):
        if path.is_file():
            digest.update(f"{path.relative_to(REPO_ROOT)}\n".encode())
            digest.update(hashlib.sha256(path.read_bytes()).digest())
    # The wheels the venv was installed from (a re-downloaded wheelhouse can hold newer dependencies).
    for wheel in sorted(WHEELHOUSE.glob("*/*")):
        digest.update(f"{wheel.relative_to(WHEELHOUSE)} {wheel.stat().st_size}\n".encode())
    return digest.hexdigest()[:16]


def image_name(image_key: str | None = None) -> str:
    return f"{REPOSITORY}:{image_key or key()}"


def exists(image: str) -> bool:
    return podman("image", "exists", image, check=False).returncode == 0


def capture(host: str) -> str:
    """Make the golden image from a converged test host (left running, untouched) unless it exists:
    its filesystem exported without SCRUB_PATHS into a single-layer image, then one layer that
    resets the identity and refreshes the model manifests."""
    image = image_name()
    if exists(image):
        return image
    started = time.perf_counter()
    exported, resetter = f"{image}-export", f"{BUILD_HOST}-reset"
    podman("rm", "-f", resetter, check=False)
    try:
        export_without(host, present_paths(host, SCRUB_PATHS), exported)
        script = RESET_IDENTITY + f"python3 - <<'PY'\n{REFRESH_MANIFESTS}PY\n"
        podman("run", "--name", resetter, "--systemd=false", exported, "/bin/sh", "-c", script)
        podman("commit", "--quiet", *IMAGE_CONFIG, resetter, image)
    finally:
        podman("rm", "-f", resetter, check=False)
        podman("rmi", exported, check=False)
    _prune_other_keys(image)
    _write_record(image, host, time.perf_counter() - started)
    return image


def present_paths(host: str, patterns: list[str]) -> list[str]:
    """The paths matching these patterns on the host (tar --delete fails on a name it does not find)."""
    script = 'cd / && for p in ' + " ".join(patterns) + '; do if [ -e "$p" ] || [ -L "$p" ]; then echo "$p"; fi; done'
    return podman("exec", host, "sh", "-c", script).stdout.split()


def export_without(host: str, paths: list[str], image: str) -> None:
    """A single-layer image of the host's filesystem without these paths (export | tar --delete | import)."""
    strip = f" | tar --delete -f - {' '.join(map(shlex.quote, paths))}" if paths else ""
    command = (f"podman export {shlex.quote(host)}{strip} | podman import --quiet "
               f"{' '.join(map(shlex.quote, IMAGE_CONFIG))} - {shlex.quote(image)}")
    done = subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"exporting {host} into {image} failed: {done.stderr.strip()[-2000:]}")


def _prune_other_keys(keep: str) -> None:
    """Remove this checkout's earlier golden images (the ones it has records of), not other checkouts'."""
    for record in RECORDS.glob("*.json") if RECORDS.is_dir() else []:
        if record.stem != keep.rsplit(":", 1)[1]:
            podman("rmi", f"{REPOSITORY}:{record.stem}", check=False)
            record.unlink()


def _write_record(image: str, host: str, seconds: float) -> None:
    RECORDS.mkdir(parents=True, exist_ok=True)
    size = podman("image", "inspect", "--format", "{{.Size}}", image, check=False).stdout.strip()
    record = {"image": image, "captured_from": host, "capture_seconds": round(seconds, 1),
              "size_bytes": int(size or 0), "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (RECORDS / f"{image.rsplit(':', 1)[1]}.json").write_text(json.dumps(record, indent=2) + "\n")


def capture_pending() -> bool:
    try:
        pid = int(PENDING.read_text().strip())
    except (OSError, ValueError):
        return False
    return Path(f"/proc/{pid}").is_dir()


def wait_while_capture_pending(timeout: float = PENDING_WAIT_SECONDS, poll: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while capture_pending() and time.monotonic() < deadline:
        time.sleep(poll)


def capture_settled() -> None:
    """The first deploy captured the image or could not: nobody needs to wait for it any more."""
    PENDING.unlink(missing_ok=True)


def ensure() -> str:
    """The golden image for this checkout; built from a bare test host when missing (the e2e run
    captures it first when it runs in the same session, in this process or in another lane)."""
    # The key is computed after the wait: it hashes the wheelhouse, which that deploy downloads.
    wait_while_capture_pending()
    image = image_name()
    if exists(image):
        return image
    testhost = str(REPO_ROOT / "tools" / "testhost.sh")
    ssh_port = os.environ.get("VLLM_FLEET_GOLDEN_SSH_PORT", "2230")
    subprocess.run([testhost, "down", BUILD_HOST], check=True)
    subprocess.run([testhost, "up", BUILD_HOST, ssh_port, os.environ.get("VLLM_FLEET_GOLDEN_API_PORT", "8030")],
                   check=True, env={**os.environ, "VLLM_FLEET_TESTHOST_IMAGE": BASE_IMAGE})
    try:
        converge = subprocess.run(
            [str(REPO_ROOT / ".venv" / "bin" / "ansible-playbook"), "-i", "inventory/local", "playbooks/deploy.yml",
             # Skipping (not selecting) tags: the prechecks' facts are set by untagged included tasks.
             "--skip-tags", "vllm_service", "-e", "model_restart_service=false"],
            cwd=REPO_ROOT, capture_output=True, text=True,
            env={**os.environ, "VLLM_FLEET_LOCAL_SSH_PORT": ssh_port, "ANSIBLE_NOCOLOR": "1"}, check=False)
        if converge.returncode != 0:
            raise RuntimeError(f"golden host converge failed:\n{converge.stdout[-6000:]}{converge.stderr[-2000:]}")
        return capture(BUILD_HOST)
    finally:
        subprocess.run([testhost, "down", BUILD_HOST], check=True)


def changed_tasks(events: list[dict], roles: tuple[str, ...] = CONVERGED_ROLES) -> list[str]:
    """'host: role : task' for each task of these roles that reported a change (ansible-runner events),
    with the first lines of what it printed (synchronize's itemized list names what differed)."""
    changed = []
    for event in events:
        data = event.get("event_data", {})
        result = data.get("res", {})
        # A collection role reports its full name (vllm_fleet.fleet.model), a checkout's its own.
        role = (data.get("role") or "").rsplit(".", 1)[-1]
        if event.get("event") == "runner_on_ok" and role in roles and result.get("changed"):
            printed = result.get("stdout_lines") or []
            changed.append(f"{data.get('host')}: {data.get('role')} : {data.get('task')}"
                           + (f" {printed[:5]}" if printed else ""))
    return changed


if __name__ == "__main__":
    print(ensure() if "--build" in sys.argv[1:] else image_name())
