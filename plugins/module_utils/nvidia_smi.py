"""Read what nvidia-smi and sysfs say about a host's NVIDIA GPUs, and decide the driver policy.

Parsers for `nvidia-smi -q -x`, `nvidia-smi --query-gpu=... --format=csv`, `nvidia-smi topo -m`
and the "Driver/library version mismatch" error; a PCI scan of sysfs that works before any driver
is installed; and the policy decisions of the nvidia_driver role (kernel-module flavour, driver
branch against GPU generation, fabric manager, reboot), each raising PolicyError with a message
that names the problem.

Standard library only: it runs on the managed host inside an Ansible module.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass, field
from pathlib import Path

NVIDIA_PCI_VENDOR = "0x10de"
DISPLAY_CLASS_PREFIX = "0x03"  # VGA (0x0300) and 3D controller (0x0302)

# PCI device-id ranges per architecture (from the PCI ID database); lowest compute capability of
# the generation. Blackwell spans 10.0 (B200, GB100: 0x29xx) and 12.0 (GB20x: 0x2Bxx-0x2Fxx).
PCI_DEVICE_RANGES: tuple[tuple[int, int, str, str], ...] = (
    (0x1340, 0x17FF, "Maxwell", "5.0"),
    (0x1B00, 0x1DFF, "Pascal", "6.0"),
    (0x1D80, 0x1DBF, "Volta", "7.0"),
    (0x1E00, 0x21FF, "Turing", "7.5"),
    (0x20B0, 0x20FF, "Ampere", "8.0"),
    (0x2200, 0x25FF, "Ampere", "8.0"),
    (0x2600, 0x28FF, "Ada Lovelace", "8.9"),
    (0x2300, 0x234F, "Hopper", "9.0"),
    (0x2900, 0x29FF, "Blackwell", "10.0"),
    (0x2B00, 0x2FFF, "Blackwell", "12.0"),
)

ARCHITECTURE_COMPUTE_CAPABILITY = {
    "Maxwell": "5.0", "Pascal": "6.0", "Volta": "7.0", "Turing": "7.5", "Ampere": "8.0",
    "Ada Lovelace": "8.9", "Hopper": "9.0", "Blackwell": "10.0",
}

# Oldest driver branch that supports each generation, and the last one for generations NVIDIA
# dropped (Maxwell/Pascal/Volta end with the 580 branch).
MIN_BRANCH = {"Maxwell": 340, "Pascal": 375, "Volta": 384, "Turing": 410, "Ampere": 450,
              "Ada Lovelace": 525, "Hopper": 525, "Blackwell": 570}
MAX_BRANCH = {"Maxwell": 580, "Pascal": 580, "Volta": 580}

OPEN_MODULES_MIN_CC = (7, 5)      # open kernel modules exist from Turing on
OPEN_MODULES_REQUIRED_CC = (10, 0)  # Blackwell: the proprietary flavour does not support it
MAX_NVLINKS_PER_GPU = 18          # the most NVLinks one GPU has (H100/B200); more means a switch
FABRIC_ACTIVE_STATES = {"Completed", "In Progress", "Not Started"}

NVML_MISMATCH = re.compile(r"Failed to initialize NVML: Driver/library version mismatch"
                           r"(?:\s*NVML library version: (?P<library>[\d.]+))?", re.IGNORECASE)
QUERY_FIELDS = "index,name,compute_cap,memory.total,driver_version"
REBOOT_POLICIES = ("never", "if_needed", "always")
KERNEL_FLAVOURS = ("auto", "open", "proprietary")


class PolicyError(ValueError):
    """A requested driver configuration that cannot work on the detected GPUs."""


@dataclass
class PciGpu:
    address: str
    device_id: str
    architecture: str | None
    compute_capability: str | None


@dataclass
class Topology:
    gpus: list[str] = field(default_factory=list)
    links: dict[str, dict[str, str]] = field(default_factory=dict)
    cpu_affinity: dict[str, str] = field(default_factory=dict)
    numa_affinity: dict[str, str] = field(default_factory=dict)
    nvlink: bool = False
    nvswitch: bool = False

    def as_dict(self) -> dict:
        return asdict(self)


# ---------------------------------------------------------------------------- parsing


def cc_tuple(compute_capability: str) -> tuple[int, int]:
    major, _dot, minor = compute_capability.partition(".")
    return int(major), int(minor or 0)


def mib(value: str | None) -> int | None:
    match = re.match(r"\s*(\d+)\s*MiB", value or "")
    return int(match.group(1)) if match else None


def _text(element: ET.Element, path: str) -> str | None:
    found = element.find(path)
    if found is None or found.text is None:
        return None
    text = found.text.strip()
    return None if text in ("", "N/A") else text


def parse_query_xml(text: str) -> dict:
    """`nvidia-smi -q -x`: driver, CUDA version and one entry per GPU."""
    # The DOCTYPE names a DTD that is never fetched: ElementTree does not resolve external entities.
    root = ET.fromstring(text)
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        architecture = _text(gpu, "product_architecture")
        gpus.append({
            "index": index,
            "name": _text(gpu, "product_name"),
            "architecture": architecture,
            "pci_bus_id": _text(gpu, "pci/pci_bus_id") or gpu.get("id"),
            "pci_device_id": _text(gpu, "pci/pci_device_id"),
            "memory_total_mib": mib(_text(gpu, "fb_memory_usage/total")),
            "persistence_mode": _text(gpu, "persistence_mode") == "Enabled",
            "fabric_state": _text(gpu, "fabric/state"),
            "compute_capability": None,
        })
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "gpus": gpus,
    }


def parse_query_csv(text: str) -> list[dict[str, str]]:
    """`nvidia-smi --query-gpu=a,b --format=csv`: one dict per GPU, keys without their unit."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    keys = [re.sub(r"\s*\[.*\]$", "", key.strip()) for key in lines[0].split(",")]
    rows = []
    for line in lines[1:]:
        values = [value.strip() for value in line.split(",")]
        if len(values) != len(keys):
            raise ValueError(f"nvidia-smi CSV row has {len(values)} fields, header has {len(keys)}: {line!r}")
        rows.append(dict(zip(keys, values)))
    return rows


