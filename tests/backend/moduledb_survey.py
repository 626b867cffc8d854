"""PyTorch's module database (ModuleInfo `module_db`) on openreg, compared with CPU.

    python tests/backend/moduledb_survey.py                      # every sample and dtype, summary per dtype
    python tests/backend/moduledb_survey.py --failures           # and every failing module with its reason
    python tests/backend/moduledb_survey.py --samples 1          # the first sample per module, dtype and mode
    python tests/backend/moduledb_survey.py --json results.json  # every (module, dtype) result

A tool for developing the backend (tests/backend/test_moduledb_conformance.py runs it), not part of the package.

Each ModuleInfo of `torch.testing._internal.common_modules.module_db` gives
samples (constructor arguments and forward inputs) per dtype and training
mode; every one of them runs by default (about 1.5 minutes on two cores),
and `--samples N` takes N of each mode's samples, spread evenly over its list.
A sample's module is built on CPU (seeded) and copied, parameters and buffers,
to openreg; both run the same forward inputs. Outputs, then the gradients of the inputs and parameters for
the same random output gradients, then the buffers (running statistics) are
compared with `torch.testing.assert_close`'s default tolerances for the dtype,
or the ModuleInfo's own tolerance override for PyTorch's CPU/GPU parity test
where it has one. Samples come in training mode and, where the ModuleInfo says
the two differ, in eval mode as well.

A forward that draws from (or reseeds) CPU's generator is random (dropout in
training mode, FractionalMaxPool without fixed samples): the device has its
own generator, so its outputs are compared by shape, dtype and distribution,
and its gradients and buffers by shape and dtype only. module_db's samples fix
their draws today (FractionalMaxPool's `_random_samples`, dropout 0) and are
compared by value; the first forward of a lazy module draws its parameters,
so both copies take a first forward and openreg then takes CPU's values.

The statuses (correct / wrong / error / crash / hang, *native* when no call
reached the CPU fallback) and the worker processes that turn a crash into a
result are those of `opdb_survey.py`; a Result's `op` is the ModuleInfo's
name (`nn.Linear`).
"""

from __future__ import annotations

import argparse
import copy
import sys

import opdb_survey as opdb
from opdb_survey import Result

# ModuleInfo dtypes this survey knows (module_db also lists complex128 and
# complex32 for the convolutions; the survey leaves them out).
DTYPES = ("float32", "float64", "float16", "bfloat16", "complex64")


def _load_module_db():
    from torch.testing._internal.common_modules import module_db

    return {info.name: info for info in module_db}


def cpu_dtypes(info) -> tuple[str, ...]:
    """The survey's dtypes that the ModuleInfo lists for CPU."""
    names = {str(d).removeprefix("torch.") for d in info.dtypes}
    return tuple(d for d in DTYPES if d in names)


def _spread(items: list, count: int) -> list:
    """`count` items spread evenly over `items`, the first one included (all of them when count is 0)."""
    if count <= 0 or count >= len(items):
        return list(items)
    if count == 1:
        return items[:1]
    step = (len(items) - 1) / (count - 1)
    return [items[round(i * step)] for i in range(count)]


def _tolerance(info, dtype):
    """(rtol, atol) of the ModuleInfo's tolerance override for test_cpu_gpu_parity in `dtype`, or None.

    A precisionOverride sets only atol; rtol stays assert_close's default for the dtype.
    """
    from torch.testing._comparison import default_tolerances
    from torch.testing._internal.common_device_type import precisionOverride, toleranceOverride

    for decorate in info.decorators:
        if getattr(decorate, "test_name", "") != "test_cpu_gpu_parity" or decorate.device_type not in (None, "cpu"):
            continue
        if decorate.dtypes is not None and dtype not in decorate.dtypes:
            continue
        for decorator in decorate.decorators:
            if isinstance(decorator, toleranceOverride) and dtype in decorator.d:
                return decorator.d[dtype].rtol, decorator.d[dtype].atol
            if isinstance(decorator, precisionOverride) and dtype in decorator.d:
                return default_tolerances(dtype)[0], decorator.d[dtype]
    return None


