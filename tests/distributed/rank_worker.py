"""One rank of a distributed scenario (spawned by ranks.py).

    python rank_worker.py SCENARIO

reads RANK/WORLD_SIZE/MASTER_* from the environment, runs the scenario and
writes its JSON result to $RANK_RESULT. Checks that compare values collect
their mismatches instead of stopping at the first, so one spawn reports
every failing operation.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from datetime import timedelta

import torch
import torch.distributed as dist

import torch_openreg  # noqa: F401  (registers openreg and orccl)

RANK = int(os.environ["RANK"])
WORLD = int(os.environ["WORLD_SIZE"])
FOLDER = os.environ["RANK_FOLDER"]
BACKEND = "cpu:gloo,openreg:orccl"


def write_result(result: dict) -> None:
    with open(os.environ["RANK_RESULT"], "w") as f:
        json.dump(result, f)


def device() -> torch.device:
    return torch.device("openreg", RANK % torch.openreg.device_count())


def init(timeout_s: float = 60.0, **kwargs) -> None:
    torch.openreg.set_device(device())
    dist.init_process_group(backend=kwargs.pop("backend", BACKEND), timeout=timedelta(seconds=timeout_s), **kwargs)


def values(rank: int, n: int, dtype: torch.dtype) -> torch.Tensor:
    """Small integers (exact in every dtype and under every reduction of 2 ranks)."""
    base = torch.arange(n) % 7 + rank + 1
    return (base % 2).bool() if dtype == torch.bool else base.to(dtype)


class Checks:
    def __init__(self):
        self.failures: list[str] = []
        self.count = 0

    def equal(self, what: str, actual: torch.Tensor, expected: torch.Tensor) -> None:
        self.count += 1
        actual = actual.cpu()
        if actual.dtype != expected.dtype or actual.shape != expected.shape or not torch.equal(actual, expected):
            self.failures.append(
                f"{what}: got {actual.flatten()[:8].tolist()} {actual.dtype} {tuple(actual.shape)}, "
                f"expected {expected.flatten()[:8].tolist()} {expected.dtype} {tuple(expected.shape)}"
            )

    def run(self, what: str, fn) -> None:
        try:
            fn()
        except Exception as error:  # noqa: BLE001  (reported, with the operation's name)
            self.count += 1
            self.failures.append(f"{what}: raised {type(error).__name__}: {error}"[:2000])


def all_ranks(n: int, dtype: torch.dtype) -> torch.Tensor:
    return torch.stack([values(r, n, dtype) for r in range(WORLD)])


def reduce_expected(op, n: int, dtype: torch.dtype) -> torch.Tensor:
    stacked = all_ranks(n, dtype)
    if op == dist.ReduceOp.SUM:
        return stacked.sum(0, dtype=dtype)
    if op == dist.ReduceOp.PRODUCT:
        return stacked.prod(0, dtype=dtype)
    if op == dist.ReduceOp.MIN:
        return stacked.amin(0)
    if op == dist.ReduceOp.MAX:
        return stacked.amax(0)
    total = stacked.sum(0, dtype=dtype)
    return total / WORLD if dtype.is_floating_point else torch.div(total, WORLD, rounding_mode="trunc")


REDUCE_OPS = [dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MIN, dist.ReduceOp.MAX, dist.ReduceOp.PRODUCT]
DTYPES = [torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32, torch.int8]
# 300001 x float32 (1.2 MB) is past what rides in the first exchange between two ranks (1 MiB): Gloo moves it,
# pipelined in one chunk. 1048579 (4 MiB and 12 bytes) pipelines in two, the second of 12 bytes.
SIZES = [1, 1000, 65537, 300001, 1048579]


def check_all_reduce(checks: Checks) -> None:
    dev = device()
    for dtype in DTYPES:
        for op in REDUCE_OPS:
            # Every dtype both carried in the first exchange and pipelined (an integer AVG truncates per chunk).
            for n in SIZES if dtype == torch.float32 else (1000, 1300001):

                def body(dtype=dtype, op=op, n=n):
                    t = values(RANK, n, dtype).to(dev)
                    dist.all_reduce(t, op=op)
                    checks.equal(f"all_reduce {op} {dtype} n={n}", t, reduce_expected(op, n, dtype))

                checks.run(f"all_reduce {op} {dtype} n={n}", body)


def premul_factor(rank: int, dtype: torch.dtype) -> float:
    """Each rank's own PREMUL_SUM factor: exact in every float dtype; an integer
    input takes it truncated (as NCCL casts it to the input's type)."""
    return 0.25 * (rank + 1) if dtype.is_floating_point else rank + 1.75


def premul_expected(n: int, dtype: torch.dtype) -> torch.Tensor:
    terms = [values(r, n, dtype) * torch.tensor(premul_factor(r, dtype)).to(dtype) for r in range(WORLD)]
    return torch.stack(terms).sum(0, dtype=dtype)


def check_premul_sum(checks: Checks) -> None:
    """PREMUL_SUM (FSDP2's reduce-scatter with a gradient divide factor) with a
    float factor and a one-element device tensor, inline and pipelined; the
    caller's reduce-scatter input keeps its values."""
    dev = device()
    for dtype in (torch.float32, torch.bfloat16, torch.float16, torch.float64, torch.int64, torch.int32):
        for form in ("float", "tensor"):
            for n in (1000, 300001):
                factor = premul_factor(RANK, dtype)
                if form == "tensor":
                    factor = torch.tensor([factor], dtype=torch.float64 if dtype.is_floating_point else dtype).to(dev)
                    if not dtype.is_floating_point:  # an integer tensor factor is already truncated
                        factor = torch.tensor([int(premul_factor(RANK, dtype))], dtype=dtype).to(dev)

                def all_reduce(dtype=dtype, n=n, factor=factor):
                    t = values(RANK, n, dtype).to(dev)
                    dist.all_reduce(t, op=dist._make_nccl_premul_sum(factor))
                    checks.equal(f"all_reduce PREMUL_SUM {dtype} n={n}", t, premul_expected(n, dtype))

                def reduce_scatter(dtype=dtype, n=n, factor=factor):
                    full = torch.cat([values(RANK, n, dtype)] * WORLD)
                    source = full.to(dev)
                    out = torch.empty(n, dtype=dtype, device=dev)
                    dist.reduce_scatter_tensor(out, source, op=dist._make_nccl_premul_sum(factor))
                    checks.equal(f"reduce_scatter_tensor PREMUL_SUM {dtype} n={n}", out, premul_expected(n, dtype))
                    checks.equal(f"reduce_scatter_tensor PREMUL_SUM {dtype} n={n}: input kept", source, full)

                checks.run(f"all_reduce PREMUL_SUM {form} {dtype} n={n}", all_reduce)
                checks.run(f"reduce_scatter_tensor PREMUL_SUM {form} {dtype} n={n}", reduce_scatter)


def check_bitwise(checks: Checks) -> None:
    """BAND, BOR and BXOR on integer and bool tensors, as Gloo on CPU; floats refused at the call."""
    dev = device()
    ops = {
        dist.ReduceOp.BAND: torch.bitwise_and,
        dist.ReduceOp.BOR: torch.bitwise_or,
        dist.ReduceOp.BXOR: torch.bitwise_xor,
    }
    for op, combine in ops.items():
        for dtype in (torch.int64, torch.int32, torch.int8, torch.uint8, torch.bool):
            for n in (1000, 300001):

                def body(op=op, combine=combine, dtype=dtype, n=n):
                    t = values(RANK, n, dtype).to(dev)
                    dist.all_reduce(t, op=op)
                    expected = values(0, n, dtype)
                    for r in range(1, WORLD):
                        expected = combine(expected, values(r, n, dtype))
                    checks.equal(f"all_reduce {op} {dtype} n={n}", t, expected)

                checks.run(f"all_reduce {op} {dtype} n={n}", body)
        checks.count += 1
        try:
            dist.all_reduce(torch.ones(4, device=dev), op=op)
            checks.failures.append(f"all_reduce {op} float32: not refused")
        except ValueError as error:
            if "bitwise" not in str(error):
                checks.failures.append(f"all_reduce {op} float32: refused with {error}")


def check_async_and_future(checks: Checks) -> None:
    dev = device()

    def body():
        t = values(RANK, 100, torch.float32).to(dev)
        work = dist.all_reduce(t, async_op=True)
        result = work.get_future().wait()
        checks.equal("future value of all_reduce", result[0], reduce_expected(dist.ReduceOp.SUM, 100, torch.float32))
        doubled = (
            dist.all_reduce(values(RANK, 100, torch.float32).to(dev), async_op=True)
            .get_future()
            .then(lambda fut: fut.value()[0] * 2)
            .wait()
        )
        checks.equal("future.then of all_reduce", doubled, reduce_expected(dist.ReduceOp.SUM, 100, torch.float32) * 2)
        work = dist.all_reduce(t, async_op=True)
        work.wait()
        checks.equal("work.wait then read", t, reduce_expected(dist.ReduceOp.SUM, 100, torch.float32) * 2)
        checks.equal("work.is_success after the data is read", torch.tensor(work.is_success()), torch.tensor(True))

    checks.run("async_op futures", body)


def check_wait_does_not_block_the_host(checks: Checks) -> None:
    """Rank 1 joins only after rank 0's wait() returned: a blocking wait would deadlock (and time out)."""
    dev = device()
    store = dist.distributed_c10d._get_default_store()

    def body():
        t = values(RANK, 64, torch.float32).to(dev)
        if RANK == 0:
            work = dist.all_reduce(t, async_op=True)
            work.wait()
            completed_early = work.is_completed()
            after = t + 1  # queued on the current stream, which waits for the collective
            store.set("rank0_waited", "1")
            checks.equal(
                "all_reduce not complete before its peer joined", torch.tensor(completed_early), torch.tensor(False)
            )
            checks.equal(
                "current stream ordered after work.wait()",
                after,
                reduce_expected(dist.ReduceOp.SUM, 64, torch.float32) + 1,
            )
        else:
            store.wait(["rank0_waited"], timedelta(seconds=30))
            dist.all_reduce(t)
            checks.equal("all_reduce on the late rank", t, reduce_expected(dist.ReduceOp.SUM, 64, torch.float32))

    checks.run("wait() without blocking the host", body)


def check_inputs_kept_alive(checks: Checks) -> None:
    """The caller drops its input while the collective is pending; the memory must not be reused early.

    On rank 0 a gate kernel holds the communication stream, so the staging copy of the input runs only
    after the caller dropped it and the allocator could have handed its block to a new tensor (which
    the current stream fills at once). Without record_stream semantics the copy would send that.
    """
    dev = device()

    def body():
        n = 4096
        out = torch.empty(n * WORLD, device=dev)
        inp = values(RANK, n, torch.float32).to(dev)
        gate = None
        if RANK == 0:
            backend = dist.group.WORLD._get_backend(dev)
            comm = torch.openreg.Stream(
                stream_id=backend.communication_stream_id(dev.index),
                device_index=dev.index,
                device_type=torch.openreg.current_stream(dev).device_type,
            )
            gate = 1_000_000 + RANK
            with torch.openreg.stream(comm):
                torch.ops.openreg._wait_gate(torch.empty(1, device=dev), gate, 60.0)
        work = dist.all_gather_into_tensor(out, inp, async_op=True)
        del inp
        reused = torch.full((n,), 99.0, device=dev)  # same size: the cache's first pick
        torch.openreg.current_stream().synchronize()  # the scribble is written
        if gate is not None:
            torch_openreg._C._open_gate(gate)
        work.wait()
        checks.equal("scribble is intact", reused, torch.full((n,), 99.0))
        checks.equal("all_gather_into_tensor with a dropped input", out, all_ranks(n, torch.float32).flatten())

    checks.run("inputs kept alive", body)


def check_rooted(checks: Checks) -> None:
    dev = device()
    n = 1000
    for dtype in (torch.float32, torch.int64, torch.bfloat16):
        for root in range(WORLD):

            def broadcast(dtype=dtype, root=root):
                t = values(RANK, n, dtype).to(dev)
                dist.broadcast(t, src=root)
                checks.equal(f"broadcast {dtype} root {root}", t, values(root, n, dtype))

            def reduce(dtype=dtype, root=root):
                t = values(RANK, n, dtype).to(dev)
                dist.reduce(t, dst=root, op=dist.ReduceOp.SUM)
                expected = reduce_expected(dist.ReduceOp.SUM, n, dtype) if RANK == root else values(RANK, n, dtype)
                checks.equal(f"reduce {dtype} root {root}", t, expected)

            def gather(dtype=dtype, root=root):
                outs = [torch.empty(n, dtype=dtype, device=dev) for _ in range(WORLD)] if RANK == root else None
                dist.gather(values(RANK, n, dtype).to(dev), outs, dst=root)
                if RANK == root:
                    for r, out in enumerate(outs):
                        checks.equal(f"gather {dtype} root {root} from {r}", out, values(r, n, dtype))

            def scatter(dtype=dtype, root=root):
                out = torch.empty(n, dtype=dtype, device=dev)
                ins = [values(10 + r, n, dtype).to(dev) for r in range(WORLD)] if RANK == root else None
                dist.scatter(out, ins, src=root)
                checks.equal(f"scatter {dtype} root {root}", out, values(10 + RANK, n, dtype))

            for name, fn in (("broadcast", broadcast), ("reduce", reduce), ("gather", gather), ("scatter", scatter)):
                checks.run(f"{name} {dtype} root {root}", fn)


def check_gather_scatter_family(checks: Checks) -> None:
    dev = device()
    for dtype in (torch.float32, torch.int32, torch.float16):
        # 300001 float32 is too large to ride in the first exchange: Gloo moves it, pipelined; 1048579 in
        # three chunks of each rank's piece (2 MiB, 2 MiB, 12 bytes). int32 and float16 pipeline at 700001.
        for n in (1, 3000, 300001, 1048579) if dtype == torch.float32 else (1, 3000, 700001):

            def all_gather(dtype=dtype, n=n):
                outs = [torch.empty(n, dtype=dtype, device=dev) for _ in range(WORLD)]
                dist.all_gather(outs, values(RANK, n, dtype).to(dev))
                for r, out in enumerate(outs):
                    checks.equal(f"all_gather {dtype} n={n} from {r}", out, values(r, n, dtype))

            def all_gather_into_tensor(dtype=dtype, n=n):
                out = torch.empty(WORLD * n, dtype=dtype, device=dev)
                dist.all_gather_into_tensor(out, values(RANK, n, dtype).to(dev))
                checks.equal(f"all_gather_into_tensor {dtype} n={n}", out, all_ranks(n, dtype).flatten())

            def reduce_scatter(dtype=dtype, n=n):
                out = torch.empty(n, dtype=dtype, device=dev)
                ins = [values(RANK + 3 * r, n, dtype).to(dev) for r in range(WORLD)]
                dist.reduce_scatter(out, ins, op=dist.ReduceOp.SUM)
                expected = sum(values(k + 3 * RANK, n, dtype) for k in range(WORLD)).to(dtype)
                checks.equal(f"reduce_scatter {dtype} n={n}", out, expected)

            def reduce_scatter_tensor(dtype=dtype, n=n):
                for op in (dist.ReduceOp.SUM, dist.ReduceOp.AVG, dist.ReduceOp.MAX):
                    out = torch.empty(n, dtype=dtype, device=dev)
                    dist.reduce_scatter_tensor(out, values(RANK, WORLD * n, dtype).to(dev), op=op)
                    full = reduce_expected(op, WORLD * n, dtype)
                    checks.equal(f"reduce_scatter_tensor {op} {dtype} n={n}", out, full[RANK * n : (RANK + 1) * n])

            for name, fn in (
                ("all_gather", all_gather),
                ("all_gather_into_tensor", all_gather_into_tensor),
                ("reduce_scatter", reduce_scatter),
                ("reduce_scatter_tensor", reduce_scatter_tensor),
            ):
                checks.run(f"{name} {dtype} n={n}", fn)


def check_all_to_all(checks: Checks) -> None:
    dev = device()
    n = 600

    def even():
        inp = values(RANK, WORLD * n, torch.float32).to(dev)
        out = torch.empty_like(inp)
        dist.all_to_all_single(out, inp)
        expected = torch.cat([values(r, WORLD * n, torch.float32)[RANK * n : (RANK + 1) * n] for r in range(WORLD)])
        checks.equal("all_to_all_single even", out, expected)

    def uneven():
        # rank r sends (r + 1) * (d + 1) elements to rank d.
        send = [(RANK + 1) * (d + 1) for d in range(WORLD)]
        recv = [(s + 1) * (RANK + 1) for s in range(WORLD)]
        inp = values(RANK, sum(send), torch.int64).to(dev)
        out = torch.empty(sum(recv), dtype=torch.int64, device=dev)
        dist.all_to_all_single(out, inp, output_split_sizes=recv, input_split_sizes=send)
        pieces = []
        for s in range(WORLD):
            sizes = [(s + 1) * (d + 1) for d in range(WORLD)]
            start = sum(sizes[:RANK])
            pieces.append(values(s, sum(sizes), torch.int64)[start : start + sizes[RANK]])
        checks.equal("all_to_all_single with splits", out, torch.cat(pieces))

    def listed():
        ins = [values(RANK * 10 + d, n, torch.float32).to(dev) for d in range(WORLD)]
        outs = [torch.empty(n, device=dev) for _ in range(WORLD)]
        dist.all_to_all(outs, ins)
        for s, out in enumerate(outs):
            checks.equal(f"all_to_all from {s}", out, values(s * 10 + RANK, n, torch.float32))

    for name, fn in (("all_to_all_single even", even), ("all_to_all_single splits", uneven), ("all_to_all", listed)):
        checks.run(name, fn)


def check_point_to_point(checks: Checks) -> None:
    dev = device()

    def body():
        t = values(RANK, 500, torch.float32).to(dev)
        got = torch.empty(500, device=dev)
        peer = (RANK + 1) % WORLD
        if RANK % 2 == 0:
            dist.send(t, dst=peer)
            dist.recv(got, src=peer)
        else:
            dist.recv(got, src=peer)
            dist.send(t, dst=peer)
        checks.equal("send/recv", got, values(peer, 500, torch.float32))
        ops = [dist.P2POp(dist.isend, t, peer), dist.P2POp(dist.irecv, got.zero_(), peer)]
        for work in dist.batch_isend_irecv(ops if RANK % 2 == 0 else ops[::-1]):
            work.wait()
        checks.equal("batch_isend_irecv", got, values(peer, 500, torch.float32))

    checks.run("send/recv", body)


def check_coalesced_and_barrier(checks: Checks) -> None:
    dev = device()

    def body():
        a, b = values(RANK, 10, torch.float32).to(dev), values(RANK, 300, torch.float32).to(dev)
        with dist._coalescing_manager(device=dev, async_ops=True) as manager:
            dist.all_reduce(a)
            dist.all_reduce(b)
        manager.wait()
        checks.equal("coalesced all_reduce a", a, reduce_expected(dist.ReduceOp.SUM, 10, torch.float32))
        checks.equal("coalesced all_reduce b", b, reduce_expected(dist.ReduceOp.SUM, 300, torch.float32))
        outs = [torch.empty(WORLD * 10, device=dev), torch.empty(WORLD * 300, device=dev)]
        with dist._coalescing_manager(device=dev, async_ops=True) as manager:
            dist.all_gather_into_tensor(outs[0], values(RANK, 10, torch.float32).to(dev))
            dist.all_gather_into_tensor(outs[1], values(RANK, 300, torch.float32).to(dev))
        manager.wait()
        checks.equal("coalesced all_gather_into_tensor", outs[1], all_ranks(300, torch.float32).flatten())
        outs = [torch.empty(10, device=dev), torch.empty(300, device=dev)]
        with dist._coalescing_manager(device=dev, async_ops=True) as manager:
            dist.reduce_scatter_tensor(outs[0], values(RANK, WORLD * 10, torch.float32).to(dev))
            dist.reduce_scatter_tensor(outs[1], values(RANK, WORLD * 300, torch.float32).to(dev))
        manager.wait()
        full = reduce_expected(dist.ReduceOp.SUM, WORLD * 300, torch.float32)
        checks.equal("coalesced reduce_scatter_tensor", outs[1], full[RANK * 300 : (RANK + 1) * 300])
        dist.barrier()

    checks.run("coalesced forms and barrier", body)


def check_subgroups(checks: Checks) -> None:
    dev = device()

    def body():
        pair = dist.new_group([0, 1])
        singles = [dist.new_group([r]) for r in range(WORLD)]
        t = values(RANK, 50, torch.float32).to(dev)
        dist.all_reduce(t, group=pair)
        checks.equal("all_reduce on new_group([0, 1])", t, reduce_expected(dist.ReduceOp.SUM, 50, torch.float32))
        t = values(RANK, 50, torch.float32).to(dev)
        dist.all_reduce(t, group=singles[RANK])
        checks.equal("all_reduce on a one-rank group", t, values(RANK, 50, torch.float32))
        checks.equal(
            "new_group uses orccl for openreg",
            torch.tensor(pair._get_backend(dev).name() == "orccl"),
            torch.tensor(True),
        )

    checks.run("new_group", body)


def scenario_ops() -> dict:
    init()
    checks = Checks()
    for check in (
        check_all_reduce,
        check_premul_sum,
        check_bitwise,
        check_async_and_future,
        check_wait_does_not_block_the_host,
        check_inputs_kept_alive,
        check_rooted,
        check_gather_scatter_family,
        check_all_to_all,
        check_point_to_point,
        check_coalesced_and_barrier,
        check_subgroups,
    ):
        check(checks)
    backend = dist.get_backend()
    default = dist.group.WORLD.name()
    dist.destroy_process_group()
    return {"failures": checks.failures, "checked": checks.count, "backend": backend, "default": default}


def scenario_four_ranks() -> dict:
    """Two ranks per device: the first exchange goes to three peers, and sizes cross the inline boundary."""
    init()
    checks = Checks()
    dev = device()
    # 65537 x float32 is past the 256 KiB that rides in the first exchange, and pipelines in one chunk;
    # 2500003 in two chunks (all_reduce: 8 MiB and the rest) or three (the others' pieces: 4 MiB, 4 MiB and
    # the rest). Repeats resize blocks.
    for n in [8, 1000, 65537, 2500003, 8, 1000, 65537]:
        for dtype in (torch.float32, torch.int64):
            for op in (dist.ReduceOp.SUM, dist.ReduceOp.MAX, dist.ReduceOp.AVG):
                t = values(RANK, n, dtype).to(dev)
                checks.run(f"all_reduce {op} {dtype} {n}", lambda t=t, op=op: dist.all_reduce(t, op=op))
                checks.equal(f"all_reduce {op} {dtype} {n}", t, reduce_expected(op, n, dtype))
            whole = torch.empty(n * WORLD, dtype=dtype, device=dev)
            checks.run(
                f"all_gather {dtype} {n}",
                lambda w=whole, n=n, dtype=dtype: dist.all_gather_into_tensor(w, values(RANK, n, dtype).to(dev)),
            )
            checks.equal(f"all_gather {dtype} {n}", whole, all_ranks(n, dtype).flatten())
            part = torch.empty(n, dtype=dtype, device=dev)
            stacked = torch.cat([values(RANK + 10 * r, n, dtype) for r in range(WORLD)])
            checks.run(
                f"reduce_scatter {dtype} {n}", lambda p=part, x=stacked: dist.reduce_scatter_tensor(p, x.to(dev))
            )
            expected = torch.stack([values(r + 10 * RANK, n, dtype) for r in range(WORLD)]).sum(0, dtype=dtype)
            checks.equal(f"reduce_scatter {dtype} {n}", part, expected)
    torch.openreg.synchronize()
    dist.destroy_process_group()
    return {"failures": checks.failures, "checked": checks.count, "device": str(dev)}


def scenario_default_backend() -> dict:
    """init_process_group() with no backend argument, as under torchrun on an openreg machine."""
    torch.openreg.set_device(device())
    dist.init_process_group(timeout=timedelta(seconds=60))
    t = values(RANK, 10, torch.float32).to(device())
    dist.all_reduce(t)
    result = {"sum": t.cpu().tolist(), "backend_of_openreg": dist.group.WORLD._get_backend(device()).name()}
    dist.destroy_process_group()
    return result


def _model() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))


