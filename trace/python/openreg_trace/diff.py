"""Two traces (or two folders of traces) compared, as HTA's TraceDiff does:
per op and per kernel, count and device time, the largest changes first."""

from __future__ import annotations

from typing import Any


def _totals(summaries: list[dict[str, Any]], key: str, value: str, count: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for s in summaries:
        for row in s[key]:
            name = row["name"] if row["name"] is not None else "(linked to no op)"
            entry = out.setdefault(name, {"count": 0, "device_ns": 0})
            entry["count"] += row[count]
            entry["device_ns"] += row[value]
    return out


def _compare(base: dict[str, dict[str, int]], new: dict[str, dict[str, int]]) -> list[dict[str, Any]]:
    rows = []
    for name in base.keys() | new.keys():
        b = base.get(name, {"count": 0, "device_ns": 0})
        n = new.get(name, {"count": 0, "device_ns": 0})
        rows.append(
            {
                "name": name,
                "status": "added" if name not in base else "removed" if name not in new else "both",
                "base_count": b["count"],
                "new_count": n["count"],
                "count_delta": n["count"] - b["count"],
                "base_device_ns": b["device_ns"],
                "new_device_ns": n["device_ns"],
                "device_ns_delta": n["device_ns"] - b["device_ns"],
            }
        )
    rows.sort(key=lambda r: (-abs(r["device_ns_delta"]), -abs(r["count_delta"]), r["name"]))
    return rows


def diff_summaries(base: list[dict[str, Any]], new: list[dict[str, Any]]) -> dict[str, Any]:
    """Summaries as ortrace_summary returns them, with every row (a `top`
    larger than the number of kernels and ops). An op counts its calls that
    launched device work."""

    def total(side: list[dict[str, Any]]) -> int:
        return sum(s["device_total_ns"] for s in side)

    return {
        "base_traces": len(base),
        "new_traces": len(new),
        "base_device_ns": total(base),
        "new_device_ns": total(new),
        "device_ns_delta": total(new) - total(base),
        "kernels": _compare(
            _totals(base, "top_kernels", "total_ns", "count"), _totals(new, "top_kernels", "total_ns", "count")
        ),
        "ops": _compare(
            _totals(base, "ops", "device_ns", "op_instances"), _totals(new, "ops", "device_ns", "op_instances")
        ),
    }
