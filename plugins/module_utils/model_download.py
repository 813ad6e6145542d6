"""Fetch a model set into a staging directory: HTTP with resume, Hugging Face, a local path.

Nothing here trusts an exit code or a status line: the caller verifies every file's size and
sha256 afterwards. Downloads resume with HTTP Range from a ``<name>.part`` file.
"""

from __future__ import annotations

import errno
import fnmatch
import hashlib
import http.client
import shutil
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Callable, TypeVar

CHUNK = 4 * 1024 * 1024
T = TypeVar("T")


@dataclass
class RemoteFile:
    name: str                       # the file's name in the placed set
    url: str | None = None          # url source
    hub_path: str | None = None     # hf source: path inside the repository
    hub_repo: str | None = None
    hub_revision: str | None = None  # the commit, once resolved
    local_path: str | None = None   # local source
    size: int | None = None
    sha256: str | None = None       # expected, when the source knows it
    git_blob_sha1: str | None = None  # hf files kept in git (not LFS): the blob id


@dataclass
class Transfer:
    name: str
    bytes_transferred: int = 0
    resumed_from: int = 0
    attempts: int = 0


class FetchError(Exception):
    """A file could not be fetched; the message names it."""


@dataclass
class SpaceCheck:
    needed: int
    free: int
    margin: int
    path: str
    problems: list[str] = field(default_factory=list)


def existing_ancestor(path: Path) -> Path:
    while not path.exists():
        path = path.parent
    return path


def check_free_space(staging: Path, files: list[RemoteFile], margin: int) -> SpaceCheck:
    """Bytes still to fetch (minus partial downloads) against the free space of the staging filesystem."""
    needed = 0
    for remote in files:
        if remote.size is None:
            continue
        done = staging / remote.name
        part = staging / f"{remote.name}.part"
        have = done.stat().st_size if done.is_file() else part.stat().st_size if part.is_file() else 0
        needed += max(0, remote.size - have)
    where = existing_ancestor(staging)
    free = shutil.disk_usage(where).free
    check = SpaceCheck(needed, free, margin, str(where))
    if needed + margin > free:
        check.problems.append(
            f"not enough disk space for the model: {gib(needed)} to download + {gib(margin)} margin, "
            f"{gib(free)} free on {where}")
    return check


def gib(size: int) -> str:
    return f"{size / 2**30:.2f} GiB"


def shown_url(url: str) -> str:
    """The URL as messages show it: a presigned URL's query (signature, token) and any user:password
    are secrets, so only scheme, host and path are kept."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "<query hidden>" if parts.query else "", ""))


def open_request(request: urllib.request.Request, timeout: float):
    """The response to request; raises HTTPError for an error status, URLError or OSError for no answer."""
    # urllib's default opener, as its module-level open function uses: proxies from the environment,
    # redirects, HTTPS with the default context. Not Ansible's open_url: this also runs without Ansible.
    return urllib.request.build_opener().open(request, timeout=timeout)


def head_size(name: str, url: str, headers: dict[str, str], timeout: float, attempts: int = 1) -> int:
    """The file's size from a HEAD request, asked again (see with_retries) while attempts are left."""
    request = urllib.request.Request(url, method="HEAD", headers=headers)

    def ask(_attempt: int) -> str | None:
        with open_request(request, timeout) as response:
            return response.headers.get("Content-Length")

    try:
        length = with_retries(ask, attempts)
    except (OSError, http.client.HTTPException) as error:
        tried = f" (after {max(1, attempts)} attempt(s))" if worth_retrying(error) else ""
        raise FetchError(f"{name}: {shown_url(url)}: {error}{tried}") from error
    if length is None:
        raise FetchError(f"{name}: {shown_url(url)}: the server sends no Content-Length; give the size in the model profile")
    return int(length)


# Errors of the local file, not of the network: another attempt would meet them again.
LOCAL_WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EROFS}
# Answers a server gives while it is busy, restarting or behind a failing proxy; 501 and 505 (the
# server cannot do what was asked) and every 4xx but these two are final.
PASSING_HTTP_STATUSES = {408, 429} | (set(range(500, 600)) - {501, 505})
# Seconds to wait before the 2nd, 3rd, ... attempt: a restarting server or a flapping link gets
# time to recover instead of being asked again within the same millisecond.
RETRY_PAUSES_S = (2.0, 5.0, 15.0, 30.0)
# The most a server's Retry-After may make one pause last.
RETRY_AFTER_MAX_S = 300.0