def _samples(torch, info, dtype, count: int) -> list[tuple[bool, object]]:
    """(training, ModuleInput) pairs: training mode, and eval mode where the ModuleInfo says they differ."""
    picked = []
    for training in (True, False) if info.train_and_eval_differ else (True,):
        torch.manual_seed(0)
        inputs = info.module_inputs_func(info, device="cpu", dtype=dtype, requires_grad=True, training=training)
        inputs = [i for i in inputs if i.forward_input is not None]
        picked += [(training, i) for i in _spread(inputs, count)]
    return picked


def _to_device(torch, value):
    # A tensor passed twice (input and target alike) stays one tensor: its gradient sums both uses, as on CPU.
    copies: dict[int, object] = {}

    def move(t):
        if not isinstance(t, torch.Tensor):
            return t
        if id(t) not in copies:
            moved = t.detach().to("openreg")
            copies[id(t)] = moved.requires_grad_(t.requires_grad) if t.is_floating_point() or t.is_complex() else moved
        return copies[id(t)]

    return torch.utils._pytree.tree_map(move, value)


def _build(torch, info, module_input, dtype, training: bool):
    """The sample's module on CPU (seeded) and its copy on openreg, before any forward."""
    torch.manual_seed(0)
    args, kwargs = module_input.constructor_input.args, module_input.constructor_input.kwargs
    cpu = info.module_cls(*args, **kwargs).to(dtype).train(training)
    # deepcopy first: `.to` moves what the module registered (parameters, buffers), not copies of CPU state.
    return cpu, copy.deepcopy(cpu).to("openreg")


def _materialize(torch, cpu, device, cpu_inputs, device_inputs) -> None:
    """Lazy modules: both shape their parameters from a first forward, then openreg takes CPU's values."""
    with torch.no_grad():
        cpu(*cpu_inputs[0], **cpu_inputs[1])
        device(*device_inputs[0], **device_inputs[1])
        for mine, theirs in zip(device.parameters(), cpu.parameters()):
            mine.copy_(theirs)
        for mine, theirs in zip(device.buffers(), cpu.buffers()):
            mine.copy_(theirs)


def _leaves_needing_grad(torch, module, inputs) -> list:
    tensors = [t for t in opdb._leaves(torch, inputs) if isinstance(t, torch.Tensor) and t.requires_grad]
    return tensors + [p for p in module.parameters() if p.requires_grad]


def _compare_gradients(torch, got, want, where: str, random: bool, tol) -> str:
    pairs = [(g, w) for g, w in zip(got, want) if g is not None or w is not None]
    for i, (g, w) in enumerate(pairs):
        if (g is None) != (w is None):
            return f"{where} gradient[{i}]: {'missing' if g is None else 'unexpected'} on openreg"
    got, want = [g for g, _ in pairs], [w for _, w in pairs]
    if random:
        return opdb._compare_random(torch, got, want, f"{where} gradient", values=False)
    return opdb._compare_values(torch, got, want, f"{where} gradient", tol=tol)


def _backward(torch, cpu, device, cpu_inputs, device_inputs, outputs, seed: int) -> tuple[str, str]:
    """(status, reason) of the gradients of inputs and parameters: ('', '') when they match or CPU has none."""
    cpu_out, device_out, where, random, tol = outputs
    try:
        want = opdb._gradients_of(torch, cpu_out, _leaves_needing_grad(torch, cpu, cpu_inputs), seed)
    except Exception:  # noqa: BLE001 - CPU cannot differentiate this sample: nothing to compare
        return "", ""
    if want is None:
        return "", ""
    try:
        got = opdb._gradients_of(torch, device_out, _leaves_needing_grad(torch, device, device_inputs), seed)
        torch.openreg.synchronize()
    except Exception as error:  # noqa: BLE001
        return "error", f"{where} backward: {opdb._short(error)}"
    if got is None:
        return "wrong", f"{where} backward: no differentiable output on openreg"
    reason = _compare_gradients(torch, got, want, where, random, tol)
    return ("wrong", reason) if reason else ("", "")