def parse_topology(text: str) -> Topology:
    """`nvidia-smi topo -m`: the GPU-to-GPU link matrix, CPU/NUMA affinity, NVLink and NVSwitch."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or "GPU0" not in lines[0]:
        raise ValueError("not an `nvidia-smi topo -m` matrix: no GPU0 column in the first line")
    header = [cell.strip() for cell in re.split(r"\t|\s{2,}", lines[0].strip()) if cell.strip()]
    topology = Topology()
    for line in lines[1:]:
        if line.startswith("Legend"):
            break
        cells = [cell.strip() for cell in line.split("\t")] if "\t" in line else line.split()
        row = cells[0]
        if not row.startswith("GPU"):
            continue
        topology.gpus.append(row)
        topology.links[row] = {}
        for column, value in zip(header, cells[1:]):
            if column.startswith(("GPU", "NIC", "mlx")):
                topology.links[row][column] = value
            elif column == "CPU Affinity":
                topology.cpu_affinity[row] = value
            elif column == "NUMA Affinity":
                topology.numa_affinity[row] = value
    nvlink_counts = {gpu: [int(link[2:]) for peer, link in links.items()
                           if peer.startswith("GPU") and re.fullmatch(r"NV\d+", link)]
                     for gpu, links in topology.links.items()}
    topology.nvlink = any(nvlink_counts.values())
    # A GPU with more NVLinks to its peers than one GPU has is reaching them through NVSwitches.
    topology.nvswitch = any(sum(counts) > MAX_NVLINKS_PER_GPU for counts in nvlink_counts.values())
    return topology


def parse_p2p(text: str) -> dict[str, dict[str, str]]:
    """`nvidia-smi topo -p2p r` (or w, rw, n, a): each GPU's peer-access state to each other GPU."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or "GPU0" not in lines[0]:
        raise ValueError("not an `nvidia-smi topo -p2p` matrix: no GPU0 column in the first line")
    header = lines[0].split()
    matrix: dict[str, dict[str, str]] = {}
    for line in lines[1:]:
        cells = line.split()
        if not cells or not cells[0].startswith("GPU"):
            if line.startswith("Legend"):
                break
            continue
        matrix[cells[0]] = {peer: state for peer, state in zip(header, cells[1:]) if peer != cells[0]}
    return matrix


def nvml_mismatch(output: str) -> dict | None:
    """The user-space library no longer matches the loaded kernel module (after an upgrade)."""
    match = NVML_MISMATCH.search(output)
    if not match:
        return None
    return {"message": match.group(0).splitlines()[0], "library_version": match.group("library")}


def read_loaded_module_version(path: Path) -> str | None:
    """/sys/module/nvidia/version (or /proc/driver/nvidia/version): the kernel module in memory."""
    try:
        text = path.read_text()
    except (FileNotFoundError, NotADirectoryError):
        return None
    match = re.search(r"(\d+\.\d+(?:\.\d+)?)", text)
    return match.group(1) if match else None


# ---------------------------------------------------------------------------- PCI scan


def architecture_of_device(device_id: int) -> tuple[str | None, str | None]:
    # Later (narrower) ranges win where the table overlaps (Volta inside Pascal, Hopper in Ampere).
    found: tuple[str | None, str | None] = (None, None)
    for low, high, architecture, cc in PCI_DEVICE_RANGES:
        if low <= device_id <= high:
            found = (architecture, cc)
    return found


