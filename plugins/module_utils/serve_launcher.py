#!/usr/bin/python3
"""Start vLLM on the address the host has now, backing off when it keeps failing to start (the
vllm unit's ExecStart; standard library only).

    vllm-fleet-serve PYTHON -m vllm.entrypoints.openai.api_server ... --host network:10.0.0.0/16 ...

`--host network:CIDR` is replaced by the host's address inside CIDR at the moment the unit starts,
so a reboot, a DHCP renumbering or an interface that comes up late does not leave the service
bound to an address the host no longer has. It waits up to FLEET_BIND_WAIT_SECONDS (default 60)
for such an address, then execs the command (same PID, so systemd's MainPID is vLLM). Any other
`--host` value is passed through unchanged.

Back-off: systemd restarts a failed vLLM after RestartSec (FLEET_RESTART_SECONDS) and never gives
up (StartLimitIntervalSec=0), so a failure that passes (a driver not ready at boot, a filesystem
mounted late) heals on its own. Each start is noted in FLEET_STATE_DIRECTORY (the unit's runtime
directory, kept across restarts, removed on stop): a start that follows the previous one within
FLEET_RESTART_HEALTHY_SECONDS continues a streak of failed starts, and the n-th restart of a streak
waits until min(RestartSec * 2^(n-1), FLEET_RESTART_MAX_SECONDS) have passed since the failure.
A start after `systemctl stop`/`start` (a deploy's restart) begins with no streak and no wait.
"""

# A program (the unit's ExecStart, installed from here by the vllm_service role), not code run
# inside a module: it reports on stderr (the journal) and ends with an exit status.
# pylint: disable=ansible-bad-function

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Callable

NETWORK_PREFIX = "network:"
DEFAULT_WAIT_SECONDS = 60.0
POLL_SECONDS = 1.0
SIOCGIFADDR, SIOCGIFNETMASK = 0x8915, 0x891B

AddressReader = Callable[[], list[ipaddress.IPv4Interface]]
STATE_FILE = "starts.json"
DEFAULT_RESTART_SECONDS = 10.0
DEFAULT_MAX_SECONDS = 300.0
DEFAULT_HEALTHY_SECONDS = 900.0


def read_addresses() -> list[ipaddress.IPv4Interface]:
    """Each interface's IPv4 address and netmask (SIOCGIFADDR/SIOCGIFNETMASK: no helper program,
    and nothing the unit's system-call filter denies; secondary addresses are not listed)."""
    found = []
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
        for _index, name in socket.if_nameindex():
            request = struct.pack("256s", name.encode()[:15])
            try:
                address = fcntl.ioctl(sock.fileno(), SIOCGIFADDR, request)[20:24]
                netmask = fcntl.ioctl(sock.fileno(), SIOCGIFNETMASK, request)[20:24]
            except OSError:  # no IPv4 address on this interface
                continue
            found.append(ipaddress.IPv4Interface(f"{socket.inet_ntoa(address)}/{socket.inet_ntoa(netmask)}"))
    return found


def address_in(network: ipaddress.IPv4Network, addresses: list[ipaddress.IPv4Interface]) -> str | None:
    for address in addresses:
        if address.ip in network:
            return str(address.ip)
    return None


class NoAddress(Exception):
    pass


def wait_for_address(network: ipaddress.IPv4Network, read: AddressReader, wait_seconds: float,
                     sleep: Callable[[float], None] = time.sleep,
                     clock: Callable[[], float] = time.monotonic) -> str:
    deadline = clock() + wait_seconds
    while True:
        addresses = read()
        chosen = address_in(network, addresses)
        if chosen:
            return chosen
        if clock() >= deadline:
            have = ", ".join(str(address) for address in addresses) or "none"
            raise NoAddress(f"vllm-fleet-serve: no address of this host is in {network} after waiting "
                            f"{wait_seconds:g} s (it has: {have}); the service binds to an address in "
                            "vllm_service_bind_network, or to vllm_service_host when that is empty")
        sleep(POLL_SECONDS)


def resolve_host(argv: list[str], read: AddressReader, wait_seconds: float,
                 sleep: Callable[[float], None] = time.sleep) -> list[str]:
    """argv with `--host network:CIDR` replaced by this host's address in CIDR."""
    resolved = list(argv)
    for position, value in enumerate(argv[:-1]):
        if value == "--host" and argv[position + 1].startswith(NETWORK_PREFIX):
            network = ipaddress.IPv4Network(argv[position + 1][len(NETWORK_PREFIX):], strict=False)
            resolved[position + 1] = wait_for_address(network, read, wait_seconds, sleep)
    return resolved


def restart_gap(streak: int, restart_seconds: float, max_seconds: float) -> float:
    """Seconds from the n-th failure of a streak to the next start: RestartSec doubled each time."""
    return min(restart_seconds * 2 ** (streak - 1), max_seconds) if streak > 0 else 0.0


def note_start(state_dir: Path, now: float, healthy_seconds: float) -> int:
    """Record this start; return how many failed starts in a row came before it."""
    path = state_dir / STATE_FILE
    try:
        previous = json.loads(path.read_text())
        streak = previous["streak"] + 1 if now - previous["started"] < healthy_seconds else 0
    except (OSError, ValueError, KeyError, TypeError):
        streak = 0
    path.write_text(json.dumps({"started": now, "streak": streak}))
    return streak


def back_off(env: dict[str, str], sleep: Callable[[float], None] = time.sleep,
             clock: Callable[[], float] = time.time) -> float:
    """Wait out the back-off of a failing streak; return the seconds waited."""
    state_dir = env.get("FLEET_STATE_DIRECTORY")
    if not state_dir or not Path(state_dir).is_dir():
        return 0.0
    restart_seconds = float(env.get("FLEET_RESTART_SECONDS", DEFAULT_RESTART_SECONDS))
    streak = note_start(Path(state_dir), clock(), float(env.get("FLEET_RESTART_HEALTHY_SECONDS",
                                                                DEFAULT_HEALTHY_SECONDS)))
    wait = restart_gap(streak, restart_seconds, float(env.get("FLEET_RESTART_MAX_SECONDS", DEFAULT_MAX_SECONDS)))
    wait = max(wait - restart_seconds, 0.0)  # systemd already waited RestartSec
    if wait:
        print(f"vllm-fleet-serve: start {streak + 1} of a streak of failed starts: waiting {wait:g} s more "
              "before starting (back-off)", file=sys.stderr, flush=True)
        sleep(wait)
    return wait


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: vllm-fleet-serve COMMAND [ARG ...]", file=sys.stderr)
        return 2
    back_off(dict(os.environ))
    wait_seconds = float(os.environ.get("FLEET_BIND_WAIT_SECONDS", DEFAULT_WAIT_SECONDS))
    try:
        command = resolve_host(argv, read_addresses, wait_seconds)
    except NoAddress as error:
        print(error, file=sys.stderr)
        return 1
    for given, used in zip(argv, command):
        if given != used:
            print(f"vllm-fleet-serve: --host {used} (the address of this host in {given[len(NETWORK_PREFIX):]})",
                  file=sys.stderr, flush=True)
    os.execv(command[0], command)
    return 0  # not reached


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
