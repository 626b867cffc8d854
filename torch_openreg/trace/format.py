"""Text rendering of the library's summary and check results (JSON in, lines out)."""

from __future__ import annotations

from typing import Any


def duration(ns: int | float) -> str:
    ns = float(ns)
    a = abs(ns)
    if a < 1e3:
        return f"{ns:.0f} ns"
    if a < 1e6:
        return f"{ns / 1e3:.3f} us"
    if a < 1e9:
        return f"{ns / 1e6:.3f} ms"
    return f"{ns / 1e9:.3f} s"


def size(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n} B"


def percent(x: float) -> str:
    return f"{100.0 * x:.1f}%"


def _table(rows: list[list[str]], header: list[str], right: set[int]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]

    def line(r: list[str]) -> str:
        cells = [str(c).rjust(widths[i]) if i in right else str(c).ljust(widths[i]) for i, c in enumerate(r)]
        return "  " + "  ".join(cells).rstrip()

    return [line(header)] + [line(r) for r in rows]


def _lane(value: Any) -> str:
    return str(value)


def summary_text(s: dict[str, Any], path: str = "") -> str:
    out: list[str] = []
    t = s["trace"]
    window = s.get("window")
    head = f"Trace {path}: {t['events']:,} events, {size(t['bytes'])}"
    if window:
        head += f", profiling window {duration(window['duration_ns'])}"
    out.append(head)
    cats = ", ".join(t["device_categories"]) or "none"
    rts = ", ".join(t["runtime_categories"]) or "none"
    out.append(f"  device categories: {cats}; runtime categories: {rts}")
    if t["malformed_events"]:
        out.append(f"  warning: {t['malformed_events']} malformed events were ignored (run `check` for details)")

    total = s["device_total_ns"]
    out.append("")
    if not s["top_kernels"]:
        out.append("No device events (kernels, copies, memsets) in this trace.")
    else:
        out.append(f"Top kernels by device time ({duration(total)} of device work, {s['kernel_names']} names)")
        rows = [
            [duration(k["total_ns"]), percent(k["share"]), str(k["count"]), duration(k["avg_ns"]),
             duration(k["max_ns"]), k["name"] if k["category"] == "kernel" else f"{k['name']} [{k['category']}]"]
            for k in s["top_kernels"]
        ]
        out += _table(rows, ["total", "share", "count", "avg", "max", "name"], {0, 1, 2, 3, 4})

        out.append("")
        out.append("Device time per op (the op that launched the work)")
        rows = [
            [duration(o["device_ns"]), percent(o["share"]), str(o["device_events"]),
             str(o["op_instances"]) if o["linked"] else "-", o["name"] if o["linked"] else "(linked to no op)"]
            for o in s["ops"]
        ]
        out += _table(rows, ["device", "share", "events", "calls", "op"], {0, 1, 2, 3})

        links = s["links"]
        out.append("")
        out.append(
            f"Device events linked to an op: {links['linked']:,} of {links['device_events']:,} "
            f"({percent(links['share'])}; {links['via_external_id']:,} by External id, "
            f"{links['via_correlation']:,} through their launch's correlation)"
        )
        per_cat = ", ".join(f"{c['category']} {percent(c['share'])}" for c in links["by_category"])
        out.append(f"  by category: {per_cat}")

        out.append("")
        out.append("Device utilisation per stream (busy time / the device's first-to-last span)")
        rows = []
        for st in s["streams"]:
            rows.append([_lane(st["device"]), _lane(st["stream"]), st["name"] or "", f"{st['events']:,}",
                         duration(st["busy_ns"]), duration(st["span_ns"]), percent(st["utilization"])])
        for d in s["devices"]:
            rows.append([_lane(d["device"]), "all", d["name"] or "", f"{d['events']:,}", duration(d["busy_ns"]),
                         duration(d["span_ns"]), percent(d["utilization"])])
        out += _table(rows, ["device", "stream", "name", "events", "busy", "stream span", "util"], {3, 4, 5, 6})

        out.append("")
        if not s["idle_gaps"]:
            out.append("No idle gaps: the device was busy from its first event to its last.")
        else:
            out.append("Largest idle gaps on the device, and what the host was doing")
            for g in s["idle_gaps"]:
                out.append(
                    f"  {duration(g['duration_ns']):>12}  device {g['device']}  "
                    f"from +{duration(g['start_ns'])} to +{duration(g['end_ns'])}"
                )
                host = g["host"]
                during = ", ".join(
                    f"{o['name']} x{o['count']} ({duration(o['overlap_ns'])})" for o in host["overlapping"]
                )
                if host["text"]:
                    out.append(f"      host: {host['text']}")
                    if during:
                        out.append(f"      also during the gap: {during}")
                elif during:
                    out.append(f"      host ran: {during}")
                else:
                    out.append("      host: no host activity recorded")

    out.append("")
    mem = s["memory"]
    if not mem:
        out.append("Device memory: no device [memory] events (profile_memory=True records them).")
    else:
        out.append("Peak of device memory")
        for m in mem:
            op = m["op"]
            where = f"in {op['name']}" if op else "outside any op"
            stack = " \u2192 ".join(m["op_stack"])
            line = (f"  {m['device_type_name']}:{m['device_id']}  {size(m['peak_bytes'])} at +{duration(m['peak_ns'])}, "
                    f"reached {where}")
            if stack and len(m["op_stack"]) > 1:
                line += f"  ({stack})"
            out.append(line)
    for m in s.get("host_memory", []):
        op = m["op"]
        out.append(f"  (host memory peak: {size(m['peak_bytes'])}{', in ' + op['name'] if op else ''})")
    return "\n".join(out)


