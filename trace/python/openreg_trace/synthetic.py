"""Writes chrome traces in the layout Kineto gives torch.profiler traces with
device lanes (see libkineto's output_json.cpp): device work on pid = device,
tid = stream; host launches as *_runtime slices; ac2g arrows; [memory]
instants; M rows with sort indices; the "Trace" span.

Used by the tests (including traces with planted violations) and the
benchmark, and useful to a vendor who wants a known-good reference trace.
Times are integer nanoseconds, written as microseconds with 3 decimals.
"""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Iterable
from pathlib import Path
from typing import Any

DEVICE_SORT_BASE = 5_000_000  # Kineto's kExceedMaxPid: device rows sort below any host pid
PRIVATEUSE1 = 20  # c10::DeviceType::PrivateUse1 in the [memory] events' "Device Type"


def us(ns: int) -> str:
    sign = "-" if ns < 0 else ""
    ns = abs(ns)
    return f"{sign}{ns // 1000}.{ns % 1000:03d}"


def _args(args: dict[str, Any]) -> str:
    return ", ".join(f"{json.dumps(k)}: {json.dumps(v)}" for k, v in args.items())


class KinetoTraceWriter:
    def __init__(self, host_pid: int = 4242, host_tid: int = 4242, base_time_ns: int = 1_790_000_000_000_000_000):
        self.host_pid = host_pid
        self.host_tid = host_tid
        self.base_time_ns = base_time_ns
        self.events: list[str] = []
        # torch.profiler's footer once torch.distributed runs: {"backend", "rank", "world_size"}.
        self.distributed: dict[str, Any] | None = None
        # The document's deviceProperties: {"id", "name", "peakFlopsPerSecond", "peakBytesPerSecond"...} each.
        self.device_properties: list[dict[str, Any]] = []

    # ------------------------------------------------------------ raw events

    def raw(self, event: dict[str, Any] | str) -> KinetoTraceWriter:
        self.events.append(event if isinstance(event, str) else json.dumps(event))
        return self

    def complete(
        self, cat: str, name: str, ts: int, dur: int, pid: Any, tid: Any, args: dict[str, Any] | None = None
    ) -> KinetoTraceWriter:
        body = (
            f'{{\n    "ph": "X", "cat": {json.dumps(cat)}, "name": {json.dumps(name)}, '
            f'"pid": {json.dumps(pid)}, "tid": {json.dumps(tid)},\n    "ts": {us(ts)}, "dur": {us(dur)}'
        )
        if args:
            body += f',\n    "args": {{\n      {_args(args)}\n    }}'
        self.events.append(body + "\n  }")
        return self

    # ------------------------------------------------------------ host side

    def process(self, pid: Any, name: str, labels: str, sort_index: int) -> KinetoTraceWriter:
        for meta, args in (
            ("process_name", {"name": name}),
            ("process_labels", {"labels": labels}),
            ("process_sort_index", {"sort_index": sort_index}),
        ):
            self.raw(
                f'{{\n    "name": "{meta}", "ph": "M", "ts": 0.000, "pid": {json.dumps(pid)}, "tid": 0,\n'
                f'    "args": {{\n      {_args(args)}\n    }}\n  }}'
            )
        return self

    def thread(self, pid: Any, tid: Any, name: str, sort_index: int) -> KinetoTraceWriter:
        for meta, args in (("thread_name", {"name": name}), ("thread_sort_index", {"sort_index": sort_index})):
            self.raw(
                f'{{\n    "name": "{meta}", "ph": "M", "ts": 0.000, "pid": {json.dumps(pid)}, '
                f'"tid": {json.dumps(tid)},\n    "args": {{\n      {_args(args)}\n    }}\n  }}'
            )
        return self

    def host_rows(self) -> KinetoTraceWriter:
        self.process(self.host_pid, "python", "CPU", self.host_pid)
        return self.thread(self.host_pid, self.host_tid, f"thread {self.host_tid} (python)", self.host_tid)

    def device_rows(self, device: int, streams: Iterable[int], name: str = "openreg") -> KinetoTraceWriter:
        self.process(device, f"{name} {device}", f"{name}:{device}", DEVICE_SORT_BASE + device)
        for s in streams:
            self.thread(device, s, f"stream {s}", s)
        return self

    def op(
        self, name: str, ts: int, dur: int, external_id: int, cat: str = "cpu_op", tid: int | None = None
    ) -> KinetoTraceWriter:
        return self.complete(
            cat,
            name,
            ts,
            dur,
            self.host_pid,
            self.host_tid if tid is None else tid,
            {"External id": external_id, "Record function id": 0},
        )

    def python(self, name: str, ts: int, dur: int) -> KinetoTraceWriter:
        return self.complete("python_function", name, ts, dur, self.host_pid, self.host_tid)

    def runtime(
        self, name: str, ts: int, dur: int, correlation: int, external_id: int | None, cat: str = "privateuse1_runtime"
    ) -> KinetoTraceWriter:
        args = {"correlation": correlation}
        if external_id is not None:
            args = {"External id": external_id, **args}
        return self.complete(cat, name, ts, dur, self.host_pid, self.host_tid, args)

    def memory(
        self, ts: int, total_allocated: int, nbytes: int, device_type: int = PRIVATEUSE1, device_id: int = 0
    ) -> KinetoTraceWriter:
        args = {
            "Total Reserved": 0,
            "Total Allocated": total_allocated,
            "Bytes": nbytes,
            "Device Id": device_id,
            "Device Type": device_type,
            "Addr": 140000000000000 + ts % 1000000,
        }
        return self.raw(
            f'{{\n    "ph": "i", "cat": "cpu_instant_event", "s": "t", "name": "[memory]",\n'
            f'    "pid": {self.host_pid}, "tid": {self.host_tid},\n    "ts": {us(ts)},\n'
            f'    "args": {{\n      {_args(args)}\n    }}\n  }}'
        )

    def span(self, ts: int, dur: int) -> KinetoTraceWriter:
        self.raw(
            f'{{\n    "ph": "X", "cat": "Trace", "ts": {us(ts)}, "dur": {us(dur)},\n'
            f'    "pid": "Spans", "tid": "PyTorch Profiler",\n    "name": "PyTorch Profiler (0)",\n'
            f'    "args": {{\n      "Op count": 0\n    }}\n  }}'
        )
        return self.raw(
            f'{{\n    "name": "process_sort_index", "ph": "M", "ts": {us(ts)},\n'
            f'    "pid": "Spans", "tid": 0,\n    "args": {{\n      "sort_index": 536870912\n    }}\n  }}'
        )

    def window_end(self, ts: int) -> KinetoTraceWriter:
        return self.raw(
            f'{{\n    "name": "Record Window End", "ph": "i", "s": "g",\n    "pid": "", "tid": "", "ts": {us(ts)}\n  }}'
        )

    # ------------------------------------------------------------ device side

    def device_event(
        self,
        name: str,
        ts: int,
        dur: int,
        device: int,
        stream: int,
        correlation: int,
        external_id: int | None,
        cat: str = "kernel",
        args: dict[str, Any] | None = None,
        extra_args: dict[str, Any] | None = None,
    ) -> KinetoTraceWriter:
        """A kernel/copy/memset. `args` replaces the standard args entirely (to plant bad ones);
        `extra_args` follow the standard ones (e.g. a compiled kernel's source_lines)."""
        if args is None:
            args = {}
            if external_id is not None:
                args["External id"] = external_id
            args.update({"device": device, "stream": stream, "correlation": correlation})
        return self.complete(cat, name, ts, dur, device, stream, {**args, **(extra_args or {})})

    def flow(self, ph: str, flow_id: int, ts: int, pid: Any, tid: Any) -> KinetoTraceWriter:
        bp = ', "bp": "e"' if ph == "f" else ""
        return self.raw(
            f'{{\n    "ph": "{ph}", "id": {flow_id}, "pid": {json.dumps(pid)}, "tid": {json.dumps(tid)}, '
            f'"ts": {us(ts)},\n    "cat": "ac2g", "name": "ac2g"{bp}\n  }}'
        )

    def launch(
        self,
        kernel: str,
        launch_ts: int,
        kernel_ts: int,
        kernel_dur: int,
        device: int,
        stream: int,
        correlation: int,
        external_id: int,
        cat: str = "kernel",
        api: str = "orLaunchKernel",
        api_dur: int = 1_500,
        extra_args: dict[str, Any] | None = None,
    ) -> KinetoTraceWriter:
        """The runtime call, the device event and the arrow between them (inside an op the caller wrote)."""
        self.runtime(api, launch_ts, api_dur, correlation, external_id)
        self.device_event(
            kernel, kernel_ts, kernel_dur, device, stream, correlation, external_id, cat, extra_args=extra_args
        )
        self.flow("s", correlation, launch_ts, self.host_pid, self.host_tid)
        return self.flow("f", correlation, kernel_ts, device, stream)

    def kernel_metrics(
        self,
        name: str,
        ts: int,
        dur: int,
        device: int,
        tid: int,
        correlation: int | None = None,
        **metrics: float,
    ) -> KinetoTraceWriter:
        """Metrics of a kernel as openreg writes them: cat cuda_profiler_range on the kernel's row with its ts and
        dur; `metrics` among flops, bytes_read, bytes_written, busy_ns (and kernels, for a device's one total
        range). flops_per_s and bytes_per_s follow, over dur, as openreg adds them."""
        args: dict[str, Any] = dict(metrics)
        if "flops" in metrics and dur > 0:
            args["flops_per_s"] = metrics["flops"] * 1e9 / dur
        if "bytes_read" in metrics and "bytes_written" in metrics and dur > 0:
            args["bytes_per_s"] = (metrics["bytes_read"] + metrics["bytes_written"]) * 1e9 / dur
        if correlation is not None:
            args["correlation"] = correlation
        return self.complete("cuda_profiler_range", name, ts, dur, device, tid, args)

    def counter(
        self, name: str, ts: int, device: int, values: dict[str, float], cat: str = "mtia_counters"
    ) -> KinetoTraceWriter:
        """One sample of a counter track (Kineto's MTIA_COUNTERS layout): each value holds until the next."""
        return self.raw(
            f'{{\n    "ph": "C", "cat": {json.dumps(cat)}, "name": {json.dumps(name)}, "pid": {device}, "tid": 0,\n'
            f'    "ts": {us(ts)},\n    "args": {{\n      {_args(values)}\n    }}\n  }}'
        )

    # ------------------------------------------------------------ output

    def text(self) -> str:
        props = ",\n    ".join(json.dumps(d) for d in self.device_properties)
        header = (
            f'{{\n  "schemaVersion": 1,\n  "deviceProperties": [\n    {props}\n  ],\n  "displayTimeUnit": "ms",\n'
            f'  "baseTimeNanoseconds": {self.base_time_ns},\n  "traceEvents": [\n  '
        )
        footer = ""
        if self.distributed is not None:
            footer = f'\n  "distributedInfo": {json.dumps(self.distributed)},'
        return header + ",\n  ".join(self.events) + f'\n  ],{footer}\n  "traceName": "synthetic"\n}}'

    def write(self, path: str | Path) -> Path:
        path = Path(path)
        data = self.text().encode()
        if path.suffix == ".gz":
            data = gzip.compress(data, compresslevel=1)
        path.write_bytes(data)
        return path