class ShortDownload(http.client.HTTPException):
    """The server closed the response before the whole file had come."""


def is_network_error(error: BaseException) -> bool:
    """No answer, a refused, reset or dropped connection, a broken TLS stream, a malformed response:
    errors of the way to the server, unlike those of the local file (permissions, space, a path)."""
    if isinstance(error, urllib.error.URLError):
        return not isinstance(error.reason, ssl.SSLCertVerificationError)  # a certificate does not heal
    if isinstance(error, http.client.InvalidURL):
        return False
    return isinstance(error, (ConnectionError, TimeoutError, ssl.SSLError, http.client.HTTPException))


def worth_retrying(error: BaseException) -> bool:
    """No answer, a dropped connection or a busy server may heal by the next attempt; a final error
    status, a rejected certificate or an error of the local file will not."""
    if isinstance(error, urllib.error.HTTPError):
        return error.code in PASSING_HTTP_STATUSES
    return is_network_error(error)


def retry_pause_s(attempt: int) -> float:
    """Seconds to wait before attempt (2, 3, ...): growing, then the longest again and again."""
    return RETRY_PAUSES_S[max(0, min(attempt - 2, len(RETRY_PAUSES_S) - 1))]


def retry_after_s(error: BaseException) -> float:
    """A busy server's own Retry-After in seconds (an HTTP-date is not read), capped; else 0."""
    if not isinstance(error, urllib.error.HTTPError) or error.code not in (429, 503) or error.headers is None:
        return 0.0
    value = (error.headers.get("Retry-After") or "").strip()
    return min(float(value), RETRY_AFTER_MAX_S) if value.isdigit() else 0.0


def pause(seconds: float) -> None:
    time.sleep(seconds)


def with_retries(attempt_once: Callable[[int], T], attempts: int) -> T:
    """attempt_once(n)'s result for the first n in 1..attempts that returns; an error not worth
    retrying, or the last attempt's error, is raised as it is."""
    last = max(1, attempts)
    for attempt in range(1, last + 1):
        try:
            return attempt_once(attempt)
        except (OSError, http.client.HTTPException) as error:
            if attempt == last or not worth_retrying(error):
                raise
            pause(max(retry_pause_s(attempt + 1), retry_after_s(error)))
    raise AssertionError("unreachable: the last attempt returns or raises")


def http_download(remote: RemoteFile, staging: Path, headers: dict[str, str], timeout: float,
                  attempts: int) -> Transfer:
    """Fetch remote.url to staging/remote.name, resuming a .part file with a Range request."""
    part = staging / f"{remote.name}.part"
    if remote.size is not None and part.exists() and part.stat().st_size > remote.size:
        part.unlink()  # left by a run whose profile gave another size: not a prefix of this file
    transfer = Transfer(remote.name, resumed_from=part.stat().st_size if part.exists() else 0)

    def attempt_once(attempt: int) -> None:
        transfer.attempts = attempt
        have = part.stat().st_size if part.exists() else 0
        transfer.bytes_transferred += fetch_range(remote.url or "", part, have, headers, timeout)
        size = part.stat().st_size
        if remote.size is not None and size > remote.size:
            part.unlink()
            raise FetchError(f"{remote.name}: the server sent {size} bytes, more than the {remote.size} the model "
                             f"profile gives for {shown_url(remote.url or '')}: the profile's size or URL is wrong "
                             "for this file (not retried; the part file is removed)")
        if remote.size is not None and size < remote.size:
            raise ShortDownload(f"got {size} of {remote.size} bytes")

    try:
        with_retries(attempt_once, attempts)
    except urllib.error.HTTPError as error:
        if worth_retrying(error):
            raise incomplete(remote, part, transfer, error) from error
        raise FetchError(f"{remote.name}: {shown_url(remote.url or '')}: {error}") from error
    except (OSError, http.client.HTTPException) as error:
        if is_network_error(error):
            raise incomplete(remote, part, transfer, error) from error
        raise local_file_error(remote, part, error) from error
    part.replace(staging / remote.name)
    return transfer