def _event_text(e: dict[str, Any]) -> str:
    if "problem" in e:
        name = f" {e['name']!r}" if "name" in e else ""
        return f"event #{e['index']}{name} at byte {e['offset']}: {e['problem']}"
    parts = [f"#{e['index']}", e.get("ph", "?")]
    if e.get("cat"):
        parts.append(e["cat"])
    if e.get("name") is not None:
        parts.append(repr(e["name"]) if len(e["name"]) < 80 else repr(e["name"][:77] + "..."))
    parts.append(f"pid={e.get('pid')} tid={e.get('tid')}")
    if "id" in e:
        parts.append(f"id={e['id']}")
    if "ts" in e:
        parts.append(f"ts={e['ts']}")
    if "dur" in e:
        parts.append(f"dur={e['dur']}")
    args = e.get("args")
    if args:
        parts.append("args={" + ", ".join(f"{k}: {v}" for k, v in args.items()) + "}")
    parts.append(f"[byte {e['offset']}]")
    return " ".join(parts)


def check_text(r: dict[str, Any], path: str = "") -> str:
    out = [f"check {path}"]
    failed_errors = failed_warnings = skipped = 0
    width = max(len(c["name"]) for c in r["checks"])
    for c in r["checks"]:
        status = c["status"]
        if status == "fail":
            label = "FAIL" if c["severity"] == "error" else "WARN"
            if c["severity"] == "error":
                failed_errors += 1
            else:
                failed_warnings += 1
        else:
            label = "PASS" if status == "pass" else "SKIP"
            skipped += status == "skipped"
        count = f"{c['violations']:,}" if status == "fail" else ""
        line = f"  {label}  {c['name']:<{width}}  {count:>7}  {c['description']}"
        out.append(line.rstrip())
        if status == "skipped" and c.get("note") and c["note"] != "not selected":
            out.append(f"        ({c['note']})")
        for v in c["examples"]:
            out.append(f"        - {v['message']}")
            for e in v["events"]:
                out.append(f"            {_event_text(e)}")
        if status == "fail" and c["violations"] > len(c["examples"]):
            out.append(f"        ... and {c['violations'] - len(c['examples']):,} more")
    total = len(r["checks"])
    out.append(
        f"{total} checks: {failed_errors} failed, {failed_warnings} warnings, {skipped} skipped -> "
        f"{'OK' if r['ok'] else 'FAILED'}"
    )
    return "\n".join(out)
