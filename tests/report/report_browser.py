"""Headless Chromium (Debian's) driven through the DevTools protocol, for the report's tests and benchmark.

Starts `chromium --headless` with a private profile and every host name resolving nowhere, connects to the
page's DevTools WebSocket (websocket-client) and records console messages, exceptions, log entries and
network requests. Input goes through Input.dispatchMouseEvent / Input.dispatchKeyEvent, as a user's would.
Nothing here skips: a missing browser or client raises.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

import websocket  # websocket-client, pinned in requirements-test.txt

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "/usr/lib/chromium/chromium")


def chromium_binary() -> str:
    env = os.environ.get("OPENREG_CHROMIUM")
    for name in ([env] if env else []) + list(CHROMIUM_CANDIDATES):
        found = shutil.which(name) if name else None
        if found:
            return found
    raise RuntimeError("chromium is not installed (scripts/bootstrap.sh installs Debian's chromium)")


class Browser:
    def __init__(self, width: int = 1400, height: int = 900):
        self.profile = tempfile.mkdtemp(prefix="openreg-chromium-")
        args = [
            chromium_binary(),
            "--headless=new",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",  # containers' /dev/shm is small
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--host-resolver-rules=MAP * ~NOTFOUND",  # offline: no name resolves
            f"--window-size={width},{height}",
            f"--user-data-dir={self.profile}",
            "--remote-debugging-port=0",
            "--remote-allow-origins=*",
            "about:blank",
        ]
        self.proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True)
        port_file = Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.exists() or not port_file.read_text().strip():
            if self.proc.poll() is not None:
                raise RuntimeError("chromium exited: " + self.proc.stderr.read().decode(errors="replace")[-2000:])
            if time.monotonic() > deadline:
                self.close()
                raise RuntimeError("chromium did not open its DevTools port within 60 s")
            time.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        local = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # no proxy for the loopback
        targets = json.loads(local.open(f"http://127.0.0.1:{port}/json/list", timeout=10).read())
        page = next(t for t in targets if t["type"] == "page")
        self.ws = websocket.create_connection(page["webSocketDebuggerUrl"], timeout=120, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []
        for domain in ("Page", "Runtime", "Log", "Network"):
            self.send(domain + ".enable")
        # Any http(s)/ws request fails here: the page must need none.
        self.send("Network.setBlockedURLs", urls=["http://*", "https://*", "ws://*", "wss://*", "ftp://*"])
        self.send("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1, mobile=False)

    # ------------------------------------------------------------ protocol
    def send(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return msg.get("result", {})
            if "method" in msg:
                self.events.append(msg)

    def evaluate(self, expression: str, await_promise: bool = False) -> Any:
        r = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=await_promise)
        if "exceptionDetails" in r:
            raise RuntimeError(f"{expression}: {r['exceptionDetails']}")
        return r["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 60.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"{expression} stayed false for {timeout} s")
            time.sleep(0.05)

    def open(self, path: Path, view: str | None = None) -> None:
        self.page_url = Path(path).resolve().as_uri()
        url = self.page_url + (f"#{view}" if view else "")
        self.send("Page.navigate", url=url)
        self.wait_for("window.__report && window.__report.ready === true")

    def frame(self) -> None:
        """Waits for two animation frames (the page has drawn what input asked)."""
        self.evaluate("new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))", await_promise=True)

    # ------------------------------------------------------------ input
    def mouse(self, kind: str, x: float, y: float, **extra: Any) -> None:
        self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, **extra)

    def click(self, x: float, y: float) -> None:
        self.mouse("mouseMoved", x, y)
        self.mouse("mousePressed", x, y, button="left", clickCount=1, buttons=1)
        self.mouse("mouseReleased", x, y, button="left", clickCount=1)

    def drag(self, x0: float, y0: float, x1: float, y1: float, steps: int = 5) -> None:
        self.mouse("mouseMoved", x0, y0)
        self.mouse("mousePressed", x0, y0, button="left", clickCount=1, buttons=1)
        for i in range(1, steps + 1):
            self.mouse("mouseMoved", x0 + (x1 - x0) * i / steps, y0 + (y1 - y0) * i / steps, button="left", buttons=1)
        self.mouse("mouseReleased", x1, y1, button="left", clickCount=1)

    def wheel(self, x: float, y: float, delta_y: float) -> None:
        self.mouse("mouseWheel", x, y, deltaX=0, deltaY=delta_y)

    def key(self, key: str, code: str, key_code: int) -> None:
        common = {"key": key, "code": code, "windowsVirtualKeyCode": key_code, "nativeVirtualKeyCode": key_code}
        text = key if len(key) == 1 else ""
        self.send("Input.dispatchKeyEvent", type="keyDown" if text else "rawKeyDown", text=text, **common)
        self.send("Input.dispatchKeyEvent", type="keyUp", **common)

    def type_text(self, text: str) -> None:
        for ch in text:
            self.send("Input.dispatchKeyEvent", type="char", text=ch)

    def screenshot(self, path: Path) -> Path:
        data = self.send("Page.captureScreenshot", format="png")["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    # ------------------------------------------------------------ what happened
    def drain(self) -> None:
        """Reads the events that arrived without a call."""
        self.ws.settimeout(0.2)
        try:
            while True:
                msg = json.loads(self.ws.recv())
                if "method" in msg:
                    self.events.append(msg)
        except websocket.WebSocketTimeoutException:
            pass
        finally:
            self.ws.settimeout(120)

    def console_errors(self) -> list[str]:
        self.drain()
        out = []
        for e in self.events:
            m, p = e["method"], e.get("params", {})
            if m == "Runtime.exceptionThrown":
                out.append("exception: " + json.dumps(p.get("exceptionDetails", {}))[:2000])
            elif m == "Runtime.consoleAPICalled" and p.get("type") in ("error", "warning", "assert"):
                out.append(f"console.{p['type']}: " + json.dumps(p.get("args", []))[:2000])
            elif m == "Log.entryAdded" and p.get("entry", {}).get("level") in ("error", "warning"):
                out.append("log: " + json.dumps(p["entry"])[:2000])
        return out

    def requests(self) -> list[str]:
        """URLs the page asked for, other than the page itself."""
        self.drain()
        return [
            e["params"]["request"]["url"]
            for e in self.events
            if e["method"] == "Network.requestWillBeSent"
            and e["params"]["request"]["url"].split("#")[0] != getattr(self, "page_url", None)
        ] + [
            "failed: " + str(e["params"].get("errorText"))
            for e in self.events
            if e["method"] == "Network.loadingFailed"
        ]

    def close(self) -> None:
        try:
            self.ws.close()
        except Exception:
            pass
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 15)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, 9)
                self.proc.wait(10)
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
