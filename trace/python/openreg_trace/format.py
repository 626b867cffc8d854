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


def si(x: float, unit: str) -> str:
    """A rate or count with a decimal prefix: 524.288 MFLOP/s, 1.500 GB/s."""
    for prefix, scale in (("E", 1e18), ("P", 1e15), ("T", 1e12), ("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if abs(x) >= scale:
            return f"{x / scale:.3f} {prefix}{unit}"
    return f"{x:.0f} {unit}" if float(x).is_integer() else f"{x:.3g} {unit}"


def _share(x: float) -> str:
    """A share of a peak: small ones keep two digits (a simulated device runs far below its declared peak)."""
    return f"{100.0 * x:.2g}%" if 0 < x < 0.01 else percent(x)


def _known(x: Any, fmt: Any) -> str:
    return "?" if x is None else fmt(x)


def _table(rows: list[list[str]], header: list[str], right: set[int]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header] + rows) for i in range(len(header))]

    def line(r: list[str]) -> str:
        cells = [str(c).rjust(widths[i]) if i in right else str(c).ljust(widths[i]) for i, c in enumerate(r)]
        return "  " + "  ".join(cells).rstrip()

    return [line(header)] + [line(r) for r in rows]


def _lane(value: Any) -> str:
    return str(value)


def summary_text(s: dict[str, Any], path: str = "", top: int = 10) -> str:
    """The summary as text; `top` rows of the tables the JSON gives in full (source lines)."""
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
    steps = t.get("steps") or {}
    if steps.get("from") == "Optimizer.step#":  # an on-demand trace: said how its steps were found
        out.append(f"  steps: {steps['note']}")
    out.extend(_step_time_text(steps))
    if t["malformed_events"]:
        out.append(f"  warning: {t['malformed_events']} malformed events were ignored (run `check` for details)")

    total = s["device_total_ns"]
    out.append("")
    if not s["top_kernels"]:
        out.append("No device events (kernels, copies, memsets) in this trace.")
    else:
        out.append(f"Top kernels by device time ({duration(total)} of device work, {s['kernel_names']} names)")
        rows = [
            [
                duration(k["total_ns"]),
                percent(k["share"]),
                str(k["count"]),
                duration(k["avg_ns"]),
                duration(k["max_ns"]),
                k["name"] if k["category"] == "kernel" else f"{k['name']} [{k['category']}]",
            ]
            for k in s["top_kernels"]
        ]
        out += _table(rows, ["total", "share", "count", "avg", "max", "name"], {0, 1, 2, 3, 4})

        out.append("")
        out.append("Device time per op (the op that launched the work)")
        rows = [
            [
                duration(o["device_ns"]),
                percent(o["share"]),
                str(o["device_events"]),
                str(o["op_instances"]) if o["linked"] else "-",
                o["name"] if o["linked"] else "(linked to no op)",
            ]
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
        out += _source_lines_text(s, top)

        out.append("")
        out.append("Device utilisation per stream (busy time / the device's first-to-last span)")
        rows = []
        for st in s["streams"]:
            rows.append(
                [
                    _lane(st["device"]),
                    _lane(st["stream"]),
                    st["name"] or "",
                    f"{st['events']:,}",
                    duration(st["busy_ns"]),
                    duration(st["span_ns"]),
                    percent(st["utilization"]),
                ]
            )
        for d in s["devices"]:
            rows.append(
                [
                    _lane(d["device"]),
                    "all",
                    d["name"] or "",
                    f"{d['events']:,}",
                    duration(d["busy_ns"]),
                    duration(d["span_ns"]),
                    percent(d["utilization"]),
                ]
            )
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

        out += _device_analyses_text(s)

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
            line = (
                f"  {m['device_type_name']}:{m['device_id']}  {size(m['peak_bytes'])} at +{duration(m['peak_ns'])}, "
                f"reached {where}"
            )
            if stack and len(m["op_stack"]) > 1:
                line += f"  ({stack})"
            out.append(line)
    for m in s.get("host_memory", []):
        op = m["op"]
        out.append(f"  (host memory peak: {size(m['peak_bytes'])}{', in ' + op['name'] if op else ''})")
    out.extend(_critical_path_text(s.get("critical_path")))
    out.extend(roofline_text(s.get("roofline"), top))
    out.extend(counters_text(s.get("counters")))
    return "\n".join(out)


def _step_time_text(steps: dict[str, Any]) -> list[str]:
    """Mean step time on the trace's step clock, and why that clock."""
    durations = steps.get("durations_ns") or []
    if not durations:
        return []
    mean = sum(durations) / len(durations)
    hosts = steps.get("host_durations_ns") or durations
    line = f"  step time {duration(mean)} (mean of {len(durations)}, "
    if steps.get("clock") == "device":
        line += f"device spans; host ranges {duration(sum(hosts) / len(hosts))})"
    else:
        line += "host ranges)"
    return [line, f"    {steps['clock_note']}"] if steps.get("clock_note") else [line]


def _critical_path_text(cp: dict[str, Any] | None) -> list[str]:
    """The summary's short critical-path section (`critical-path` has the whole report)."""
    if not cp:
        return []
    kinds = sorted(((v, k) for k, v in cp["kinds"].items() if v), reverse=True)
    out = [
        "",
        f"Critical path of {cp['step']}: {duration(cp['path_ns'])} of {duration(cp['step_ns'])} "
        f"({percent(cp['path_share'])}); " + ", ".join(f"{k} {percent(v / cp['step_ns'])}" for v, k in kinds[:4]),
    ]
    if cp.get("lag_ns"):
        out.append(
            f"  the step is measured to the end of its work: host range {duration(cp['host_step_ns'])}, "
            f"the device {duration(cp['lag_ns'])} behind when it ends"
        )
    longest = sorted(cp["top_ops"] + cp["top_kernels"], key=lambda r: -r["path_ns"])[:3]
    if longest:
        out.append("  longest on it: " + ", ".join(f"{r['name'][:60]} {duration(r['path_ns'])}" for r in longest))
    return out


def _source_lines_text(s: dict[str, Any], top: int) -> list[str]:
    """Device time per model source line: from compiled kernels' source_lines, else the Python stack."""
    src = s["source_lines"]
    compiled, stack, none = src["compiled"], src["python_stack"], src["unattributed"]
    if not src["lines"]:
        return [
            "",
            "Device time per source line: none known (compiled kernels name their lines; eager traces need "
            "with_stack=True)",
        ]
    out = [
        "",
        f"Device time per model source line ({len(src['lines'])} lines; {compiled['device_events']:,} compiled "
        f"kernels split evenly among their lines, {stack['device_events']:,} events by their Python stack, "
        f"{none['device_events']:,} unattributed ({duration(none['device_ns'])}))",
    ]
    rows = [
        [
            duration(line["device_ns"]),
            percent(line["share"]),
            str(line["kernels"]),
            line["source"] + (f"  ({line['function']})" if line["function"] else ""),
        ]
        for line in src["lines"][:top]
    ]
    return out + _table(rows, ["device", "share", "kernels", "line"], {0, 1, 2})


_CLASSES = ("compute", "communication", "memory", "other")


def _device_analyses_text(s: dict[str, Any]) -> list[str]:
    """Kernel classes, temporal and idle breakdowns, launches, communication (as HTA reports them)."""
    out = ["", "Kernel classes (as HolisticTraceAnalysis classifies them): time, share, count"]
    classes = s["kernel_classes"]

    def cells(c: dict[str, Any]) -> list[str]:
        return [
            f"{duration(c[k]['total_ns'])} {percent(c[k]['share'])} x{c[k]['count']:,}" if c[k]["count"] else "-"
            for k in _CLASSES
        ]

    rows = [[_lane(st["device"]), _lane(st["stream"])] + cells(st["classes"]) for st in classes["streams"]]
    rows.append(["all", ""] + cells(classes["total"]))
    out += _table(rows, ["device", "stream", *_CLASSES], set())

    tb = s["temporal"]
    out.append("")
    out.append(
        f"Temporal breakdown over {duration(tb['kernel_time_ns'])} of device activity: "
        f"compute {percent(tb['compute_share'])}, non-compute {percent(tb['non_compute_share'])}, "
        f"idle {percent(tb['idle_share'])}"
    )

    idle = s["idle_breakdown"]
    out.append("")
    out.append(
        f"Idle time per stream: host wait (launched after the stream ran dry) / kernel wait "
        f"(gap < {idle['kernel_wait_threshold_ns']} ns) / other"
    )
    rows = [
        [
            _lane(b["device"]),
            _lane(b["stream"]),
            duration(b["idle_ns"]),
            f"{duration(b['host_wait_ns'])} ({percent(b['host_wait_share'])})",
            f"{duration(b['kernel_wait_ns'])} ({percent(b['kernel_wait_share'])})",
            f"{duration(b['other_ns'])} ({percent(b['other_share'])})",
        ]
        for b in idle["streams"]
    ]
    out += _table(rows, ["device", "stream", "idle", "host wait", "kernel wait", "other"], {2, 3, 4, 5})

    la = s["launches"]
    out.append("")
    if not la["launches"]:
        out.append("Launches: no device event is paired with a host runtime call (by correlation).")
    else:
        out.append(
            f"Launches: {la['launches']:,}, host launch time avg {duration(la['avg_host_ns'])}, launch-to-start "
            f"delay avg {duration(la['avg_delay_ns'])} (max {duration(la['max_delay_ns'])}); "
            f"{la['short_kernels']:,} kernels ({percent(la['short_share'])}) ran shorter than their launch"
        )
        out.append("  worst offenders by op (host launch time + delay)")
        rows = [
            [
                o["name"] or "(linked to no op)",
                f"{o['launches']:,}",
                duration(o["host_ns"]),
                duration(o["delay_ns"]),
                f"{o['short_kernels']:,}",
            ]
            for o in la["by_op"]
        ]
        out += _table(rows, ["op", "launches", "host", "delay", "short"], {1, 2, 3, 4})

    comm = s["communication"]
    if comm["collectives"]:
        out.append("")
        rank = f"rank {comm['rank']}" if comm["rank"] is not None else "this trace"
        out.append(
            f"Communication on {rank}: {duration(comm['comm_ns'])}, {percent(comm['overlap_share'])} hidden "
            f"behind compute, {duration(comm['exposed_ns'])} exposed"
        )
        rows = [
            [
                c["collective"],
                f"{c['calls']:,}",
                size(c["bytes"]) if c["bytes"] else "?",
                duration(c["device_ns"]),
                f"{c['algbw_gbps']:.2f}" if c["algbw_gbps"] is not None else "?",
                f"{c['busbw_gbps']:.2f}" if c["busbw_gbps"] is not None else "?",
            ]
            for c in comm["collectives"]
        ]
        out += _table(rows, ["collective", "calls", "bytes", "device", "algbw GB/s", "busbw GB/s"], {1, 2, 3, 4, 5})
    return out


def _peaks_text(d: dict[str, Any]) -> str:
    flops, nbytes = d["peak_flops_per_s"], d["peak_bytes_per_s"]
    if flops is None and nbytes is None:
        return "peak unknown"
    sources = sorted({x for x in (d["peak_flops_source"], d["peak_bytes_source"]) if x})
    text = f"peaks {_known(flops, lambda v: si(v, 'FLOP/s'))} and {_known(nbytes, lambda v: si(v, 'B/s'))}"
    text += f" (from {' and '.join(sources)})"
    ridge = d["ridge_flops_per_byte"]
    return text + (f", ridge {ridge:.2f} FLOP/B" if ridge is not None else "")


def _roofline_row(r: dict[str, Any]) -> list[str]:
    name = r["name"] if r["name"] is not None else "(all kernels)"
    if r["device_total"]:
        name += f" ({r['kernels']:,} kernels)"
    return [
        f"{r['count']:,}",
        _known(r["time_ns"], duration),
        _known(r["flops"], lambda v: si(v, "FLOP")),
        _known(r["bytes"], lambda v: si(v, "B")),
        _known(r["intensity_flops_per_byte"], lambda v: f"{v:.3g}"),
        _known(r["flops_per_s"], lambda v: si(v, "FLOP/s")),
        _known(r["peak_flops_share"], _share),
        _known(r["bytes_per_s"], lambda v: si(v, "B/s")),
        _known(r["peak_bytes_share"], _share),
        r["bound"] or "?",
        name,
    ]


def roofline_text(roofline: dict[str, Any] | None, top: int = 10) -> list[str]:
    """Per device: the kernels' FLOPs, bytes, intensity and rates against the peaks; what is unknown and why."""
    if roofline is None:
        return []
    out = [""]
    if not roofline["devices"]:
        return out + [f"Roofline: {note}" for note in roofline["notes"]]
    for d in roofline["devices"]:
        name = f" ({d['name']})" if d["name"] else ""
        ranges = f"{d['ranges']:,} metric range{'s' if d['ranges'] != 1 else ''}"
        out.append(f"Roofline of device {d['device']}{name}: {_peaks_text(d)}; {ranges}")
        rows = [_roofline_row(r) for r in d["kernels"][:top]]
        if len(d["kernels"]) > 1:
            rows.append(_roofline_row(d["total"]))
        header = ["count", "time", "FLOPs", "bytes", "FLOP/B", "FLOP/s", "of peak", "bytes/s", "of peak"]
        out += _table(rows, header + ["bound", "kernel"], set(range(9)))
        out += [f"  note: {note}" for note in d["notes"]]
    return out


def _counter_value(series: str, v: float) -> str:
    if "bytes" in series and series.endswith("per_s"):
        return si(v, "B/s")
    if "bytes" in series:
        return size(v)
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:.4g}"


