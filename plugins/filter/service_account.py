"""service_account_problems / service_group_problems: whether an account may run the vLLM service
(and be cleaned up as it), and whether a group may read its env files.

The cleanup before every start stops the service user's processes, so the user must be a
dedicated system account: one the vllm_service role created (system uid, no login shell, the
service's home), or none yet (the role then creates it). Root and any other account are refused.
"""

from __future__ import annotations

NO_LOGIN_SHELLS = ("/usr/sbin/nologin", "/sbin/nologin", "/bin/false", "/usr/bin/false")
# Debian's SYS_UID_MAX (login.defs): regular accounts start at 1000.
SYSTEM_UID_MAX = 999


def service_account_problems(user: str, passwd_entry: list | None, home: str) -> list[str]:
    """Why `user` must not be the service user; [] when it may.

    passwd_entry: the getent passwd fields after the name (password, uid, gid, gecos, home,
    shell), or None when the account does not exist yet.
    """
    if user == "root":
        return ["vllm_service_user is root: vLLM must run as a dedicated non-root system account"]
    if not passwd_entry:
        return []
    uid, account_home, shell = int(passwd_entry[1]), passwd_entry[4], passwd_entry[5]
    problems = []
    if uid == 0:
        problems.append(f"vllm_service_user {user} has uid 0")
    elif uid > SYSTEM_UID_MAX:
        problems.append(f"vllm_service_user {user} is a regular account (uid {uid})")
    if shell not in NO_LOGIN_SHELLS:
        problems.append(f"vllm_service_user {user} has a login shell ({shell})")
    if account_home != home:
        problems.append(f"vllm_service_user {user} has home {account_home}, not vllm_service_home {home}")
    return problems


def service_group_problems(group: str, group_entry: list | None, user: str) -> list[str]:
    """Why `group` must not be the service group, which may read the env files (API key, extra
    env): root's, or one with other members (sudo, adm, docker ...). group_entry: the getent
    group fields after the name (password, gid, members), or None when it does not exist yet."""
    if group == "root" or (group_entry and int(group_entry[1]) == 0):
        return [f"vllm_service_group {group} has gid 0"]
    members = [m for m in (group_entry[2].split(",") if group_entry and group_entry[2] else []) if m != user]
    if members:
        return [f"vllm_service_group {group} has other members ({', '.join(members)}), who could read the "
                "service's env files"]
    return []


class FilterModule:
    def filters(self) -> dict:
        return {"service_account_problems": service_account_problems,
                "service_group_problems": service_group_problems}
