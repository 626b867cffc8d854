"""ctypes binding of libopenreg_trace.so (trace/include/openreg/trace_analysis.h).

Only the C ABI crosses this boundary; every result is a JSON document that
the library allocates and this module frees. ctypes releases the GIL during
each call, so analyses of large traces do not block other Python threads.
"""

from __future__ import annotations

import ctypes
import glob
import json
import os
from pathlib import Path
from typing import Any

LIBRARY_NAME = "libopenreg_trace.so"
ENV_LIBRARY = "OPENREG_TRACE_LIB"

_PACKAGE_DIR = Path(__file__).resolve().parent  # openreg_trace/
# In a source checkout the package is trace/python/openreg_trace: the checkout's own builds count too.
_TRACE_PROJECT = _PACKAGE_DIR.parent.parent
_CHECKOUT = _TRACE_PROJECT.parent if (_TRACE_PROJECT / "CMakeLists.txt").is_file() else None
_lib: ctypes.CDLL | None = None


class TraceError(RuntimeError):
    """A failure reported by libopenreg_trace (I/O, parse, bad option...)."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status


class LibraryNotFound(TraceError):
    pass


def _candidates() -> list[Path]:
    found = []
    env = os.environ.get(ENV_LIBRARY)
    if env:
        found.append(Path(env))
    # An installed wheel's library, or a checkout's: the editable install and the
    # backend's release build (build/py) both write it there.
    found.append(_PACKAGE_DIR / "lib" / LIBRARY_NAME)
    if _CHECKOUT is not None:
        # Other builds of the checkout (cmake -B build/<name>), newest first.
        dev = [Path(p) for p in glob.glob(str(_CHECKOUT / "build" / "*" / "trace" / LIBRARY_NAME))]
        found.extend(sorted(dev, key=lambda p: p.stat().st_mtime, reverse=True))
    return found


def library_path() -> Path:
    """Where the library will be loaded from; raises LibraryNotFound."""
    env = os.environ.get(ENV_LIBRARY)
    if env and not Path(env).is_file():
        raise LibraryNotFound("missing", f"{ENV_LIBRARY}={env} does not name a file")
    for path in _candidates():
        if path.is_file():
            return path
    raise LibraryNotFound(
        "missing",
        f"{LIBRARY_NAME} was not found (looked in ${ENV_LIBRARY}, {_PACKAGE_DIR / 'lib'}"
        + (f" and {_CHECKOUT / 'build'}/*/trace/" if _CHECKOUT is not None else "")
        + "). Install the package with `pip install ./trace` from a source checkout "
        "(`pip install -e ./trace` to work on it), or point $" + ENV_LIBRARY + " at the library.",
    )


def _load() -> ctypes.CDLL:
    global _lib
    if _lib is not None:
        return _lib
    lib = ctypes.CDLL(str(library_path()))
    out = ctypes.POINTER(ctypes.c_void_p)
    lib.ortrace_version.restype = ctypes.c_char_p
    lib.ortrace_version.argtypes = []
    lib.ortrace_open_file.restype = ctypes.c_int
    lib.ortrace_open_file.argtypes = [ctypes.c_char_p, ctypes.c_char_p, out, out]
    lib.ortrace_open_buffer.restype = ctypes.c_int
    lib.ortrace_open_buffer.argtypes = [ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p, out, out]
    lib.ortrace_close.restype = None
    lib.ortrace_close.argtypes = [ctypes.c_void_p]
    for name in ("ortrace_summary", "ortrace_check", "ortrace_timeline"):
        fn = getattr(lib, name)
        fn.restype = ctypes.c_int
        fn.argtypes = [ctypes.c_void_p, ctypes.c_char_p, out]
    lib.ortrace_list_checks.restype = ctypes.c_int
    lib.ortrace_list_checks.argtypes = [out]
    lib.ortrace_free_string.restype = None
    lib.ortrace_free_string.argtypes = [ctypes.c_void_p]
    _lib = lib
    return lib


def _take_string(lib: ctypes.CDLL, ptr: ctypes.c_void_p) -> str | None:
    if not ptr.value:
        return None
    try:
        return ctypes.string_at(ptr.value).decode("utf-8", errors="replace")
    finally:
        lib.ortrace_free_string(ptr)


def _raise(lib: ctypes.CDLL, status: int, text: str | None) -> None:
    if text:
        try:
            err = json.loads(text)
            raise TraceError(err.get("status", str(status)), err.get("message", text))
        except ValueError:
            pass
    names = {1: "invalid_argument", 2: "io", 3: "parse", 4: "out_of_memory", 5: "internal"}
    raise TraceError(names.get(status, str(status)), text or f"libopenreg_trace failed ({names.get(status, status)})")


def _options(options: dict[str, Any] | None) -> bytes | None:
    return json.dumps(options).encode() if options else None


def version() -> str:
    return _load().ortrace_version().decode()


def list_checks() -> list[dict[str, str]]:
    lib = _load()
    out = ctypes.c_void_p()
    status = lib.ortrace_list_checks(ctypes.byref(out))
    text = _take_string(lib, out)
    if status != 0:
        _raise(lib, status, text)
    return json.loads(text)


class NativeTrace:
    """An opened, indexed trace; analyses can run on it many times."""

    def __init__(
        self, path: str | os.PathLike | None = None, *, data: bytes | None = None, options: dict[str, Any] | None = None
    ):
        lib = _load()
        self._lib = lib
        self._handle = ctypes.c_void_p()
        err = ctypes.c_void_p()
        if data is not None:
            status = lib.ortrace_open_buffer(
                data, len(data), _options(options), ctypes.byref(self._handle), ctypes.byref(err)
            )
        else:
            status = lib.ortrace_open_file(
                os.fsencode(path), _options(options), ctypes.byref(self._handle), ctypes.byref(err)
            )
        text = _take_string(lib, err)
        if status != 0:
            self._handle = ctypes.c_void_p()
            _raise(lib, status, text)

    def _call(self, fn_name: str, options: dict[str, Any] | None) -> dict[str, Any]:
        if not self._handle.value:
            raise TraceError("invalid_argument", "the trace is closed")
        out = ctypes.c_void_p()
        status = getattr(self._lib, fn_name)(self._handle, _options(options), ctypes.byref(out))
        text = _take_string(self._lib, out)
        if status != 0:
            _raise(self._lib, status, text)
        return json.loads(text)

    def summary(self, **options: Any) -> dict[str, Any]:
        return self._call("ortrace_summary", options)

    def check(self, **options: Any) -> dict[str, Any]:
        return self._call("ortrace_check", options)

    def timeline(self, **options: Any) -> dict[str, Any]:
        return self._call("ortrace_timeline", options)

    def close(self) -> None:
        if self._handle.value:
            self._lib.ortrace_close(self._handle)
            self._handle = ctypes.c_void_p()

    def __enter__(self) -> NativeTrace:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass
