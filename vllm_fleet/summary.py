"""What a playbook run did to each host, from ansible-runner's events: the CLI's table and exit code.

Plain functions over the event dicts ansible-runner emits (event, event_data.host/task/res), so
they are tested on recorded events without running Ansible.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

# Exit codes scripts can rely on (2 is argparse's for bad usage).
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_FAILED = 3
EXIT_UNREACHABLE = 4
EXIT_ROLLED_BACK = 5

STATUS_FACT = "vllm_service_status_report"
ROLLED_BACK_FACT = "vllm_service_rolled_back"
LIVE_FACT = "vllm_fleet_live_figures"  # playbooks/status.yml: the host's figures from Prometheus


@dataclass
class HostOutcome:
    host: str
    task: str = ""
    ok: int = 0
    changed: int = 0
    failed: bool = False
    unreachable: bool = False
    rolled_back: bool = False
    ready: bool = False
    release: str | None = None
    previous: str | None = None
    active: str | None = None
    healthy: bool | None = None
    tok_s: float | None = None
    live: str | None = None
    message: str = ""
    seen: bool = False

    @property
    def state(self) -> str:
        if self.unreachable:
            return "unreachable"
        if self.rolled_back and self.failed:
            return "rolled back"
        if self.failed:
            return "failed"
        if not self.seen:
            return "not reached"
        if self.active is not None:
            return "serving" if self.active == "active" and self.healthy else self.active
        return "serving" if self.ready else "ok"

    def as_dict(self) -> dict[str, Any]:
        return dict(asdict(self), state=self.state)


@dataclass
class RunSummary:
    hosts: dict[str, HostOutcome] = field(default_factory=dict)
    # Given the vLLM hosts up front, other hosts' events (the balancer's) are not reported.
    fixed: bool = False

    @classmethod
    def for_hosts(cls, names: list[str]) -> "RunSummary":
        return cls({name: HostOutcome(name) for name in names}, fixed=bool(names))

    def host(self, name: str) -> HostOutcome:
        return self.hosts.setdefault(name, HostOutcome(name))

    def feed(self, event: dict[str, Any]) -> None:
        data = event.get("event_data") or {}
        name = data.get("host")
        kind = event.get("event", "")
        if not name or not kind.startswith("runner_on_") or (self.fixed and name not in self.hosts):
            return
        outcome = self.host(name)
        outcome.seen = True
        outcome.task = data.get("task", outcome.task)
        res = data.get("res") or {}
        if kind == "runner_on_ok":
            record_ok(outcome, data.get("resolved_action") or data.get("task_action", ""), res)
        elif kind == "runner_on_failed" and not data.get("ignore_errors"):
            outcome.failed = True
            outcome.message = str(res.get("msg", ""))[:2000]
        elif kind == "runner_on_unreachable":
            outcome.unreachable = True
            outcome.message = str(res.get("msg", ""))[:2000]

    def exit_code(self, runner_rc: int) -> int:
        states = list(self.hosts.values())
        if any(o.rolled_back and o.failed for o in states):
            return EXIT_ROLLED_BACK
        if any(o.failed for o in states):
            return EXIT_FAILED
        if any(o.unreachable for o in states):
            return EXIT_UNREACHABLE
        return EXIT_OK if runner_rc == 0 else EXIT_ERROR

    def as_dict(self) -> list[dict[str, Any]]:
        return [outcome.as_dict() for outcome in self.hosts.values()]


def short_action(action: str) -> str:
    return action.rsplit(".", 1)[-1]


def record_ok(outcome: HostOutcome, action: str, res: dict[str, Any]) -> None:
    outcome.ok += 1
    outcome.changed += 1 if res.get("changed") else 0
    action = short_action(action)
    if action == "vllm_release":
        outcome.release = res.get("current", outcome.release)
        outcome.previous = res.get("previous", outcome.previous)
    elif action == "vllm_ready":
        outcome.ready = True
    elif action == "vllm_bench" and res.get("levels"):
        # The verify role's run (the release gate measures no concurrency level).
        outcome.tok_s = (res.get("decode") or {}).get("tok_s_tpot")
    elif action == "set_fact" and (res.get("ansible_facts") or {}).get(ROLLED_BACK_FACT):
        # Set only once the restored release is ready again.
        outcome.rolled_back = True
    elif action == "set_fact" and LIVE_FACT in (res.get("ansible_facts") or {}):
        outcome.live = res["ansible_facts"][LIVE_FACT].get("summary")
    elif action == "set_fact" and STATUS_FACT in (res.get("ansible_facts") or {}):
        report = res["ansible_facts"][STATUS_FACT]
        outcome.release = report.get("release")
        outcome.previous = report.get("previous")
        outcome.active = report.get("active")
        outcome.healthy = str(report.get("healthy")).lower() == "true"


def group_hosts(inventory: dict[str, Any], group: str) -> list[str]:
    """Hosts of a group in `ansible-inventory --list` output, children included, in order."""
    seen: list[str] = []

    def walk(name: str) -> None:
        entry = inventory.get(name) or {}
        for host in entry.get("hosts", []):
            if host not in seen:
                seen.append(host)
        for child in entry.get("children", []):
            walk(child)

    walk(group)
    return seen
