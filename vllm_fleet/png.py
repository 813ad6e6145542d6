"""The PNGs the CLI draws (report, dashboard): matplotlib without a display, and the series drawn
written into the picture as the text chunk "vllm-fleet-series" (JSON), so that a reader can check
a picture against its data."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SERIES_KEY = "vllm-fleet-series"


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend; ImportError without matplotlib."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def save(fig: Any, out: Path, series: Any) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="png", metadata={SERIES_KEY: json.dumps(series, sort_keys=True)})
    pyplot().close(fig)