def _check_sample(torch, info, dtype, training: bool, module_input, where: str, seed: int) -> tuple[str, str]:
    """(status, reason) of one sample: ('', '') when it matches CPU or CPU cannot run it."""
    cpu_inputs = (module_input.forward_input.args, module_input.forward_input.kwargs)
    try:
        cpu, device = _build(torch, info, module_input, dtype, training)
        device_inputs = _to_device(torch, cpu_inputs)
        if info.is_lazy:
            _materialize(torch, cpu, device, cpu_inputs, device_inputs)
    except Exception as error:  # noqa: BLE001 - building on CPU works (module_db says so): openreg failed
        return "error", f"{where}: building the module: {opdb._short(error)}"
    torch.manual_seed(0)
    state = torch.get_rng_state()
    try:
        expected = cpu(*cpu_inputs[0], **cpu_inputs[1])
    except Exception:  # noqa: BLE001 - CPU cannot run this sample: nothing to compare
        return "", ""
    random = not torch.equal(state, torch.get_rng_state())
    try:
        torch.manual_seed(0)
        actual = device(*device_inputs[0], **device_inputs[1])
        torch.openreg.synchronize()
    except Exception as error:  # noqa: BLE001
        return "error", f"{where}: {opdb._short(error)}"
    tol = _tolerance(info, dtype)
    if random:
        reason = opdb._compare_random(torch, actual, expected, f"{where} output")
    else:
        reason = opdb._compare_values(torch, actual, expected, f"{where} output", tol=tol)
    if reason:
        return "wrong", reason
    status, reason = _backward(
        torch, cpu, device, cpu_inputs, device_inputs, (expected, actual, where, random, tol), seed
    )
    if status:
        return status, reason
    # Running statistics and the like, after forward and backward.
    buffers, cpu_buffers = list(device.buffers()), list(cpu.buffers())
    if random:
        reason = opdb._compare_random(torch, buffers, cpu_buffers, f"{where} buffer", values=False)
    else:
        reason = opdb._compare_values(torch, buffers, cpu_buffers, f"{where} buffer", tol=tol)
    return ("wrong", reason) if reason else ("", "")


def check(info, dtype_name: str, samples: int = 0) -> Result | None:
    """Runs the ModuleInfo's samples in `dtype_name` on CPU and openreg; None when CPU does not support the dtype."""
    import torch

    import torch_openreg  # registers the device

    if dtype_name == opdb.ERROR_INPUTS:
        return check_error_inputs(info)
    if dtype_name not in cpu_dtypes(info):
        return None
    dtype = getattr(torch, dtype_name)
    result = Result(info.name, dtype_name, "correct")
    try:
        picked = _samples(torch, info, dtype, samples)
    except Exception as error:  # noqa: BLE001 - the ModuleInfo's own generator failed on CPU
        result.reason = f"no samples on CPU: {opdb._short(error)}"
        return result
    fallback: set[str] = set()
    for index, (training, module_input) in enumerate(picked):
        mode = "train" if training else "eval"
        where = f"sample {index} ({mode}{': ' + module_input.desc if module_input.desc else ''})"
        torch_openreg._C._reset_fallback_counts()
        status, reason = _check_sample(torch, info, dtype, training, module_input, where, 1000 + index)
        fallback |= set(torch_openreg._C._fallback_counts())
        if status:
            return opdb._failed(result, status, reason, fallback)
        result.samples += 1
    result.fallback = sorted(fallback)
    result.native = not fallback
    return result