def scenario_ddp() -> dict:
    """DDP on two ranks (half the batch each) against one process on the full batch."""
    from torch.nn.parallel import DistributedDataParallel as DDP

    init()
    dev = device()
    torch.manual_seed(1)
    inputs, targets = torch.randn(8, 8), torch.randn(8, 4)
    mine = slice(RANK * 8 // WORLD, (RANK + 1) * 8 // WORLD)
    reference = _model().to(dev)
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    variants = {
        "device_ids": DDP(_model().to(dev), device_ids=[dev.index]),
        "no_device_ids": DDP(_model().to(dev)),
        "comm_hook": DDP(_model().to(dev), device_ids=[dev.index]),
    }
    # A Python comm hook: all_reduce(async_op=True).get_future().then(divide), as DDP users write them.
    variants["comm_hook"].register_comm_hook(None, default_hooks.allreduce_hook)
    optimizers = {k: torch.optim.SGD(m.parameters(), lr=0.1) for k, m in variants.items()}
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    for _ in range(4):
        for name, model in variants.items():
            optimizers[name].zero_grad()
            loss = torch.nn.functional.mse_loss(model(inputs[mine].to(dev)), targets[mine].to(dev))
            loss.backward()
            optimizers[name].step()
        ref_opt.zero_grad()
        torch.nn.functional.mse_loss(reference(inputs.to(dev)), targets.to(dev)).backward()
        ref_opt.step()
    ref = [p.detach().cpu() for p in reference.parameters()]
    logging = variants["device_ids"]._get_ddp_logging_data()
    result = {
        "timer": {
            k: logging.get(k, 0)
            for k in ("avg_forward_compute_time", "avg_backward_compute_time", "avg_backward_comm_time")
        }
    }
    for name, model in variants.items():
        params = [p.detach().cpu() for p in model.module.parameters()]
        result[name] = {
            "max_diff": max((a - b).abs().max().item() for a, b in zip(params, ref)),
            "checksum": sum(p.double().sum().item() for p in params),
        }
    dist.destroy_process_group()
    return result


def scenario_fsdp2_divide_factor() -> dict:
    """FSDP2 with a gradient divide factor (torchtitan always sets one): its
    reduce-scatter is PREMUL_SUM(1/factor). Against the same steps on CPU in one
    process (Gloo has no PREMUL_SUM, so FSDP2 cannot run this on CPU): each
    step's gradient is the sum of the ranks' local gradients / factor."""
    from torch.distributed.fsdp import FSDPModule, fully_shard

    init()
    dev = device()
    factor = 3.0
    torch.manual_seed(1)
    inputs, targets = torch.randn(8, 8), torch.randn(8, 4)
    halves = [slice(r * 8 // WORLD, (r + 1) * 8 // WORLD) for r in range(WORLD)]
    reference = _model()
    model = _model().to(dev)
    model.load_state_dict(reference.state_dict())
    from torch.distributed.device_mesh import init_device_mesh

    mesh = init_device_mesh(dev.type, (WORLD,))
    for layer in model:
        if isinstance(layer, torch.nn.Linear):
            fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    for module in model.modules():  # the factor is each FSDP module's own (torchtitan sets it on each)
        if isinstance(module, FSDPModule):
            module.set_gradient_divide_factor(factor)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    ref_opt = torch.optim.SGD(reference.parameters(), lr=0.1)
    losses, ref_losses = [], []
    for _ in range(3):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(inputs[halves[RANK]].to(dev)), targets[halves[RANK]].to(dev))
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
        ref_opt.zero_grad()
        for r, half in enumerate(halves):
            ref_loss = torch.nn.functional.mse_loss(reference(inputs[half]), targets[half])
            ref_loss.backward()
            if r == RANK:
                ref_losses.append(ref_loss.item())
        for p in reference.parameters():
            p.grad /= factor
        ref_opt.step()
    params = [p.full_tensor().detach().cpu() for p in model.parameters()]
    ref = [p.detach() for p in reference.parameters()]
    dist.barrier()
    dist.destroy_process_group()
    max_diff = max((a - b).abs().max().item() for a, b in zip(params, ref))
    return {"max_diff": max_diff, "losses": losses, "cpu_losses": ref_losses}


def computes_during_an_all_reduce(step: int, leader: int, square: torch.Tensor) -> None:
    """Overlap for HTA to find, by causality rather than by luck.

    The leader queues an all_reduce, then computes; its peers join the all_reduce only once the leader's
    compute has finished, so the leader's collective kernel cannot end before that compute does. It starts
    as soon as the communication stream takes it up, which is queued before the compute and is far shorter
    than the compute's tens of milliseconds.
    """
    store = dist.distributed_c10d._get_default_store()
    key = f"computed/{step}/{leader}"
    if RANK == leader:
        work = dist.all_reduce(torch.ones(1 << 16, device=square.device), async_op=True)
        for _ in range(4):
            (square @ square).relu_()
        torch.openreg.current_stream().synchronize()
        store.set(key, "1")
        work.wait()
    else:
        store.wait([key], timedelta(seconds=60))
        dist.all_reduce(torch.ones(1 << 16, device=square.device))


# 16 MiB: pipelines in two chunks of 8 MiB.
PIPELINED_IN_TRACE = 1 << 22


def scenario_trace() -> dict:
    """A profiled DDP run plus a few explicit collectives; one trace per rank in $RANK_FOLDER/traces."""
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    init()
    dev = device()
    model = DDP(
        torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 64)).to(dev),
        device_ids=[dev.index],
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batch = torch.randn(32, 64, device=dev)
    square = torch.randn(384, 384, device=dev)
    gathered = torch.empty(WORLD * 1000, device=dev)
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
        schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
        on_trace_ready=tensorboard_trace_handler(os.path.join(FOLDER, "traces"), worker_name=f"rank{RANK}"),
        record_shapes=True,
    ) as prof:
        for step in range(4):
            optimizer.zero_grad()
            model(batch).square().mean().backward()
            optimizer.step()
            dist.all_gather_into_tensor(gathered, values(RANK, 1000, torch.float32).to(dev))
            dist.all_reduce(torch.ones(PIPELINED_IN_TRACE, device=dev))  # stages in chunks on the copy row
            for leader in range(WORLD):
                computes_during_an_all_reduce(step, leader, square)
            peer = torch.empty(10, device=dev)
            if RANK == 0:
                dist.send(values(RANK, 10, torch.float32).to(dev), dst=1)
            else:
                dist.recv(peer, src=0)
            torch.openreg.synchronize()
            prof.step()
    averages = {
        e.key: {
            "count": e.count,
            "device_time_total": e.device_time_total,
            "self_device_time_total": e.self_device_time_total,
        }
        for e in prof.key_averages()
        if e.key.startswith("openregComm") or e.key == "record_param_comms"
    }
    stream = dist.group.WORLD._get_backend(dev).communication_stream_id(dev.index)
    dist.destroy_process_group()
    return {"key_averages": averages, "communication_stream": stream, "pipelined_numel": PIPELINED_IN_TRACE}


