"""vllm-fleet report: the verify history drawn as a PNG, decode tok/s and TTFT p99 over time per host.

  vllm-fleet report [--history-dir DIR] [--out FILE.png]

Reads the JSON lines the verify role appends on the controller (one file per host,
plugins/module_utils/bench_history.py). The figures drawn are written into the PNG too, as the text
chunk "vllm-fleet-series" (JSON), so a reader can check a picture against its data. Exit 0 with a
picture, 1 when there is no history to draw, 2 without matplotlib.
"""

from __future__ import annotations

import argparse
import os
from datetime import datetime
from pathlib import Path

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.bench_history import figure, read_history
from vllm_fleet.png import pyplot, save

PANELS = {"decode_tok_s": "decode tok/s (one stream)", "ttft_p99_ms": "TTFT p99 (ms)"}


def default_history_dir() -> Path:
    """Where the verify role writes by default (roles/verify/defaults/main.yml verify_history_dir)."""
    return Path(os.environ.get("VLLM_FLEET_RESULTS_DIR", Path.home() / ".local/state/vllm-fleet/verify"))


def series_by_host(history_dir: Path) -> dict[str, dict[str, list]]:
    """{host: {"time": [...], "decode_tok_s": [...], "ttft_p99_ms": [...]}} in time order."""
    series: dict[str, dict[str, list]] = {}
    for path in sorted(history_dir.glob("*.jsonl")):
        for record in sorted(read_history(path), key=lambda record: record["timestamp"]):
            host = series.setdefault(record["host"], {"time": [], **{name: [] for name in PANELS}})
            host["time"].append(record["timestamp"])
            for name in PANELS:
                host[name].append(figure(record["result"], name))
    return series


def draw(series: dict[str, dict[str, list]], out: Path) -> None:
    plt = pyplot()
    fig, axes = plt.subplots(len(PANELS), 1, figsize=(10, 7), dpi=100, sharex=True)
    for axis, (name, label) in zip(axes, PANELS.items()):
        for host, figures in series.items():
            times = [datetime.fromisoformat(stamp.replace("Z", "+00:00")) for stamp in figures["time"]]
            axis.plot(times, figures[name], marker="o", label=host)
        axis.set_ylabel(label)
        axis.grid(True, alpha=0.3)
    axes[0].legend(loc="best")
    axes[0].set_title("vllm-fleet verify history")
    axes[-1].set_xlabel("time (UTC)")
    fig.autofmt_xdate()
    save(fig, out, series)


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="vllm-fleet report", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--history-dir", type=Path, default=default_history_dir(),
                        help="the verify history (default: $VLLM_FLEET_RESULTS_DIR or ~/.local/state/vllm-fleet/verify)")
    parser.add_argument("--out", type=Path, default=Path("vllm-fleet-report.png"), help="the PNG to write")
    args = parser.parse_args(argv)
    series = series_by_host(args.history_dir)
    if not series:
        print(f"report: no verify history in {args.history_dir} (run verify first)")
        return 1
    try:
        draw(series, args.out)
    except ImportError:
        print("report: matplotlib is needed to draw (pip install 'vllm-fleet[report]')")
        return 2
    runs = sum(len(figures["time"]) for figures in series.values())
    print(f"report: {args.out} ({len(series)} host(s), {runs} verify run(s))")
    return 0
