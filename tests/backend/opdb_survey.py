"""PyTorch's operator database (OpInfo `op_db`) on openreg, compared with CPU.

    python tests/backend/opdb_survey.py                     # all dtypes, summary per dtype
    python tests/backend/opdb_survey.py --dtypes float32 --failures  # and every failing operator with its reason
    python tests/backend/opdb_survey.py --json results.json # every (operator, dtype) result

A tool for developing the backend (tests/backend/test_opdb_conformance.py runs it), not part of the package.

Each OpInfo's first samples (`--samples`, default 3) run on CPU and on openreg;
outputs are compared with `torch.testing.assert_close` (its default
tolerances per dtype, the ones PyTorch's own OpInfo tests start from), and,
for operators that support autograd in that dtype, so are the gradients of
the inputs for the same random output gradients. Operators that draw from (or
reseed) CPU's generator are random: the device has its own generator, so their
outputs are compared by shape, dtype and distribution, not by value.

Every (operator, dtype) runs in worker processes (`--jobs`): a worker that
dies on a signal is recorded as a crash for the operator it was running, and
replaced. A result is one of

- correct   every sample matched CPU (outputs and gradients);
- wrong     a sample ran but differs from CPU (the reason says where);
- error     a sample raised on openreg that runs on CPU;
- crash     the process died (a defect, never expected);
- hang      no answer within `--timeout` seconds (the worker is killed).

and it is *native* when no call reached the CPU fallback (forward and
backward): `torch_openreg._C._fallback_counts()` stayed empty.

`--dtypes error_inputs` (in the default list) runs each OpInfo's error inputs
instead: bad arguments that must raise. On openreg each must raise at the
call, not later from the device kernel, with the OpInfo's error type and
message, or with CPU's own for the same input. "wrong" says which did not.

`--dtypes refused_dtypes` (in the default list too) runs each OpInfo's first
samples in every dtype of ALL_DTYPES that the OpInfo does not list for CPU:
where CPU raises (`"normal_kernel_cpu" not implemented for 'Int'`), openreg
must raise at the call with CPU's exception type and message (see
`same_error` for the two differences allowed); where CPU runs the sample
anyway, openreg must not raise either.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field

DTYPES = ("float32", "float64", "bfloat16", "float16", "complex64", "int64", "bool")
ERROR_INPUTS = "error_inputs"  # a pseudo-dtype: the OpInfo's error inputs (see the module's docstring)
# A pseudo-dtype: every dtype of ALL_DTYPES that the OpInfo says CPU does not support (see the docstring).
REFUSED_DTYPES = "refused_dtypes"
ALL_DTYPES = (
    "float32", "float64", "float16", "bfloat16", "complex32", "complex64", "complex128",
    "uint8", "int8", "int16", "int32", "int64", "bool",
)  # fmt: skip
STATUSES = ("correct", "wrong", "error", "crash", "hang")


@dataclass
class Result:
    op: str  # OpInfo name, ".variant" appended when it has one
    dtype: str
    status: str
    native: bool = True
    fallback: list[str] = field(default_factory=list)  # aten operators that reached the fallback
    reason: str = ""
    samples: int = 0  # samples compared


def op_key(op) -> str:
    return f"{op.name}.{op.variant_test_name}" if op.variant_test_name else op.name


# --- one (operator, dtype), in the calling process -------------------------------------------------


def _load_op_db():
    from torch.testing._internal.common_methods_invocations import op_db

    return {op_key(op): op for op in op_db}


def _short(error: BaseException) -> str:
    text = f"{type(error).__name__}: {error}".strip()
    first = text.splitlines()[0] if text else type(error).__name__
    return first[:300]


def _to_device(torch, sample):
    def move(t):
        if not isinstance(t, torch.Tensor):
            return t
        moved = _move_keeping_storage(torch, t.detach())
        return moved.requires_grad_(t.requires_grad) if t.is_floating_point() or t.is_complex() else moved

    moved = sample.transform(move)
    # Factories take the device as an argument.
    if "device" in moved.kwargs:
        moved.kwargs["device"] = "openreg"
    return moved


def _move_keeping_storage(torch, t):
    """`t` on openreg, a view into a copy of its whole storage when it is a partial view on CPU.

    `.to()` would copy only the view's elements into a new storage: an operator that reads outside the view
    (as_strided with its storage offset) would then see other memory than CPU's does.
    """
    if t.layout != torch.strided or t.is_conj() or t.is_neg():
        return t.to("openreg")
    elements = t.untyped_storage().nbytes() // max(t.element_size(), 1)
    if t.storage_offset() == 0 and elements == t.numel():
        return t.to("openreg")
    whole = torch.empty(0, dtype=t.dtype).set_(t.untyped_storage(), 0, (elements,), (1,)).to("openreg")
    return torch.empty(0, dtype=t.dtype, device="openreg").set_(
        whole.untyped_storage(), t.storage_offset(), t.size(), t.stride()
    )


def _call(op, sample):
    return op(sample.input, *sample.args, **sample.kwargs)


def _leaves(torch, value):
    from torch.utils._pytree import tree_flatten

    return tree_flatten(value)[0]


def _tensor_inputs(torch, sample):
    return [t for t in _leaves(torch, [sample.input, sample.args, sample.kwargs]) if isinstance(t, torch.Tensor)]


def _compare_values(torch, actual, expected, where: str, device: str = "openreg", tol=None) -> str:
    """'' when `actual` (on `device`) matches `expected` (CPU), else the reason.

    `tol` is an (rtol, atol) pair that replaces assert_close's defaults for the dtype.
    """
    close = {"rtol": tol[0], "atol": tol[1]} if tol else {}
    got, want = _leaves(torch, actual), _leaves(torch, expected)
    if len(got) != len(want):
        return f"{where}: {len(got)} results, CPU gives {len(want)}"
    for i, (a, e) in enumerate(zip(got, want)):
        if isinstance(e, torch.Tensor):
            if not isinstance(a, torch.Tensor):
                return f"{where}[{i}]: {type(a).__name__}, CPU gives a tensor"
            if a.device.type != device:
                return f"{where}[{i}]: result on {a.device}, not {device}"
            if a.layout != e.layout:
                return f"{where}[{i}]: layout {a.layout}, CPU gives {e.layout}"
            try:
                torch.testing.assert_close(a.cpu(), e, equal_nan=True, check_device=False, check_layout=False, **close)
            except AssertionError as error:
                lines = [line.strip() for line in str(error).splitlines() if line.strip()]
                return f"{where}[{i}]: " + "; ".join(lines[:3])[:300]
        elif a != e and not (isinstance(e, float) and e != e and a != a):
            return f"{where}[{i}]: {a!r}, CPU gives {e!r}"
    return ""


def _compare_random(torch, actual, expected, where: str, values: bool = True) -> str:
    """Random results: the same structure, shapes and dtypes; values from the same distribution."""
    got, want = _leaves(torch, actual), _leaves(torch, expected)
    if len(got) != len(want):
        return f"{where}: {len(got)} results, CPU gives {len(want)}"
    for i, (a, e) in enumerate(zip(got, want)):
        if not isinstance(e, torch.Tensor):
            continue
        if not isinstance(a, torch.Tensor) or a.shape != e.shape or a.dtype != e.dtype:
            return f"{where}[{i}]: {getattr(a, 'shape', a)} {getattr(a, 'dtype', '')}, CPU gives {e.shape} {e.dtype}"
        if a.device.type != "openreg":
            return f"{where}[{i}]: result on {a.device}, not openreg"
        if not values:
            continue
        a = a.detach().cpu()
        e = e.detach()
        if a.numel() == 0 or e.is_complex():
            continue
        a64, e64 = a.double(), e.double()
        finite = torch.isfinite(e64)
        if not torch.equal(torch.isfinite(a64), finite) and finite.all():
            return f"{where}[{i}]: non-finite values where CPU has none"
        a64, e64 = a64[torch.isfinite(a64)], e64[finite]
        if a64.numel() == 0 or e64.numel() == 0:
            continue
        # With enough draws: the device's lie in CPU's range, widened by its
        # spread (a few draws, or all equal, say nothing about the range).
        spread = float(e64.std()) if e64.numel() > 1 else 0.0
        if e64.numel() >= 16 and spread > 0:
            low, high = float(e64.min()) - 3 * spread, float(e64.max()) + 3 * spread
            if float(a64.min()) < low or float(a64.max()) > high:
                return (
                    f"{where}[{i}]: values in [{float(a64.min()):.4g}, {float(a64.max()):.4g}], "
                    f"CPU's [{low:.4g}, {high:.4g}]"
                )
        if a64.numel() >= 64 and spread > 0:
            bound = 6 * spread / a64.numel() ** 0.5 + 1e-3 * abs(float(e64.mean()))
            if abs(float(a64.mean()) - float(e64.mean())) > bound:
                return f"{where}[{i}]: mean {float(a64.mean()):.4g}, CPU's {float(e64.mean()):.4g}"
    return ""


# OpInfos that draw random numbers. Most run under OpInfo's wrapper_set_seed,
# which reseeds and then restores CPU's generator, so a change of its state
# cannot tell them (that check catches the others).
RANDOM_OPS = {
    "bernoulli", "cauchy", "exponential", "geometric", "log_normal", "normal", "uniform", "multinomial",
    "rand_like", "randn_like", "randint", "randint_like", "randn", "rand", "randperm", "svd_lowrank",
    "pca_lowrank", "nn.functional.dropout", "nn.functional.dropout1d", "nn.functional.dropout2d",
    "nn.functional.dropout3d", "nn.functional.alpha_dropout", "nn.functional.feature_alpha_dropout",
    "nn.functional.rrelu", "nn.functional.multi_head_attention_forward", "nn.functional.fractional_max_pool2d",
    "nn.functional.fractional_max_pool3d", "nn.functional.scaled_dot_product_attention",
}  # fmt: skip

# Results whose values are unspecified (uninitialized memory): compared by
# shape and dtype only.
UNSPECIFIED_VALUES = {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided"}


def _differentiable(torch, outputs):
    return [
        t
        for t in _leaves(torch, outputs)
        if isinstance(t, torch.Tensor) and t.requires_grad and (t.is_floating_point() or t.is_complex())
    ]


def _gradients(torch, sample, outputs, seed: int):
    """Gradients of the sample's inputs for seeded random output gradients (None when nothing is differentiable)."""
    inputs = [t for t in _tensor_inputs(torch, sample) if t.requires_grad]
    return _gradients_of(torch, outputs, inputs, seed)