def check_error_inputs(info) -> Result | None:
    """The ModuleInfo's error inputs (bad constructor or forward arguments) raise where module_db says, at the
    call on openreg, with its error; None when it has none."""
    import torch
    from torch.testing._internal.common_modules import ModuleErrorEnum

    make = getattr(info, "module_error_inputs_func", None)
    if make is None:
        return None
    result = Result(info.name, opdb.ERROR_INPUTS, "correct")
    try:
        error_inputs = list(make(info, "openreg", torch.float32, False, training=True))
    except Exception as error:  # noqa: BLE001 - the ModuleInfo's generator failed
        return opdb._failed(result, "error", f"generating the error inputs: {opdb._short(error)}", set())
    for index, error_input in enumerate(error_inputs):
        module_input = error_input.module_error_input
        construct, forward = module_input.constructor_input, module_input.forward_input
        at_construction = error_input.error_on == ModuleErrorEnum.CONSTRUCTION_ERROR

        def call(info=info, construct=construct, forward=forward, at_construction=at_construction):
            module = info.module_cls(*construct.args, **construct.kwargs)
            if not at_construction:
                module.to("openreg")(*forward.args, **forward.kwargs)

        where, error = opdb.raised_where(torch, call)
        if where == "kernel":
            return opdb._failed(result, "wrong", f"error input {index}: raised by the kernel, not at the call: "
                                f"{opdb._short(error)}", set())  # fmt: skip
        if where == "none":
            return opdb._failed(result, "wrong", f"error input {index}: no error", set())
        if not opdb._expected_error(error, error_input):
            reason = f"{opdb._short(error)}; expected {error_input.error_type.__name__} /{error_input.error_regex}/"
            return opdb._failed(result, "wrong", f"error input {index}: {reason}", set())
        result.samples += 1
    return result


def survey(
    keys: list[str] | None = None,
    dtypes: tuple[str, ...] = DTYPES,
    samples: int = 0,
    jobs: int = 2,
    timeout: float = 120.0,
    progress=None,
) -> list[Result]:
    """Every (ModuleInfo, dtype) result, in opdb's worker processes; CPU-unsupported dtypes left out."""
    if keys is None:
        keys = list(_load_module_db())
    return opdb.survey(keys, dtypes, samples, jobs, timeout, progress, worker_script=__file__)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python tests/backend/moduledb_survey.py", description=__doc__.splitlines()[0]
    )
    parser.add_argument(
        "--dtypes",
        default=",".join((*DTYPES, opdb.ERROR_INPUTS)),
        help="comma-separated dtypes (default: all five, and error_inputs)",
    )
    parser.add_argument("--modules", default="", help="comma-separated ModuleInfo names (nn.Linear); default all")
    parser.add_argument("--samples", type=int, default=0, help="samples per module, dtype and mode (default 0: all)")
    parser.add_argument("--jobs", type=int, default=2, help="worker processes")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds per module before it counts as a hang")
    parser.add_argument("--failures", action="store_true", help="list every module that is not correct, and why")
    parser.add_argument("--fallback", action="store_true", help="also list correct modules that use the fallback")
    parser.add_argument("--json", metavar="PATH", help="write every result as JSON")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        return opdb.serve(_load_module_db(), check, args.samples)
    dtypes = tuple(d for d in args.dtypes.split(",") if d)
    unknown = [d for d in dtypes if d not in (*DTYPES, opdb.ERROR_INPUTS)]
    if unknown:
        parser.error(f"unknown dtypes {unknown}; choose from {', '.join(DTYPES)}, {opdb.ERROR_INPUTS}")
    keys = [k for k in args.modules.split(",") if k] or None
    if keys is not None:
        missing = [k for k in keys if k not in _load_module_db()]
        if missing:
            parser.error(f"not in module_db: {', '.join(missing)}")

    def progress(result: Result) -> None:
        if result.status in ("crash", "hang"):
            print(f"{result.dtype} {result.op}: {result.status} {result.reason}", file=sys.stderr)

    results = survey(keys, dtypes, args.samples, args.jobs, args.timeout, progress)
    opdb.write_report(results, dtypes, args, noun="modules")
    return 0


if __name__ == "__main__":
    sys.exit(main())
