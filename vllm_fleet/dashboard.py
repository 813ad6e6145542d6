"""vllm-fleet dashboard: the Grafana dashboard's panels drawn from Prometheus as one PNG, no Grafana needed.

  vllm-fleet dashboard [--prometheus URL] [--via SSH_DESTINATION [--ssh-option OPT ...]]
                       [--hosts REGEX] [--minutes 60] [--end ISO_TIME] [--out FILE.png]

Reads the dashboard the monitoring role ships (files/monitoring/grafana-dashboard.json), runs each
panel's queries over the minutes up to --end (now by default; an incident's time for a post-mortem)
through Prometheus's /api/v1/query_range, `$host` set to --hosts, and draws the panels where the
dashboard places them, with their legends and units: what Grafana shows, for an incident note or a
host without Grafana. Prometheus listens on the monitoring host's
loopback: `--via MONITORING_HOST` reaches --prometheus as that host sees it, through an SSH tunnel
this command opens and closes (ssh's own configuration applies; --ssh-option adds -o options). The series
drawn are written into the PNG as the text chunk "vllm-fleet-series" (JSON). Exit 0 with a
picture, 1 when no panel has data, 2 when Prometheus cannot be asked or matplotlib is missing.
"""

from __future__ import annotations

import argparse
import json
import re
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator
from urllib.parse import urlsplit, urlunsplit

from ansible_collections.vllm_fleet.fleet.plugins.module_utils.prometheus import PrometheusError, query_range
from vllm_fleet.png import pyplot, save
from vllm_fleet.tunnel import TunnelError, forwarded_port

GRID_COLUMNS = 24  # Grafana's grid: 24 columns, rows of 30 px
FIGURE_WIDTH, ROW_INCHES, TITLE_INCHES = 16.0, 0.3, 0.6
POINTS_PER_PANEL = 240
LEGEND_FIELD = re.compile(r"\{\{\s*(\w+)\s*\}\}")


@dataclass
class Series:
    label: str
    points: list[tuple[float, float]]


@dataclass
class Panel:
    title: str
    unit: str
    grid: dict[str, int]
    targets: list[dict[str, str]]
    series: list[Series] = field(default_factory=list)


def load_panels(dashboard: dict[str, Any]) -> list[Panel]:
    return [Panel(title=panel["title"], unit=panel.get("fieldConfig", {}).get("defaults", {}).get("unit", "short"),
                  grid=panel["gridPos"], targets=panel["targets"])
            for panel in dashboard["panels"] if panel.get("type") == "timeseries"]


def legend(template: str, metric: dict[str, str]) -> str:
    """Grafana's legendFormat: "p99 {{host}}" with the series' labels filled in."""
    text = LEGEND_FIELD.sub(lambda found: metric.get(found.group(1), ""), template).strip()
    return text or json.dumps(metric, sort_keys=True)


def fetch(panels: list[Panel], base_url: str, hosts: str, start: float, end: float) -> None:
    step = max(5.0, round((end - start) / POINTS_PER_PANEL))
    for panel in panels:
        for target in panel.targets:
            expr = target["expr"].replace("$host", hosts)
            for answer in query_range(base_url, expr, start, end, step):
                points = [(float(stamp), float(value)) for stamp, value in answer["values"]]
                panel.series.append(Series(legend(target.get("legendFormat", ""), answer["metric"]), points))


def unit_formatter(unit: str) -> Any:
    from matplotlib.ticker import FuncFormatter, PercentFormatter

    if unit == "percentunit":
        return PercentFormatter(xmax=1.0)
    if unit == "s":
        return FuncFormatter(lambda value, _pos: f"{value * 1000:.0f} ms" if abs(value) < 1 else f"{value:.2f} s")
    if unit == "reqps":
        return FuncFormatter(lambda value, _pos: f"{value:g} req/s")
    return FuncFormatter(lambda value, _pos: f"{value:g}")


def figure_height(rows: int) -> float:
    """Inches for `rows` Grafana grid rows and the figure's title."""
    return rows * ROW_INCHES + TITLE_INCHES


def panel_box(grid: dict[str, int], rows: int) -> list[float]:
    """A panel's axes in figure fractions, from its Grafana gridPos, leaving room for its title,
    tick labels and the figure's title."""
    left, right, below, above = 0.85, 0.25, 0.45, 0.4  # inches
    height = figure_height(rows)
    x0 = grid["x"] / GRID_COLUMNS * FIGURE_WIDTH + left
    y0 = height - TITLE_INCHES - (grid["y"] + grid["h"]) * ROW_INCHES + below
    return [x0 / FIGURE_WIDTH, y0 / height, (grid["w"] / GRID_COLUMNS * FIGURE_WIDTH - left - right) / FIGURE_WIDTH,
            (grid["h"] * ROW_INCHES - below - above) / height]