def _gradients_of(torch, outputs, inputs, seed: int):
    """Gradients of `inputs` for seeded random gradients of `outputs` (None when nothing is differentiable)."""
    diff = _differentiable(torch, outputs)
    if not diff or not inputs:
        return None
    gen = torch.Generator().manual_seed(seed)
    grads = [torch.randn(t.shape, dtype=t.dtype, generator=gen).to(t.device) for t in diff]
    return torch.autograd.grad(diff, inputs, grads, allow_unused=True)


def check(op, dtype_name: str, samples: int = 3) -> Result | None:
    """Runs `op`'s first samples in `dtype_name` on CPU and openreg; None when CPU does not support the dtype."""
    import torch

    import torch_openreg  # noqa: F401 - registers the device

    if dtype_name == ERROR_INPUTS:
        return check_error_inputs(op)
    if dtype_name == REFUSED_DTYPES:
        return check_refused_dtypes(op, samples)
    dtype = getattr(torch, dtype_name)
    if dtype not in op.supported_dtypes("cpu"):
        return None
    key = op_key(op)
    grad = op.supports_autograd and dtype in op.supported_backward_dtypes("cpu")
    torch.manual_seed(0)
    try:
        cpu_samples = list(itertools.islice(op.sample_inputs("cpu", dtype, requires_grad=grad), samples))
    except Exception as error:  # noqa: BLE001 - OpInfo's own sample generator failed on CPU
        return Result(key, dtype_name, "correct", reason=f"no samples on CPU: {_short(error)}")
    result = Result(key, dtype_name, "correct")
    fallback: set[str] = set()
    for index, sample in enumerate(cpu_samples):
        where = f"sample {index}"
        torch.manual_seed(0)
        state = torch.get_rng_state()
        try:
            expected = _call(op, sample)
        except Exception:  # noqa: BLE001 - CPU cannot run this sample: nothing to compare
            continue
        # Random: the operator drew from (or reseeded) CPU's generator.
        random = op.name in RANDOM_OPS | UNSPECIFIED_VALUES or not torch.equal(state, torch.get_rng_state())
        try:
            device_sample = _to_device(torch, sample)
        except Exception as error:  # noqa: BLE001
            return _failed(result, "error", f"{where}: moving the inputs: {_short(error)}", fallback)
        torch_openreg._C._reset_fallback_counts()
        try:
            torch.manual_seed(0)
            actual = _call(op, device_sample)
            torch.openreg.synchronize()
        except Exception as error:  # noqa: BLE001
            fallback |= set(torch_openreg._C._fallback_counts())
            return _failed(result, "error", f"{where}: {_short(error)}", fallback)
        if random:
            reason = _compare_random(torch, actual, expected, f"{where} output", op.name not in UNSPECIFIED_VALUES)
        else:
            reason = _compare_values(torch, actual, expected, f"{where} output")
        if not reason and grad and not random:
            reason = _compare_gradients(torch, sample, expected, device_sample, actual, 1000 + index, where)
            if reason.startswith("error:"):
                fallback |= set(torch_openreg._C._fallback_counts())
                return _failed(result, "error", reason.removeprefix("error: "), fallback)
        fallback |= set(torch_openreg._C._fallback_counts())
        if reason:
            return _failed(result, "wrong", reason, fallback)
        result.samples += 1
    result.fallback = sorted(fallback)
    result.native = not fallback
    return result


