"""vllm-fleet report: the verify history drawn per host, checked in the PNG itself (its size, the
hosts' line colours on the canvas and the figures it says it drew)."""

from __future__ import annotations

import json
from pathlib import Path

from PIL import Image

from vllm_fleet import report
from vllm_fleet.png import SERIES_KEY


def record(host: str, stamp: str, decode: float, ttft_p99: float) -> dict:
    level = {"output_throughput": 100.0, "ttft_ms": {"p99": ttft_p99}}
    return {"host": host, "model": "glm-5", "timestamp": stamp,
            "result": {"decode": {"tok_s_tpot": decode}, "levels": [level], "decode_load": {"ttft_ms": {"p99": ttft_p99}}}}


def write_history(directory: Path) -> None:
    runs = {"gpu1": [("2026-12-01T10:00:00Z", 55.0, 900.0), ("2026-12-02T10:00:00Z", 57.1, 850.0),
                     ("2026-12-03T10:00:00Z", 41.0, 1600.0)],
            "gpu2": [("2026-12-01T11:00:00Z", 56.0, 880.0), ("2026-12-03T11:00:00Z", 56.5, 870.0)]}
    directory.mkdir()
    for host, rows in runs.items():
        # appended out of order: the report sorts by time
        lines = [json.dumps(record(host, *row)) for row in reversed(rows)]
        (directory / f"{host}.jsonl").write_text("\n".join(lines) + "\n")


def colour_pixels(image: Image.Image, rgb: tuple[int, int, int]) -> int:
    return sum(count for count, colour in image.getcolors(maxcolors=1 << 20) if colour[:3] == rgb)


def test_the_report_draws_each_hosts_history(tmp_path: Path):
    write_history(tmp_path / "history")
    out = tmp_path / "report.png"
    assert report.main(["--history-dir", str(tmp_path / "history"), "--out", str(out)]) == 0
    image = Image.open(out)
    assert image.size == (1000, 700)
    drawn = json.loads(image.text[SERIES_KEY])
    assert drawn["gpu1"]["decode_tok_s"] == [55.0, 57.1, 41.0]
    assert drawn["gpu1"]["ttft_p99_ms"] == [900.0, 850.0, 1600.0]
    assert drawn["gpu2"]["time"] == ["2026-12-01T11:00:00Z", "2026-12-03T11:00:00Z"]
    rgb = image.convert("RGB")
    # matplotlib's first two line colours (C0, C1): one line per host in each panel
    assert colour_pixels(rgb, (0x1F, 0x77, 0xB4)) > 300 and colour_pixels(rgb, (0xFF, 0x7F, 0x0E)) > 300


def test_no_history_is_said_and_draws_nothing(tmp_path: Path, capsys):
    out = tmp_path / "report.png"
    assert report.main(["--history-dir", str(tmp_path), "--out", str(out)]) == 1
    assert "no verify history" in capsys.readouterr().out and not out.exists()
