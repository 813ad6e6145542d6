"""The collection_path lookup: roles reach shared data relative to the collection's root, not through
role_path/../.."""

from __future__ import annotations

import pytest
from ansible.errors import AnsibleLookupError

from ansible_collections.vllm_fleet.fleet.plugins.lookup.collection_path import COLLECTION_ROOT, collection_file

from tests.conftest import REPO_ROOT


def test_a_shipped_path_resolves_under_the_collection_root():
    assert COLLECTION_ROOT == REPO_ROOT.resolve()
    assert collection_file("files/patches") == COLLECTION_ROOT / "files" / "patches"
    assert collection_file("files/triage/rules.json").is_file()


@pytest.mark.parametrize(("term", "named"), [
    ("files/no-such-thing", "'files/no-such-thing' is not in the collection at"),
    ("../outside", "'../outside' leaves the collection at"),
    ("files/../../outside", "leaves the collection at"),
    ("/etc/passwd", "'/etc/passwd' is not a path relative to the collection's root"),
    ("", "is not a path relative to the collection's root"),
])
def test_a_path_outside_or_missing_fails_naming_it(term: str, named: str):
    with pytest.raises(AnsibleLookupError, match="collection_path: ") as error:
        collection_file(term)
    assert named in str(error.value)


def test_no_role_reaches_shared_data_through_role_path_or_playbook_dir():
    found = [f"{path.relative_to(REPO_ROOT)}:{number}" for path in sorted((REPO_ROOT / "roles").rglob("*.yml"))
             for number, line in enumerate(path.read_text().splitlines(), 1)
             if "role_path }}/.." in line or "playbook_dir ~ '/.." in line]
    assert found == [], found