def check_error_inputs(op) -> Result | None:
    """Each of `op`'s error inputs raises at the call on openreg, as the OpInfo (or CPU) says; None without any."""
    import torch

    if op.error_inputs_func is None:
        return None
    result = Result(op_key(op), ERROR_INPUTS, "correct")
    try:
        device_inputs = list(op.error_inputs("openreg"))
        cpu_inputs = list(op.error_inputs("cpu"))
    except Exception as error:  # noqa: BLE001 - the OpInfo's generator failed
        return _failed(result, "error", f"generating the error inputs: {_short(error)}", set())
    for index, error_input in enumerate(device_inputs):
        expected = f"{error_input.error_type.__name__} matching {error_input.error_regex!r}"
        where, error = raised_where(torch, lambda: _call(op, error_input.sample_input))
        if where == "call":
            if not _expected_error(error, error_input) and _short(error) != _cpu_error(op, cpu_inputs, index):
                return _failed(result, "wrong", f"error input {index}: {_short(error)}; expected {expected}", set())
        elif where == "kernel":
            return _failed(result, "wrong", f"error input {index}: raised by the kernel, not at the call: "
                           f"{_short(error)}", set())  # fmt: skip
        elif _cpu_error(op, cpu_inputs, index) != _NO_ERROR:  # some error inputs are for other devices only
            return _failed(result, "wrong", f"error input {index}: no error; expected {expected}", set())
        result.samples += 1
    return result


