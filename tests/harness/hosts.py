"""A systemd test host the tests deploy to with inventory/local: its name, the SSH and API ports it
publishes on the controller, and the playbook runs, commands and service state the tests read."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import ansible_runner

from tests.conftest import REPO_ROOT
from tests.harness import collection, timings

# The test hosts serve behind an API key, as a production one does (every run passes it).
API_KEY = "e2e-test-key"


@dataclass
class PlayRun:
    rc: int
    changed: int
    failed: bool
    output: str
    seconds: float
    events: list[dict] = field(default_factory=list)

    def task_result(self, task: str) -> dict:
        """The module result of the last run of a task, ok or failed."""
        for event in reversed(self.events):
            data = event.get("event_data", {})
            if data.get("task") == task and event.get("event") in ("runner_on_ok", "runner_on_failed"):
                return data.get("res", {})
        raise KeyError(f"task {task!r} did not run")

    def failed_result(self, task: str) -> dict:
        """The module result of the last failed run of a task (a rollback may run it again, ok)."""
        for event in reversed(self.events):
            data = event.get("event_data", {})
            if data.get("task") == task and event.get("event") == "runner_on_failed":
                return data.get("res", {})
        raise KeyError(f"task {task!r} did not fail")


@dataclass(frozen=True)
class TestHost:
    name: str
    ssh_port: int
    api_port: int

    __test__ = False  # not a test class, whatever its name

    @property
    def api_url(self) -> str:
        return f"http://127.0.0.1:{self.api_port}/v1"

    @property
    def results_dir(self) -> Path:
        """The verify role's JSON lines history of this host's runs."""
        return REPO_ROOT / ".cache" / f"results-{self.name}"

    def on_host(self, command: str, check: bool = True) -> str:
        result = subprocess.run(["podman", "exec", self.name, "sh", "-c", command], check=check,
                                capture_output=True, text=True)
        return result.stdout.strip()

    def service_state(self) -> tuple[str, str]:
        props = dict(line.split("=", 1) for line in
                     self.on_host("systemctl show vllm --property=ActiveState,MainPID").splitlines())
        return props["ActiveState"], props["MainPID"]

    def run_playbook(self, workdir: Path, playbook: str = "site.yml", cmdline: str = "",
                     installed: Path | None = None, **extravars) -> PlayRun:
        """The checkout's playbook, or with installed (a collections path, tests/harness/collection.py)
        the installed collection's own (vllm_fleet.fleet.<name>) with no role from the checkout."""
        workdir.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        envvars = {"ANSIBLE_CONFIG": str(REPO_ROOT / "ansible.cfg")}
        target = str(REPO_ROOT / playbook)
        if installed:
            envvars = {"ANSIBLE_CONFIG": str(collection.config_without_checkout_roles(workdir)),
                       "ANSIBLE_COLLECTIONS_PATH": str(installed)}
            target = f"{collection.NAME}.{Path(playbook).stem}"
        result = ansible_runner.run(
            private_data_dir=str(workdir),
            project_dir=str(REPO_ROOT),
            playbook=target,
            inventory=str(REPO_ROOT / "inventory" / "local"),
            extravars={"vllm_service_api_key": API_KEY, **extravars},
            envvars={**envvars, "ANSIBLE_NOCOLOR": "1",
                     "VLLM_FLEET_LOCAL_SSH_PORT": str(self.ssh_port),
                     "VLLM_FLEET_LOCAL_API_PORT": str(self.api_port),
                     "VLLM_FLEET_RESULTS_DIR": str(self.results_dir)},
            cmdline=cmdline or None,
            quiet=True,
        )
        stats = result.stats or {}
        events = list(result.events)
        seconds = time.perf_counter() - started
        timings.record_play(playbook, events, seconds)
        return PlayRun(
            rc=result.rc,
            changed=sum(stats.get("changed", {}).values()),
            failed=bool(stats.get("failures") or stats.get("dark")),
            output=result.stdout.read(),
            seconds=seconds,
            events=events,
        )
