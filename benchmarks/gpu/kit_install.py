#!/usr/bin/env python3
"""Device side of benchmarks/gpu/make-kit-033.sh: install every kit wheel whose parts have all arrived.

  kit_install.py KIT_DIR SITE_DIR [--group core --group cutlass ...]

KIT_DIR collects the files of the kit folders carried so far (k1, k2, ...). A wheel whose parts are
all there is joined, checked against kit.json's sha256 and unpacked into SITE_DIR (what
`pip install --target --no-deps` does for these wheels: purelib/platlib go to the top, other
.data folders are skipped); its parts are then deleted. Run it after every carried folder:
it installs what is complete and says what is still missing. Idempotent (SITE_DIR/.kit-installed).
Standard library only; wheels unpack in parallel.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import zipfile
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path


def unpack(wheel: Path, site: Path) -> int:
    count = 0
    with zipfile.ZipFile(wheel) as archive:
        for info in archive.infolist():
            name = info.filename
            first, _, rest = name.partition("/")
            if first.endswith(".data"):
                kind, _, inner = rest.partition("/")
                if kind not in ("purelib", "platlib") or not inner:
                    continue
                name = inner
            if name.endswith("/"):
                continue
            target = site / name
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(info) as src, open(target, "wb") as out:
                while block := src.read(1 << 22):
                    out.write(block)
            mode = (info.external_attr >> 16) & 0o777
            if mode:
                os.chmod(target, mode)
            count += 1
    return count


def join_and_install(kit: Path, site: Path, wheel: str, entry: dict) -> str:
    joined = kit / wheel
    digest = hashlib.sha256()
    with open(joined, "wb") as out:
        for part in entry["parts"]:
            data = (kit / part).read_bytes()
            digest.update(data)
            out.write(data)
    if digest.hexdigest() != entry["sha256"]:
        joined.unlink()
        raise RuntimeError(f"{wheel}: sha256 mismatch after joining {len(entry['parts'])} parts")
    files = unpack(joined, site)
    joined.unlink()
    for part in entry["parts"]:
        (kit / part).unlink()
    return f"{wheel} ({files} files)"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kit", type=Path)
    ap.add_argument("site", type=Path)
    ap.add_argument("--group", action="append", help="only these groups (default: all)")
    args = ap.parse_args()
    meta = json.loads((args.kit / "kit.json").read_text())
    args.site.mkdir(parents=True, exist_ok=True)
    done_file = args.site / ".kit-installed"
    done = set(done_file.read_text().split()) if done_file.exists() else set()
    ready, missing = [], {}
    for wheel, entry in meta["wheels"].items():
        if wheel in done or (args.group and entry["group"] not in args.group):
            continue
        absent = [p for p in entry["parts"] if not (args.kit / p).exists()]
        if absent:
            missing[wheel] = len(absent)
        else:
            ready.append(wheel)
    failed = False
    with ProcessPoolExecutor(max_workers=min(16, os.cpu_count() or 4)) as pool:
        futures = {w: pool.submit(join_and_install, args.kit, args.site, w, meta["wheels"][w]) for w in ready}
        for wheel, future in futures.items():
            try:
                future.result()
                done.add(wheel)
            except Exception as err:  # report every wheel, then fail
                print(f"kit_install: {err}", file=sys.stderr)
                failed = True
    done_file.write_text("\n".join(sorted(done)) + "\n")
    print(json.dumps({"installed_now": len(ready), "installed": len(done), "waiting": len(missing),
                      "next": sorted(missing)[:3]}))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
