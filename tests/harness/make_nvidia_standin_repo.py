#!/usr/bin/env python3
"""Build a signed stand-in for NVIDIA's CUDA apt repository (flat layout, like NVIDIA's).

The packages carry NVIDIA's real names and dependency structure for one driver branch
(nvidia-driver-pinning-<branch>, nvidia-kernel-open-dkms / nvidia-kernel-dkms, nvidia-driver-cuda,
nvidia-smi, libcuda1, libnvidia-ml1, nvidia-persistenced with its systemd unit,
nvidia-fabricmanager, cuda-toolkit-X-Y / cuda-nvcc-X-Y) plus linux-headers-<kernel> for the
running kernel, which a container's distribution cannot provide. Their programs print recorded
real outputs (tests/fixtures/nvidia_smi). Made with dpkg-deb and apt-ftparchive, signed with a
GPG key generated here; the key is exported to <out>/cuda-archive-keyring.gpg.

    tests/harness/make_nvidia_standin_repo.py OUT --kernel "$(uname -r)"
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
import textwrap
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[2]
FIXTURES = REPO_ROOT / "tests" / "fixtures" / "nvidia_smi"
QUERY = "--query-gpu=index,name,compute_cap,memory.total,driver_version"  # nvidia_smi.QUERY_FIELDS

PERSISTENCED_UNIT = """\
[Unit]
Description=NVIDIA Persistence Daemon
Wants=syslog.target

[Service]
Type=forking
PIDFile=/var/run/nvidia-persistenced/nvidia-persistenced.pid
Restart=always
ExecStart=/usr/bin/nvidia-persistenced --verbose
ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced

[Install]
WantedBy=multi-user.target
"""

# Stands in for the daemon: it forks, writes its pid file and stays alive, as the real one does.
PERSISTENCED = """\
#!/bin/bash
mkdir -p /var/run/nvidia-persistenced
(exec -a nvidia-persistenced sleep infinity) </dev/null >/dev/null 2>&1 &
echo $! > /var/run/nvidia-persistenced/nvidia-persistenced.pid
"""

NVIDIA_SMI = f"""\
#!/bin/sh
# Stand-in nvidia-smi: prints outputs recorded on real machines (see the fixtures README).
d=/usr/share/nvidia-standin
case "$*" in
  "-q -x"|"-x -q") cat "$d/q.xml" ;;
  "{QUERY} --format=csv") cat "$d/query.csv" ;;
  "topo -m") if [ -f "$d/topo.txt" ]; then cat "$d/topo.txt"; else echo "stand-in: no topology recorded" >&2; exit 3; fi ;;
  *) echo "stand-in nvidia-smi: nothing recorded for: $*" >&2; exit 2 ;;
esac
"""

# What dkms does first: without headers for the running kernel there is nothing to build against.
DKMS_POSTINST = """\
#!/bin/sh
set -e
kernel=$(uname -r)
if [ ! -e "/lib/modules/$kernel/build/Makefile" ]; then
  echo "Error! Your kernel headers for kernel $kernel cannot be found at /lib/modules/$kernel/build." >&2
  exit 1