def counters_text(counters: dict[str, Any] | None) -> list[str]:
    """Per counter track: each series' min, max, last value and time-weighted mean."""
    if counters is None:
        return []
    tracks = counters["tracks"]
    if not tracks:
        note = counters["note"]
        return ["", note[:1].upper() + note[1:]]
    devices = len({str(t["device"]) for t in tracks})
    out = [
        "",
        f"Counter tracks ({len(tracks)} on {devices} device{'s' if devices > 1 else ''}; each value holds until "
        "its series' next sample; mean weighted by that time)",
    ]
    for t in tracks:
        when = f"from +{duration(t['first_ns'])} to +{duration(t['last_ns'])}"
        cat = f" [{t['category']}]" if t["category"] else ""
        out.append(f"  device {t['device']}  {t['name']}{cat}: {t['samples']:,} samples {when}")
        rows = [
            [
                c["name"],
                f"min {_counter_value(c['name'], c['min'])}",
                f"max {_counter_value(c['name'], c['max'])}",
                f"last {_counter_value(c['name'], c['last'])}",
                "mean " + _known(c["mean"], lambda v, n=c["name"]: _counter_value(n, v)),
            ]
            for c in t["series"]
        ]
        out += ["  " + line for line in _table(rows, ["series", "", "", "", ""], set())[1:]]
    return out


