"""Model download on the deployed test host, from an HTTP server this test runs on the controller:
download + verify + place a split GGUF set, resume after a dropped connection, refuse a wrong hash,
a missing shard and a shard from another set (current link and service untouched), refuse a set
that does not fit before downloading, and restart the service onto a switched set, also when the
play that switched it was killed before its gate."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path
from typing import Iterator

import pytest

from tests.conftest import DEMO_MODEL_DIR
from tests.e2e.conftest import DEMO_PROFILE, BackgroundCapture, PlayRun, on_host, run_playbook, service_state
from tests.e2e.model_http_server import ModelHTTPServer
from tests.harness import faults
from tests.unit.test_model_fetch import SHARDS, make_set

pytestmark = pytest.mark.slow

PLAY = "tests/e2e/model_play.yml"
FETCH_TASK = "Download, verify and place the model set, then switch current to it"
ROOT = "/var/lib/vllm-fleet/models"
RELEASES = "/opt/vllm-fleet/releases"
NAME = "split-demo"
HF_FILES = ["config.json", "tokenizer.json", "tokenizer_config.json"]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def server(tmp_path_factory, first_run: PlayRun, golden_capture: BackgroundCapture):
    golden_capture.wait()  # these tests change the host
    assert first_run.rc == 0, first_run.output[-6000:]
    www = tmp_path_factory.mktemp("www")
    make_set(www / "a")
    make_set(www / "b", shift=1)  # a valid set of its own, with other shard boundaries
    # The controller as the container sees it: the gateway of its default route (podman's bridge).
    gateway = on_host("ip route show default").split()[2]
    with ModelHTTPServer(www, host=gateway) as running:
        yield running


def profile(server: ModelHTTPServer, directory: str, hashes_from: str | None = None, **extra) -> dict:
    source = server.state.root / (hashes_from or directory)
    urls = [{"url": server.url(f"{directory}/{n}"), "sha256": sha256(source / n)} for n in [*SHARDS, *HF_FILES]]
    return {"name": NAME, "served_name": "demo", "source": "url", "urls": urls, "gguf_files": SHARDS,
            "architecture": "qwen3", "tensor_count": 25, "max_model_len": 2048, "tensor_parallel_size": 1, **extra}


def current() -> str:
    return on_host(f"readlink {ROOT}/{NAME}/current", check=False)


def play(tmp_path: Path, fleet_model: dict, **extravars) -> PlayRun:
    return run_playbook(tmp_path, PLAY, fleet_model=fleet_model, **extravars)


def gets(server: ModelHTTPServer) -> list[str]:
    return [r.path for r in server.state.log if r.method == "GET"]


def test_split_set_is_downloaded_verified_placed_then_left_alone(server: ModelHTTPServer, tmp_path: Path):
    first = play(tmp_path / "1", profile(server, "a"))
    assert first.rc == 0, first.output[-4000:]
    fetched = first.task_result(FETCH_TASK)
    assert fetched["switched"] and current() == f"versions/{fetched['version']}"
    placed = on_host(f"cd {ROOT}/{NAME}/current && sha256sum {' '.join(SHARDS)}")
    assert placed.split()[::2] == [sha256(server.state.root / "a" / n) for n in SHARDS]
    print(f"\n[model] placed {fetched['bytes_transferred']} bytes, hashed in {fetched['hash_seconds']} s")

    requests = len(server.state.log)
    second = play(tmp_path / "2", profile(server, "a"))
    assert second.rc == 0 and second.changed == 0, second.output[-4000:]
    assert second.task_result(FETCH_TASK)["hashed_files"] == [] and len(server.state.log) == requests


def test_dropped_connection_fails_naming_the_shard_and_a_rerun_resumes(server: ModelHTTPServer, tmp_path: Path):
    before, pid = current(), service_state()[1]
    size = (server.state.root / "b" / SHARDS[2]).stat().st_size
    server.state.drop_after[SHARDS[2]] = size // 3
    failed = play(tmp_path / "1", profile(server, "b"), model_download_attempts=1)
    assert failed.rc != 0
    message = failed.task_result(FETCH_TASK)["msg"]
    assert f"{SHARDS[2]}: download incomplete after 1 attempt(s)" in message, message
    assert current() == before and service_state()[1] == pid

    resumed = play(tmp_path / "2", profile(server, "b"))
    assert resumed.rc == 0, resumed.output[-4000:]
    transfer = next(t for t in resumed.task_result(FETCH_TASK)["transfers"] if t["name"] == SHARDS[2])
    assert transfer["resumed_from"] == size // 3 and transfer["bytes_transferred"] == size - size // 3 < size
    assert [r.range for r in server.state.log if r.path.endswith(f"b/{SHARDS[2]}")][-1] == f"bytes={size // 3}-"
    assert current() != before
    faults.record("download_dropped", survived="failed clearly", seconds=failed.seconds,
                  message=f"{message.splitlines()[0]}; the rerun resumed from byte {size // 3}")


def broken_sets(server: ModelHTTPServer) -> dict[str, tuple[dict, str]]:
    www = server.state.root
    # c: set a with another tokenizer_config (so it is a new version) whose shard 2 the server lacks.
    shutil.copytree(www / "a", www / "c")
    (www / "c" / "tokenizer_config.json").write_text((www / "a" / "tokenizer_config.json").read_text() + " ")
    missing = profile(server, "c")
    (www / "c" / SHARDS[1]).unlink()
    # d: set a with shard 2 of set b (its own sha256 listed: only the GGUF headers can tell).
    shutil.copytree(www / "a", www / "d")
    shutil.copy(www / "b" / SHARDS[1], www / "d" / SHARDS[1])
    wrong_hash = profile(server, "a")
    wrong_hash["urls"][1]["sha256"] = sha256(www / "b" / SHARDS[1])
    return {
        "wrong hash": (wrong_hash, f"{SHARDS[1]}: sha256 {sha256(www / 'a' / SHARDS[1])} does not match"),
        "missing shard": (missing, f"{SHARDS[1]}: {server.url('c/' + SHARDS[1])}: HTTP Error 404"),
        "shard from another set": (profile(server, "d"), f"{SHARDS[1]}: tensor "),
    }


def test_bad_sets_fail_naming_the_shard_and_leave_current_and_service_alone(server: ModelHTTPServer, tmp_path: Path):
    before, pid = current(), service_state()[1]
    messages: list[str] = []
    seconds: list[float] = []
    for case, (fleet_model, expected) in broken_sets(server).items():
        run = play(tmp_path / case.replace(" ", "-"), fleet_model)
        assert run.rc != 0, case
        message = run.task_result(FETCH_TASK)["msg"]
        print(f"\n[model] {case}: {message}")
        assert expected in message, (case, message)
        assert current() == before and service_state() == ("active", pid), case
        messages.append(expected)
        seconds.append(run.seconds)
    faults.record("download_bad_set", survived="failed clearly", seconds=max(seconds),
                  message="; ".join(messages) + "; current set and service unchanged")


def test_a_set_larger_than_the_free_space_fails_before_downloading(server: ModelHTTPServer, tmp_path: Path):
    # The host's /dev/shm is a small tmpfs (podman --shm-size); the set has a 3 GiB (sparse) shard.
    big = server.state.root / "big"
    big.mkdir()
    with (big / "big.gguf").open("wb") as handle:
        handle.truncate(3 * 2**30)
    for name in HF_FILES:
        shutil.copy(DEMO_MODEL_DIR / name, big / name)
    fleet_model = profile(server, "a")
    fleet_model["urls"] = [{"url": server.url(f"big/{n}"), "sha256": "0" * 64} for n in ["big.gguf", *HF_FILES]]
    fleet_model["gguf_files"] = ["big.gguf"]
    run = play(tmp_path, fleet_model, model_root="/dev/shm/small-models")
    assert run.rc != 0
    message = run.task_result(FETCH_TASK)["msg"]
    assert "not enough disk space for the model: 3.00 GiB to download + 1.00 GiB margin" in message, message
    assert "free on /dev/shm" in message
    assert not [p for p in gets(server) if p.startswith("/big/")]
    assert on_host("test -e /dev/shm/small-models && echo yes || echo no") == "no"
    faults.record("download_no_space", survived="refused before any change", seconds=run.seconds,
                  message=message.splitlines()[0])


def test_the_filesystem_filling_during_a_download_fails_naming_the_shard_and_a_rerun_resumes(
        server: ModelHTTPServer, tmp_path: Path):
    """Another writer fills the model filesystem while shard 2 downloads (the server fills it on the
    host after sending a third of the shard, then sends the rest): the play fails naming the shard
    and the full disk, the current link and the service are untouched, the partial file is kept,
    and once there is room again the rerun resumes it."""
    root, filler = "/dev/shm/small-models", "/dev/shm/other-writer"
    size = (server.state.root / "a" / SHARDS[1]).stat().st_size
    running = service_state()

    def fill() -> None:  # leave 64 KiB, less than the two thirds of the shard still to come
        on_host(f"fallocate -l $(( $(df --output=avail --block-size=1 /dev/shm | tail -n 1) - 65536 )) {filler}")

    server.state.pause_after[SHARDS[1]] = (size // 3, fill)
    asked_before = len(server.state.log)
    try:
        failed = play(tmp_path / "1", profile(server, "a"), model_root=root, model_download_attempts=3)
        assert failed.rc != 0
        message = failed.task_result(FETCH_TASK)["msg"]
        print(f"\n[model] filesystem full: {message}")
        assert f"{SHARDS[1]}: cannot write " in message and "(No space left on device, [Errno 28]); not retried" in message
        asked = [r.path for r in server.state.log[asked_before:] if r.method == "GET" and r.path.endswith(SHARDS[1])]
        assert len(asked) == 1  # not retried: attempts are 3
        assert on_host(f"test -e {root}/{NAME}/current && echo yes || echo no") == "no"
        assert service_state() == running
        kept = int(on_host(f"stat -c %s $(find {root} -name '{SHARDS[1]}.part')"))
        assert 0 < kept < size

        on_host(f"rm -f {filler}")
        resumed = play(tmp_path / "2", profile(server, "a"), model_root=root)
        assert resumed.rc == 0, resumed.output[-4000:]
        transfer = next(t for t in resumed.task_result(FETCH_TASK)["transfers"] if t["name"] == SHARDS[1])
        assert transfer["resumed_from"] == kept and transfer["bytes_transferred"] == size - kept
    finally:
        on_host(f"rm -rf {filler} {root}", check=False)
    faults.record("download_fs_full", survived="failed clearly", seconds=failed.seconds,
                  message=f"{message.splitlines()[0]}; the rerun resumed from byte {kept}")


@contextlib.contextmanager
def killed_when_current_changes(run_dir: Path) -> Iterator[dict[str, str]]:
    """SIGKILL (its whole process group) the ansible-playbook run whose runner directory is
    run_dir the moment the release `current` link changes; what was killed and the link it left
    are put in the yielded dict."""
    before = on_host(f"readlink {RELEASES}/current")
    killed: dict[str, str] = {}
    play_ended = threading.Event()

    def kill_after_switch() -> None:
        while on_host(f"readlink {RELEASES}/current", check=False) in (before, ""):
            if play_ended.wait(0.1):
                return
        found = subprocess.run(["pgrep", "-f", f"{run_dir}/env/extravars"], capture_output=True, text=True, check=False)
        for pid in found.stdout.split():
            with contextlib.suppress(ProcessLookupError):
                os.killpg(os.getpgid(int(pid)), signal.SIGKILL)
                killed["pid"] = pid
        killed["current"] = on_host(f"readlink {RELEASES}/current", check=False)

    watcher = threading.Thread(target=kill_after_switch)
    watcher.start()
    try:
        yield killed
    finally:
        play_ended.set()
        watcher.join(timeout=60)


def test_switching_the_served_set_restarts_the_service_onto_it(server: ModelHTTPServer, tmp_path: Path):
    """Same model name and file names, another set: the unit is unchanged, the model role restarts
    it. The first switch run is SIGKILLed the moment `current` names the new release (a play killed
    between the release switch and the gate); the next run with the same configuration restarts
    into it, gates it and marks it verified."""
    www = server.state.root / "demo2"
    www.mkdir()
    for path in DEMO_MODEL_DIR.iterdir():
        shutil.copy(path, www / path.name)
    (www / "generation_config.json").write_text((DEMO_MODEL_DIR / "generation_config.json").read_text() + "\n")
    names = ["demo-qwen3-F32.gguf", "config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json"]
    demo2 = {"name": "demo-qwen3", "served_name": "demo", "source": "url", "gguf_files": names[:1],
             "urls": [{"url": server.url(f"demo2/{n}"), "sha256": sha256(www / n)} for n in names],
             "max_model_len": 2048, "tensor_parallel_size": 1, "dtype": DEMO_PROFILE["dtype"]}
    old_link, old_pid = on_host(f"readlink {ROOT}/demo-qwen3/current"), service_state()[1]
    old_release = on_host(f"readlink {RELEASES}/current")
    unit = on_host("systemctl cat vllm")
    # Eager: this start proves the switch, not torch.compile (a cold compile for the new path).
    switch = {"fleet_model": demo2, "vllm_service_extra_args": ["--enforce-eager"]}
    try:
        with killed_when_current_changes(tmp_path / "killed") as killed:
            interrupted = run_playbook(tmp_path / "killed", **switch)
        print(f"\n[killed after switch] play rc={interrupted.rc}, killed {killed}; "
              f"verified -> {on_host(f'readlink {RELEASES}/verified', check=False)}")
        assert killed.get("pid") and interrupted.rc != 0, (killed, interrupted.output[-3000:])
        assert killed["current"] != old_release != ""
        assert on_host(f"readlink {RELEASES}/verified", check=False) != killed["current"]

        switched = run_playbook(tmp_path / "switch", **switch)
        assert switched.rc == 0, switched.output[-5000:]
        new_link = on_host(f"readlink {ROOT}/demo-qwen3/current")
        assert new_link != old_link and service_state()[0] == "active" and service_state()[1] != old_pid
        # The unit runs the current release; the new model set made a new release, which pins it.
        assert on_host("systemctl cat vllm") == unit
        assert on_host(f"readlink {RELEASES}/current") == killed["current"] == on_host(f"readlink {RELEASES}/verified")
        served = on_host(f"cat /proc/{service_state()[1]}/cmdline | tr '\\0' ' '")
        assert f"{ROOT}/demo-qwen3/{new_link}/demo-qwen3-F32.gguf" in served
        assert switched.task_result("Wait until vLLM serves, failing fast on a crash")["completion_tokens"] > 0
        faults.record("killed_between_switch_and_gate", survived="recovered", seconds=switched.seconds,
                      message=f"ansible-playbook killed with current -> {killed['current']} not yet verified; "
                              "the next run restarted into it, gated it and marked it verified")
    finally:
        restored = run_playbook(tmp_path / "restore")
    assert restored.rc == 0, restored.output[-5000:]
    # The earlier set was kept (model_keep_previous: 1): switching back is a rename, no copy.
    assert on_host(f"readlink {ROOT}/demo-qwen3/current") == old_link
    assert restored.task_result(FETCH_TASK)["bytes_transferred"] == 0