def local_file_error(remote: RemoteFile, part: Path, error: BaseException) -> FetchError:
    if isinstance(error, OSError) and error.errno in LOCAL_WRITE_ERRORS:
        return FetchError(f"{remote.name}: cannot write {part} ({error.strerror}, [Errno {error.errno}]); not retried: "
                          "a full, over-quota or read-only filesystem does not heal by itself. Make room and re-run: "
                          "the part file is kept and resumed")
    return FetchError(f"{remote.name}: cannot fetch into {part} ({error}); not retried: an error of the staging "
                      "directory or of the request, not of the network (its owner, mode, path or the URL); "
                      "fix it and re-run")


def incomplete(remote: RemoteFile, part: Path, transfer: Transfer, error: BaseException) -> FetchError:
    return FetchError(f"{remote.name}: download incomplete after {transfer.attempts} attempt(s) "
                      f"({str(error) or type(error).__name__}); {part} is kept and a re-run resumes it")


def fetch_range(url: str, part: Path, offset: int, headers: dict[str, str], timeout: float) -> int:
    """Append url's bytes from offset to part; returns the bytes received (a server that ignores Range restarts the file)."""
    request = urllib.request.Request(url, headers={**headers, **({"Range": f"bytes={offset}-"} if offset else {})})
    try:
        response = open_request(request, timeout)
    except urllib.error.HTTPError as error:
        if error.code == 416 and offset:  # nothing left past offset: the .part is whole
            return 0
        raise
    received = 0
    with response, part.open("ab" if offset and response.status == 206 else "wb") as out:
        while chunk := response.read(CHUNK):
            out.write(chunk)
            received += len(chunk)
    return received


def copy_local(remote: RemoteFile, staging: Path) -> Transfer:
    source = Path(remote.local_path or "")
    target = staging / remote.name
    if not source.is_file():
        raise FetchError(f"{remote.name}: not found at {source}")
    temporary = staging / f"{remote.name}.part"
    shutil.copyfile(source, temporary)
    temporary.replace(target)
    return Transfer(remote.name, bytes_transferred=target.stat().st_size, attempts=1)


def git_blob_sha1(path: Path) -> str:
    """Git's object id of a file (what the hub reports for files not kept in LFS)."""
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def matches(path: str, patterns: list[str]) -> bool:
    return any(fnmatch.fnmatch(path, pattern) for pattern in patterns)


def resolve_hf(repo: str, revision: str | None, patterns: list[str], token: str | None,
               endpoint: str | None) -> tuple[str, list[RemoteFile]]:
    """The commit a revision names and the repository's files matching patterns, with sizes and hashes."""
    from huggingface_hub import HfApi

    info = HfApi(endpoint=endpoint, token=token or None).model_info(repo, revision=revision, files_metadata=True)
    files = []
    for sibling in info.siblings or []:
        if not matches(sibling.rfilename, patterns):
            continue
        lfs = sibling.lfs
        files.append(RemoteFile(
            name=PurePosixPath(sibling.rfilename).name, hub_path=sibling.rfilename, hub_repo=repo, hub_revision=info.sha,
            size=lfs.size if lfs else sibling.size, sha256=lfs.sha256 if lfs else None,
            git_blob_sha1=None if lfs else sibling.blob_id))
    return info.sha, files


def hf_download(remote: RemoteFile, staging: Path, token: str | None, endpoint: str | None) -> Transfer:
    """hf_hub_download into staging/.hf (its own resume and fast transfer), then move the file into the set."""
    from huggingface_hub import hf_hub_download

    hub_dir = staging / ".hf"
    partial = sum(p.stat().st_size for p in hub_dir.rglob("*.incomplete")) if hub_dir.is_dir() else 0
    try:
        path = hf_hub_download(repo_id=remote.hub_repo or "", filename=remote.hub_path or remote.name,
                               revision=remote.hub_revision, local_dir=hub_dir, token=token or None, endpoint=endpoint)
    except Exception as error:  # noqa: BLE001 - the hub raises many kinds; each becomes a named failure
        raise FetchError(f"{remote.name}: {type(error).__name__}: {error}") from error
    Path(path).replace(staging / remote.name)
    return Transfer(remote.name, bytes_transferred=max(0, (remote.size or 0) - partial), resumed_from=partial, attempts=1)