def draw(panels: list[Panel], out: Path, title: str, start: float, end: float) -> None:
    plt = pyplot()
    import matplotlib.dates as mdates

    rows = max(panel.grid["y"] + panel.grid["h"] for panel in panels)
    fig = plt.figure(figsize=(FIGURE_WIDTH, figure_height(rows)), dpi=100)
    span = [datetime.fromtimestamp(stamp, timezone.utc) for stamp in (start, end)]
    for panel in panels:
        axis = fig.add_axes(panel_box(panel.grid, rows))
        axis.set_title(panel.title, loc="left", fontsize=11)
        axis.yaxis.set_major_formatter(unit_formatter(panel.unit))
        axis.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M", tz=timezone.utc))
        axis.set_xlim(*span)
        axis.grid(True, alpha=0.3)
        for series in panel.series:
            times = [datetime.fromtimestamp(stamp, timezone.utc) for stamp, _value in series.points]
            axis.plot(times, [value for _stamp, value in series.points], label=series.label, linewidth=1.5)
        if panel.series:
            axis.legend(loc="upper left", fontsize=8)
        else:
            axis.text(0.5, 0.5, "no data", transform=axis.transAxes, ha="center", va="center", color="grey")
    fig.suptitle(title, x=0.01, y=1 - 0.15 / figure_height(rows), ha="left", va="top", fontsize=13)
    drawn = {panel.title: {series.label: series.points for series in panel.series} for panel in panels}
    save(fig, out, drawn)


@contextmanager
def prometheus_url(url: str, via: str | None, ssh_options: list[str]) -> Iterator[str]:
    """The URL to ask: `url` itself, or with --via the local end of a tunnel to it."""
    if via is None:
        yield url
        return
    parts = urlsplit(url)
    remote = (parts.hostname or "127.0.0.1", parts.port or 9090)
    with forwarded_port(via, remote, prometheus_answers(parts.path), ssh_options) as port:
        yield urlunsplit((parts.scheme, f"127.0.0.1:{port}", parts.path, parts.query, parts.fragment))


def prometheus_answers(path: str) -> Callable[[int], bool]:
    def ready(port: int) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}{path.rstrip('/')}/-/ready", timeout=2):
                return True
        except OSError:
            return False
    return ready


def end_timestamp(end: datetime) -> float:
    """A naive time is UTC, as Prometheus and the picture's axes are."""
    return (end if end.tzinfo else end.replace(tzinfo=timezone.utc)).timestamp()


def main(argv: list[str], dashboard: Path) -> int:
    parser = argparse.ArgumentParser(prog="vllm-fleet dashboard", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--prometheus", default="http://127.0.0.1:9090", help="Prometheus's URL (default: %(default)s)")
    parser.add_argument("--hosts", default=".*", help="regex of the host labels to draw, Grafana's $host (default: all)")
    parser.add_argument("--minutes", type=float, default=60.0, help="time range up to --end (default: %(default)s)")
    parser.add_argument("--end", type=datetime.fromisoformat, default=None,
                        help="end of the range, ISO 8601 (2026-12-04T12:48:00+00:00; default: now)")
    parser.add_argument("--out", type=Path, default=Path("vllm-fleet-dashboard.png"), help="the PNG to write")
    parser.add_argument("--via", metavar="SSH_DESTINATION",
                        help="reach --prometheus as this host sees it, through an SSH tunnel (the monitoring host)")
    parser.add_argument("--ssh-option", action="append", default=[], metavar="OPT",
                        help="with --via: an ssh -o option, e.g. IdentityFile=~/.ssh/fleet (repeatable)")
    args = parser.parse_args(argv)
    definition = json.loads(dashboard.read_text())
    panels = load_panels(definition)
    end = time.time() if args.end is None else end_timestamp(args.end)
    try:
        with prometheus_url(args.prometheus, args.via, args.ssh_option) as url:
            fetch(panels, url, args.hosts, end - args.minutes * 60, end)
    except (PrometheusError, TunnelError) as error:
        print(f"dashboard: cannot ask Prometheus: {error}")
        return 2
    if not any(panel.series for panel in panels):
        print(f"dashboard: Prometheus at {args.prometheus} has no data for any panel (hosts {args.hosts!r})")
        return 1
    try:
        draw(panels, args.out, f"{definition['title']}: last {args.minutes:g} min, "
                               f"up to {datetime.fromtimestamp(end, timezone.utc):%Y-%m-%d %H:%M} UTC, hosts {args.hosts}",
             end - args.minutes * 60, end)
    except ImportError:
        print("dashboard: matplotlib is needed to draw (pip install 'vllm-fleet[report]')")
        return 2
    empty = [panel.title for panel in panels if not panel.series]
    print(f"dashboard: {args.out} ({len(panels) - len(empty)} of {len(panels)} panels with data"
          + (f"; no data: {', '.join(empty)})" if empty else ")"))
    return 0
