"""Draws a trace's timeline to an image: host op ranges, device stream rows,
and the device memory curve. The library has already reduced the data to
the drawing resolution, so this only plots rectangles and points.

matplotlib is the package's one optional dependency (the extra ``openreg-trace[plot]``): without it every
other command works, and this one says what to install."""

from __future__ import annotations

import importlib.util
import zlib
from typing import Any

from ._native import TraceError

INSTALL_HINT = "pip install 'openreg-trace[plot]'"


def require_matplotlib() -> None:
    """Raises TraceError (status "missing") naming what to install when matplotlib is not importable."""
    if importlib.util.find_spec("matplotlib") is None:
        raise TraceError(
            "missing",
            f"timeline draws with matplotlib, which is not installed: {INSTALL_HINT} (or pip install matplotlib)",
        )


def _color(name: str, cmap: Any) -> Any:
    # A stable colour per name: crc32 is the same in every run (hash() is not).
    return cmap((zlib.crc32(name.encode()) % 20) / 20.0)


def _rows(ax: Any, rows: list[dict[str, Any]], names: list[str], cmap: Any, label_min: float) -> None:
    for y, row in enumerate(rows):
        blocks = row["blocks"]
        spans = [(b[0] / 1e6, max((b[1] - b[0]) / 1e6, 1e-9)) for b in blocks]
        colors = [_color(names[b[2]], cmap) for b in blocks]
        ax.broken_barh(spans, (y - 0.4, 0.8), facecolors=colors, linewidth=0)
        for b, (x, w) in zip(blocks, spans):
            if w >= label_min:
                ax.text(x + w / 2, y, names[b[2]], ha="center", va="center", fontsize=6, clip_on=True)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r["label"] for r in rows], fontsize=7)
    ax.set_ylim(len(rows) - 0.5, -0.5)


def draw(data: dict[str, Any], output: str, title: str = "", dpi: int = 120) -> None:
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = data["names"]
    host, device, memory = data["host_rows"], data["device_rows"], data["memory"]
    device_memory = [m for m in memory if m["device_type"] != 0] or memory
    heights = [max(len(host), 1) * 0.5 + 0.6, max(len(device), 1) * 0.5 + 0.6, 2.0]
    fig, axes = plt.subplots(
        3, 1, sharex=True, figsize=(14, sum(heights) + 1.2), gridspec_kw={"height_ratios": heights}
    )
    ax_host, ax_dev, ax_mem = axes
    cmap = plt.get_cmap("tab20")
    start_ms, end_ms = data["start_ns"] / 1e6, data["end_ns"] / 1e6
    label_min = (end_ms - start_ms) / 25 if end_ms > start_ms else 0.0

    for s in data["steps"]:
        for ax in axes:
            ax.axvspan(s[0] / 1e6, s[1] / 1e6, color="0.93", zorder=0)
        if (s[1] - s[0]) / 1e6 >= label_min:
            ax_host.text(s[0] / 1e6, -0.5, s[2], fontsize=6, va="bottom", ha="left", color="0.4")

    if host:
        _rows(ax_host, host, names, cmap, label_min)
    else:
        ax_host.text(0.5, 0.5, "no host ops", transform=ax_host.transAxes, ha="center", va="center")
        ax_host.set_yticks([])
    ax_host.set_title("host ops (outermost per thread)", fontsize=9, loc="left")

    if device:
        _rows(ax_dev, device, names, cmap, label_min)
    else:
        ax_dev.text(0.5, 0.5, "no device events", transform=ax_dev.transAxes, ha="center", va="center")
        ax_dev.set_yticks([])
    ax_dev.set_title("device streams", fontsize=9, loc="left")

    top = 0.0
    for m in device_memory:
        pts = m["points"]
        if not pts:
            continue
        xs = [p[0] / 1e6 for p in pts]
        ys = [p[1] / 2**20 for p in pts]
        # The last level holds until the end of the trace.
        if end_ms > xs[-1]:
            xs.append(end_ms)
            ys.append(ys[-1])
        top = max(top, max(ys))
        ax_mem.step(xs, ys, where="post", linewidth=1, label=f"{m['device_type_name']}:{m['device_id']}")
    if device_memory:
        ax_mem.legend(fontsize=7, loc="lower right")
        ax_mem.set_ylim(0, top * 1.15 if top > 0 else 1)
    else:
        ax_mem.text(0.5, 0.5, "no [memory] events", transform=ax_mem.transAxes, ha="center", va="center")
    ax_mem.set_ylabel("allocated (MiB)", fontsize=8)
    ax_mem.set_title("memory", fontsize=9, loc="left")
    ax_mem.set_xlabel("time since trace start (ms)")
    if end_ms > start_ms:
        ax_mem.set_xlim(start_ms, end_ms)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(output, dpi=dpi)
    plt.close(fig)
