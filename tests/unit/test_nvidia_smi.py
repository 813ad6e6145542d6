"""plugins/module_utils/nvidia_smi.py on nvidia-smi outputs recorded on real machines (tests/fixtures/nvidia_smi)."""

from __future__ import annotations

from pathlib import Path

import pytest

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.nvidia_smi import (
    PolicyError,
    Topology,
    architecture_of_device,
    check_branch,
    fabric_manager_needed,
    kernel_flavour,
    nvml_mismatch,
    parse_query_csv,
    parse_query_xml,
    parse_topology,
    read_loaded_module_version,
    reboot_action,
    scan_pci_gpus,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "nvidia_smi"


def fixture(name: str) -> str:
    return (FIXTURES / name).read_text()


def test_blackwell_workstation_xml():
    parsed = parse_query_xml(fixture("rtx-pro-6000-maxq-blackwell.q.xml"))
    assert parsed["driver_version"] == "590.44.01"
    assert parsed["cuda_version"] == "13.1"
    [gpu] = parsed["gpus"]
    assert gpu["name"] == "NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition"
    assert gpu["architecture"] == "Blackwell"
    assert gpu["memory_total_mib"] == 97887
    assert gpu["persistence_mode"] is True
    assert gpu["pci_device_id"] == "2BB410DE"
    assert gpu["fabric_state"] is None  # N/A: no NVSwitch fabric


def test_blackwell_server_query_csv():
    rows = parse_query_csv(fixture("rtx-pro-6000-server-9gpu.query.csv"))
    assert len(rows) == 9
    assert {row["compute_cap"] for row in rows} == {"12.0"}
    assert rows[8] == {"index": "8", "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition", "compute_cap": "12.0",
                       "memory.total": "97887 MiB", "driver_version": "580.65.06"}


def test_csv_row_with_the_wrong_number_of_fields_is_named():
    with pytest.raises(ValueError, match="has 2 fields, header has 3"):
        parse_query_csv("a, b, c\n1, 2\n")


def test_h100_hgx_topology_is_nvswitch():
    topology = parse_topology(fixture("h100-hgx-8gpu.topo.txt"))
    assert topology.gpus == [f"GPU{i}" for i in range(8)]
    assert topology.links["GPU0"]["GPU7"] == "NV18"
    assert topology.links["GPU3"]["GPU3"] == "X"
    assert topology.cpu_affinity["GPU4"] == "48-95,144-191"
    assert topology.numa_affinity["GPU7"] == "1"
    assert topology.nvlink and topology.nvswitch
    assert fabric_manager_needed(topology, [])


def test_pcie_only_topology_with_nics():
    topology = parse_topology(fixture("rtx4090-8gpu-pcie.topo.txt"))
    assert len(topology.gpus) == 8
    assert topology.links["GPU6"]["NIC0"] == "PHB"
    assert topology.links["GPU0"]["GPU1"] == "SYS"
    assert topology.cpu_affinity["GPU0"] == "0-55,112-167"
    assert not topology.nvlink and not topology.nvswitch
    assert not fabric_manager_needed(topology, [None] * 8)


def test_direct_nvlink_pairs_are_not_a_switch():
    topology = parse_topology("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV12\t0-7\nGPU1\tNV12\t X \t0-7\n")
    assert topology.nvlink and not topology.nvswitch


def test_fabric_state_alone_means_nvswitch():
    assert fabric_manager_needed(None, ["Completed"])
    assert not fabric_manager_needed(None, [None, "N/A"])


def test_not_a_topology_is_named():
    with pytest.raises(ValueError, match="no GPU0 column"):
        parse_topology(fixture("nvml-mismatch.stdout.txt"))


def test_nvml_mismatch_recorded_error():
    found = nvml_mismatch(fixture("nvml-mismatch.stdout.txt"))
    assert found == {"message": "Failed to initialize NVML: Driver/library version mismatch", "library_version": "570.124"}
    assert nvml_mismatch(fixture("rtx-pro-6000-server-9gpu.query.csv")) is None


def test_loaded_module_version(tmp_path):
    (tmp_path / "version").write_text("580.65.06\n")
    assert read_loaded_module_version(tmp_path / "version") == "580.65.06"
    proc = tmp_path / "proc"
    proc.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.124.06  Release Build\n")
    assert read_loaded_module_version(proc) == "570.124.06"
    assert read_loaded_module_version(tmp_path / "absent") is None


def test_pci_scan(tmp_path):
    def device(address: str, vendor: str, device_id: str, pci_class: str) -> None:
        path = tmp_path / "bus" / "pci" / "devices" / address
        path.mkdir(parents=True)
        for name, value in (("vendor", vendor), ("device", device_id), ("class", pci_class)):
            (path / name).write_text(value + "\n")
    device("0000:61:00.0", "0x10de", "0x2bb4", "0x030000")  # RTX PRO 6000 Blackwell (recorded XML)
    device("0000:19:00.0", "0x10de", "0x2330", "0x030200")  # H100 SXM
    device("0000:61:00.1", "0x10de", "0x22e8", "0x040300")  # the card's audio function
    device("0000:00:02.0", "0x8086", "0x0412", "0x030000")  # not NVIDIA
    gpus = scan_pci_gpus(tmp_path)
    assert [(gpu.address, gpu.architecture, gpu.compute_capability) for gpu in gpus] == [
        ("0000:19:00.0", "Hopper", "9.0"), ("0000:61:00.0", "Blackwell", "12.0")]
    assert scan_pci_gpus(tmp_path / "nothing") == []


@pytest.mark.parametrize("device_id,architecture", [
    (0x2B85, "Blackwell"), (0x2901, "Blackwell"), (0x2335, "Hopper"), (0x20B0, "Ampere"),
    (0x2684, "Ada Lovelace"), (0x1E04, "Turing"), (0x1DB4, "Volta"), (0x1B06, "Pascal")])
def test_device_ids_map_to_architectures(device_id, architecture):
    assert architecture_of_device(device_id)[0] == architecture


def test_blackwell_gets_open_modules_and_refuses_proprietary():
    assert kernel_flavour(["12.0"], "auto") == "open"
    assert kernel_flavour(["12.0"], "open") == "open"
    with pytest.raises(PolicyError, match=r"proprietary kernel modules do not support compute capability 10\.0, 12\.0"):
        kernel_flavour(["12.0", "10.0"], "proprietary")


def test_older_gpus_and_mixed_hosts():
    assert kernel_flavour(["9.0"], "proprietary") == "proprietary"
    assert kernel_flavour(["7.0"], "auto") == "proprietary"
    with pytest.raises(PolicyError, match="Turing .compute capability 7.5. and newer"):
        kernel_flavour(["6.1"], "open")
    with pytest.raises(PolicyError, match="no single driver fits"):
        kernel_flavour(["12.0", "7.0"], "auto")
    with pytest.raises(PolicyError, match="not one of"):
        kernel_flavour(["12.0"], "closed")


def test_branch_against_generation():
    check_branch(580, ["Blackwell", "Hopper"])
    with pytest.raises(PolicyError, match="driver branch 550 does not support Blackwell GPUs: the oldest branch that does is 570"):
        check_branch(550, ["Blackwell"])
    with pytest.raises(PolicyError, match="driver branch 590 dropped Volta GPUs: the last branch that supports them is 580"):
        check_branch(590, ["Volta"])


@pytest.mark.parametrize("policy,loaded,installed,changed,action", [
    ("never", "580.65.06", "580.65.06", False, "none"),
    ("never", None, "580.65.06", True, "none"),        # first install: said, not forced
    ("never", "575.57.08", "580.65.06", True, "fail"),  # NVML mismatch, reboot not allowed
    ("if_needed", "575.57.08", "580.65.06", False, "reboot"),
    ("if_needed", None, "580.65.06", True, "reboot"),
    ("if_needed", "580.65.06", "580.65.06", True, "none"),
    ("always", "580.65.06", "580.65.06", True, "reboot"),
    ("always", "580.65.06", "580.65.06", False, "none"),
])
def test_reboot_decision(policy, loaded, installed, changed, action):
    decision = reboot_action(policy, loaded, installed, changed)
    assert decision["action"] == action
    assert decision["mismatch"] == (loaded is not None and loaded != installed)


def test_reboot_refusal_names_both_versions_and_the_way_out():
    decision = reboot_action("never", "575.57.08", "580.65.06", False)
    assert "loaded NVIDIA kernel module is 575.57.08 but 580.65.06 is installed" in decision["reason"]
    assert "set it to if_needed" in decision["reason"]
    with pytest.raises(PolicyError, match="reboot policy 'sometimes'"):
        reboot_action("sometimes", None, None, False)
    assert Topology().as_dict()["nvswitch"] is False
