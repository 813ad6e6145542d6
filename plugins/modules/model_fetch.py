#!/usr/bin/python
"""Ansible module: download, verify and place a GGUF model set as a new version, then switch current."""

from __future__ import annotations

DOCUMENTATION = r"""
module: model_fetch
short_description: Download a GGUF model set, verify every file, place it atomically as a new version
description:
  - Brings a model set (GGUF shards, config.json, tokenizer) to I(root)/I(name)/versions/<version> and
    points I(root)/I(name)/current at it, from a list of URLs, a Hugging Face repository or a
    directory on the host, or checks a set the role already copied into the staging directory.
  - Before fetching, checks the free space of the staging filesystem against the bytes still to
    fetch plus I(free_space_margin_mib), and fails naming both figures.
  - Downloads resume with HTTP Range from a C(.part) file; Hugging Face downloads go through
    huggingface_hub (its own resume and transfer backend).
  - Verifies every file's sha256 (from the profile, or from the hub's LFS metadata; the git blob id
    for small files kept in git), hashing several files at once; then reads every shard's GGUF
    header (every C(-NNNNN-of-NNNNN) present, split.no/split.count consistent, each tensor in exactly
    one shard, split.tensors.count, architecture and tensor count as expected).
  - Only a verified set is moved into versions/ and made current; on any failure the current set
    is untouched. A manifest (size, mtime, sha256 of each file) lets a later run skip all work.
  - Keeps I(keep_previous) earlier versions besides the current one and removes older ones.
  - Needs the C(gguf) package (and C(huggingface_hub) for I(source=hf)) in the Python that runs it.
options:
  name: {description: Directory name of the model under I(root)., type: str, required: true}
  root: {description: Host directory that holds the models., type: path, required: true}
  source:
    description: Where the files come from; C(staged) means the role already copied them into I(staging_dir).
    type: str
    choices: [url, hf, local, staged]
    required: true
  state:
    description: C(present) fetches and places; C(planned) only reports the version, its staging directory and whether it is current.
    type: str
    choices: [present, planned]
    default: present
  gguf_files: {description: Every shard of the set in order (file names)., type: list, elements: str, required: true}
  files:
    description: For I(source=url) or I(source=staged), every file of the set.
    type: list
    elements: dict
    default: []
    suboptions:
      name: {description: File name in the set (default the URL's last path element)., type: str}
      url: {description: Where to download it (I(source=url))., type: str}
      sha256: {description: Expected sha256., type: str}
      size: {description: Size in bytes (default from a HEAD request)., type: int}
  local_dir: {description: "For I(source=local), the directory with the GGUF files, config and tokenizer.", type: path}
  hf_repo: {description: "For I(source=hf), the repository with the GGUF shards.", type: str}
  hf_revision: {description: "Branch, tag or commit; pin a commit for a reproducible set.", type: str, default: main}
  hf_allow_patterns: {description: Repository paths to fetch (default any path ending in one of I(gguf_files))., type: list, elements: str}
  hf_config_repo: {description: Repository with config.json and the tokenizer (default I(hf_repo))., type: str}
  hf_config_revision: {description: Its revision., type: str, default: main}
  hf_token: {description: Hub token (from Ansible Vault)., type: str}
  hf_endpoint: {description: "Hub endpoint (default huggingface_hub's, which reads HF_ENDPOINT).", type: str}
  expected_architecture: {description: general.architecture the first shard must carry., type: str}
  expected_tensor_count: {description: Number of tensors the set must hold., type: int}
  validate_gguf: {description: Read the GGUF headers (off only where the controller already did)., type: bool, default: true}
  keep_previous: {description: Earlier versions to keep besides the current one., type: int, default: 1}
  protected_versions:
    description: Versions never removed (those the kept vLLM service releases pin).
    type: list
    elements: str
    default: []
  pinned_model_dirs:
    description:
      - The model directories kept service releases run (their manifests' model_dir). The versions
        they resolve to are protected like I(protected_versions), compared as real paths.
    type: list
    elements: str
    default: []
  free_space_margin_mib: {description: Free space to leave on the filesystem after the download., type: int, default: 1024}
  hash_workers: {description: Files hashed at once., type: int, default: 4}
  download_attempts: {description: 'Attempts per file within one run (each resumes the last after a pause of 2, 5, 15, then 30 s or the
      server''s Retry-After; an unanswered size request is retried too).', type: int, default: 3}
  timeout: {description: Seconds without data before a connection counts as failed., type: float, default: 60}
author: vllm-fleet engineers (@vllm-fleet)
"""