def ranks_text(r: dict[str, Any]) -> str:
    out = [
        f"Across {len(r['ranks'])} ranks: {r['matched_instances']:,} collectives matched "
        f"({r['unmatched_instances']:,} seen on one rank only)"
    ]
    rows = [[str(x["rank"]), f"{x['last_arrivals']:,}", duration(x["waited_ns"]), x["path"]] for x in r["ranks"]]
    out += _table(rows, ["rank", "arrived last", "waited", "trace"], {1, 2})
    if r["longest_waits"]:
        out.append("  longest waits")
        for m in r["longest_waits"]:
            seq = f" seq {m['seq']}" if m["seq"] is not None else ""
            out.append(
                f"    {m['collective']}{seq}: rank {m['last_rank']} arrived last; others waited up to "
                f"{duration(m['max_wait_ns'])}"
            )
    return "\n".join(out)


def diff_text(d: dict[str, Any], base: str, new: str, top: int = 15) -> str:
    out = [
        f"diff {base} ({d['base_traces']} traces) -> {new} ({d['new_traces']} traces): device time "
        f"{duration(d['base_device_ns'])} -> {duration(d['new_device_ns'])} ({d['device_ns_delta']:+,} ns)"
    ]
    for key, title in (("kernels", "kernel"), ("ops", "op")):
        out.append("")
        out.append(f"Per {title}, largest changes first")
        rows = [
            [
                f"{r['device_ns_delta'] / 1e3:+,.3f} us",
                duration(r["base_device_ns"]),
                duration(r["new_device_ns"]),
                f"{r['base_count']:,} -> {r['new_count']:,}",
                r["status"],
                r["name"],
            ]
            for r in d[key][:top]
        ]
        out += _table(rows, ["delta", "base", "new", "count", "", title], {0, 1, 2, 3})
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