def check_refused_dtypes(op, samples: int = 1) -> Result | None:
    """In each dtype CPU refuses, `op`'s first samples raise at the call on openreg as on CPU; None without any.

    The OpInfo's CPU dtypes are its claim; CPU's own run of the same sample is the reference: where CPU raises,
    openreg raises at the call with CPU's exception type and message, and where CPU runs the sample, openreg
    does not raise (at the call or from a kernel) either.
    """
    import torch

    supported = op.supported_dtypes("cpu")
    refused = [name for name in ALL_DTYPES if getattr(torch, name) not in supported]
    if not refused:
        return None
    result = Result(op_key(op), REFUSED_DTYPES, "correct")
    for name in refused:
        try:
            cpu_samples = list(itertools.islice(op.sample_inputs("cpu", getattr(torch, name)), samples))
        except Exception:  # noqa: BLE001, S112 - OpInfo builds no inputs in this dtype: nothing to call
            continue
        for index, sample in enumerate(cpu_samples):
            reason = _refused_sample(torch, op, sample)
            if reason:
                return _failed(result, "wrong", f"{name} sample {index}: {reason}", set())
            result.samples += 1
    return result


def _refused_sample(torch, op, sample) -> str:
    """'' when openreg answers `sample` (on CPU) as CPU does: the same error at the call, or none."""
    torch.manual_seed(0)
    try:
        _call(op, sample)
        cpu_error = _NO_ERROR
    except Exception as error:  # noqa: BLE001 - the error is the reference
        cpu_error = _short(error)
    try:
        device_sample = _to_device(torch, sample)
    except Exception as error:  # noqa: BLE001
        return f"moving the inputs: {_short(error)}"
    torch.manual_seed(0)
    where, error = raised_where(torch, lambda: _call(op, device_sample))
    if where == "kernel":
        return f"raised by the kernel, not at the call: {_short(error)}; CPU: {cpu_error}"
    got = _short(error) if where == "call" else _NO_ERROR
    return "" if same_error(got, cpu_error) else f"{got}; CPU: {cpu_error}"


