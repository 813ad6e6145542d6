"""service_account_problems: whether an account may run the vLLM service (and be cleaned up as it).

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


class FilterModule:
    def filters(self) -> dict:
        return {"service_account_problems": service_account_problems}
