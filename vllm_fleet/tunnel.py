"""A local port forwarded over SSH to an address as another host sees it (`ssh -N -L`): how the
controller reaches a service that listens on a remote host's loopback, such as Prometheus."""

from __future__ import annotations

import socket
import subprocess
import time
from contextlib import contextmanager
from typing import Callable, Iterator

READY_TIMEOUT_S = 20.0
POLL_S = 0.3


class TunnelError(Exception):
    """The forward did not come up: ssh failed, or the service did not answer through it."""


def free_local_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def ssh_command(destination: str, local_port: int, remote: tuple[str, int], options: list[str]) -> list[str]:
    option_args = [arg for option in options for arg in ("-o", option)]
    return ["ssh", "-N", "-o", "ExitOnForwardFailure=yes", "-o", "BatchMode=yes", *option_args,
            "-L", f"127.0.0.1:{local_port}:{remote[0]}:{remote[1]}", destination]


@contextmanager
def forwarded_port(destination: str, remote: tuple[str, int], ready: Callable[[int], bool],
                   options: list[str] | None = None, timeout: float = READY_TIMEOUT_S) -> Iterator[int]:
    """A local port that reaches `remote` (host, port) as `destination` sees it, once `ready(port)`
    says the service answers through it. `options` are ssh's -o options (IdentityFile=...)."""
    local_port = free_local_port()
    ssh = subprocess.Popen(ssh_command(destination, local_port, remote, options or []),
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        wait_until_ready(ssh, local_port, ready, timeout, destination)
        yield local_port
    finally:
        ssh.terminate()
        try:
            ssh.wait(timeout=10)
        except subprocess.TimeoutExpired:
            ssh.kill()
            ssh.wait()


def wait_until_ready(ssh: subprocess.Popen, local_port: int, ready: Callable[[int], bool], timeout: float,
                     destination: str) -> None:
    deadline = time.monotonic() + timeout
    while not ready(local_port):
        if ssh.poll() is not None:
            reason = (ssh.stderr.read() if ssh.stderr else "").strip() or f"exit status {ssh.returncode}"
            raise TunnelError(f"ssh to {destination} failed: {reason}")
        if time.monotonic() > deadline:
            raise TunnelError(f"nothing answered through the tunnel via {destination} within {timeout:g} s")
        time.sleep(POLL_S)
