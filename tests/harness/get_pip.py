"""A stand-in for the get-pip script that ansible-test's sanity venvs bootstrap with.

ansible-test creates each sanity test's venv without pip, then runs
`python ~/.ansible/test/cache/get_pip_<version>.py --disable-pip-version-check pip==<version>
[--no-setuptools] [--no-wheel]` with that venv's interpreter (and a cleaned environment). It
downloads the script from a host that only ansible's own CI reaches, unless the file is already in
the cache. `place()` writes a script there that does the same job with a pip already on the
machine: it copies the `pip` package (not its metadata) out of the controller venv, imports it
from the copy and installs the requested pip into the interpreter that runs it, from the package
index the machine's pip configuration names. Without the metadata the running pip is not an
installed distribution, so the install never touches the controller's pip.
"""

from __future__ import annotations

import re
import shutil
import sys
import sysconfig
import tempfile
from pathlib import Path

GET_PIP_ONLY_FLAGS = ("--no-setuptools", "--no-wheel")
CACHE = Path.home() / ".ansible" / "test" / "cache"


def pip_install_arguments(argv: list[str]) -> list[str]:
    """get-pip's own flags say what not to add; pip install takes the rest as they are."""
    return ["install", *(arg for arg in argv if arg not in GET_PIP_ONLY_FLAGS)]


def bootstrap(pip_source: Path, argv: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="get-pip-") as scratch:
        shutil.copytree(pip_source / "pip", Path(scratch) / "pip")
        sys.path.insert(0, scratch)
        from pip._internal.cli.main import main as pip_main  # pylint: disable=import-outside-toplevel

        return pip_main(pip_install_arguments(argv))


def ansible_test_pip_version() -> str:
    """The pip version ansible-test bootstraps its venvs with (its python_requirements' default)."""
    import ansible_test  # pylint: disable=import-outside-toplevel

    source = (Path(ansible_test.__file__).parent / "_internal" / "python_requirements.py").read_text()
    found = re.search(r"pip='(\d+(?:\.\d+)*)'", source)
    if not found:
        raise RuntimeError("cannot find the pip version ansible-test bootstraps with")
    return found.group(1)


def place(cache: Path = CACHE) -> Path:
    """Write the bootstrap script where ansible-test looks for it, unless a real one is there."""
    script = cache / f"get_pip_{ansible_test_pip_version().replace('.', '_')}.py"
    if script.exists() and "vllm-fleet stand-in" not in script.read_text():
        return script
    cache.mkdir(parents=True, exist_ok=True)
    script.write_text(
        "# vllm-fleet stand-in for get-pip (tests/harness/get_pip.py)\n"
        "import sys\n"
        f"sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
        "from pathlib import Path\n"
        "from tests.harness.get_pip import bootstrap\n"
        f"sys.exit(bootstrap(Path({sysconfig.get_paths()['purelib']!r}), sys.argv[1:]))\n")
    return script
