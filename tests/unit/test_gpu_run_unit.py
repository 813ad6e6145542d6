"""benchmarks/gpu/run_unit.py: a unit rendered by the vllm_service role becomes the command systemd would run."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks" / "gpu"))
import run_unit  # noqa: E402

UNIT = """# Ansible managed
[Unit]
Description=x
[Service]
EnvironmentFile=/etc/vllm-fleet/vllm.env
ExecStart=/opt/venv/bin/python -m vllm.entrypoints.openai.api_server \\
    --model /m/x.gguf \\
    --port 8000 \\
    $FLEET_TUNING_ARGS
KillSignal=SIGTERM
"""
ENV = """# comment
VLLM_CACHE_ROOT=/var/lib/vllm/cache
NCCL_PROTO=LL
VLLM_API_KEY="s3cr\\"et"
FLEET_TUNING_ARGS='--attention-backend TRITON_MLA --compilation-config {"cudagraph_mode":"FULL_AND_PIECEWISE"}'
"""


def test_exec_start_joined_and_tuning_args_split_into_words():
    argv, env = run_unit.command_and_env(UNIT, ENV, "python3", {"PYTHONPATH": "/root/site"})
    assert argv == ["python3", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m/x.gguf",
                    "--port", "8000", "--attention-backend", "TRITON_MLA",
                    "--compilation-config", '{"cudagraph_mode":"FULL_AND_PIECEWISE"}']
    assert env["NCCL_PROTO"] == "LL" and env["PYTHONPATH"] == "/root/site"
    assert env["VLLM_API_KEY"] == 's3cr"et'


def test_braced_variable_stays_one_word():
    unit = "[Service]\nExecStart=/bin/echo ${A} $A\n"
    argv, _env = run_unit.command_and_env(unit, "A='x y'\n", None, {})
    assert argv == ["/bin/echo", "x y", "x", "y"]


def test_bad_env_line_is_named():
    with pytest.raises(run_unit.UnitError, match="line 2"):
        run_unit.parse_env_file("A=1\nnot an assignment\n")


def test_unit_without_exec_start_is_refused():
    with pytest.raises(run_unit.UnitError, match="no ExecStart"):
        run_unit.command_and_env("[Service]\nType=exec\n", "", None, {})


def test_every_environment_file_of_the_unit_is_read_in_order():
    unit = ("[Service]\nEnvironmentFile=/opt/r/current/release.env\nEnvironmentFile=-/etc/vllm-fleet/vllm.env\n"
            "ExecStart=/opt/r/current/venv/bin/python -m x $FLEET_SERVE_ARGS\n[Install]\nEnvironmentFile=/nope\n")
    assert run_unit.unit_env_files(unit) == ["/opt/r/current/release.env", "-/etc/vllm-fleet/vllm.env"]