def write_workload(
    path: str | Path, target_events: int, streams: int = 2, seed: int = 0, ops_per_step: int = 40
) -> int:
    """Streams a realistic training-like trace of about `target_events` events to
    `path`: steps of ops, each launching a kernel or a copy on one of the
    streams, memory traffic, and a host synchronisation at the end of each
    step (the device idles while the host prepares the next). Returns the
    number of events written."""
    rng = random.Random(seed)
    w = KinetoTraceWriter()
    w.host_rows().device_rows(0, range(7, 7 + streams))
    written = len(w.events)
    out = open(path, "w", encoding="utf-8")
    out.write(w.text().rsplit("\n  ],", 1)[0])  # header and metadata; events follow
    kernels = [
        "gemm_nt_128x128",
        "gemm_tn_64x64",
        "softmax_fwd",
        "layernorm_fwd",
        "gelu_fwd",
        "add_bias",
        "attention_fwd",
        "dropout_fwd",
    ]
    ops = [
        "aten::mm",
        "aten::addmm",
        "aten::softmax",
        "aten::layer_norm",
        "aten::gelu",
        "aten::add",
        "aten::scaled_dot_product_attention",
        "aten::dropout",
    ]
    t = 10_000
    stream_free = {s: 0 for s in range(7, 7 + streams)}
    ext = corr = 0
    allocated = 0
    step = 0
    first_ts = t
    while written < target_events:
        w.events.clear()
        step += 1
        step_start = t
        ext += 1
        step_ext = ext
        step_allocated = 0
        t += 2_000
        for k in range(ops_per_step):
            i = rng.randrange(len(ops))
            ext += 1
            corr += 1
            op_ts = t
            op_dur = 8_000 + rng.randrange(4_000)
            w.op(ops[i], op_ts, op_dur, ext)
            nbytes = 4096 * (1 + rng.randrange(64))
            allocated += nbytes
            step_allocated += nbytes
            w.memory(op_ts + 500, allocated, nbytes)
            stream = 7 + (k % streams)
            launch_ts = op_ts + 2_000
            start = max(stream_free[stream], launch_ts + 3_000)
            dur = 5_000 + rng.randrange(20_000)
            w.launch(kernels[i], launch_ts, start, dur, 0, stream, corr, ext)
            stream_free[stream] = start + dur
            if rng.random() < 0.5:
                allocated -= nbytes
                step_allocated -= nbytes
                w.memory(op_ts + op_dur - 500, allocated, -nbytes)
            t = op_ts + op_dur + 500
        # item(): copy the loss back and wait for the device.
        ext += 1
        corr += 1
        item_ts = t
        busy_until = max(stream_free.values())
        copy_start = max(busy_until, item_ts + 4_000)
        sync_end = copy_start + 2_000 + 500
        w.op("aten::item", item_ts, sync_end - item_ts + 1_000, ext)
        w.launch(
            "Memcpy DtoH (Device -> Host)",
            item_ts + 1_000,
            copy_start,
            2_000,
            0,
            7,
            corr,
            ext,
            cat="gpu_memcpy",
            api="orMemcpyAsync",
        )
        stream_free[7] = copy_start + 2_000
        w.runtime("orStreamSynchronize", item_ts + 3_000, sync_end - item_ts - 3_000, corr + 1_000_000_000, ext)
        t = sync_end + 1_000
        # The device idles while the host frees the step's memory and loads the next batch.
        w.memory(t + 200, allocated - step_allocated, -step_allocated)
        allocated -= step_allocated
        load_dur = 20_000 + rng.randrange(30_000)
        ext += 1
        w.op(
            "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__",
            t + 1_000,
            load_dur,
            ext,
            cat="user_annotation",
        )
        t += 2_000 + load_dur
        w.op(f"ProfilerStep#{step}", step_start, t - step_start, step_ext, cat="user_annotation")
        out.write(",\n  " + ",\n  ".join(w.events))
        written += len(w.events)
    w.events.clear()
    w.span(first_ts - 1_000, t - first_ts + 2_000)
    w.window_end(t + 5_000)
    out.write(",\n  " + ",\n  ".join(w.events))
    written += len(w.events)
    out.write('\n  ],\n  "traceName": "synthetic"\n}')
    out.close()
    return written