_REFUSED = re.compile(r"^NotImplementedError: \"\w+\" not implemented for '(\w+)'$")
# torch names an openreg tensor's type "openregFloatType" where it names a CPU tensor's "torch.FloatTensor" (and
# a CUDA tensor's "torch.cuda.FloatTensor"), in messages that print a tensor's type.
_TENSOR_TYPE = re.compile(r"\b(?:torch\.|openreg)(\w+?)(?:Tensor|Type)\b")


def same_error(got: str, cpu: str) -> bool:
    """Whether openreg's error (`_short` form) is CPU's: the same type and message, up to two differences.

    A dtype refusal names the CPU kernel that refused first ('"bmm" not implemented for 'ComplexHalf''), which
    depends on the sizes and the decomposition, not on the refusal; and torch prints a tensor's type with its
    device's name.
    """
    if got == cpu:
        return True
    refused_got, refused_cpu = _REFUSED.match(got), _REFUSED.match(cpu)
    if refused_got and refused_cpu:
        return refused_got.group(1) == refused_cpu.group(1)
    return _TENSOR_TYPE.sub(r"\1", got) == _TENSOR_TYPE.sub(r"\1", cpu)


def raised_where(torch, call) -> tuple[str, BaseException | None]:
    """Runs `call` on openreg: ("call", error) when it raised, ("kernel", error) when only the synchronisation after
    it did (a device kernel failed), ("none", None) when neither. The device is left synchronised."""
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the error is the answer
        _drain(torch)
        return "call", error
    try:
        torch.openreg.synchronize()
    except Exception as error:  # noqa: BLE001
        return "kernel", error
    return "none", None


def _expected_error(error: BaseException, error_input) -> bool:
    import re

    return isinstance(error, error_input.error_type) and re.search(error_input.error_regex, str(error)) is not None


_NO_ERROR = "(no error)"


def _cpu_error(op, cpu_inputs, index: int) -> str | None:
    """CPU's error for the same error input (the generator gives both devices the same list), _NO_ERROR when
    CPU accepts it, None when CPU has no such input."""
    if index >= len(cpu_inputs):
        return None
    try:
        _call(op, cpu_inputs[index].sample_input)
    except Exception as error:  # noqa: BLE001
        return _short(error)
    return _NO_ERROR


def _drain(torch) -> None:
    # A kernel launched before the call raised must not fail the next input.
    try:
        torch.openreg.synchronize()
    except Exception:  # noqa: BLE001, S110 - reported where it is checked: at the call
        pass


def _compare_gradients(torch, sample, expected, device_sample, actual, seed: int, where: str) -> str:
    try:
        want = _gradients(torch, sample, expected, seed)
    except Exception:  # noqa: BLE001 - CPU cannot differentiate this sample
        return ""
    if want is None:
        return ""
    try:
        got = _gradients(torch, device_sample, actual, seed)
        torch.openreg.synchronize()
    except Exception as error:  # noqa: BLE001
        return f"error: {where} backward: {_short(error)}"
    if got is None:
        return f"{where} backward: no differentiable output on openreg"
    pairs = [(g, w) for g, w in zip(got, want) if w is not None or g is not None]
    for i, (g, w) in enumerate(pairs):
        if (g is None) != (w is None):
            return f"{where} gradient[{i}]: {'missing' if g is None else 'unexpected'} on openreg"
    reason = _compare_values(torch, [g for g, _ in pairs], [w for _, w in pairs], f"{where} gradient")
    return reason


def _failed(result: Result, status: str, reason: str, fallback: set[str]) -> Result:
    result.status, result.reason = status, reason
    result.fallback = sorted(fallback)
    result.native = not fallback
    return result


# --- the worker processes --------------------------------------------------------------------------

_RESULT = "@@opdb-result "


def _worker(samples: int) -> int:
    return serve(_load_op_db(), check, samples)


