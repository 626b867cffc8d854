"""torchtitan on openreg: llama3 debug model, 1 rank against 2 ranks with FSDP2.

    python tests/torchtitan/run_torchtitan_check.py [--steps 8] [--keep] [--json out.json]

Runs torchtitan 0.3.0's llama3 debug model (``--module llama3 --config
llama3_debugmodel_varlen_attn``) with torchrun on 127.0.0.1, on openreg, which
torchtitan picks by itself (``torch._utils._get_available_device_type()``):

1. once on 1 rank, the reference;
2. once on 2 ranks, where torchtitan's default data_parallel_shard_degree=-1
   resolves to 2 and its ``fully_shard`` (FSDP2) shards every parameter over
   the 2 ranks (collectives on orccl).

Both runs train on the same global batch at every step from the same weights,
so their per-step loss and grad norm must agree: the script prints them side by
side and exits 1 if any differs by more than ``--rtol`` (1e-4), if a run fails
or times out, or if a check below fails. It fails (exit 1), and does not skip,
when torchtitan or its dependencies are missing (``scripts/install_torchtitan.sh``).

No network: the tokenizer (a WordLevel ``tokenizers`` tokenizer trained on
generated text, ``tokenizer.json`` + ``tokenizer_config.json``) and the dataset
(JSON lines of ``{"text": ...}``, what torchtitan's ``c4_test`` loader reads)
are generated into a temporary folder; HF_HUB_OFFLINE and HF_DATASETS_OFFLINE are set.

Where the run departs from ``llama3_debugmodel`` as shipped (tests/torchtitan/README.md has
the errors and reproductions):

* ``--config llama3_debugmodel_varlen_attn``: torchtitan's own variant of the
  debug model with varlen attention. ``llama3_debugmodel`` uses FlexAttention,
  which torch 2.13 refuses on any device but CUDA, CPU, XPU, HPU and MPS.
* ``--parallelism.spmd_backend partial_dtensor``: torchtitan's default
  ``spmd_types`` hands ``fully_shard`` plain parameters with a ``dp_mesh_dims``,
  which torch 2.13's FSDP2 rejects; ``full_dtensor`` trains, but its logged loss
  is world_size times too large (torch 2.13's ``clone()`` of a Partial DTensor
  is Replicate, and torchtitan then sums it over the ranks).
* ``--training.mixed_precision_param float32`` (torchtitan's default bf16 is
  ``--mixed-precision-param bfloat16``): bf16 compute rounds differently for a
  batch of 4 on one rank and 2 x 2 on two.

How the two runs are made comparable (each is checked, not assumed):

* data: torchtitan packs documents into ``seq_len`` samples and gives each
  rank a contiguous half of the documents (``split_dataset_by_node``). Every
  generated document is exactly ``seq_len - 1`` words, so with BOS and EOS it
  is exactly one sample. The 2-rank run reads ``c4_dist`` (rank 0 the first
  half, rank 1 the second); the 1-rank run reads ``c4_single``, the same
  documents interleaved in blocks of ``--batch``, with a local batch of
  2 x ``--batch``. Each rank records a hash of every sample it trains on, and the
  1-rank batch of every step must be rank 0's followed by rank 1's.
* weights: a torchtitan seed checkpoint (``--checkpoint.create_seed_checkpoint``
  on one rank, DCP) that both runs load (``--checkpoint.initial_load_path``,
  model only, ``--checkpoint.load_only``), torchtitan's own recipe for comparing
  parallelisms. ``--no-seed-checkpoint`` initialises each run from
  ``--debug.seed`` instead: the sharded and unsharded inits then differ.
* device: each rank records torchtitan's device type, where its parameters
  are, their DTensor mesh and placements and the FSDP modules; step
  ``--trace-step`` is profiled (CPU + PrivateUse1) on every rank and the
  trace must show kernels on openreg's device rows (with orccl's collectives
  on 2 ranks).

Instrumentation and workarounds in the workers (``--worker``, what torchrun starts):

* ``torch.distributed.set_timeout``: torchtitan calls it after the first step
  (``set_pg_timeouts``); torch 2.13 has no such function. It is provided as a
  call of ``torch.distributed.distributed_c10d._set_pg_timeout``, which
  torch_openreg wraps to set orccl's timeout too.
* ``triton``: torchtitan imports it at module level
  (``torchtitan/distributed/minimal_async_ep/kernels.py``, reached from
  ``models/common/moe.py``) for MoE expert-parallel kernels that a dense llama3
  never runs; the CPU build of torch has no triton. When ``import triton``
  fails, torchtitan's own modules (and only those) get a stub whose kernels
  raise if ever called; torch itself keeps seeing no triton.
* metrics: ``MetricsProcessor.log`` is wrapped to write the exact per-step loss
  and grad norm (rank 0) to a JSON lines file (the printed log has 5 and 4
  decimals; its lines are parsed too, as a cross-check), and
  ``clip_grad_norm_`` to also compute the gradients' norm in float64: torch's
  fp32 norm kernel (CPU's, which openreg's matches) accumulates in one fp32
  sum per lane and is off by up to ~1e-4 relative here, differently for whole
  and half-size tensors, while the gradients themselves agree to ~1e-7.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:  # torch autoloads torch_openreg, which must be importable from the checkout
    sys.path.insert(0, str(REPO))
INSTALL_HINT = "bash scripts/install_torchtitan.sh"
METRICS_ENV = "OPENREG_TT_METRICS"
DEVICE_ENV = "OPENREG_TT_DEVICE_REPORT"
DATA_ENV = "OPENREG_TT_DATA"
TRACE_ENV = "OPENREG_TT_TRACE"
TRACE_STEP_ENV = "OPENREG_TT_TRACE_STEP"
BOS, EOS, UNK = "<|begin_of_text|>", "<|end_of_text|>", "<unk>"
LOG_STEP = re.compile(r"step:\s*(\d+)\s+loss:\s*([-+0-9.eEnaif]+)\s+grad_norm:\s*([-+0-9.eEnaif]+)")


# --------------------------------------------------------------------------- worker


def _triton_stub():
    """A stand-in for the ``triton`` names torchtitan's modules use at import time."""
    import types

    class _Any:
        def __getattr__(self, name):
            if name.startswith("_"):
                raise AttributeError(name)
            return _Any()

        def __call__(self, *args, **kwargs):
            return _Any()

        def __getitem__(self, key):
            return _Any()

    def jit(fn=None, **_kwargs):
        def wrap(f):
            def kernel(*args, **kwargs):
                raise RuntimeError(f"triton kernel {f.__qualname__} called, but triton is a stub here (no triton)")

            kernel.__name__ = kernel.__qualname__ = f.__name__
            return kernel

        return wrap(fn) if fn is not None else wrap

    def _module_getattr(name):
        if name.startswith("_"):
            raise AttributeError(name)
        return _Any()

    triton = types.ModuleType("triton")
    language = types.ModuleType("triton.language")
    language.__getattr__ = _module_getattr
    triton.language = language
    triton.jit = jit
    triton.cdiv = lambda a, b: -(-a // b)
    triton.next_power_of_2 = lambda n: 1 << (n - 1).bit_length()
    return triton


def _install_triton_stub_for_torchtitan() -> bool:
    import builtins
    import importlib.util

    if importlib.util.find_spec("triton") is not None:
        return False
    stub = _triton_stub()
    real_import = builtins.__import__

    def import_(name, globals=None, locals=None, fromlist=(), level=0):
        if (
            level == 0
            and (name == "triton" or name.startswith("triton."))
            and globals
            and str(globals.get("__name__", "")).startswith("torchtitan")
        ):
            return stub
        return real_import(name, globals, locals, fromlist, level)

    builtins.__import__ = import_
    return True


def _install_set_timeout() -> None:
    import torch.distributed as dist

    if hasattr(dist, "set_timeout"):
        return

    def set_timeout(timeout, group=None):
        # torch 2.13 has no public set_timeout; _set_pg_timeout is what it would call
        # (torch_openreg wraps it so that orccl's timeout is set too).
        dist.distributed_c10d._set_pg_timeout(timeout, group)

    dist.set_timeout = set_timeout


def _install_metrics_capture(path: str) -> None:
    """Rank 0 writes each step's exact loss and grad norm, and the grad norm recomputed in float64.

    torchtitan's grad norm is torch's fp32 ``_foreach_norm`` of the gradients; the float64 one is
    computed here from the same gradients (``full_tensor()`` of each, before clipping) as a
    reference that does not depend on the fp32 norm kernel's accumulation (see the README).
    """
    import torch
    import torchtitan.distributed.utils as dist_utils
    from torch.distributed.tensor import DTensor
    from torchtitan.components.metrics import MetricsProcessor

    clip = dist_utils.clip_grad_norm_
    state: dict = {}

    def clip_and_measure(parameters, *args, **kwargs):
        parameters = list(parameters)
        with torch.no_grad():
            total = 0.0
            for p in parameters:
                if p.grad is not None:
                    g = p.grad.full_tensor() if isinstance(p.grad, DTensor) else p.grad
                    total += float(g.double().pow(2).sum())
        state["grad_norm_fp64"] = math.sqrt(total)
        return clip(parameters, *args, **kwargs)

    dist_utils.clip_grad_norm_ = clip_and_measure
    log = MetricsProcessor.log

    def log_and_record(self, step, global_avg_loss, global_max_loss, grad_norm, extra_metrics=None):
        import torch.distributed as dist

        if not dist.is_initialized() or dist.get_rank() == 0:
            row = {
                "step": step,
                "loss": global_avg_loss,
                "max_loss": global_max_loss,
                "grad_norm": grad_norm,
                "grad_norm_fp64": state.get("grad_norm_fp64"),
            }
            with open(path, "a") as f:
                f.write(json.dumps(row) + "\n")
        return log(self, step, global_avg_loss, global_max_loss, grad_norm, extra_metrics)

    MetricsProcessor.log = log_and_record


def _install_data_record(path: str) -> None:
    """Each rank writes a fingerprint of every sample it trains on, per step."""
    import hashlib

    import torch.distributed as dist
    from torchtitan.trainer import Trainer

    post = Trainer.post_dataloading_process

    def post_and_record(self, input_dict, labels):
        rank = dist.get_rank() if dist.is_initialized() else 0
        rows = [hashlib.sha1(row.numpy().tobytes()).hexdigest()[:16] for row in labels.cpu()]
        with open(f"{path}.rank{rank}.jsonl", "a") as f:
            f.write(json.dumps({"step": self.step, "rank": rank, "rows": rows}) + "\n")
        return post(self, input_dict, labels)

    Trainer.post_dataloading_process = post_and_record


def _install_trace(path: str, step: int) -> None:
    """Profiles training step ``step`` with CPU and openreg (PrivateUse1) activities, one trace per rank."""
    import torch
    import torch.distributed as dist
    from torch.profiler import ProfilerActivity, profile
    from torchtitan.trainer import Trainer

    train_step = Trainer.train_step

    def traced_train_step(self, data_iterator):
        if self.step != step:
            return train_step(self, data_iterator)
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            out = train_step(self, data_iterator)
            torch.openreg.synchronize()
        rank = dist.get_rank() if dist.is_initialized() else 0
        prof.export_chrome_trace(f"{path}.rank{rank}.json")
        return out

    Trainer.train_step = traced_train_step


def _install_device_report(path: str) -> None:
    """Records, per rank, the device torchtitan picked and where the model's parameters are."""
    from torchtitan.trainer import Trainer

    init = Trainer.__init__

    def init_and_report(self, *args, **kwargs):
        init(self, *args, **kwargs)
        import torch
        import torch.distributed as dist
        from torch.distributed.fsdp import FSDPModule
        from torch.distributed.tensor import DTensor

        model = self.model_parts[0]
        params = list(model.parameters())
        rank = dist.get_rank() if dist.is_initialized() else 0
        report = {
            "rank": rank,
            "available_device_type": torch._utils._get_available_device_type(),
            "trainer_device": str(self.device),
            "param_devices": sorted({str(p.device) for p in params}),
            "params": len(params),
            "dtensor_params": sum(isinstance(p, DTensor) for p in params),
            "param_placements": sorted({str(tuple(p.placements)) for p in params if isinstance(p, DTensor)}),
            "param_mesh_sizes": sorted({p.device_mesh.size() for p in params if isinstance(p, DTensor)}),
            "fsdp_modules": sum(isinstance(m, FSDPModule) for m in model.modules()),
            "dp_shard": int(self.parallel_dims.dp_shard),
            "spmd_backend": self.config.parallelism.spmd_backend,
            "world_size": dist.get_world_size() if dist.is_initialized() else 1,
            "default_pg_backend": (str(dist.get_backend()) if dist.is_initialized() else None),
        }
        with open(f"{path}.rank{rank}.json", "w") as f:
            json.dump(report, f)

    Trainer.__init__ = init_and_report


def worker_main(argv: list[str]) -> None:
    stubbed = _install_triton_stub_for_torchtitan()
    import torch  # noqa: F401  (loads torch_openreg through torch's backend autoload)

    import torch_openreg  # noqa: F401

    _install_set_timeout()
    import torchtitan.train

    if os.environ.get(METRICS_ENV):
        _install_metrics_capture(os.environ[METRICS_ENV])
    if os.environ.get(DEVICE_ENV):
        _install_device_report(os.environ[DEVICE_ENV])
    if os.environ.get(DATA_ENV):
        _install_data_record(os.environ[DATA_ENV])
    if os.environ.get(TRACE_ENV):
        _install_trace(os.environ[TRACE_ENV], int(os.environ.get(TRACE_STEP_ENV, "2")))
    if stubbed and os.environ.get("RANK", "0") == "0":
        print("[check] triton is not installed: torchtitan's module-level triton imports get a stub", flush=True)
    sys.argv = ["torchtitan.train", *argv]
    torchtitan.train.main()


# --------------------------------------------------------------------------- assets


def _words(n: int, rng: random.Random) -> list[str]:
    onsets = ["b", "c", "d", "f", "g", "h", "j", "k", "l", "m", "n", "p", "r", "s", "t", "v", "w", "z", "st", "tr"]
    vowels = ["a", "e", "i", "o", "u", "ai", "ou"]
    codas = ["", "n", "s", "t", "r", "l", "m"]
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < n:
        w = "".join(rng.choice(onsets) + rng.choice(vowels) + rng.choice(codas) for _ in range(rng.randint(1, 3)))
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def _documents(count: int, length: int, vocab: list[str], rng: random.Random) -> list[str]:
    """Documents of exactly ``length`` words from a fixed random bigram chain (learnable)."""
    successors = {w: rng.sample(vocab, 8) for w in vocab}
    docs = []
    for _ in range(count):
        w = rng.choice(vocab)
        words = [w]
        for _ in range(length - 1):
            w = rng.choice(successors[w]) if rng.random() < 0.9 else rng.choice(vocab)
            words.append(w)
        docs.append(" ".join(words))
    return docs


def make_assets(root: Path, seq_len: int, batch: int, steps: int, vocab_size: int, seed: int) -> dict:
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    rng = random.Random(seed)
    vocab = _words(vocab_size - 3, rng)
    per_rank = batch * (steps + 2)  # documents each rank of the 2-rank run needs, with spare
    docs = _documents(2 * per_rank, seq_len - 1, vocab, rng)

    tok_dir = root / "tokenizer"
    tok_dir.mkdir(parents=True)
    tokenizer = Tokenizer(models.WordLevel(unk_token=UNK))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.WordLevelTrainer(vocab_size=vocab_size, special_tokens=[UNK, BOS, EOS], min_frequency=1)
    tokenizer.train_from_iterator([" ".join(vocab), *docs], trainer=trainer)
    tokenizer.save(str(tok_dir / "tokenizer.json"))
    (tok_dir / "tokenizer_config.json").write_text(
        json.dumps({"bos_token": BOS, "eos_token": EOS, "unk_token": UNK, "add_bos_token": True, "add_eos_token": True})
    )
    n_vocab = tokenizer.get_vocab_size()
    for d in docs:
        ids = tokenizer.encode(d).ids
        assert len(ids) == seq_len - 1 and tokenizer.token_to_id(UNK) not in ids, "a document is not seq_len-1 tokens"

    first, second = docs[:per_rank], docs[per_rank:]
    single = []
    for s in range(0, per_rank, batch):
        single += first[s : s + batch] + second[s : s + batch]
    for name, rows in (("c4_dist", first + second), ("c4_single", single)):
        d = root / name
        d.mkdir()
        with open(d / "data.jsonl", "w") as f:
            for text in rows:
                f.write(json.dumps({"text": text}) + "\n")
    return {"tokenizer": str(tok_dir), "vocab_size": n_vocab, "documents": len(docs)}


# --------------------------------------------------------------------------- runs


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _env(root: Path, tag: str, trace_step: int = 0) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)
    hf = root / f"hf-{tag}"
    env.update(
        HF_HOME=str(hf),
        HF_DATASETS_CACHE=str(hf / "datasets"),
        HF_HUB_OFFLINE="1",
        HF_DATASETS_OFFLINE="1",
        TRANSFORMERS_OFFLINE="1",
        WANDB_MODE="disabled",
        MASTER_ADDR="127.0.0.1",
        GLOO_SOCKET_IFNAME="lo",
        TORCHINDUCTOR_CACHE_DIR=str(root / f"inductor-{tag}"),
        OMP_NUM_THREADS=env.get("OMP_NUM_THREADS", "1"),
        PYTHONUNBUFFERED="1",
    )
    env[METRICS_ENV] = str(root / f"metrics-{tag}.jsonl")
    env[DEVICE_ENV] = str(root / f"device-{tag}")
    env[DATA_ENV] = str(root / f"data-{tag}")
    if trace_step:
        env[TRACE_ENV] = str(root / f"trace-{tag}")
        env[TRACE_STEP_ENV] = str(trace_step)
    return env


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (torchrun puts each worker in a session of its own)."""
    children: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(d.name))
    out, todo = [], [pid]
    while todo:
        for c in children.get(todo.pop(), []):
            out.append(c)
            todo.append(c)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _become_subreaper() -> None:
    """Orphaned workers (torchrun gone) become this process's children, so that _stop finds them."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _stop(proc: subprocess.Popen) -> list[int]:
    """Ends torchrun and every process it started; returns the ones that were still there."""
    left = [p for p in _descendants(os.getpid()) if _alive(p) and p != proc.pid]
    if proc.poll() is None:
        left.insert(0, proc.pid)
    for sig, grace in ((signal.SIGTERM, 20.0), (signal.SIGKILL, 10.0)):
        live = [p for p in left if _alive(p)]
        if not live:
            break
        for p in live:
            try:
                os.kill(p, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and any(_alive(p) for p in live):
            if proc.poll() is None:
                try:
                    proc.wait(timeout=0.2)
                except subprocess.TimeoutExpired:
                    pass
            else:
                _reap()
                time.sleep(0.2)
    if proc.poll() is None:
        proc.wait(timeout=10)
    _reap()
    return left


def torchrun(root: Path, tag: str, nproc: int, tt_args: list[str], timeout: float, trace_step: int = 0) -> dict:
    """One torchrun on 127.0.0.1 with ``nproc`` workers, bounded by ``timeout`` seconds."""
    log_path = root / f"log-{tag}.txt"
    port = _free_port()
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc-per-node={nproc}",
        "--nnodes=1",
        "--node-rank=0",
        "--master-addr=127.0.0.1",
        f"--master-port={port}",
        "--local-addr=127.0.0.1",
        "--max-restarts=0",
        "--monitor-interval=1",
        "--role=rank",
        "--tee=3",
        f"--log-dir={root / f'torchrun-{tag}'}",
        str(Path(__file__).resolve()),
        "--worker",
        *tt_args,
    ]
    start = time.monotonic()
    with open(log_path, "w") as log:
        log.write(" ".join(cmd) + "\n")
        log.flush()
        proc = subprocess.Popen(
            cmd,
            cwd=str(root),
            env=_env(root, tag, trace_step),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        try:
            rc = proc.wait(timeout=timeout)
            timed_out = False
        except subprocess.TimeoutExpired:
            timed_out = True
            rc = None
        finally:
            leftover = _stop(proc)
    wall = time.monotonic() - start
    if timed_out:
        rc = proc.returncode
    return {
        "tag": tag,
        "nproc": nproc,
        "rc": rc,
        "timed_out": timed_out,
        "wall_s": wall,
        "log": str(log_path),
        "stopped_leftovers": leftover,
    }


def read_metrics(root: Path, tag: str) -> dict[int, dict]:
    rows: dict[int, dict] = {}
    path = root / f"metrics-{tag}.jsonl"
    if path.exists():
        for line in path.read_text().splitlines():
            r = json.loads(line)
            rows[int(r["step"])] = r
    return rows


def parse_log(path: str) -> dict[int, tuple[float, float]]:
    """torchtitan's printed ``step: N  loss: X  grad_norm: Y`` lines of rank 0."""
    out = {}
    for line in Path(path).read_text(errors="replace").splitlines():
        prefix = re.match(r"\[rank(\d+)\]:", line)
        if prefix and prefix.group(1) != "0":
            continue
        m = LOG_STEP.search(re.sub(r"\x1b\[[0-9;]*m", "", line))
        if m:
            out[int(m.group(1))] = (float(m.group(2)), float(m.group(3)))
    return out


def read_data(root: Path, tag: str) -> dict[int, dict[int, list[str]]]:
    """step -> rank -> fingerprints of the samples that rank trained on."""
    out: dict[int, dict[int, list[str]]] = {}
    for p in sorted(root.glob(f"data-{tag}.rank*.jsonl")):
        for line in p.read_text().splitlines():
            r = json.loads(line)
            out.setdefault(int(r["step"]), {}).setdefault(int(r["rank"]), []).extend(r["rows"])
    return out


def read_device_reports(root: Path, tag: str) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(root.glob(f"device-{tag}.rank*.json"))]


