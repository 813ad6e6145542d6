"""The thin modules in plugins/modules/ as Ansible runs them (ad-hoc on the controller)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from tests.conftest import DEMO_MODEL_DIR, run


# One command-line argument may hold at most 128 KiB (Linux's MAX_ARG_STRLEN): a larger module
# argument (the triage rules with their word model) goes to Ansible as an extra-vars file instead.
ARGUMENT_BYTES_MAX = 64 * 1024


def adhoc(module: str, args: dict, check: bool = False) -> tuple[int, dict]:
    with tempfile.TemporaryDirectory(prefix="adhoc-") as scratch:
        large = {key for key, value in args.items() if len(json.dumps(value)) > ARGUMENT_BYTES_MAX}
        extra_vars = Path(scratch) / "large-arguments.json"
        extra_vars.write_text(json.dumps({f"adhoc_{key}": args[key] for key in large}))
        inline = {key: "{{ adhoc_%s }}" % key if key in large else value for key, value in args.items()}
        result = run(["ansible", "localhost", "-o", *(["-C"] if check else []), "-e", f"@{extra_vars}",
                      "-m", f"vllm_fleet.fleet.{module}", "-a", json.dumps(inline)])
    # one-line output: "localhost | SUCCESS => {...}" or "localhost | FAILED! => {...}"
    line = next(line for line in result.stdout.splitlines() if line.startswith("localhost |"))
    return result.returncode, json.loads(line.split("=>", 1)[1])


def test_gguf_model_check_passes_the_demo_model():
    rc, out = adhoc("gguf_model_check", {"source_dir": str(DEMO_MODEL_DIR), "gguf_files": ["demo-qwen3-F32.gguf"]})
    assert rc == 0, out
    assert out["changed"] is False
    assert out["architecture"] == "qwen3"
    assert "tokenizer.json" in out["hf_files"]


def test_gguf_model_check_names_the_missing_file(tmp_path):
    rc, out = adhoc("gguf_model_check", {"source_dir": str(tmp_path), "gguf_files": ["model.gguf"]})
    assert rc != 0
    assert f"GGUF file not found: {tmp_path}/model.gguf" in out["msg"]
    assert "config.json not found beside the GGUF" in out["msg"]


def test_vllm_bench_fails_clearly_when_nothing_listens():
    rc, out = adhoc("vllm_bench", {"base_url": "http://127.0.0.1:9/v1", "model": "demo", "health_timeout": 1})
    assert rc != 0
    assert "http://127.0.0.1:9/health not healthy after 1 s (no answer)" == out["msg"]


def test_vllm_roofline_reads_the_demo_gguf_through_ansible():
    gguf = str(DEMO_MODEL_DIR / "demo-qwen3-F32.gguf")
    rc, out = adhoc("vllm_roofline", {"gguf_path": gguf, "memory_bandwidth_gbs": 100.0})
    assert rc == 0, out
    assert out["changed"] is False and out["expert_count"] == 0
    assert out["ceiling_tok_s"] == round(100e9 / out["bytes_per_token"], 1)
    rc, out = adhoc("vllm_roofline", {"gguf_path": gguf})
    assert rc == 0 and out["ceiling_tok_s"] is None and "no GPU" in out["bandwidth_source"]


def test_vllm_triage_names_the_cause_of_a_saved_log():
    rules = json.loads((DEMO_MODEL_DIR.parents[1] / "triage" / "rules.json").read_text())
    log = DEMO_MODEL_DIR.parents[2] / "tests" / "fixtures" / "triage" / "port_in_use.journal.json"
    rc, out = adhoc("vllm_triage", {"log_path": str(log), "triage_rules": rules})
    assert rc == 0, out
    assert out["changed"] is False and out["found"] is True
    assert out["class"] == "port_in_use"
    assert "Address already in use" in out["root_cause"]


def test_vllm_cleanup_in_check_mode_reports_and_kills_nothing():
    import subprocess
    import pwd
    # An engine core of the service user (here: whoever runs the test) outside any unit.
    orphan = subprocess.Popen(["bash", "-c", "exec -a VLLM::EngineCore sleep 60"])
    try:
        rc, out = adhoc("vllm_cleanup", {"service_user": pwd.getpwuid(os.getuid()).pw_name,
                                         "device_glob": "/nonexistent/nvidia*"}, check=True)
        assert rc == 0, out
        assert orphan.pid in [holder["pid"] for holder in out["holders"]]
        assert out["terminated"] == [] and out["killed"] == []
        assert orphan.poll() is None, "check mode must not stop anything"
    finally:
        orphan.kill()
        orphan.wait()


def make_release(root, release_id: str, created: float, venv) -> None:
    (root / release_id).mkdir(parents=True)
    (root / release_id / "venv").symlink_to(venv)
    (root / release_id / "release.json").write_text(json.dumps({"id": release_id, "created": created}))


def test_vllm_release_switches_rolls_back_and_reports_through_ansible(tmp_path):
    venv = tmp_path / "env"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    root = tmp_path / "releases"
    for index, release_id in enumerate(["r1", "r2"]):
        make_release(root, release_id, 10.0 + index, venv)
    rc, out = adhoc("vllm_release", {"root": str(root), "action": "switch", "release": "r1"})
    assert rc == 0 and out["changed"] is True and out["current"] == "r1", out
    rc, out = adhoc("vllm_release", {"root": str(root), "action": "switch", "release": "r2"})
    assert (out["current"], out["previous"]) == ("r2", "r1"), out
    rc, out = adhoc("vllm_release", {"root": str(root), "action": "info"})
    assert rc == 0 and out["changed"] is False and [r["id"] for r in out["releases"]] == ["r1", "r2"]
    rc, out = adhoc("vllm_release", {"root": str(root), "action": "rollback", "reason": "gate failed"})
    assert rc == 0 and out["current"] == "r1" and out["rolled_back_from"] == "r2", out
    assert out["current_manifest"]["id"] == "r1"
    assert (root / "r2" / "FAILED").read_text() == "gate failed\n"
    rc, out = adhoc("vllm_release", {"root": str(root), "action": "rollback"})
    assert rc != 0 and "previous release r2 failed before (gate failed)" in out["msg"], out
    rc, out = adhoc("vllm_release", {"root": str(root), "action": "switch", "release": "nope"})
    assert rc != 0 and out["msg"] == f"release nope does not exist under {root}"


def test_vllm_drain_wait_treats_a_stopped_server_as_drained():
    rc, out = adhoc("vllm_drain_wait", {"base_url": "http://127.0.0.1:9", "model": "demo", "timeout": 2})
    assert rc == 0, out
    assert out["changed"] is False and out["drained"] is True and "not listening" in out["reason"]


def test_vllm_release_prune_removes_the_clones_only_pruned_releases_ran(tmp_path):
    envs, root = tmp_path / "envs", tmp_path / "releases"
    pinned = envs / "vllm-cpu-0123"
    clones = {tag: envs / f"vllm-cpu-0123-p{tag}" for tag in ("old", "new")}
    for env in (pinned, *clones.values()):
        (env / "bin").mkdir(parents=True)
        (env / "bin" / "python").write_text("")
    for clone in clones.values():
        (clone / "vllm-fleet-env.json").write_text(json.dumps({"base": str(pinned), "series_ids": ["x"]}))
    for index, (release_id, env) in enumerate([("r1", clones["old"]), ("r2", pinned), ("r3", clones["new"])]):
        make_release(root, release_id, 100.0 + index, env)
    (root / "current").symlink_to("r3")
    (root / "previous").symlink_to("r2")
    args = {"root": str(root), "action": "prune", "keep": 2, "envs_root": str(envs)}
    rc, out = adhoc("vllm_release", args, check=True)
    assert rc == 0 and out["changed"] and out["removed"] == ["r1"] and out["removed_envs"] == [str(clones["old"])]
    assert (root / "r1").is_dir() and clones["old"].is_dir()  # check mode removed nothing
    rc, out = adhoc("vllm_release", args)
    assert rc == 0 and out["removed"] == ["r1"] and out["removed_envs"] == [str(clones["old"])], out
    assert not clones["old"].exists() and clones["new"].is_dir() and pinned.is_dir()
    rc, out = adhoc("vllm_release", args)
    assert rc == 0 and out["changed"] is False and out["removed_envs"] == []


def test_host_preflight_reads_this_host_through_ansible():
    import socket

    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        rc, out = adhoc("host_preflight", {"checks": ["shm", "port", "limits", "platform"], "port": port,
                                           "min_shm_mib": 1, "service_unit": "no-such.service"})
    assert rc == 0, out
    assert out["changed"] is False
    facts = out["facts"]
    assert facts["nr_open"] > 0 and facts["shm"]["total_mib"] > 0 and "mode" in facts["iommu"]
    assert [holder["pid"] for holder in facts["port_holders"]] == [os.getpid()], facts
    assert any(f"port {port}" in problem for problem in out["no_go"]), out["no_go"]