def scenario_fsdp2_trace() -> dict:
    """Two profiled FSDP2 steps (torchtitan's setup: fully_shard per layer and at the root, a gradient divide
    factor); one trace per rank in $RANK_FOLDER/fsdp2_traces, and what each rank launched."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import FSDPModule, fully_shard
    from torch.profiler import ProfilerActivity, profile, schedule, tensorboard_trace_handler

    init()
    dev = device()
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256), torch.nn.ReLU(), torch.nn.Linear(256, 8)
    ).to(dev)
    mesh = init_device_mesh(dev.type, (WORLD,))
    layers = [layer for layer in model if isinstance(layer, torch.nn.Linear)]
    for layer in layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_gradient_divide_factor(3.0)  # not the world size: PREMUL_SUM(1/3), as torchtitan's
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    batch, target = torch.randn(32, 64, device=dev), torch.randn(32, 8, device=dev)
    with profile(
        activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1],
        schedule=schedule(wait=1, warmup=1, active=2, repeat=1),
        on_trace_ready=tensorboard_trace_handler(os.path.join(FOLDER, "fsdp2_traces"), worker_name=f"rank{RANK}"),
        record_shapes=True,
    ) as prof:
        for _ in range(4):
            optimizer.zero_grad()
            torch.nn.functional.mse_loss(model(batch), target).backward()
            optimizer.step()
            torch.openreg.synchronize()
            prof.step()
    stream = dist.group.WORLD._get_backend(dev).communication_stream_id(dev.index)
    shard_numels = [p.to_local().numel() for p in model.parameters()]
    dist.destroy_process_group()
    return {"communication_stream": stream, "layers": len(layers), "shard_numels": shard_numels}


def _error_of(fn) -> str | None:
    try:
        fn()
    except Exception as error:  # noqa: BLE001  (the message is the result)
        return f"{type(error).__name__}: {error}"
    return None


def scenario_bad_input() -> dict:
    """Calls each rank rejects on its own, then a collective that still works, then sizes that differ."""
    init(timeout_s=15, device_id=device())
    dev = device()
    other = torch.device("openreg", (dev.index + 1) % torch.openreg.device_count())
    errors = {
        "other_device": _error_of(lambda: dist.all_reduce(torch.ones(4, device=other))),
        "mixed_devices": _error_of(
            lambda: dist.all_gather([torch.empty(4, device=dev), torch.empty(4)], torch.ones(4, device=dev))
        ),
        "dtype": _error_of(lambda: dist.all_reduce(torch.ones(4, dtype=torch.uint32, device=dev))),
        "op": _error_of(lambda: dist.all_reduce(torch.ones(4, dtype=torch.float32, device=dev), op=dist.ReduceOp.BAND)),
        "premul_sum": _error_of(
            lambda: dist.all_reduce(torch.ones(4, dtype=torch.bool, device=dev), op=dist._make_nccl_premul_sum(2.0))
        ),
        "list_length": _error_of(lambda: dist.all_gather([torch.empty(4, device=dev)], torch.ones(4, device=dev))),
        "output_size": _error_of(
            lambda: dist.all_gather_into_tensor(torch.empty(5, device=dev), torch.ones(4, device=dev))
        ),
        "non_contiguous": _error_of(lambda: dist.all_reduce(torch.ones(4, 4, device=dev).t())),
        "reserved_tag": _error_of(lambda: dist.send(torch.ones(4, device=dev), 1 - RANK, tag=0x6F726363)),
        "pipeline_tag": _error_of(lambda: dist.recv(torch.ones(4, device=dev), 1 - RANK, tag=0x6F726364)),
    }
    t = values(RANK, 16, torch.float32).to(dev)
    dist.all_reduce(t)
    still_works = torch.equal(t.cpu(), reduce_expected(dist.ReduceOp.SUM, 16, torch.float32))

    def mismatched():
        # 4 elements ride in the first exchange, 20000 do not: the check must hold across that boundary.
        work = dist.all_reduce(torch.ones(4 if RANK == 0 else 20000, device=dev), async_op=True)
        work.wait()
        dist.barrier()

    return {"errors": errors, "still_works": still_works, "mismatch": _error_of(mismatched)}


def scenario_large_mismatch() -> dict:
    """Sizes that differ where one rank pipelines and the other does not, and where both pipeline with
    different chunks: each group fails with the collective named, and a healthy group still works."""
    init(timeout_s=15, device_id=device())
    dev = device()
    # One group per mismatch: a failed group stays failed.
    cases = {"one_pipelines": (4, 400000), "both_pipeline": (300000, 2100000), "all_gather": (300000, 2100000)}
    groups = {name: dist.new_group([0, 1]) for name in cases}

    def mismatched(name):
        mine = cases[name][RANK]
        if name == "all_gather":
            out = torch.empty(2 * mine, device=dev)
            work = dist.all_gather_into_tensor(out, torch.ones(mine, device=dev), group=groups[name], async_op=True)
        else:
            work = dist.all_reduce(torch.ones(mine, device=dev), group=groups[name], async_op=True)
        work.wait()
        dist.barrier(group=groups[name])

    errors = {name: _error_of(lambda name=name: mismatched(name)) for name in cases}
    t = values(RANK, 400000, torch.float32).to(dev)
    dist.all_reduce(t)
    still_works = torch.equal(t.cpu(), reduce_expected(dist.ReduceOp.SUM, 400000, torch.float32))
    return {"errors": errors, "still_works": still_works}


def scenario_second_device() -> dict:
    """A group without a bound device keeps the device of its first call; another device is refused."""
    init(timeout_s=15)
    dev = device()
    other = torch.device("openreg", (dev.index + 1) % torch.openreg.device_count())
    t = values(RANK, 16, torch.float32).to(dev)
    dist.all_reduce(t)
    # Rank 0 tries its other device, rank 1 stays: unrefused, the two would
    # size their transfers from different histories and Gloo would abort.
    refused = _error_of(lambda: dist.all_reduce(torch.ones(4, device=other))) if RANK == 0 else None
    dist.all_reduce(t)
    still_works = torch.equal(t.cpu(), 2 * reduce_expected(dist.ReduceOp.SUM, 16, torch.float32))
    return {"refused": refused, "still_works": still_works}


def scenario_dying_rank() -> dict:
    """Rank 1 dies while rank 0 is inside a collective; rank 0 must fail, naming it and the peer."""
    init(timeout_s=20)
    dev = device()
    store = dist.distributed_c10d._get_default_store()  # served by rank 0: it outlives rank 1
    t = values(RANK, 1000, torch.float32).to(dev)
    dist.all_reduce(t)
    torch.openreg.synchronize()
    if RANK == 1:
        store.wait(["rank0_in_collective"], timedelta(seconds=30))
        os._exit(17)

    def during_death():
        work = dist.all_reduce(t, async_op=True)  # queued: the transfer waits for rank 1
        store.set("rank0_in_collective", "1")
        dist.barrier(device_ids=[dev.index])  # on orccl: blocking, as NCCL's
        work.wait()

    first = _error_of(during_death)
    later = _error_of(lambda: dist.all_reduce(t))
    device_sync = _error_of(torch.openreg.synchronize)
    return {"first": first, "later": later, "device_sync": device_sync}


def scenario_dying_mid_pipeline() -> dict:
    """Rank 1 dies while a large collective ($COLLECTIVE) streams its chunks: rank 0 fails cleanly.

    Rank 1 exits 50 ms into a transfer of 64 MiB per rank, after the first exchange and with rank 0's receives posted
    (all_gather, reduce_scatter) or a chunk's Gloo all_reduce under way. Rank 0 reports how much of rank 1's data
    reached its output, which tells where the transfer stopped.
    """
    import threading
    import time

    init(timeout_s=6)
    dev = device()
    store = dist.distributed_c10d._get_default_store()
    collective = os.environ["COLLECTIVE"]
    n = 16 << 20  # float32: 64 MiB per rank
    mine = torch.full((n,), float(RANK + 1), device=dev)
    if collective == "all_gather":
        out = torch.zeros(2 * n, device=dev)
        call = lambda: dist.all_gather_into_tensor(out, mine, async_op=True)  # noqa: E731
        arrived = lambda: out[n:].eq(2).sum().item()  # noqa: E731
    elif collective == "reduce_scatter":
        out = torch.zeros(n // 2, device=dev)
        call = lambda: dist.reduce_scatter_tensor(out, mine, async_op=True)  # noqa: E731
        arrived = lambda: out.eq(3).sum().item()  # noqa: E731
    else:
        out = mine
        call = lambda: dist.all_reduce(out, async_op=True)  # noqa: E731
        arrived = lambda: out.eq(3).sum().item()  # noqa: E731
    dist.barrier()
    torch.openreg.synchronize()
    store.set(f"ready{RANK}", "1")
    store.wait(["ready0", "ready1"], timedelta(seconds=30))
    if RANK == 1:
        threading.Timer(0.05, lambda: os._exit(17)).start()
        call()
        time.sleep(30)  # the timer ends the process
        os._exit(18)
    work = call()
    error = _error_of(work.wait)
    device_sync = _error_of(torch.openreg.synchronize)
    later = _error_of(lambda: dist.all_reduce(torch.ones(4, device=dev)))
    return {
        "error": error or device_sync,
        "device_sync": device_sync,
        "later": later,
        "arrived": arrived(),
        "expected": out.numel() - (n if collective == "all_gather" else 0),
    }


def scenario_silent_peer() -> dict:
    """Rank 1 never joins the collective (but stays alive): rank 0 fails by the group's timeout."""
    init(timeout_s=4)
    dev = device()
    store = dist.distributed_c10d._get_default_store()
    t = values(RANK, 100, torch.float32).to(dev)
    if RANK == 1:
        store.wait(["rank0_failed"], timedelta(seconds=60))
        store.set("rank1_done", "1")
        os._exit(0)  # the group is broken: no orderly shutdown
    error = _error_of(lambda: (dist.all_reduce(t), dist.barrier(device_ids=[dev.index])))
    store.set("rank0_failed", "1")
    store.wait(["rank1_done"], timedelta(seconds=60))  # rank 0 serves the store: keep it until rank 1 read it
    return {"error": error}


