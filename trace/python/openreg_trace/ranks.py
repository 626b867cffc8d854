"""Across the rank traces of one run: which rank reached each collective last
and how long the others waited for it.

A collective instance is matched across ranks by (process group, collective,
Seq) when the traces carry record_param_comms' "Seq", else by its order
among that group's collectives of the same kind on each rank. A rank
"arrives" when its communication kernel starts (NCCL's kernels, like
openreg's, then wait on the device for the slowest peer), so the wait of a
rank is the last arrival minus its own.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any


def _rank_of(index: int, summary: dict[str, Any]) -> int:
    rank = summary.get("communication", {}).get("rank")
    return rank if isinstance(rank, int) else index


def _instance_keys(instances: list[dict[str, Any]]) -> list[tuple]:
    order: dict[tuple, int] = defaultdict(int)
    keys = []
    for inst in instances:
        base = (inst["group"], inst["collective"])
        if inst["seq"] is not None:
            keys.append(base + ("seq", inst["seq"]))
        else:
            keys.append(base + ("order", order[base]))
            order[base] += 1
    return keys


def compare_ranks(traces: list[tuple[str, dict[str, Any]]], top: int = 5) -> dict[str, Any] | None:
    """None unless at least two traces hold collectives."""
    per_rank: dict[int, dict[tuple, dict[str, Any]]] = {}
    paths: dict[int, list[str]] = defaultdict(list)
    for index, (path, summary) in enumerate(traces):
        instances = summary.get("communication", {}).get("instances", [])
        if not instances:
            continue
        rank = _rank_of(index, summary)
        # Several files of one rank are its profiling cycles (tensorboard_trace_handler writes one per
        # cycle): one rank, whose collectives Seq tells apart; without Seq, the cycle's place does.
        cycle = len(paths[rank])
        paths[rank].append(path)
        keys = [key if key[2] == "seq" else key + (cycle,) for key in _instance_keys(instances)]
        per_rank.setdefault(rank, {}).update(zip(keys, instances))
    if len(per_rank) < 2:
        return None

    ranks = sorted(per_rank)
    waited = {r: 0 for r in ranks}
    last_count = {r: 0 for r in ranks}
    by_collective: dict[str, dict[str, Any]] = {}
    matched: list[dict[str, Any]] = []
    keys = sorted({k for r in ranks for k in per_rank[r]}, key=lambda k: tuple(str(x) for x in k))
    unmatched = 0
    for key in keys:
        present = {r: per_rank[r][key] for r in ranks if key in per_rank[r]}
        if len(present) < 2:
            unmatched += 1
            continue
        last_rank = max(present, key=lambda r: (present[r]["ts_ns"], r))
        last_ts = present[last_rank]["ts_ns"]
        waits = {r: last_ts - inst["ts_ns"] for r, inst in present.items()}
        last_count[last_rank] += 1
        for r, w in waits.items():
            waited[r] += w
        name = key[1]
        agg = by_collective.setdefault(
            name, {"collective": name, "instances": 0, "wait_ns": 0, "last_arrivals": {r: 0 for r in ranks}}
        )
        agg["instances"] += 1
        agg["wait_ns"] += sum(waits.values())
        agg["last_arrivals"][last_rank] += 1
        first = next(iter(present.values()))
        matched.append(
            {
                "collective": name,
                "group": key[0],
                "seq": first["seq"],
                "last_rank": last_rank,
                "max_wait_ns": max(waits.values()),
                "waits_ns": {str(r): w for r, w in waits.items()},
            }
        )
    for agg in by_collective.values():
        agg["last_arrivals"] = {str(r): n for r, n in agg["last_arrivals"].items()}
    matched.sort(key=lambda m: -m["max_wait_ns"])
    return {
        "ranks": [
            {"rank": r, "path": ", ".join(paths[r]), "waited_ns": waited[r], "last_arrivals": last_count[r]}
            for r in ranks
        ],
        "matched_instances": len(matched),
        "unmatched_instances": unmatched,
        "collectives": sorted(by_collective.values(), key=lambda a: -a["wait_ns"]),
        "longest_waits": matched[:top],
    }
