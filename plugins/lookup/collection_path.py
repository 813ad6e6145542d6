"""Lookup plugin: the path of a file the vllm_fleet.fleet collection ships (its patch series, triage rules, launcher)."""

from __future__ import annotations

DOCUMENTATION = r"""
name: collection_path
author: vllm-fleet engineers (@vllm-fleet)
version_added: 0.1.0
short_description: The path on the controller of a file or directory shipped in this collection
description:
  - Returns the absolute path of each term, taken relative to the root of the collection this
    plugin was loaded from (an installed C(vllm_fleet.fleet), or the checkout that is the collection).
  - Roles find the data they share (C(files/patches), C(files/triage/rules.json), the service launcher)
    through it, wherever the collection is installed.
  - Fails naming the term when it is absolute, leaves the collection, or does not exist.
options:
  _terms:
    description: Paths relative to the collection's root, for example C(files/patches).
    required: true
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Show where the patch series are
  ansible.builtin.debug:
    msg: "{{ lookup('vllm_fleet.fleet.collection_path', 'files/patches') }}"
"""

RETURN = r"""
_raw:
  description: The absolute path of each term.
  type: list
  elements: path
"""

import os
from pathlib import Path

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

# plugins/lookup/collection_path.py -> the collection's root.
COLLECTION_ROOT = Path(__file__).resolve().parents[2]


def collection_file(term: str, root: Path = COLLECTION_ROOT) -> Path:
    """root/term, refused when term is absolute, climbs out of root or names nothing there."""
    if not term or os.path.isabs(term):
        raise AnsibleLookupError(f"collection_path: {term!r} is not a path relative to the collection's root")
    path = Path(os.path.normpath(root / term))
    if path != root and root not in path.parents:
        raise AnsibleLookupError(f"collection_path: {term!r} leaves the collection at {root}")
    if not path.exists():
        raise AnsibleLookupError(f"collection_path: {term!r} is not in the collection at {root}")
    return path


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        self.set_options(var_options=variables, direct=kwargs)
        return [str(collection_file(term)) for term in terms]