def scenario_set_timeout() -> dict:
    """torch's _set_pg_timeout reaches orccl (torch 2.13 sets only Gloo's and NCCL's)."""
    import warnings

    init(timeout_s=60.0)
    ours = dist.group.WORLD._get_backend(device())
    before = ours.timeout
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dist.distributed_c10d._set_pg_timeout(timedelta(seconds=17))
    after = ours.timeout
    t = torch.ones(8, device=device())
    dist.all_reduce(t)
    total = t.cpu().tolist()
    dist.destroy_process_group()
    return {
        "before_s": before.total_seconds(),
        "after_s": after.total_seconds(),
        "warnings": [str(w.message) for w in caught],
        "sum": total,
    }


def scenario_readme() -> dict:
    """The README's distributed example, as written, then one DDP step."""
    from pathlib import Path

    text = (Path(__file__).resolve().parents[2] / "README.md").read_text()
    section = text[text.index("\n## Distributed training\n") :]
    block = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace: dict = {}
    exec(block, namespace)  # noqa: S102
    model = namespace["model"]
    model(torch.full((4, 64), float(RANK + 1), device="openreg")).sum().backward()
    grad = model.module.weight.grad.cpu()
    result = {"backend": dist.get_backend(), "grad_sum": grad.sum().item(), "device": str(model.module.weight.device)}
    dist.destroy_process_group()
    return result


SCENARIOS = {
    "silent_peer": scenario_silent_peer,
    "readme": scenario_readme,
    "bad_input": scenario_bad_input,
    "large_mismatch": scenario_large_mismatch,
    "second_device": scenario_second_device,
    "dying_rank": scenario_dying_rank,
    "dying_mid_pipeline": scenario_dying_mid_pipeline,
    "ops": scenario_ops,
    "set_timeout": scenario_set_timeout,
    "fsdp2_divide_factor": scenario_fsdp2_divide_factor,
    "four_ranks": scenario_four_ranks,
    "default_backend": scenario_default_backend,
    "ddp": scenario_ddp,
    "trace": scenario_trace,
    "fsdp2_trace": scenario_fsdp2_trace,
}


def main() -> int:
    try:
        result = SCENARIOS[sys.argv[1]]()
    except Exception:
        traceback.print_exc()
        return 1
    write_result(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
