"""DeepSeek sparse attention (DSA) or dense MLA for a GLM-5 / DeepSeek-V3.2 GGUF, per platform.

The decision the vllm_service role renders as FLEET_DSA_ATTENTION (read by the GGUF plugin's
patch 0008) and checks the attention backend against:
- no DSA indexer tensors in the GGUF (llama.cpp's first glm-dsa GGUFs): dense MLA, everywhere;
- CPU: dense MLA (vLLM's CPU platform has no sparse MLA backend);
- SM 12.x (RTX PRO 6000 Blackwell, RTX 50xx): dense MLA even with indexer tensors, with a warning:
  the only sparse MLA backend there, FLASHINFER_MLA_SPARSE_SM120, livelocks under sustained load;
- SM 9.x (Hopper) and SM 10.x (B200/B300) with indexer tensors: sparse DSA;
- anything older (no sparse MLA kernels): dense MLA.
Dense MLA is exact for sequences up to index_topk tokens (DSA then selects every token).
An explicit "dense" is always allowed; an explicit "sparse" is refused where it cannot work or is
unsafe. Several GPUs of different capability: the most restrictive rule wins.

Standard library only (runs inside Ansible filters and modules).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

MODES = ("auto", "dense", "sparse")
SPARSE_CAPABILITY_MAJORS = (9, 10)
UNSAFE_SPARSE_MAJORS = {12: "FLASHINFER_MLA_SPARSE_SM120, the only sparse MLA backend on SM 12.x, "
                            "livelocks under sustained load"}
# vLLM's MLA backends (--attention-backend), by whether they run sparse DSA.
DENSE_MLA_BACKENDS = frozenset({"TRITON_MLA", "FLASH_ATTN_MLA", "FLASHMLA", "FLASHINFER_MLA", "CUTLASS_MLA"})
SPARSE_MLA_BACKENDS = frozenset({"FLASH_ATTN_MLA_SPARSE", "FLASHMLA_SPARSE", "FLASHINFER_MLA_SPARSE",
                                 "FLASHINFER_MLA_SPARSE_SM90", "FLASHINFER_MLA_SPARSE_SM120"})


# Compute capability by the GPU name nvidia-smi prints, for planning on a machine without the GPU.
COMPUTE_CAPABILITY_BY_NAME = {"RTX PRO 6000": "12.0", "RTX 50": "12.0", "H100": "9.0", "H200": "9.0",
                              "GH200": "9.0", "H20": "9.0", "B200": "10.0", "GB200": "10.0", "B300": "10.3",
                              "GB300": "10.3", "A100": "8.0", "L40S": "8.9"}


def compute_capability_for(gpu_name: str) -> str | None:
    """The compute capability of a GPU by its name (the longest matching table entry), or None."""
    matches = [key for key in COMPUTE_CAPABILITY_BY_NAME if key.lower() in gpu_name.lower()]
    return COMPUTE_CAPABILITY_BY_NAME[max(matches, key=len)] if matches else None


class PolicyError(ValueError):
    """The requested attention mode cannot run on this platform or model."""


@dataclass(frozen=True)
class DsaDecision:
    mode: str            # "dense" or "sparse"
    reason: str
    warning: str | None = None

    def as_dict(self) -> dict:
        return asdict(self)


def capability_major(compute_capability: str) -> int:
    major, _dot, _minor = str(compute_capability).strip().partition(".")
    return int(major)


def decide(compute_capabilities: list[str], has_indexer: bool, platform: str = "cuda",
           requested: str = "auto") -> DsaDecision:
    """Dense MLA or sparse DSA; raises PolicyError for a "sparse" request that cannot run safely."""
    requested = (requested or "auto").strip().lower()
    if requested not in MODES:
        raise PolicyError(f"DSA attention mode {requested!r}: expected one of {', '.join(MODES)}")
    if requested == "dense":
        return DsaDecision("dense", "dense MLA requested")
    blocker = _sparse_blocker(compute_capabilities, has_indexer, platform)
    if requested == "sparse":
        if blocker:
            raise PolicyError(f"sparse DSA was requested, but {blocker[0]}")
        return DsaDecision("sparse", "sparse DSA requested")
    if blocker:
        reason, warn = blocker
        return DsaDecision("dense", reason, f"{reason}: serving with dense MLA (exact up to index_topk tokens)"
                           if warn else None)
    return DsaDecision("sparse", "DSA indexer tensors present and every GPU has a sparse MLA backend "
                                 f"(SM {', '.join(sorted(set(map(str, compute_capabilities))))})")


def _sparse_blocker(compute_capabilities: list[str], has_indexer: bool, platform: str) -> tuple[str, bool] | None:
    """(why sparse DSA cannot or must not run, whether that deserves a warning), or None."""
    if not has_indexer:
        return "the GGUF has no DSA indexer tensors", False
    if platform != "cuda":
        return f"the {platform} platform has no sparse MLA backend", True
    if not compute_capabilities:
        return "no GPU compute capability is known", True
    majors = {capability_major(cc) for cc in compute_capabilities}
    for major, why in sorted(UNSAFE_SPARSE_MAJORS.items()):
        if major in majors:
            return f"sparse MLA on SM {major}.x is unsafe ({why})", True
    unsupported = sorted(m for m in majors if m not in SPARSE_CAPABILITY_MAJORS)
    if unsupported:
        return f"SM {', '.join(f'{m}.x' for m in unsupported)} has no sparse MLA backend", True
    return None


def check_backend(decision: DsaDecision, backend: str) -> None:
    """Refuse an --attention-backend that cannot run the decided mode (empty: vLLM picks)."""
    name = (backend or "").strip().upper()
    if not name:
        return
    if decision.mode == "sparse" and name in DENSE_MLA_BACKENDS:
        raise PolicyError(f"attention backend {name} runs dense MLA only, but this model and platform serve "
                          "sparse DSA: leave the backend empty (vLLM picks a sparse one) or name a *_SPARSE one")
    if decision.mode == "dense" and name in SPARSE_MLA_BACKENDS:
        raise PolicyError(f"attention backend {name} runs sparse DSA only, but this deployment serves dense MLA "
                          f"({decision.reason}): use TRITON_MLA or leave it empty")
