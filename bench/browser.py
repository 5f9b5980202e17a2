"""A page as a person sees it: Debian's headless Chromium, driven over the
DevTools protocol on a pipe (``--remote-debugging-pipe``: no port, no
WebSocket library), with the network off.

Used by the report's browser test and by ``python -m bench.html_report``:
load a file, wait until the page says it has drawn (the report's loader
sets ``data-first-paint-ms`` and, for ``#all``, ``data-done`` on <body>),
collect every console error and uncaught exception, evaluate expressions,
take a screenshot.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

NAMES = ("chromium", "chromium-browser", "google-chrome")


def executable() -> str | None:
    for name in NAMES:
        found = shutil.which(name)
        if found:
            return found
    return None


class BrowserError(RuntimeError):
    pass


class Browser:
    """One headless Chromium with one page; a context manager."""

    def __init__(self, width: int = 1400, height: int = 1000, timeout: float = 60.0):
        exe = executable()
        if exe is None:
            raise BrowserError("no Chromium: apt-get install chromium")
        self.timeout = timeout
        self.errors: list[str] = []
        self._profile = tempfile.mkdtemp(prefix="hh-chromium-")
        to_child, self._out = os.pipe()
        self._in, from_child = os.pipe()

        def fds():
            # The protocol's pipe is fd 3 (commands in) and fd 4 (replies out).
            a, b = os.dup(to_child), os.dup(from_child)
            os.dup2(a, 3)
            os.dup2(b, 4)

        args = [exe, "--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run",
                "--remote-debugging-pipe", f"--user-data-dir={self._profile}",
                # No network: a page that fetches anything fails to, loudly.
                "--proxy-server=127.0.0.1:9", "--host-resolver-rules=MAP * ~NOTFOUND",
                "--disable-background-networking", "--disable-component-update",
                "--disable-extensions", "--mute-audio", "about:blank"]
        self._proc = subprocess.Popen(args, preexec_fn=fds, close_fds=False,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.close(to_child)
        os.close(from_child)
        self._buf = b""
        self._id = 0
        self._events: list[dict] = []
        target = self._call("Target.createTarget", {"url": "about:blank"})["targetId"]
        self._session = self._call("Target.attachToTarget",
                                   {"targetId": target, "flatten": True})["sessionId"]
        for method in ("Runtime.enable", "Log.enable", "Page.enable", "Network.enable"):
            self.call(method)
        self.call("Network.emulateNetworkConditions", {
            "offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
        self.call("Emulation.setDeviceMetricsOverride", {
            "width": width, "height": height, "deviceScaleFactor": 1, "mobile": False})

    # --- the protocol ---------------------------------------------------------

    def _send(self, msg: dict) -> int:
        self._id += 1
        msg["id"] = self._id
        os.write(self._out, json.dumps(msg).encode() + b"\0")
        return self._id

    def _read(self, deadline: float) -> dict:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([self._in], [], [], left)[0]:
                raise BrowserError("Chromium did not answer in time")
            chunk = os.read(self._in, 1 << 20)
            if not chunk:
                raise BrowserError("Chromium exited")
            self._buf += chunk
        raw, self._buf = self._buf.split(b"\0", 1)
        return json.loads(raw)

    def _call(self, method: str, params: dict | None = None, session: str | None = None):
        msg = {"method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        want = self._send(msg)
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == want:
                if "error" in reply:
                    raise BrowserError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self._event(reply)

    def _event(self, ev: dict) -> None:
        method, p = ev.get("method"), ev.get("params", {})
        if method == "Runtime.exceptionThrown":
            d = p.get("exceptionDetails", {})
            self.errors.append((d.get("exception") or {}).get("description") or d.get("text", ""))
        elif method == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            self.errors.append(" ".join(str(a.get("value", a.get("description", "")))
                                        for a in p.get("args", [])))
        elif method == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            e = p["entry"]
            self.errors.append(f"{e.get('source')}: {e.get('text')} {e.get('url', '')}".strip())

    def call(self, method: str, params: dict | None = None) -> dict:
        return self._call(method, params, self._session)

    # --- what a test wants ----------------------------------------------------

    def evaluate(self, expression: str):
        res = self.call("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                             "awaitPromise": True})
        if "exceptionDetails" in res:
            raise BrowserError(f"{expression}: {res['exceptionDetails'].get('text')}")
        return res.get("result", {}).get("value")

    def open(self, path: str | Path, fragment: str = "", until: str = "firstPaintMs",
             timeout: float | None = None) -> float:
        """Load *path* and wait until <body> has ``data-<until>``; the wall
        seconds from navigation to then."""
        url = Path(path).resolve().as_uri() + (f"#{fragment}" if fragment else "")
        start = time.monotonic()
        self.call("Page.navigate", {"url": url})
        deadline = start + (timeout or self.timeout)
        probe = f"document.body ? document.body.dataset.{until} || null : null"
        while time.monotonic() < deadline:
            if self.evaluate(probe) is not None:
                return time.monotonic() - start
            time.sleep(0.05)
        raise BrowserError(f"{url}: <body data-{until}> not set within "
                           f"{timeout or self.timeout:.0f} s")

    def screenshot(self, path: str | Path, full_page: bool = False) -> Path:
        params: dict = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        data = self.call("Page.captureScreenshot", params)["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)

    def close(self) -> None:
        try:
            self._call("Browser.close")
        except (BrowserError, OSError):
            pass
        try:
            self._proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        for fd in (self._in, self._out):
            try:
                os.close(fd)
            except OSError:
                pass
        shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