def summarize_trace(path: Path) -> dict:
    """Device rows and kernels of one rank's trace of one training step."""
    events = json.loads(path.read_text())["traceEvents"]
    rows = {}
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "process_name":
            rows[e["pid"]] = e["args"]["name"]
    device_pids = {pid for pid, name in rows.items() if str(name).startswith("openreg:")}
    kernels = [e for e in events if e.get("ph") == "X" and e.get("cat") == "kernel"]
    on_device = [e for e in kernels if e.get("pid") in device_pids]
    names: dict[str, int] = {}
    for e in on_device:
        names[e["name"]] = names.get(e["name"], 0) + 1
    comm = {n: c for n, c in names.items() if re.search(r"all_?gather|reduce_?scatter|all_?reduce|orccl|nccl", n, re.I)}
    top = sorted(names.items(), key=lambda kv: -kv[1])[:5]
    return {
        "device_rows": sorted({rows[e["pid"]] for e in on_device}),
        "kernels": len(on_device),
        "device_ms": sum(e.get("dur", 0.0) for e in on_device) / 1e3,
        "collective_kernels": comm,
        "top_kernels": top,
    }


def tail(path: str, n: int = 60) -> str:
    return "\n".join(Path(path).read_text(errors="replace").splitlines()[-n:])


def rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), abs(b), 1e-12)