EXAMPLES = r"""
- name: Fetch the GGUF shards from an internal mirror
  model_fetch:
    name: glm-5-q4
    root: /var/lib/vllm-fleet/models
    source: url
    gguf_files: [GLM-5-Q4_K_M-00001-of-00002.gguf, GLM-5-Q4_K_M-00002-of-00002.gguf]
    files:
      - {url: "https://mirror.example/GLM-5-Q4_K_M-00001-of-00002.gguf", sha256: "..."}
      - {url: "https://mirror.example/GLM-5-Q4_K_M-00002-of-00002.gguf", sha256: "..."}
      - {url: "https://mirror.example/config.json", sha256: "..."}
      - {url: "https://mirror.example/tokenizer.json", sha256: "..."}
    expected_architecture: glm-dsa
"""

RETURN = r"""
version: {description: The set's version (from its files' hashes)., returned: always, type: str}
previous_version: {description: The version current pointed at before., returned: always, type: str}
switched: {description: Whether current now points at another version., returned: always, type: bool}
model_dir: {description: The stable path the service reads (root/name/current)., returned: always, type: str}
staging_dir: {description: Where the set is fetched to before it is placed., returned: when not current, type: str}
needed_bytes: {description: Bytes still to fetch., returned: always, type: int}
free_bytes: {description: Free bytes on the staging filesystem., returned: always, type: int}
transfers: {description: "Per file: bytes_transferred, resumed_from, attempts.", returned: always, type: list}
bytes_transferred: {description: Bytes received in this run., returned: always, type: int}
hashed_files: {description: Files hashed in this run (empty when the manifest vouched for them)., returned: always, type: list}
hash_seconds: {description: Time spent hashing., returned: always, type: float}
pruned: {description: Versions removed by retention., returned: always, type: list}
problems: {description: "What is wrong, one sentence each, naming the file.", returned: always, type: list}
"""

from pathlib import Path

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.gguf_files import CONFIG_FILE, OPTIONAL_HF_FILES, TOKENIZER_FILES
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.model_download import FetchError, RemoteFile, resolve_hf
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.model_fetch import FetchRequest, ensure_model
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.model_profile import plain_name_problem, url_file_name

HF_FILES = [CONFIG_FILE, *TOKENIZER_FILES, *OPTIONAL_HF_FILES]


def listed_files(params: dict) -> list[RemoteFile]:
    return [RemoteFile(name=url_file_name(f), url=f.get("url"), sha256=f.get("sha256"), size=f.get("size"))
            for f in params["files"]]


def local_files(params: dict) -> list[RemoteFile]:
    directory = Path(params["local_dir"])
    names = [*params["gguf_files"], *(n for n in HF_FILES if (directory / n).is_file())]
    return [RemoteFile(name=n, local_path=str(directory / n)) for n in names]


def hub_files(params: dict) -> list[RemoteFile]:
    token, endpoint = params["hf_token"], params["hf_endpoint"]
    patterns = params["hf_allow_patterns"] or [f"*{name}" for name in params["gguf_files"]]
    _revision, shards = resolve_hf(params["hf_repo"], params["hf_revision"], patterns, token, endpoint)
    config_repo = params["hf_config_repo"] or params["hf_repo"]
    _config_revision, config = resolve_hf(config_repo, params["hf_config_revision"], HF_FILES, token, endpoint)
    return [s for s in shards if s.name in params["gguf_files"]] + config


