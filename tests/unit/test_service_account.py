"""Which accounts may run the vLLM service: only one the role made, or a new one."""

from __future__ import annotations

from ansible_collections.vllm_fleet.fleet.plugins.filter.service_account import service_account_problems, service_group_problems

HOME = "/var/lib/vllm"


def test_a_new_account_or_the_one_the_role_made_may_run_the_service():
    assert service_account_problems("vllm", None, HOME) == []
    assert service_account_problems("vllm", ["x", "998", "997", "", HOME, "/usr/sbin/nologin"], HOME) == []


def test_root_and_accounts_the_role_did_not_make_are_refused():
    assert service_account_problems("root", ["x", "0", "0", "root", "/root", "/bin/bash"], HOME) == [
        "vllm_service_user is root: vLLM must run as a dedicated non-root system account"]
    assert service_account_problems("toor", ["x", "0", "0", "", HOME, "/usr/sbin/nologin"], HOME) == [
        "vllm_service_user toor has uid 0"]
    assert service_account_problems("alice", ["x", "1000", "1000", "Alice", "/home/alice", "/bin/bash"], HOME) == [
        "vllm_service_user alice is a regular account (uid 1000)",
        "vllm_service_user alice has a login shell (/bin/bash)",
        "vllm_service_user alice has home /home/alice, not vllm_service_home /var/lib/vllm"]
    # A system daemon's account (here Debian's messagebus) is not the service's either.
    assert service_account_problems("messagebus", ["x", "100", "101", "", "/nonexistent", "/usr/sbin/nologin"],
                                    HOME) == ["vllm_service_user messagebus has home /nonexistent, not "
                                              "vllm_service_home /var/lib/vllm"]


def test_the_service_group_is_new_or_holds_no_one_else():
    assert service_group_problems("vllm", None, "vllm") == []
    assert service_group_problems("vllm", ["x", "997", ""], "vllm") == []
    assert service_group_problems("vllm", ["x", "997", "vllm"], "vllm") == []
    assert service_group_problems("root", ["x", "0", ""], "vllm") == ["vllm_service_group root has gid 0"]
    assert service_group_problems("sudo", ["x", "27", "alice,bob"], "vllm") == [
        "vllm_service_group sudo has other members (alice, bob), who could read the service's env files"]