def scan_pci_gpus(sysfs_root: Path) -> list[PciGpu]:
    devices = sysfs_root / "bus" / "pci" / "devices"
    gpus = []
    for device in sorted(devices.iterdir()) if devices.is_dir() else []:
        try:
            vendor = (device / "vendor").read_text().strip().lower()
            pci_class = (device / "class").read_text().strip().lower()
            device_id = (device / "device").read_text().strip().lower()
        except (FileNotFoundError, NotADirectoryError):
            continue
        if vendor != NVIDIA_PCI_VENDOR or not pci_class.startswith(DISPLAY_CLASS_PREFIX):
            continue
        architecture, cc = architecture_of_device(int(device_id, 16))
        gpus.append(PciGpu(device.name, device_id, architecture, cc))
    return gpus


# ---------------------------------------------------------------------------- policy


def kernel_flavour(compute_capabilities: list[str], requested: str) -> str:
    """open or proprietary kernel modules for these GPUs; PolicyError when the request cannot work."""
    if requested not in KERNEL_FLAVOURS:
        raise PolicyError(f"kernel module flavour {requested!r} is not one of {', '.join(KERNEL_FLAVOURS)}")
    ccs = [cc_tuple(cc) for cc in compute_capabilities]
    needs_open = [cc for cc in ccs if cc >= OPEN_MODULES_REQUIRED_CC]
    cannot_open = [cc for cc in ccs if cc < OPEN_MODULES_MIN_CC]
    if needs_open and cannot_open:
        raise PolicyError("this host mixes GPUs that need the open kernel modules (compute capability >= 10) "
                          "with GPUs the open modules do not support (before Turing): no single driver fits")
    if requested == "proprietary" and needs_open:
        shown = ", ".join(sorted({f"{major}.{minor}" for major, minor in needs_open}))
        raise PolicyError(f"the proprietary kernel modules do not support compute capability {shown} "
                          "(Blackwell): set nvidia_driver_kernel_flavour to open or auto")
    if requested == "open" and cannot_open:
        raise PolicyError("the open kernel modules support Turing (compute capability 7.5) and newer; "
                          "this host has older GPUs: set nvidia_driver_kernel_flavour to proprietary or auto")
    if requested != "auto":
        return requested
    return "proprietary" if cannot_open else "open"


def check_branch(branch: int, architectures: list[str]) -> None:
    for architecture in sorted(set(architectures)):
        low, high = MIN_BRANCH.get(architecture), MAX_BRANCH.get(architecture)
        if low is not None and branch < low:
            raise PolicyError(f"driver branch {branch} does not support {architecture} GPUs: "
                              f"the oldest branch that does is {low}")
        if high is not None and branch > high:
            raise PolicyError(f"driver branch {branch} dropped {architecture} GPUs: the last branch "
                              f"that supports them is {high}")


def fabric_manager_needed(topology: Topology | None, fabric_states: list[str | None]) -> bool:
    """Fabric manager runs only where NVSwitches connect the GPUs."""
    if topology is not None and topology.nvswitch:
        return True
    return any(state in FABRIC_ACTIVE_STATES for state in fabric_states)


def reboot_action(policy: str, loaded_version: str | None, installed_version: str | None,
                  changed: bool) -> dict:
    """What to do about the kernel module in memory: nothing, reboot, or fail with the reason.

    A loaded module whose version differs from the installed user space is the NVML mismatch:
    every CUDA program fails until a reboot. No module loaded (first install) needs a reboot too.
    """
    if policy not in REBOOT_POLICIES:
        raise PolicyError(f"reboot policy {policy!r} is not one of {', '.join(REBOOT_POLICIES)}")
    mismatch = bool(loaded_version and installed_version and loaded_version != installed_version)
    not_loaded = loaded_version is None and installed_version is not None
    if mismatch:
        reason = (f"the loaded NVIDIA kernel module is {loaded_version} but {installed_version} is installed "
                  "(Failed to initialize NVML: Driver/library version mismatch until a reboot)")
    elif not_loaded:
        reason = f"NVIDIA driver {installed_version} is installed but its kernel module is not loaded"
    else:
        reason = ""
    if policy == "always" and (changed or reason):
        return {"action": "reboot", "reason": reason or "the driver changed and nvidia_driver_reboot is always",
                "mismatch": mismatch}
    if reason and policy == "if_needed":
        return {"action": "reboot", "reason": reason, "mismatch": mismatch}
    if mismatch:
        return {"action": "fail", "mismatch": True,
                "reason": f"{reason}; nvidia_driver_reboot is never: reboot the host, or set it to if_needed"}
    return {"action": "none", "reason": reason, "mismatch": False}