def serve(table: dict, check_one, samples: int) -> int:
    """A worker's loop: reads 'key<TAB>dtype' lines from stdin, answers one result line each on stdout.

    `check_one(table[key], dtype, samples)` gives the Result (None: CPU lacks the dtype).
    """
    import warnings

    import torch

    warnings.filterwarnings("ignore")
    # CPU's reference on one thread, as an openreg kernel body runs: reductions then sum in the same order on
    # any machine, where the host's thread count would otherwise decide which float32 sums land within atol.
    torch.set_num_threads(1)
    out = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # anything an operator prints goes to stderr, not into the protocol
    out.write("@@opdb-ready\n")
    for line in sys.stdin:
        key, dtype = line.rstrip("\n").split("\t")
        try:
            result = check_one(table[key], dtype, samples)
        except Exception as error:  # noqa: BLE001 - a failure of the harness around the op
            result = Result(key, dtype, "error", reason=f"harness: {_short(error)}")
        payload = asdict(result) if result is not None else {"op": key, "dtype": dtype, "status": "skip"}
        out.write(_RESULT + json.dumps(payload) + "\n")
    return 0


class _Worker:
    def __init__(self, samples: int, script: str):
        self.log = tempfile.TemporaryFile()
        env = dict(os.environ)
        env.pop("TORCH_DEVICE_BACKEND_AUTOLOAD", None)
        # The workers import the torch_openreg of this checkout, whichever is installed.
        checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        env["PYTHONPATH"] = os.pathsep.join(p for p in (checkout, env.get("PYTHONPATH", "")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, script, "--worker", "--samples", str(samples)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.log,
            text=True,
            bufsize=1,
            env=env,
        )
        self.task: tuple[str, str] | None = None
        self.started = 0.0
        self.ready = False

    def send(self, task: tuple[str, str]) -> None:
        self.task, self.started = task, time.monotonic()
        self.proc.stdin.write(f"{task[0]}\t{task[1]}\n")
        self.proc.stdin.flush()

    def death(self) -> str:
        code = self.proc.wait()
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        self.log.seek(0)
        tail = self.log.read().decode(errors="replace").strip().splitlines()[-1:]
        return f"exited with status {code}" + (f": {tail[0][:200]}" if tail else "")

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.log.close()


def survey(
    keys: list[str] | None = None,
    dtypes: tuple[str, ...] = DTYPES,
    samples: int = 3,
    jobs: int = 2,
    timeout: float = 120.0,
    progress=None,
    worker_script: str = __file__,
) -> list[Result]:
    """Every (operator, dtype) result; crashes and hangs included, CPU-unsupported dtypes left out.

    `worker_script` is the script whose `--worker` mode checks one key (moduledb_survey.py: a ModuleInfo).
    """
    if keys is None:
        keys = list(_load_op_db())
    tasks = collections.deque((k, d) for k in keys for d in dtypes)
    results: list[Result] = []
    selector = selectors.DefaultSelector()
    workers: list[_Worker] = []

    def start() -> None:
        process = _Worker(samples, worker_script)
        workers.append(process)
        selector.register(process.proc.stdout, selectors.EVENT_READ, process)

    def retire(worker: _Worker, status: str, reason: str) -> None:
        if worker.task is not None:
            results.append(Result(worker.task[0], worker.task[1], status, native=False, reason=reason))
            if progress:
                progress(results[-1])
        selector.unregister(worker.proc.stdout)
        workers.remove(worker)
        worker.close()
        if tasks:
            start()

    for _ in range(min(jobs, len(tasks))):
        start()
    try:
        while workers:
            for selected, _ in selector.select(timeout=5):
                worker: _Worker = selected.data
                line = worker.proc.stdout.readline()
                if not line:
                    retire(worker, "crash", worker.death())
                    continue
                if line.startswith("@@opdb-ready"):
                    worker.ready = True
                elif line.startswith(_RESULT):
                    payload = json.loads(line[len(_RESULT) :])
                    worker.task = None
                    if payload["status"] != "skip":
                        results.append(Result(**payload))
                        if progress:
                            progress(results[-1])
                else:
                    continue
                if tasks:
                    worker.send(tasks.popleft())
                else:
                    selector.unregister(worker.proc.stdout)
                    workers.remove(worker)
                    worker.close()
            now = time.monotonic()
            for worker in list(workers):
                if worker.task is not None and now - worker.started > timeout:
                    worker.proc.kill()
                    worker.proc.wait()
                    retire(worker, "hang", f"no result within {timeout:.0f} s")
    finally:
        for worker in workers:
            worker.close()
    order = {d: i for i, d in enumerate(dtypes)}
    return sorted(results, key=lambda r: (order.get(r.dtype, 99), r.op))


# --- reports ---------------------------------------------------------------------------------------


def summary(results: list[Result]) -> dict[str, dict[str, int]]:
    """Per dtype: operators run, each status, and native (correct and without the fallback)."""
    table: dict[str, dict[str, int]] = {}
    for r in results:
        row = table.setdefault(r.dtype, {"ops": 0, **{s: 0 for s in STATUSES}, "native": 0})
        row["ops"] += 1
        row[r.status] += 1
        row["native"] += int(r.native and r.status == "correct")
    return table


def format_summary(results: list[Result], dtypes: tuple[str, ...] = DTYPES, noun: str = "ops") -> str:
    table = summary(results)
    width = max(5, len(noun))
    head = f"{'dtype':10s} {noun:>{width}s} {'correct':>8s} {'native':>7s} {'native%':>8s} " + " ".join(
        f"{s:>6s}" for s in STATUSES[1:]
    )
    lines = [head]
    for dtype in dtypes:
        row = table.get(dtype)
        if not row:
            continue
        pct = 100.0 * row["native"] / row["ops"] if row["ops"] else 0.0
        lines.append(
            f"{dtype:10s} {row['ops']:{width}d} {row['correct']:8d} {row['native']:7d} {pct:7.1f}% "
            + " ".join(f"{row[s]:6d}" for s in STATUSES[1:])
        )
    return "\n".join(lines) + "\n"


def format_failures(results: list[Result], fallback: bool = False) -> str:
    lines = []
    for r in results:
        if r.status != "correct":
            lines.append(f"{r.dtype:10s} {r.op:45s} {r.status:6s} {r.reason}")
        elif fallback and not r.native:
            lines.append(f"{r.dtype:10s} {r.op:45s} {'fallbk':6s} {', '.join(r.fallback)}")
    return "\n".join(lines) + ("\n" if lines else "")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python tests/backend/opdb_survey.py", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dtypes",
        default=",".join((*DTYPES, ERROR_INPUTS, REFUSED_DTYPES)),
        help=f"comma-separated dtypes (default: all seven, {ERROR_INPUTS} and {REFUSED_DTYPES})",
    )
    parser.add_argument("--ops", default="", help="comma-separated OpInfo names (name or name.variant); default all")
    parser.add_argument("--samples", type=int, default=3, help="samples per operator and dtype")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per operator before it counts as a hang")
    parser.add_argument("--failures", action="store_true", help="list every operator that is not correct, and why")
    parser.add_argument("--fallback", action="store_true", help="also list correct operators that use the fallback")
    parser.add_argument("--json", metavar="PATH", help="write every result as JSON")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return _worker(args.samples)
    dtypes = tuple(d for d in args.dtypes.split(",") if d)
    unknown = [d for d in dtypes if d not in (*DTYPES, ERROR_INPUTS, REFUSED_DTYPES)]
    if unknown:
        parser.error(f"unknown dtypes {unknown}; choose from {', '.join(DTYPES)}, {ERROR_INPUTS}, {REFUSED_DTYPES}")
    keys = [k for k in args.ops.split(",") if k] or None
    if keys is not None:
        known = _load_op_db()
        unknown_ops = [k for k in keys if k not in known]
        if unknown_ops:
            parser.error(f"not in op_db: {', '.join(unknown_ops)}")
    done = [0]

    def progress(result: Result) -> None:
        done[0] += 1
        if result.status in ("crash", "hang") or done[0] % 250 == 0:
            print(f"[{done[0]}] {result.dtype} {result.op}: {result.status} {result.reason}", file=sys.stderr)

    results = survey(keys, dtypes, args.samples, args.jobs, args.timeout, progress)
    write_report(results, dtypes, args)
    return 0


def write_report(results: list[Result], dtypes, args, noun: str = "ops") -> None:
    """What the command prints (and writes with --json) for a finished survey."""
    if args.json:
        with open(args.json, "w") as f:
            json.dump([asdict(r) for r in results], f, indent=1)
    if args.failures or args.fallback:
        sys.stdout.write(format_failures(results, args.fallback))
        sys.stdout.write("\n")
    sys.stdout.write(format_summary(results, dtypes, noun=noun))


if __name__ == "__main__":
    sys.exit(main())
