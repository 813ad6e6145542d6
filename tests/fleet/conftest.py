"""A fleet of three systemd test hosts running the CPU vLLM behind a real HAProxy (a fourth test
host), deployed once by site.yml, for the rolling-restart, rollback and CLI tests."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import ansible_runner
import pytest
import yaml

from tests.conftest import DEMO_MODEL_DIR, REPO_ROOT, ansible_env

PREFIX = os.environ.get("VLLM_FLEET_ROLL_PREFIX", "vllm-fleet-roll")
PORT_BASE = int(os.environ.get("VLLM_FLEET_ROLL_PORT_BASE", "2240"))
LB = f"{PREFIX}-lb"
HOSTS = [f"{PREFIX}-{n}" for n in (1, 2, 3)]
# host -> (ssh port, published API port)
PORTS = {LB: (PORT_BASE, 8100 + PORT_BASE % 100)} | {
    host: (PORT_BASE + i, 8100 + PORT_BASE % 100 + i) for i, host in enumerate(HOSTS, start=1)}
LB_URL = f"http://127.0.0.1:{PORTS[LB][1]}/v1"
RESULTS_DIR = REPO_ROOT / ".cache" / f"results-{PREFIX}"


@dataclass
class Fleet:
    inventory: Path

    def host_vars(self, host: str) -> Path:
        return self.inventory / "host_vars" / f"{host}.yml"


@dataclass
class PlayRun:
    rc: int
    output: str
    events: list[dict]
    seconds: float


def testhost(*args: str) -> None:
    subprocess.run([str(REPO_ROOT / "tools" / "testhost.sh"), *args], check=True)


def on(host: str, command: str, check: bool = True) -> str:
    done = subprocess.run(["podman", "exec", host, "sh", "-c", command], check=check, capture_output=True, text=True)
    return done.stdout.strip()


def main_pid(host: str) -> str:
    return on(host, "systemctl show vllm --property=MainPID --value")


def active(host: str) -> str:
    return on(host, "systemctl is-active vllm", check=False)


def current_release(host: str) -> str:
    return on(host, "readlink /opt/vllm-fleet/releases/current", check=False)


def internal_url(host: str) -> str:
    address = subprocess.run(["podman", "inspect", "-f", "{{.NetworkSettings.IPAddress}}", host], check=True,
                             capture_output=True, text=True).stdout.strip()
    return f"http://{address}:8000/v1"


def haproxy_servers() -> dict[str, str]:
    """Member -> operational state from HAProxy's runtime API (2 = UP), read inside the LB host."""
    script = ("import socket; s=socket.socket(socket.AF_UNIX); s.connect('/run/haproxy/admin.sock'); "
              "s.sendall(b'show servers state vllm\\n'); print(s.makefile().read())")
    lines = on(LB, f'python3 -c "{script}"').splitlines()
    rows = [line.split() for line in lines if line and not line.startswith("#") and len(line.split()) > 5]
    return {row[3]: row[5] for row in rows}


def write_inventory(root: Path) -> None:
    key = subprocess.run([str(REPO_ROOT / "tools" / "testhost.sh"), "key"], check=True, capture_output=True,
                         text=True).stdout.strip()
    hosts = {
        "all": {
            "vars": {"ansible_host": "127.0.0.1", "ansible_user": "root", "ansible_ssh_private_key_file": key,
                     "ansible_ssh_common_args": "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null"},
            "children": {
                "vllm_hosts": {"hosts": {h: {"ansible_port": PORTS[h][0]} for h in HOSTS}},
                "load_balancers": {"hosts": {LB: {"ansible_port": PORTS[LB][0]}}},
                "gpu_hosts": {"hosts": {}},
            },
        }
    }
    (root / "group_vars" / "all").mkdir(parents=True)
    (root / "host_vars").mkdir()
    (root / "hosts.yml").write_text(yaml.safe_dump(hosts, sort_keys=False))
    local = yaml.safe_load((REPO_ROOT / "inventory" / "local" / "group_vars" / "all" / "main.yml").read_text())
    local["fleet_model"]["source_dir"] = str(DEMO_MODEL_DIR)
    local["python_env_wheelhouse_dir"] = str(REPO_ROOT / ".cache" / "wheelhouse")
    local.pop("verify_base_url")  # the controller reaches each host at its own address
    # Three CPU vLLMs share two cores: a short verify plan.
    local["verify_plan"] = {"decode_requests": 1, "decode_max_tokens": 64, "concurrency": [2],
                            "requests_per_level": 4, "max_tokens": 32, "prompt_words": 32}
    (root / "group_vars" / "all" / "main.yml").write_text(yaml.safe_dump(local, sort_keys=False))


def run_playbook(fleet: Fleet, playbook: str, workdir: Path, **extravars) -> PlayRun:
    started = time.perf_counter()
    result = ansible_runner.run(
        private_data_dir=str(workdir), project_dir=str(REPO_ROOT), playbook=str(REPO_ROOT / playbook),
        inventory=str(fleet.inventory), extravars=extravars,
        envvars={"ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
                 "VLLM_FLEET_RESULTS_DIR": str(RESULTS_DIR)},
        quiet=True,
    )
    return PlayRun(result.rc, result.stdout.read(), list(result.events), time.perf_counter() - started)


def cli(fleet: Fleet, *args: str, json_file: Path) -> tuple[int, dict, str]:
    done = subprocess.run([str(REPO_ROOT / "tools" / "vllm-fleet"), *args, "-i", str(fleet.inventory),
                           "--json", str(json_file)], capture_output=True, text=True, timeout=1800,
                          env=ansible_env(VLLM_FLEET_RESULTS_DIR=str(RESULTS_DIR), COLUMNS="200"))
    report = json.loads(json_file.read_text()) if json_file.exists() else {}
    return done.returncode, report, done.stdout + done.stderr


@pytest.fixture(scope="session")
def fleet(tmp_path_factory) -> Iterator[Fleet]:
    os.environ["PATH"] = ansible_env()["PATH"]
    for host in [LB, *HOSTS]:
        testhost("down", host)
        testhost("up", host, str(PORTS[host][0]), str(PORTS[host][1]))
    inventory = tmp_path_factory.mktemp("fleet-inventory")
    write_inventory(inventory)
    fleet = Fleet(inventory)
    deployed = run_playbook(fleet, "site.yml", tmp_path_factory.mktemp("fleet-deploy"))
    assert deployed.rc == 0, deployed.output[-8000:]
    yield fleet
    for host in [LB, *HOSTS]:
        testhost("down", host)
