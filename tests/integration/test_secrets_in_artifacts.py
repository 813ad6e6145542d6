"""A presigned URL's query is a credential: failed downloads name the file and the host, and
nothing ansible-runner keeps (stdout, job events, the command line) holds the signature."""

from __future__ import annotations

import http.server
import sys
import threading
from pathlib import Path

import ansible_runner

from tests.conftest import ansible_env
from vllm_fleet.cli import REPO, ansible_envvars

SIGNATURE = "X-Amz-Signature=5ecre7f00d"
SHA = "a" * 64


class RefusingServer(http.server.BaseHTTPRequestHandler):
    """An object store that refuses the signature (an expired presigned URL)."""

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's handler name
        self.send_response(403)
        self.end_headers()

    do_GET = do_HEAD  # noqa: N815

    def log_message(self, *args: object) -> None:
        pass


def runner_env() -> dict[str, str]:
    """The CLI's environment, with the venv's ansible-playbook first on PATH (as tools/vllm-fleet sets it)."""
    return {**ansible_envvars(), "PATH": ansible_env()["PATH"]}


def inventory(tmp_path: Path, base: str) -> Path:
    """The URLs live in group_vars, as a user's model profile does."""
    root = tmp_path / "inventory"
    (root / "group_vars").mkdir(parents=True)
    (root / "hosts.yml").write_text("all:\n  hosts:\n    localhost:\n      ansible_connection: local\n"
                                    f"      ansible_python_interpreter: {sys.executable}\n")
    (root / "group_vars" / "all.yml").write_text(f"""\
presigned:
  - {{url: "{base}/models/demo.gguf?{SIGNATURE}&X-Amz-Expires=60", sha256: "{SHA}"}}
nameless:
  - {{url: "{base}?{SIGNATURE}"}}
""")
    return root


def playbook(tmp_path: Path) -> Path:
    play = tmp_path / "fetch.yml"
    play.write_text(f"""\
- name: Fetch from an object store that refuses the signature
  hosts: localhost
  gather_facts: false
  tasks:
    - name: Check a profile whose URL names no file and gives no sha256
      vllm_fleet.fleet.model_profile_check: {{source: url, gguf_files: [demo.gguf], urls: "{{{{ nameless }}}}"}}
      ignore_errors: true
    - name: Download the set
      vllm_fleet.fleet.model_fetch:
        name: demo
        root: "{tmp_path}/models"
        source: url
        gguf_files: [demo.gguf]
        files: "{{{{ presigned }}}}"
        validate_gguf: false
      ignore_errors: true
""")
    return play


def test_a_refused_presigned_download_names_the_host_and_keeps_the_signature_out_of_the_artifacts(tmp_path):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), RefusingServer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_port}"
    artifacts = tmp_path / "runner"
    artifacts.mkdir()
    try:
        result = ansible_runner.run(private_data_dir=str(artifacts), project_dir=str(REPO),
                                    playbook=str(playbook(tmp_path)), inventory=str(inventory(tmp_path, base)),
                                    envvars=runner_env(), verbosity=3, quiet=True)
    finally:
        server.shutdown()
    stdout = result.stdout.read()
    assert result.rc == 0, stdout
    assert f"urls[0] ({base}?<query hidden>): sha256 missing" in stdout
    assert f"demo.gguf: {base}/models/demo.gguf?<query hidden>: HTTP Error 403" in stdout
    leaks = [str(path.relative_to(artifacts)) for path in artifacts.rglob("*")
             if path.is_file() and "5ecre7f00d" in path.read_text(errors="replace")]
    assert leaks == []
