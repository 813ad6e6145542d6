"""plugins/module_utils/dsa_policy.py: sparse DSA or dense MLA, from nvidia-smi outputs recorded on real machines."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.dsa_policy import PolicyError, check_backend, decide
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.nvidia_smi import parse_query_csv, parse_query_xml

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi"


def capabilities_csv(name: str) -> list[str]:
    return [row["compute_cap"] for row in parse_query_csv((FIXTURES / name).read_text())]


def test_h200_recorded_on_the_device_machine_is_sm90():
    assert capabilities_csv("h200-1gpu.query.csv") == ["9.0"]


def test_h200_with_indexer_serves_sparse_dsa():
    decision = decide(capabilities_csv("h200-1gpu.query.csv"), has_indexer=True)
    assert decision.mode == "sparse" and decision.warning is None
    assert "SM 9.0" in decision.reason


def test_h200_without_indexer_serves_dense_without_a_warning():
    decision = decide(capabilities_csv("h200-1gpu.query.csv"), has_indexer=False)
    assert decision.mode == "dense" and "no DSA indexer tensors" in decision.reason
    assert decision.warning is None


def test_rtx_pro_6000_with_indexer_serves_dense_and_warns():
    ccs = capabilities_csv("rtx-pro-6000-server-9gpu.query.csv")
    assert set(ccs) == {"12.0"} and len(ccs) == 9
    decision = decide(ccs, has_indexer=True)
    assert decision.mode == "dense"
    assert "SM 12.x" in decision.reason and "FLASHINFER_MLA_SPARSE_SM120" in decision.reason
    assert decision.warning and "dense MLA" in decision.warning


def test_rtx_pro_6000_maxq_xml_is_sm12_too():
    gpus = parse_query_xml((FIXTURES / "rtx-pro-6000-maxq-blackwell.q.xml").read_text())["gpus"]
    names = [gpu["name"] for gpu in gpus]
    assert any("RTX PRO 6000" in name for name in names)
    assert decide(["12.0"] * len(gpus), has_indexer=True).mode == "dense"


def test_sparse_requested_on_sm12_is_refused_with_the_reason():
    with pytest.raises(PolicyError, match="livelocks"):
        decide(capabilities_csv("rtx-pro-6000-server-9gpu.query.csv"), has_indexer=True, requested="sparse")


def test_sparse_requested_without_indexer_is_refused():
    with pytest.raises(PolicyError, match="no DSA indexer tensors"):
        decide(["9.0"], has_indexer=False, requested="sparse")


def test_dense_request_always_wins():
    assert decide(["9.0"], has_indexer=True, requested="dense").mode == "dense"
    assert decide(["12.0"], has_indexer=True, requested="DENSE").mode == "dense"


@pytest.mark.parametrize(("ccs", "mode"), [(["10.0"], "sparse"), (["10.3", "10.0"], "sparse"),
                                           (["8.9"], "dense"), (["8.0"], "dense"), (["9.0", "12.0"], "dense"),
                                           ([], "dense")])
def test_capability_families(ccs, mode):
    assert decide(ccs, has_indexer=True).mode == mode


def test_cpu_is_dense_even_with_indexer():
    decision = decide([], has_indexer=True, platform="cpu")
    assert decision.mode == "dense" and "cpu platform" in decision.reason


def test_unknown_mode_is_refused():
    with pytest.raises(PolicyError, match="expected one of"):
        decide(["9.0"], has_indexer=True, requested="fast")


def test_backend_must_match_the_mode():
    sparse = decide(["9.0"], has_indexer=True)
    dense = decide(["12.0"], has_indexer=True)
    with pytest.raises(PolicyError, match="TRITON_MLA runs dense MLA only"):
        check_backend(sparse, "TRITON_MLA")
    with pytest.raises(PolicyError, match="runs sparse DSA only"):
        check_backend(dense, "FLASHINFER_MLA_SPARSE_SM120")
    check_backend(sparse, "")
    check_backend(sparse, "FLASH_ATTN_MLA_SPARSE")
    check_backend(dense, "TRITON_MLA")


def test_role_precheck_lists_the_same_dense_only_backends():
    """The vllm_service precheck refuses sparse DSA on a dense-only backend with the module's list."""
    import re

    from ansible_collections.vllm_fleet.fleet.plugins.module_utils.dsa_policy import DENSE_MLA_BACKENDS
    task = (Path(__file__).resolve().parents[2] / "roles" / "vllm_service" / "tasks" / "precheck.yml").read_text()
    listed = re.search(r"vllm_service_attention_backend \| upper in \[([^\]]*)\]", task)
    assert listed, "the precheck no longer checks the backend against the DSA mode"
    assert {name.strip(" '\"") for name in listed.group(1).split(",")} == DENSE_MLA_BACKENDS