# --------------------------------------------------------------------------- main


def _check_installed() -> str:
    import importlib.metadata as md

    try:
        version = md.version("torchtitan")
    except md.PackageNotFoundError:
        sys.exit(f"FAIL: torchtitan is not installed. Install it (without letting pip pick torch) with: {INSTALL_HINT}")
    missing = []
    for mod in ("tyro", "spmd_types", "torchdata.stateful_dataloader", "tensorboard", "tokenizers", "datasets"):
        try:
            __import__(mod)
        except Exception as e:  # noqa: BLE001  (any failure to import is a missing dependency here)
            missing.append(f"{mod} ({type(e).__name__}: {e})")
    if missing:
        sys.exit(
            f"FAIL: torchtitan {version} is installed but not its runtime dependencies: {missing}. Run {INSTALL_HINT}"
        )
    return version


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--seq-len", type=int, default=128)
    ap.add_argument("--batch", type=int, default=2, help="local batch per rank of the 2-rank run (1 rank: twice that)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--rtol", type=float, default=1e-4)
    ap.add_argument("--timeout", type=float, default=600, help="seconds allowed for each torchrun")
    ap.add_argument(
        "--config",
        default="llama3_debugmodel_varlen_attn",
        help="torchtitan llama3 config (llama3_debugmodel itself uses FlexAttention, which torch refuses on openreg)",
    )
    ap.add_argument(
        "--spmd-backend",
        default="partial_dtensor",
        choices=["partial_dtensor", "full_dtensor", "spmd_types"],
        help="--parallelism.spmd_backend (torchtitan's default spmd_types cannot shard on torch 2.13; see the README)",
    )
    ap.add_argument(
        "--mixed-precision-param",
        default="float32",
        choices=["float32", "bfloat16"],
        help="FSDP2's compute dtype (torchtitan's default bfloat16 rounds differently at batch 4 and 2 x 2)",
    )
    ap.add_argument("--no-seed-checkpoint", action="store_true", help="initialise each run from --debug.seed instead")
    ap.add_argument("--trace-step", type=int, default=2, help="profile this step on every rank (0: no trace)")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder (logs, metrics, traces, assets)")
    ap.add_argument(
        "--work-dir", type=Path, default=None, help="use this (empty) folder, kept, instead of a temporary one"
    )
    ap.add_argument("--json", type=Path, default=None, help="also write the results to this file")
    args = ap.parse_args()
    if args.trace_step > args.steps:
        ap.error("--trace-step must be at most --steps")

    version = _check_installed()
    import torch

    _become_subreaper()

    print(f"torch {torch.__version__}, torchtitan {version}, python {sys.version.split()[0]}")
    print(
        f"config {args.config}, spmd_backend {args.spmd_backend}, {args.steps} steps, seq_len {args.seq_len}, "
        f"global batch {2 * args.batch} (1 rank x {2 * args.batch}, 2 ranks x {args.batch})"
    )

    if args.work_dir is not None:
        args.work_dir.mkdir(parents=True, exist_ok=True)
        if any(args.work_dir.iterdir()):
            ap.error(f"--work-dir {args.work_dir} is not empty")
    root = (args.work_dir or Path(tempfile.mkdtemp(prefix="openreg-torchtitan-"))).resolve()
    keep = args.keep or args.work_dir is not None
    t0 = time.monotonic()
    try:
        return _run(args, root)
    finally:
        print(f"total wall time {time.monotonic() - t0:.1f} s")
        if keep:
            print(f"kept: {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


def _base_args(args, assets: dict) -> list[str]:
    return [
        "--module",
        "llama3",
        "--config",
        args.config,
        f"--parallelism.spmd-backend={args.spmd_backend}",
        f"--hf-assets-path={assets['tokenizer']}",
        "--dataloader.dataset=c4_test",
        "--dataloader.num-workers=0",
        f"--training.seq-len={args.seq_len}",
        f"--debug.seed={args.seed}",
        "--comm.init-timeout-seconds=120",
        "--comm.train-timeout-seconds=120",
    ]


def _train_args(args, assets: dict, seed_ckpt: Path | None) -> list[str]:
    common = _base_args(args, assets) + [
        f"--training.steps={args.steps}",
        # torchtitan's default is bf16 parameters in FSDP2's compute; fp32 by default here (see --mixed-precision-param)
        f"--training.mixed-precision-param={args.mixed_precision_param}",
        "--metrics.log-freq=1",
        "--metrics.disable-color-printing",
    ]
    if seed_ckpt is not None:
        common += [
            "--checkpoint.enable",
            "--checkpoint.load-only",  # load the seed weights, save nothing
            f"--checkpoint.initial-load-path={seed_ckpt}",
            "--checkpoint.initial-load-model-only",
            "--checkpoint.no-enable-first-step-checkpoint",
        ]
    return common


def _report_run(r: dict) -> None:
    state = "timed out" if r["timed_out"] else f"rc={r['rc']}"
    print(f"{r['tag']}: {r['nproc']} rank(s), {state}, wall {r['wall_s']:.1f} s")
    if r["stopped_leftovers"] and not r["timed_out"]:
        print(f"  note: stopped processes left behind by torchrun: {r['stopped_leftovers']}")
    if r["rc"] != 0:
        print(f"---- last lines of {r['log']} ----\n{tail(r['log'])}\n----")


def _check_devices(root: Path, runs: dict, failures: list[str]) -> dict:
    """Each rank trained on openreg, and the 2-rank run's parameters are FSDP-sharded over both."""
    devices = {tag: read_device_reports(root, tag) for tag in runs}
    for tag, (nproc, _) in runs.items():
        if len(devices[tag]) != nproc:
            failures.append(f"{tag}: {len(devices[tag])} of {nproc} ranks reported their device")
        for d in devices[tag]:
            print(
                f"{tag} rank {d['rank']}: device type {d['available_device_type']!r}, trainer device {d['trainer_device']}, "
                f"params on {d['param_devices']}, {d['dtensor_params']}/{d['params']} DTensor params "
                f"{d['param_placements']} on a mesh of {d['param_mesh_sizes']}, {d['fsdp_modules']} FSDP modules, "
                f"dp_shard {d['dp_shard']}, backend {d['default_pg_backend']}"
            )
            if d["available_device_type"] != "openreg" or not all(x.startswith("openreg") for x in d["param_devices"]):
                failures.append(f"{tag} rank {d['rank']} did not train on openreg")
            if tag == "2rank" and (d["dp_shard"] != 2 or d["fsdp_modules"] == 0 or d["param_mesh_sizes"] != [2]):
                failures.append(f"2rank rank {d['rank']}: parameters are not FSDP-sharded over 2 ranks")
    return devices


def _check_traces(root: Path, runs: dict, trace_step: int, failures: list[str]) -> dict:
    """The profiled step of every rank shows kernels on openreg's device rows."""
    traces = {}
    for tag, (nproc, _) in runs.items():
        paths = sorted(root.glob(f"trace-{tag}.rank*.json"))
        if len(paths) != nproc:
            failures.append(f"{tag}: {len(paths)} of {nproc} ranks wrote a trace of step {trace_step}")
        for p in paths:
            s = summarize_trace(p)
            traces[p.name] = s
            print(
                f"trace {p.name} (step {trace_step}): {s['kernels']} kernels on {s['device_rows']}, "
                f"{s['device_ms']:.0f} ms device time; collectives {s['collective_kernels'] or 'none'}; "
                f"top {s['top_kernels'][:3]}"
            )
            if not s["kernels"]:
                failures.append(f"{p.name}: no openreg kernels in the trace")
    return traces


def _check_data(root: Path, args, failures: list[str]) -> None:
    """At every step the 1-rank batch is rank 0's samples followed by rank 1's."""
    one_rank, two_ranks = read_data(root, "1rank"), read_data(root, "2rank")
    bad = 0
    for step in range(1, args.steps + 1):
        one = one_rank.get(step, {}).get(0)
        two = two_ranks.get(step, {})
        if one is None or set(two) != {0, 1}:
            continue  # a run that stopped early is reported with the metrics
        if one != two[0] + two[1]:
            bad += 1
            failures.append(f"step {step}: the 1-rank batch is not the 2-rank global batch")
    if one_rank and two_ranks and not bad:
        print(f"data: at every step the 1-rank batch is exactly rank 0's + rank 1's batch ({2 * args.batch} samples)")


def _run(args, root: Path) -> int:
    t = time.monotonic()
    assets = make_assets(root, args.seq_len, args.batch, args.steps, vocab_size=2048, seed=args.seed)
    print(
        f"assets in {root}: WordLevel tokenizer, vocab {assets['vocab_size']}; "
        f"{assets['documents']} documents of seq_len+1 tokens ({time.monotonic() - t:.1f} s)"
    )

    results = []
    failures: list[str] = []
    seed_ckpt = None
    if not args.no_seed_checkpoint:
        ckpt_dir = root / "seed"
        seed_args = _base_args(args, assets) + [
            f"--dataloader.dataset-path={root / 'c4_single'}",
            "--checkpoint.enable",
            "--checkpoint.create-seed-checkpoint",
            f"--checkpoint.folder={ckpt_dir}",
            "--parallelism.data-parallel-shard-degree=1",
        ]
        r = torchrun(root, "seed", 1, seed_args, args.timeout)
        results.append(r)
        _report_run(r)
        seed_ckpt = ckpt_dir / "step-0"
        if r["rc"] != 0 or not seed_ckpt.is_dir():
            print(f"FAIL: could not create the seed checkpoint; log {r['log']}")
            return 1

    common = _train_args(args, assets, seed_ckpt)
    runs = {
        "1rank": (
            1,
            [f"--dataloader.dataset-path={root / 'c4_single'}", f"--training.local-batch-size={2 * args.batch}"],
        ),
        "2rank": (2, [f"--dataloader.dataset-path={root / 'c4_dist'}", f"--training.local-batch-size={args.batch}"]),
    }
    for tag, (nproc, extra) in runs.items():
        # a checkpoint folder of its own: torchtitan resumes from any step-N it finds in its folder
        extra = [*extra, f"--checkpoint.folder={root / f'checkpoints-{tag}'}"]
        r = torchrun(root, tag, nproc, common + extra, args.timeout, trace_step=args.trace_step)
        results.append(r)
        _report_run(r)
        if r["rc"] != 0:
            failures.append(f"the {tag} run failed ({'timed out' if r['timed_out'] else 'rc ' + str(r['rc'])})")

    devices = _check_devices(root, runs, failures)
    traces = _check_traces(root, runs, args.trace_step, failures) if args.trace_step else {}
    _check_data(root, args, failures)
    metrics = {tag: read_metrics(root, tag) for tag in runs}
    logs = {tag: parse_log(str(root / f"log-{tag}.txt")) for tag in runs}
    worst = {"loss": 0.0, "grad_norm": 0.0, "grad_norm_fp64": 0.0}
    print()
    print(
        "loss, grad_norm: torchtitan's values (exact, from MetricsProcessor.log); "
        "fp64 norm: the same gradients' norm in float64"
    )
    hdr = (
        f"{'step':>4} | {'loss 1 rank':>11} {'loss 2 ranks':>12} {'rel':>8} | {'gnorm 1 rank':>12} "
        f"{'gnorm 2 ranks':>13} {'rel':>8} | {'fp64 1 rank':>11} {'fp64 2 ranks':>12} {'rel':>8}"
    )
    print(hdr)
    print("-" * len(hdr))
    table = []
    for step in range(1, args.steps + 1):
        a, b = metrics["1rank"].get(step), metrics["2rank"].get(step)
        if a is None or b is None:
            failures.append(f"step {step}: no metrics from {'1rank' if a is None else '2rank'}")
            print(f"{step:>4} | missing: 1 rank {'ok' if a else '-'}, 2 ranks {'ok' if b else '-'}")
            continue
        d = {k: rel(a[k], b[k]) for k in worst}
        for k in worst:
            worst[k] = max(worst[k], d[k])
            if not (math.isfinite(a[k]) and math.isfinite(b[k])):
                failures.append(f"step {step}: {k} is not finite")
        flag = "  <-- differs" if max(d.values()) > args.rtol else ""
        print(
            f"{step:>4} | {a['loss']:11.7f} {b['loss']:12.7f} {d['loss']:8.1e} | {a['grad_norm']:12.7f} "
            f"{b['grad_norm']:13.7f} {d['grad_norm']:8.1e} | {a['grad_norm_fp64']:11.7f} {b['grad_norm_fp64']:12.7f} "
            f"{d['grad_norm_fp64']:8.1e}{flag}"
        )
        table.append({"step": step, "1rank": a, "2rank": b, "rel": d})
        for tag, row in (("1rank", a), ("2rank", b)):
            logged = logs[tag].get(step)
            if logged is None or abs(logged[0] - row["loss"]) > 1e-5 or abs(logged[1] - row["grad_norm"]) > 1e-4:
                failures.append(
                    f"{tag} step {step}: torchtitan's log line {logged} does not match the recorded metrics"
                )
    print("-" * len(hdr))
    print(
        f"max rel diff: loss {worst['loss']:.1e}, grad_norm {worst['grad_norm']:.1e}, "
        f"fp64 grad norm {worst['grad_norm_fp64']:.1e} (tolerance {args.rtol:g})"
    )
    for k, v in worst.items():
        if v > args.rtol:
            failures.append(f"{k} differs by {v:.1e} relative (> {args.rtol:g})")
    for r in results:
        print(f"wall time {r['tag']}: {r['wall_s']:.1f} s")
    match = not failures
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "match": match,
                    "failures": failures,
                    "worst_rel": worst,
                    "table": table,
                    "runs": results,
                    "devices": devices,
                    "traces": traces,
                    "args": {k: str(v) for k, v in vars(args).items()},
                },
                indent=1,
            )
        )
    if match:
        print("PASS: 1 rank and 2 ranks (FSDP2) agree")
        return 0
    print("FAIL: " + "; ".join(dict.fromkeys(failures)))
    return 1


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker_main(sys.argv[2:])
    else:
        sys.exit(main())
