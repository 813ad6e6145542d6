"""A local fleet for tests and benchmarks: N systemd test hosts for the CPU vLLM and one HAProxy
host (podman containers made by tools/testhost.sh), an inventory for them, playbook runs.

Used by tests/fleet and benchmarks/bench_rolling.py.
"""

from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import ansible_runner
import yaml

from tests.harness import timings

REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_MODEL_DIR = REPO_ROOT / "files" / "models" / "demo-qwen3"
RELEASES = "/opt/vllm-fleet/releases"


@dataclass
class LocalFleet:
    prefix: str = "vllm-fleet-roll"
    size: int = 3
    port_base: int = 2240
    # --enforce-eager: no torch.compile at start. A cold compile costs ~40 s of the two cores per
    # host, and three at once starve one another; the fleet tests are about releases, drains and
    # rollbacks, not about what compilation does to a start.
    enforce_eager: bool = False
    # The image the vLLM hosts start from (empty: the bare test-host image); the balancer is bare.
    image: str = ""
    inventory: Path = field(default_factory=Path)

    @property
    def lb(self) -> str:
        return f"{self.prefix}-lb"

    @property
    def hosts(self) -> list[str]:
        return [f"{self.prefix}-{n}" for n in range(1, self.size + 1)]

    def ports(self, host: str) -> tuple[int, int]:
        """(ssh port, published API port) of a test host."""
        index = 0 if host == self.lb else self.hosts.index(host) + 1
        return self.port_base + index, 8100 + self.port_base % 100 + index

    @property
    def lb_url(self) -> str:
        return f"http://127.0.0.1:{self.ports(self.lb)[1]}/v1"

    def host_vars(self, host: str) -> Path:
        return self.inventory / "host_vars" / f"{host}.yml"

    def up(self, fresh: bool = True) -> None:
        for host in [self.lb, *self.hosts]:
            if fresh:
                testhost("down", host)
            image = self.image if host != self.lb else ""
            testhost("up", host, *map(str, self.ports(host)), image=image)

    def down(self) -> None:
        for host in [self.lb, *self.hosts]:
            testhost("down", host)

    def write_inventory(self, root: Path) -> None:
        self.inventory = root
        key = subprocess.run([str(REPO_ROOT / "tools" / "testhost.sh"), "key"], check=True, capture_output=True,
                             text=True).stdout.strip()
        hosts = {"all": {
            "vars": {"ansible_host": "127.0.0.1", "ansible_user": "root", "ansible_ssh_private_key_file": key,
                     "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"},
            "children": {
                "vllm_hosts": {"hosts": {h: {"ansible_port": self.ports(h)[0]} for h in self.hosts}},
                "load_balancers": {"hosts": {self.lb: {"ansible_port": self.ports(self.lb)[0]}}},
                "gpu_hosts": {"hosts": {}},
            }}}
        (root / "group_vars" / "all").mkdir(parents=True, exist_ok=True)
        (root / "host_vars").mkdir(exist_ok=True)
        (root / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
        local = yaml.safe_load((REPO_ROOT / "inventory" / "local" / "group_vars" / "all" / "main.yml").read_text())
        local["fleet_model"]["source_dir"] = str(DEMO_MODEL_DIR)
        local["python_env_wheelhouse_dir"] = str(REPO_ROOT / ".cache" / "wheelhouse")
        local.pop("verify_base_url")  # the controller reaches each host at its own address
        # Several CPU vLLMs share two cores: a short verify plan.
        local["verify_plan"] = {"decode_requests": 1, "decode_max_tokens": 64, "concurrency": [2],
                                "requests_per_level": 4, "max_tokens": 32, "prompt_words": 32}
        if self.enforce_eager:
            local["vllm_service_extra_args"] = [*local.get("vllm_service_extra_args", []), "--enforce-eager"]
        (root / "group_vars" / "all" / "main.yml").write_text(yaml.safe_dump(local, sort_keys=False))


@dataclass
class PlayRun:
    rc: int
    output: str
    events: list[dict]
    seconds: float


def testhost(*args: str, image: str = "") -> None:
    env = {**os.environ, "VLLM_FLEET_TESTHOST_IMAGE": image} if image else None
    subprocess.run([str(REPO_ROOT / "tools" / "testhost.sh"), *args], check=True, env=env)


def run_playbook(inventory: Path, playbook: str, workdir: Path, results_dir: Path, cmdline: str = "",
                 **extravars) -> PlayRun:
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    result = ansible_runner.run(
        private_data_dir=str(workdir), project_dir=str(REPO_ROOT), playbook=str(REPO_ROOT / playbook),
        inventory=str(inventory), extravars=extravars, cmdline=cmdline or None,
        envvars={"ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
                 "VLLM_FLEET_RESULTS_DIR": str(results_dir)},
        quiet=True,
    )
    events, seconds = list(result.events), time.perf_counter() - started
    timings.record_play(playbook, events, seconds)
    return PlayRun(result.rc, result.stdout.read(), events, seconds)


def on(host: str, command: str, check: bool = True) -> str:
    done = subprocess.run(["podman", "exec", host, "sh", "-c", command], check=check, capture_output=True, text=True)
    return done.stdout.strip()


def main_pid(host: str) -> str:
    return on(host, "systemctl show vllm --property=MainPID --value")


def active(host: str) -> str:
    return on(host, "systemctl is-active vllm", check=False)


def current_release(host: str) -> str:
    return on(host, f"readlink {RELEASES}/current", check=False)


def internal_url(host: str) -> str:
    address = subprocess.run(["podman", "inspect", "-f", "{{.NetworkSettings.IPAddress}}", host], check=True,
                             capture_output=True, text=True).stdout.strip()
    return f"http://{address}:8000/v1"


def haproxy_runtime(lb: str, command: str) -> list[str]:
    """The lines HAProxy's runtime API answers to a command, sent from inside the LB host."""
    script = ("import socket; s=socket.socket(socket.AF_UNIX); s.connect('/run/haproxy/admin.sock'); "
              f"s.sendall(b'{command}\\n'); print(s.makefile().read())")
    return on(lb, f'python3 -c "{script}"').splitlines()


def haproxy_states(lb: str, backend: str = "vllm") -> dict[str, tuple[int, int]]:
    """Member -> (operational state, administrative flags): op 2 is UP; admin 0x01 is maintenance set
    by the runtime API, 0x08 drain."""
    lines = haproxy_runtime(lb, f"show servers state {backend}")
    rows = [line.split() for line in lines if line and not line.startswith("#") and len(line.split()) > 6]
    return {row[3]: (int(row[5]), int(row[6])) for row in rows}


def haproxy_stats(lb: str, backend: str = "vllm") -> dict[str, dict[str, str]]:
    """Member -> its row of HAProxy's `show stat` (counters such as wretr, wredis, econ, eresp)."""
    lines = [line for line in haproxy_runtime(lb, "show stat") if line.strip()]
    header = lines[0].lstrip("# ").split(",")
    rows = [dict(zip(header, line.split(","))) for line in lines[1:]]
    return {row["svname"]: row for row in rows if row.get("pxname") == backend and row["svname"] not in ("BACKEND", "FRONTEND")}


def haproxy_servers(lb: str, backend: str = "vllm") -> dict[str, str]:
    """Member -> operational state (2 = UP)."""
    return {name: str(op) for name, (op, _admin) in haproxy_states(lb, backend).items()}


def env_prefix() -> tuple[str, int]:
    """Overridable, so that several checkouts can run fleets side by side."""
    return os.environ.get("VLLM_FLEET_ROLL_PREFIX", "vllm-fleet-roll"), int(os.environ.get("VLLM_FLEET_ROLL_PORT_BASE", "2240"))
