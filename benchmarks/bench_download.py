#!/usr/bin/env python3
"""Benchmark the model role's download and hashing on a multi-GB test set.

Writes N files of S GB under .cache/bench-download, serves them with the tests' local HTTP server
(tests/e2e/model_http_server.py), downloads them with the role's resumable downloader, then
hashes them with the role's parallel sha256 (1 thread and N threads) and with coreutils'
`sha256sum` on the same files in the same process run, and prints GB/s and the ratios. Files are
in the page cache when hashed (just written): the figures are CPU-bound, not disk-bound.
Deletes everything it wrote at the end.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.model_download import RemoteFile, http_download  # noqa: E402
from ansible_collections.vllm_fleet.fleet.plugins.module_utils.model_store import sha256_files  # noqa: E402
from tests.e2e.model_http_server import ModelHTTPServer  # noqa: E402

BLOCK = 64 * 2**20


def write_files(directory: Path, count: int, size: int) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    block = os.urandom(BLOCK)
    paths = []
    for index in range(count):
        path = directory / f"bench-{index + 1:05d}-of-{count:05d}.gguf"
        with path.open("wb") as handle:
            for offset in range(0, size, BLOCK):
                handle.write(block[: min(BLOCK, size - offset)])
        paths.append(path)
    return paths


def timed(action) -> tuple[float, object]:
    started = time.perf_counter()
    value = action()
    return time.perf_counter() - started, value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", maxsplit=1)[0])
    parser.add_argument("--files", type=int, default=4)
    parser.add_argument("--size-gb", type=float, default=1.0)
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--dir", type=Path, default=REPO_ROOT / ".cache" / "bench-download")
    args = parser.parse_args()
    size = int(args.size_gb * 1e9)
    total_gb = args.files * size / 1e9
    served, fetched = args.dir / "served", args.dir / "fetched"
    try:
        seconds, paths = timed(lambda: write_files(served, args.files, size))
        print(f"test set: {args.files} x {size / 1e9:.2f} GB written in {seconds:.1f} s ({os.cpu_count()} CPUs)")

        fetched.mkdir(parents=True, exist_ok=True)
        with ModelHTTPServer(served) as server:
            def download() -> int:
                return sum(http_download(RemoteFile(p.name, url=server.url(p.name), size=size), fetched, {}, 60, 1)
                           .bytes_transferred for p in paths)
            seconds, received = timed(download)
        print(f"download (local HTTP server, one file at a time): {received / 1e9:.2f} GB in {seconds:.2f} s "
              f"= {received / 1e9 / seconds:.2f} GB/s")
        shutil.rmtree(fetched)

        baseline, out = timed(lambda: subprocess.run(["sha256sum", *map(str, paths)], check=True,
                                                     capture_output=True, text=True).stdout)
        expected = {Path(line.split()[1]).name: line.split()[0] for line in out.splitlines()}
        print(f"sha256sum (coreutils, files in sequence): {total_gb / baseline:.2f} GB/s ({baseline:.2f} s)")
        for workers in sorted({1, args.workers, args.files}):
            seconds, hashes = timed(lambda workers=workers: sha256_files(paths, workers))
            assert hashes == expected, "hashes disagree with sha256sum"
            print(f"model_store.sha256_files, {workers} thread(s): {total_gb / seconds:.2f} GB/s ({seconds:.2f} s), "
                  f"{baseline / seconds:.2f}x sha256sum")
    finally:
        shutil.rmtree(args.dir, ignore_errors=True)


if __name__ == "__main__":
    main()
