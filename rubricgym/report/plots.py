"""Curves and colours drawn by matplotlib (Agg backend, inline SVG; nothing fetched).

Each curve is a ``Line2D`` with a ``gid`` (``curve-<key>``), which matplotlib writes as the
id of the SVG group holding the line and one marker per point, so a browser (or a test) can
find a metric's curve and count its points.
"""

from __future__ import annotations

import io
import math
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
from matplotlib import colormaps  # noqa: E402
from matplotlib.colors import TwoSlopeNorm, to_hex  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

ADVANTAGE_CMAP = "RdBu"
MARKER_LIMIT = 400  # beyond this many points markers would only blur the line


def slug(key: str) -> str:
    """``"TRCA reward (mean)"`` -> ``"trca-reward-mean"``: an id for HTML and SVG."""
    return "-".join("".join(c if c.isalnum() else " " for c in key).split()).lower()


def curve_svg(title: str, series: Mapping[str, Sequence[tuple[float, float]]], ylabel: str = "",
              xlabel: str = "iteration") -> str:
    """One plot (several named series) as an inline ``<svg>`` string."""
    with plt.rc_context({"svg.fonttype": "none", "svg.hashsalt": f"rubricgym-{slug(title)}",
                         "svg.id": f"plot-{slug(title)}", "font.size": 9}):
        fig, ax = plt.subplots(figsize=(4.2, 2.6))
        try:
            for key, points in series.items():
                xs = [p[0] for p in points]
                ys = [p[1] for p in points]
                marker = "o" if len(points) <= MARKER_LIMIT else "."
                ax.plot(xs, ys, marker=marker, markersize=3 if len(points) <= MARKER_LIMIT else 1.5, linewidth=1.2,
                        label=key, gid=f"curve-{slug(key)}")
            ax.set_title(title)
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
            ax.set_xlabel(xlabel)
            if ylabel:
                ax.set_ylabel(ylabel)
            ax.grid(True, alpha=0.3)
            if len(series) > 1:
                ax.legend(fontsize=7, loc="best")
            fig.tight_layout()
            buf = io.StringIO()
            fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None})
        finally:
            plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg"):]  # drop the XML prolog and DOCTYPE: the SVG is inline


def advantage_color(value: float | None, max_abs: float) -> str:
    """A diverging colour for an advantage (blue positive, red negative, white zero)."""
    if value is None or not math.isfinite(value):
        return "#eeeeee"
    scale = max(max_abs, 1e-9)
    norm = TwoSlopeNorm(vmin=-scale, vcenter=0.0, vmax=scale)
    return to_hex(colormaps[ADVANTAGE_CMAP](float(norm(max(-scale, min(scale, value))))))


def text_color(value: float | None, max_abs: float) -> str:
    """Readable text on ``advantage_color``: white on the dark ends of the map."""
    if value is None or max_abs <= 0:
        return "#000000"
    return "#ffffff" if abs(value) / max_abs > 0.6 else "#000000"
