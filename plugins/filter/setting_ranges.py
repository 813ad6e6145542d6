"""setting_range_problems / gpu_count_problems / bind_network_problems: the settings an argument
spec can only type-check, checked before any host is changed.

    {{ {'vllm_service_port': [vllm_service_port, 1, 65535]} | vllm_fleet.fleet.setting_range_problems }}

Each entry is [value, minimum, maximum]; a bound may be null (unbounded), and a minimum given
as a string ending in ")" (e.g. "0)") excludes itself.
"""

from __future__ import annotations

import ipaddress


def _bound(value: object) -> tuple[float | None, bool]:
    if value is None:
        return None, False
    if isinstance(value, str) and value.endswith(")"):
        return float(value[:-1]), True
    return float(value), False


def setting_range_problems(settings: dict[str, list]) -> list[str]:
    """One problem per setting outside its range (or not a number); [] when all are in range."""
    problems = []
    for name, (value, minimum, maximum) in sorted(settings.items()):
        try:
            number = float(value)
        except (TypeError, ValueError):
            problems.append(f"{name}={value!r} is not a number")
            continue
        low, exclusive = _bound(minimum)
        high, _high_exclusive = _bound(maximum)
        if low is not None and (number <= low if exclusive else number < low):
            problems.append(f"{name}={value} is below its range ({'more than' if exclusive else 'at least'} {low:g})")
        elif high is not None and number > high:
            problems.append(f"{name}={value} is above its range (at most {high:g})")
    return problems


def gpu_count_problems(tensor_parallel_size: int, gpu_count: int, visible_devices: str = "") -> list[str]:
    """Whether tensor parallelism fits the GPUs the unit sees (CUDA_VISIBLE_DEVICES, else all)."""
    visible = [item for item in str(visible_devices or "").split(",") if item.strip()]
    usable = len(visible) if visible else int(gpu_count)
    if int(tensor_parallel_size) > usable:
        where = f"CUDA_VISIBLE_DEVICES={visible_devices}" if visible else "the host"
        return [f"tensor_parallel_size={tensor_parallel_size} needs {tensor_parallel_size} GPUs, "
                f"but {where} has {usable}"]
    return []


def bind_network_problems(network: str, host: str) -> list[str]:
    """Whether vllm_service_bind_network is an IPv4 network that holds the host's address today."""
    if not network:
        return []
    try:
        parsed = ipaddress.IPv4Network(str(network), strict=False)
    except ValueError as error:
        return [f"vllm_service_bind_network={network!r} is not an IPv4 network ({error})"]
    try:
        inside = ipaddress.IPv4Address(str(host)) in parsed
    except ValueError:
        inside = True  # a name or no address today: the start resolves the network alone
    if not inside:
        return [f"vllm_service_bind_network={network} does not hold vllm_service_host={host}"]
    return []


class FilterModule:
    def filters(self) -> dict:
        return {"setting_range_problems": setting_range_problems, "gpu_count_problems": gpu_count_problems,
                "bind_network_problems": bind_network_problems}
