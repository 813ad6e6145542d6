"""The checkout built as the collection it is (galaxy.yml) and installed into a directory of its
own, as an operator installs it: `ansible-galaxy collection build`, then `install`."""

from __future__ import annotations

import configparser
import subprocess
from pathlib import Path

from tests.conftest import REPO_ROOT, ansible_env

NAME = "vllm_fleet.fleet"


def install(dest: Path) -> Path:
    """Build and install the collection under dest; the collections path to give Ansible."""
    built, collections = dest / "build", dest / "collections"
    built.mkdir(parents=True, exist_ok=True)
    subprocess.run(["ansible-galaxy", "collection", "build", "--force", "--output-path", str(built), str(REPO_ROOT)],
                   check=True, capture_output=True, text=True, env=ansible_env())
    tarball = next(built.glob("vllm_fleet-fleet-*.tar.gz"))
    # --force: the checkout, linked into the controller venv, is the same collection already installed.
    subprocess.run(["ansible-galaxy", "collection", "install", "--force", "--no-deps", "-p", str(collections),
                    str(tarball)], check=True, capture_output=True, text=True, env=ansible_env())
    return collections


def installed_root(collections: Path) -> Path:
    return collections / "ansible_collections" / Path(*NAME.split("."))


def config_without_checkout_roles(dest: Path) -> Path:
    """The checkout's ansible.cfg without roles_path, so that no role resolves from the checkout."""
    config = configparser.ConfigParser(interpolation=None)
    config.read(REPO_ROOT / "ansible.cfg")
    config.remove_option("defaults", "roles_path")
    path = dest / "ansible.cfg"
    with path.open("w") as out:
        config.write(out)
    return path