def main() -> None:
    file_spec = {"name": {"type": "str"}, "url": {"type": "str"}, "sha256": {"type": "str"}, "size": {"type": "int"}}
    module = AnsibleModule(
        argument_spec={
            "name": {"type": "str", "required": True},
            "root": {"type": "path", "required": True},
            "source": {"type": "str", "required": True, "choices": ["url", "hf", "local", "staged"]},
            "state": {"type": "str", "default": "present", "choices": ["present", "planned"]},
            "gguf_files": {"type": "list", "elements": "str", "required": True},
            "files": {"type": "list", "elements": "dict", "default": [], "options": file_spec},
            "local_dir": {"type": "path"},
            "hf_repo": {"type": "str"},
            "hf_revision": {"type": "str", "default": "main"},
            "hf_allow_patterns": {"type": "list", "elements": "str"},
            "hf_config_repo": {"type": "str"},
            "hf_config_revision": {"type": "str", "default": "main"},
            "hf_token": {"type": "str", "no_log": True},
            "hf_endpoint": {"type": "str"},
            "expected_architecture": {"type": "str"},
            "expected_tensor_count": {"type": "int"},
            "validate_gguf": {"type": "bool", "default": True},
            "keep_previous": {"type": "int", "default": 1},
            "protected_versions": {"type": "list", "elements": "str", "default": []},
            "pinned_model_dirs": {"type": "list", "elements": "str", "default": []},
            "free_space_margin_mib": {"type": "int", "default": 1024},
            "hash_workers": {"type": "int", "default": 4},
            "download_attempts": {"type": "int", "default": 3},
            "timeout": {"type": "float", "default": 60},
        },
        required_if=[("source", "url", ["files"]), ("source", "staged", ["files"]),
                     ("source", "local", ["local_dir"]), ("source", "hf", ["hf_repo"])],
        supports_check_mode=True,
    )
    params = module.params
    bad_names = [problem for name in params["gguf_files"] if (problem := plain_name_problem("gguf_files entry", name))]
    if bad_names:
        module.fail_json(msg="model fetch refused: " + "; ".join(bad_names))
    try:
        files = {"url": listed_files, "staged": listed_files, "local": local_files, "hf": hub_files}[params["source"]](params)
    except (FetchError, OSError, ImportError) as error:
        module.fail_json(msg=f"model fetch failed: cannot list the {params['source']} source's files: {error}")
    except Exception as error:  # noqa: BLE001 - huggingface_hub's errors (missing repo, auth) named as they come
        module.fail_json(msg=f"model fetch failed: cannot list the hub's files: {type(error).__name__}: {error}")
    bad_names = [problem for f in files if (problem := plain_name_problem("file name", f.name))]
    if bad_names:
        module.fail_json(msg="model fetch refused: " + "; ".join(bad_names))
    missing_hashes = [f.name for f in files if params["source"] == "url" and not f.sha256]
    if missing_hashes:
        module.fail_json(msg=f"model fetch refused: no sha256 in the model profile for {', '.join(missing_hashes)}")
    request = FetchRequest(
        root=params["root"], name=params["name"], source=params["source"], files=files,
        gguf_files=params["gguf_files"], expected_architecture=params["expected_architecture"],
        expected_tensor_count=params["expected_tensor_count"], validate_gguf=params["validate_gguf"],
        keep_previous=params["keep_previous"], protected_versions=frozenset(params["protected_versions"]),
        pinned_model_dirs=tuple(params["pinned_model_dirs"]),
        margin_bytes=params["free_space_margin_mib"] * 2**20,
        hash_workers=params["hash_workers"], attempts=params["download_attempts"], timeout=params["timeout"],
        hf_token=params["hf_token"], hf_endpoint=params["hf_endpoint"])
    try:
        result = ensure_model(request, check_mode=module.check_mode, plan_only=params["state"] == "planned")
    except ImportError as error:
        module.fail_json(msg=f"model fetch failed: {error}; run this module with a Python that has gguf "
                             "(and huggingface_hub for the hf source): the role's model_python, by default the vLLM venv's")
    report = result.as_dict()
    if result.problems:
        module.fail_json(msg="model fetch failed: " + "; ".join(result.problems), **report)
    module.exit_json(**report)


if __name__ == "__main__":
    main()
