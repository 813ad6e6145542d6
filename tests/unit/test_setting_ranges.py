from __future__ import annotations

from ansible_collections.vllm_fleet.fleet.plugins.filter.setting_ranges import bind_network_problems, gpu_count_problems, setting_range_problems


def test_settings_in_range_pass_and_each_bad_one_is_named():
    assert setting_range_problems({"port": [8000, 1, 65535], "util": [0.9, "0)", 1]}) == []
    assert setting_range_problems({"port": [70000, 1, 65535], "util": [0, "0)", 1], "keep": [0, 1, None],
                                   "tp": ["two", 1, None]}) == [
        "keep=0 is below its range (at least 1)",
        "port=70000 is above its range (at most 65535)",
        "tp='two' is not a number",
        "util=0 is below its range (more than 0)",
    ]
    assert setting_range_problems({"util": [1.2, "0)", 1]}) == ["util=1.2 is above its range (at most 1)"]


def test_tensor_parallelism_must_fit_the_visible_gpus():
    assert gpu_count_problems(8, 8) == []
    assert gpu_count_problems(8, 4) == ["tensor_parallel_size=8 needs 8 GPUs, but the host has 4"]
    assert gpu_count_problems(4, 8, "0,1") == ["tensor_parallel_size=4 needs 4 GPUs, but CUDA_VISIBLE_DEVICES=0,1 has 2"]


def test_bind_network_must_hold_the_host_address():
    assert bind_network_problems("10.88.0.0/16", "10.88.0.20") == []
    assert bind_network_problems("", "10.88.0.20") == []
    assert bind_network_problems("10.88.0.0/16", "vllm-host-1") == []  # a name: resolved at start
    assert bind_network_problems("192.168.1.0/24", "10.88.0.20") == [
        "vllm_service_bind_network=192.168.1.0/24 does not hold vllm_service_host=10.88.0.20"]
    [problem] = bind_network_problems("10.88.0.0/33", "10.88.0.20")
    assert problem.startswith("vllm_service_bind_network='10.88.0.0/33' is not an IPv4 network")