fi
mkdir -p "/var/lib/dkms/{name}/{version}/$kernel/x86_64"
echo "{name}/{version}, $kernel, x86_64: installed (stand-in: no module is built)"
"""


def control(name: str, version: str, depends: str = "", extra: str = "") -> str:
    fields = [f"Package: {name}", f"Version: {version}", "Architecture: amd64",
              "Maintainer: vllm-fleet test stand-in <test@invalid>", "Section: NVIDIA", "Priority: optional"]
    if depends:
        fields.append(f"Depends: {depends}")
    if extra:
        fields.append(extra.strip())
    fields.append(f"Description: stand-in for NVIDIA's {name} (vllm-fleet tests)")
    return "\n".join(fields) + "\n"


def build_deb(pool: Path, name: str, version: str, files: dict[str, tuple[str, int]],
              depends: str = "", extra: str = "", postinst: str | None = None,
              links: dict[str, str] | None = None) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "pkg"
        (root / "DEBIAN").mkdir(parents=True)
        (root / "DEBIAN" / "control").write_text(control(name, version, depends, extra))
        if postinst:
            (root / "DEBIAN" / "postinst").write_text(postinst)
            (root / "DEBIAN" / "postinst").chmod(0o755)
        for path, (content, mode) in files.items():
            target = root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(content)
            target.chmod(mode)
        for path, destination in (links or {}).items():
            target = root / path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.symlink_to(destination)
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "--build", str(root),
                        str(pool / f"{name}_{version}_amd64.deb")], check=True, capture_output=True)


def build_packages(pool: Path, branch: str, driver: str, cuda: str, kernel: str, profile: dict[str, Path]) -> None:
    v = f"{driver}-1"
    exact = f"(= {v})"
    cuda_dash = cuda.replace(".", "-")
    cuda_v = f"{cuda}.2-1"
    build_deb(pool, f"nvidia-driver-pinning-{branch}", v, {
        f"/etc/apt/preferences.d/nvidia-driver-pinning-{branch}": (
            f"Package: nvidia-* libnvidia-* libcuda1\nPin: version {branch}.*\nPin-Priority: 1000\n", 0o644)})
    for name, other in (("nvidia-kernel-open-dkms", "nvidia-kernel-dkms"), ("nvidia-kernel-dkms", "nvidia-kernel-open-dkms")):
        build_deb(pool, name, v, {f"/usr/src/nvidia-{driver}/dkms.conf": (f'PACKAGE_NAME="nvidia"\nPACKAGE_VERSION="{driver}"\n', 0o644)},
                  extra=f"Conflicts: {other}\nProvides: nvidia-kernel-dkms-any (= {v})",
                  postinst=DKMS_POSTINST.format(name="nvidia", version=driver))
    build_deb(pool, "libcuda1", v, {"/usr/share/doc/libcuda1/version": (driver + "\n", 0o644)})
    build_deb(pool, "libnvidia-ml1", v, {"/usr/share/doc/libnvidia-ml1/version": (driver + "\n", 0o644)})
    smi_files = {"/usr/bin/nvidia-smi": (NVIDIA_SMI, 0o755),
                 "/usr/share/nvidia-standin/q.xml": (profile["xml"].read_text(), 0o644),
                 "/usr/share/nvidia-standin/query.csv": (profile["csv"].read_text(), 0o644)}
    if profile.get("topo"):
        smi_files["/usr/share/nvidia-standin/topo.txt"] = (profile["topo"].read_text(), 0o644)
    build_deb(pool, "nvidia-smi", v, smi_files, depends=f"libnvidia-ml1 {exact}")
    build_deb(pool, "nvidia-persistenced", v, {
        "/usr/bin/nvidia-persistenced": (PERSISTENCED, 0o755),
        "/lib/systemd/system/nvidia-persistenced.service": (PERSISTENCED_UNIT, 0o644)})
    build_deb(pool, "nvidia-driver-cuda", v, {"/usr/share/doc/nvidia-driver-cuda/version": (driver + "\n", 0o644)},
              depends=f"nvidia-smi {exact}, libcuda1 {exact}, libnvidia-ml1 {exact}, nvidia-persistenced {exact}, "
                      f"nvidia-kernel-open-dkms {exact} | nvidia-kernel-dkms {exact}")
    build_deb(pool, "nvidia-open", v, {}, depends=f"nvidia-driver-cuda {exact}, nvidia-kernel-open-dkms {exact}")
    build_deb(pool, "nvidia-fabricmanager", v, {
        "/usr/bin/nv-fabricmanager": ("#!/bin/sh\nexec sleep infinity\n", 0o755),
        "/lib/systemd/system/nvidia-fabricmanager.service": (
            "[Unit]\nDescription=NVIDIA fabric manager service\n\n[Service]\nExecStart=/usr/bin/nv-fabricmanager\n\n"
            "[Install]\nWantedBy=multi-user.target\n", 0o644)},
        depends=f"nvidia-driver-cuda {exact}")
    build_deb(pool, f"cuda-nvcc-{cuda_dash}", cuda_v, {
        f"/usr/local/cuda-{cuda}/bin/nvcc": (
            "#!/bin/sh\ncat <<'EOF'\n" + profile["nvcc"].read_text() + "EOF\n", 0o755),
        f"/usr/local/cuda-{cuda}/lib64/.keep": ("", 0o644)})
    build_deb(pool, f"cuda-toolkit-{cuda_dash}", cuda_v, {}, depends=f"cuda-nvcc-{cuda_dash} (= {cuda_v})")
    build_deb(pool, f"linux-headers-{kernel}", "1.0-standin", {
        f"/usr/src/linux-headers-{kernel}/Makefile": ("# stand-in kernel headers\n", 0o644)},
        links={f"/lib/modules/{kernel}/build": f"/usr/src/linux-headers-{kernel}"})


def sign(out: Path, gnupg_home: Path) -> None:
    env = {**os.environ, "GNUPGHOME": str(gnupg_home)}
    gnupg_home.mkdir(mode=0o700, parents=True, exist_ok=True)
    if not list(gnupg_home.glob("pubring.*")):
        subprocess.run(["gpg", "--batch", "--passphrase", "", "--quick-gen-key",
                        "vllm-fleet stand-in repository <test@invalid>", "rsa3072", "sign", "1d"],
                       check=True, capture_output=True, env=env)
    (out / "InRelease").unlink(missing_ok=True)
    (out / "Release.gpg").unlink(missing_ok=True)
    subprocess.run(["gpg", "--batch", "--yes", "--clearsign", "-o", str(out / "InRelease"), str(out / "Release")],
                   check=True, capture_output=True, env=env)
    subprocess.run(["gpg", "--batch", "--yes", "-abs", "-o", str(out / "Release.gpg"), str(out / "Release")],
                   check=True, capture_output=True, env=env)
    key = subprocess.run(["gpg", "--batch", "--export"], check=True, capture_output=True, env=env).stdout
    (out / "cuda-archive-keyring.gpg").write_bytes(key)


def index(out: Path) -> None:
    packages = subprocess.run(["apt-ftparchive", "packages", "."], cwd=out, check=True,
                              capture_output=True, text=True).stdout
    (out / "Packages").write_text(packages)
    release = subprocess.run(["apt-ftparchive", "-o", "APT::FTPArchive::Release::Origin=NVIDIA",
                              "-o", "APT::FTPArchive::Release::Label=NVIDIA CUDA",
                              "release", "."], cwd=out, check=True, capture_output=True, text=True).stdout
    (out / "Release").write_text(release)


PROFILES = {
    "blackwell": {"xml": FIXTURES / "rtx-pro-6000-maxq-blackwell.q.xml",
                  "csv": FIXTURES / "rtx-pro-6000-server-9gpu.query.csv",
                  "nvcc": FIXTURES / "nvcc-13.0.version.txt"},
}


def build(out: Path, kernel: str, branch: str = "580", driver: str = "580.65.06", cuda: str = "13.0",
          profile: str = "blackwell", gnupg_home: Path | None = None) -> Path:
    for tool in ("dpkg-deb", "apt-ftparchive", "gpg"):
        if not shutil.which(tool):
            raise SystemExit(f"{tool} not found (Debian packages dpkg, apt-utils, gnupg)")
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("*.deb"):
        old.unlink()
    build_packages(out, branch, driver, cuda, kernel, PROFILES[profile])
    index(out)
    sign(out, gnupg_home or out.parent / "gnupg")
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--kernel", default=os.uname().release, help="kernel release the headers stand-in is for")
    parser.add_argument("--branch", default="580")
    parser.add_argument("--driver", default="580.65.06")
    parser.add_argument("--cuda", default="13.0")
    parser.add_argument("--profile", default="blackwell", choices=sorted(PROFILES))
    args = parser.parse_args()
    out = build(args.out, args.kernel, args.branch, args.driver, args.cuda, args.profile)
    print(textwrap.dedent(f"""\
        stand-in repository in {out}: {len(list(out.glob('*.deb')))} packages, key {out / 'cuda-archive-keyring.gpg'}"""))


if __name__ == "__main__":
    main()