# Rank traces of a data-parallel step, for the communication section.
COMPUTE_STREAM = 7
COMM_STREAM = 20


def comm_kernel_name(style: str) -> str:
    """An all-reduce of f32 as NCCL names it, or as openreg's collectives do."""
    return "ncclDevKernel_AllReduce_Sum_f32_RING_LL" if style == "nccl" else "openregComm_AllReduce_Sum_f32"


def write_rank_traces(
    folder: str | Path,
    world_size: int = 2,
    steps: int = 3,
    style: str = "nccl",
    skew_ns: int = 20_000,
    nelems: int = 1 << 20,
    comm_args: bool = True,
) -> list[Path]:
    """One trace per rank (rank{r}.json), in step k starting at k ms:

    - a compute kernel on stream 7 over [10, 110] us of the step;
    - an all-reduce on stream 20 that rank r reaches at 60 + r * skew us and
      that ends, on every rank, 50 us after the last rank arrived.

    So with 2 ranks and skew 20 us: rank 0 communicates 70 us, 50 of them
    under compute (overlap 5/7, 20 us exposed); rank 1 50 us, 30 under compute
    (0.6, 20 us exposed); rank 1 arrives last and rank 0 waits 20 us each step.
    `style` "nccl" writes NCCL's kernel names with the args Kineto copies from
    record_param_comms ("Collective name", "In msg nelems", "dtype", "Seq"...;
    `comm_args` False leaves them out); "openreg" names the kernel as openreg's
    collectives do."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    last_arrival = 60_000 + (world_size - 1) * skew_ns
    for rank in range(world_size):
        host = 1000 + rank
        w = KinetoTraceWriter(host_pid=host, host_tid=host)
        w.distributed = {"backend": "nccl" if style == "nccl" else "gloo", "rank": rank, "world_size": world_size}
        w.host_rows().device_rows(rank, [COMPUTE_STREAM, COMM_STREAM], name="GPU" if style == "nccl" else "openreg")
        w.span(0, steps * 1_000_000)
        api = "cudaLaunchKernel" if style == "nccl" else "orLaunchKernel"
        rt_cat = "cuda_runtime" if style == "nccl" else "privateuse1_runtime"
        ext = corr = 0
        for k in range(steps):
            base = k * 1_000_000
            ext += 1
            w.op(f"ProfilerStep#{k + 1}", base + 1_000, 998_000, ext, cat="user_annotation")
            ext += 1
            corr += 1
            w.op("aten::mm", base + 2_000, 6_000, ext)
            w.runtime(api, base + 3_000, 2_000, corr, ext, cat=rt_cat)
            w.device_event("gemm_kernel", base + 10_000, 100_000, rank, COMPUTE_STREAM, corr, ext)
            ext += 1
            corr += 1
            arrive = base + 60_000 + rank * skew_ns
            end = base + last_arrival + 50_000
            op_ts = arrive - 10_000
            w.op("record_param_comms", op_ts, 8_000, ext)
            w.runtime(api, op_ts + 2_000, 2_000, corr, ext, cat=rt_cat)
            args: dict[str, Any] = {"External id": ext, "device": rank, "stream": COMM_STREAM, "correlation": corr}
            if comm_args:
                args.update(
                    {
                        "Collective name": "allreduce",
                        "In msg nelems": nelems,
                        "Out msg nelems": nelems,
                        "Group size": world_size,
                        "dtype": "Float",
                        "Process Group Name": "0",
                        "Seq": k,
                    }
                )
            w.device_event(comm_kernel_name(style), arrive, end - arrive, rank, COMM_STREAM, corr, ext, args=args)
        paths.append(w.write(folder / f"rank{rank}.json"))
    return paths


# The metrics trace: a 64x64x64 f32 matmul's FLOPs and bytes, and an elementwise add's.
GEMM_FLOPS = 2 * 64 * 64 * 64
GEMM_BYTES = (2 * 64 * 64 * 4, 64 * 64 * 4)  # read (A and B), written (C)
ADD_FLOPS = 64 * 64
ADD_BYTES = (2 * 64 * 64 * 4, 64 * 64 * 4)
PEAK_FLOPS = 1e12
PEAK_BYTES_PER_S = 2e11  # ridge: 5 FLOP/B; the gemm (10.7) is compute-bound, the add (1/12) memory-bound


def metrics_trace(metrics: str = "per_kernel", counters: bool = True, peaks: bool = True) -> KinetoTraceWriter:
    """A step on device 0 as openreg writes it with its counters and metrics: stream 7 runs three 1 ms gemms
    (at 1, 3 and 5 ms), stream 13 two 0.5 ms adds (at 2 and 6 ms); then a 0.1 ms copy. `metrics`: "per_kernel"
    (a cuda_profiler_range event under each kernel), "total" (one "openreg kernels" range over them all, on
    its own row) or "none". `counters`: memory_allocated, memory_reserved, queued_tasks, copy_bandwidth.
    `peaks`: deviceProperties declare PEAK_FLOPS and PEAK_BYTES_PER_S."""
    ms = 1_000_000
    w = KinetoTraceWriter()
    w.host_rows().device_rows(0, [7, 13])
    if peaks:
        w.device_properties.append(
            {"id": 0, "name": "openreg 0", "peakFlopsPerSecond": PEAK_FLOPS, "peakBytesPerSecond": PEAK_BYTES_PER_S}
        )
    w.span(0, 10 * ms)
    w.op("ProfilerStep#1", 0, 9 * ms, 1, cat="user_annotation")
    kernels = [("gemm", 7, t * ms, ms, GEMM_FLOPS, GEMM_BYTES) for t in (1, 3, 5)]
    kernels += [("add", 13, t * ms, ms // 2, ADD_FLOPS, ADD_BYTES) for t in (2, 6)]
    for k, (name, stream, ts, dur, flops, (read, written)) in enumerate(kernels):
        ext, corr = 10 + k, 100 + k
        w.op("aten::mm" if name == "gemm" else "aten::add", 100_000 * (k + 1), 50_000, ext)
        w.launch(name, 100_000 * (k + 1) + 10_000, ts, dur, 0, stream, corr, ext)
        if metrics == "per_kernel":
            w.kernel_metrics(name, ts, dur, 0, stream, corr, flops=flops, bytes_read=read, bytes_written=written)
    w.op("aten::copy_", 600_000, 50_000, 20)
    w.launch("Memcpy DtoH (Device -> Host)", 610_000, 7 * ms, ms // 10, 0, 7, 120, 20, cat="gpu_memcpy")
    if metrics == "total":
        flops = sum(k[4] for k in kernels)
        read, written = (sum(k[5][i] for k in kernels) for i in (0, 1))
        w.kernel_metrics(
            "openreg kernels",
            1 * ms,
            6 * ms - ms // 2,
            0,
            0,
            flops=flops,
            bytes_read=read,
            bytes_written=written,
            kernels=len(kernels),
        )
    if counters:
        _metrics_counters(w, ms)
    return w


def _metrics_counters(w: KinetoTraceWriter, ms: int) -> None:
    """openreg's four counters over the step: memory 1 MiB then 3 MiB at 2 ms, back to 1 MiB at 6 ms; two
    streams' queues; the copy's bandwidth while it runs."""
    for ts, allocated in ((0, 1 << 20), (2 * ms, 3 << 20), (6 * ms, 1 << 20), (8 * ms, 1 << 20)):
        w.counter("memory_allocated", ts, 0, {"bytes": allocated})
        w.counter("memory_reserved", ts, 0, {"bytes": 4 << 20})
    for ts, q7, q13 in ((0, 3, 2), (2 * ms, 2, 1), (4 * ms, 1, 1), (8 * ms, 0, 0)):
        w.counter("queued_tasks", ts, 0, {"stream 7": q7, "stream 13": q13})
    for ts, bw in ((7 * ms, 2.5e10), (7 * ms + ms // 10, 0.0)):
        w.counter("copy_bandwidth", ts, 0, {"bytes_per_s": bw})
