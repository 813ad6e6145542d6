"""The readiness gate's decisions, over recorded systemd states and a local HTTP server."""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.readiness import crash_sign, wait_until_ready
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.vllm_http import Endpoint
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.systemd_unit import parse_show, read_journal, read_unit_state, unit_state_from_show

# `systemctl show vllm --timestamp=unix --property=...` of a unit crash-looping on a bad argument.
SHOW_AUTO_RESTART = """ActiveState=activating
SubState=auto-restart
MainPID=0
NRestarts=2
Result=exit-code
ExecMainStatus=2
InvocationID=8d3f0c7e2b1a4f55a1d4c1b2e3f4a5b6
InactiveExitTimestamp=@1796050322
"""
SHOW_RUNNING = SHOW_AUTO_RESTART.replace("activating", "active").replace("auto-restart", "running").replace(
    "MainPID=0", "MainPID=2098").replace("NRestarts=2", "NRestarts=0").replace("exit-code", "success").replace(
    "ExecMainStatus=2", "ExecMainStatus=0")


def running():
    return unit_state_from_show(parse_show(SHOW_RUNNING))


def test_show_output_is_read():
    state = unit_state_from_show(parse_show(SHOW_AUTO_RESTART))
    assert (state.active_state, state.sub_state, state.n_restarts, state.exec_main_status) == (
        "activating", "auto-restart", 2, 2)
    assert state.started_at == 1796050322


def test_read_unit_state_and_journal_ask_systemd_the_right_questions():
    calls = []

    def run(argv):
        calls.append(argv)
        return SHOW_RUNNING
    assert read_unit_state("vllm", run=run).main_pid == 2098
    assert calls[0][:4] == ["systemctl", "show", "vllm", "--timestamp=unix"]
    read_journal("vllm", since=1796050321, run=run)
    assert calls[1] == ["journalctl", "--unit", "vllm", "--output", "json", "--no-pager", "--lines", "20000",
                        "--since", "@1796050321"]


@pytest.mark.parametrize("change, expected", [
    (dict(n_restarts=1), "systemd restarted it 1 time(s)"),
    (dict(active_state="failed", result="start-limit-hit"), "the unit failed (Result=start-limit-hit"),
    (dict(active_state="activating", sub_state="auto-restart", exec_main_status=1), "auto-restart"),
    (dict(active_state="inactive", sub_state="dead"), "the unit stopped"),
    (dict(main_pid=3000), "main process changed from 2098 to 3000"),
])
def test_crash_signs(change, expected):
    assert expected in crash_sign(running(), replace(running(), **change))


def test_loading_is_not_a_crash():
    assert crash_sign(running(), running()) is None


class Server:
    def __init__(self, health=200, models=("demo",), completion_status=200, tokens=4):
        self.health, self.models, self.completion_status, self.tokens = health, list(models), completion_status, tokens


@pytest.fixture
def server():
    state = Server()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def reply(self, status, body=None):
            data = json.dumps(body or {}).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path == "/health":
                return self.reply(state.health)
            self.reply(200, {"data": [{"id": m} for m in state.models]})

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.reply(state.completion_status, {"usage": {"completion_tokens": state.tokens}})

    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield state, Endpoint(f"http://127.0.0.1:{httpd.server_port}", timeout=5)
    httpd.shutdown()


def fake_clock():
    now = [0.0]
    return (lambda: now[0]), (lambda seconds: now.__setitem__(0, now[0] + seconds))


def test_ready_needs_a_real_completion(server):
    _state, endpoint = server
    clock, sleep = fake_clock()
    result = wait_until_ready(endpoint, "demo", running, timeout=60, clock=clock, sleep=sleep)
    assert result.ready and result.completion_tokens == 4


def test_healthy_but_failing_completion_fails_at_once(server):
    state, endpoint = server
    state.completion_status, state.tokens = 500, 0
    clock, sleep = fake_clock()
    result = wait_until_ready(endpoint, "demo", running, timeout=600, clock=clock, sleep=sleep)
    assert not result.ready
    assert "a completion got HTTP 500 with no tokens" in result.reason
    assert result.seconds < 10


def test_crash_loop_fails_at_the_first_restart(server):
    state, endpoint = server
    state.health = 503
    states = iter([running(), running(), replace(running(), n_restarts=1, main_pid=0)])
    clock, sleep = fake_clock()
    result = wait_until_ready(endpoint, "demo", lambda: next(states), timeout=1800, clock=clock, sleep=sleep)
    assert not result.ready and "restarted it 1 time(s)" in result.reason
    assert result.seconds <= 2


def test_slow_load_times_out_with_what_is_missing(server):
    state, endpoint = server
    state.models = []
    clock, sleep = fake_clock()
    result = wait_until_ready(endpoint, "demo", running, timeout=5, clock=clock, sleep=sleep)
    assert not result.ready and "not ready after 5 s: /v1/models answered 200 listing []" == result.reason