_LABELS = {"fail": "FAIL", "warn": "WARN", "pass": "PASS", "skipped": "SKIP"}


def check_text(r: dict[str, Any], path: str = "") -> str:
    out = [f"check {path}" + (" (strict)" if r.get("strict") else "")]
    counts = {"fail": 0, "warn": 0, "skipped": 0, "pass": 0}
    width = max(len(c["name"]) for c in r["checks"])
    for c in r["checks"]:
        status = c["status"]
        counts[status] += 1
        found = c["violations"] + c["warnings"]
        count = f"{found:,}" if status in ("fail", "warn") else ""
        out.append(f"  {_LABELS[status]}  {c['name']:<{width}}  {count:>7}  {c['description']}".rstrip())
        if status == "skipped" and c.get("note") and c["note"] != "not selected":
            out.append(f"        ({c['note']})")
        if status == "fail":
            out.append(f"        breaks {c['consumer']}: {c['breaks']}")
        elif status == "warn" and c.get("artifact") and not c["violations"]:
            out.append(f"        harmless: {c['artifact']}")
        for v in c["examples"]:
            out.append(
                f"        - {v['message']}" + (" [known artifact]" if v.get("artifact") and status == "fail" else "")
            )
            for e in v["events"]:
                out.append(f"            {_event_text(e)}")
        if found > len(c["examples"]) and status in ("fail", "warn"):
            out.append(f"        ... and {found - len(c['examples']):,} more")
    out.append(
        f"{len(r['checks'])} checks: {counts['fail']} failed, {counts['warn']} warned, {counts['skipped']} skipped -> "
        f"{'OK' if r['ok'] else 'FAILED'}"
    )
    return "\n".join(out)


def explain_text(checks: list[dict[str, str]]) -> str:
    """What each check protects: the consumer, what breaks there, and which findings only warn."""
    out: list[str] = []
    for c in checks:
        out.append(f"{c['name']} ({c['severity']}): {c['description']}")
        out.append(f"  protects: {c['consumer']}")
        out.append(f"  when it fails: {c['breaks']}")
        if c["artifact"]:
            out.append(f"  only warns (unless --strict): {c['artifact']}")
        out.append("")
    out.append(
        "A check fails only when a consumer breaks; warnings (warning-level checks and known Kineto "
        "artifacts) fail only with --strict."
    )
    return "\n".join(out)
