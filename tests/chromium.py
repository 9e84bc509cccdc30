"""Drive Debian's headless Chromium over the DevTools protocol (tests and bench/bench_html.py).

No downloads: the `chromium` binary of the system, a throw-away profile, networking features off.
Console messages and uncaught exceptions of the page are collected in `Browser.console` and
`Browser.exceptions`.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

BINARIES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
FLAGS = (
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-default-apps", "--disable-extensions", "--mute-audio", "--hide-scrollbars",
)  # fmt: skip


def find_chromium() -> str | None:
    for name in BINARIES:
        path = shutil.which(name)
        if path:
            return path
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Browser:
    """One headless Chromium with one page target, driven synchronously."""

    def __init__(self, width: int = 1400, height: int = 1000, timeout: float = 30.0) -> None:
        import websocket  # test dependency (websocket-client)

        binary = find_chromium()
        if binary is None:
            raise RuntimeError("chromium not found")
        self.profile = tempfile.mkdtemp(prefix="msprobe-chromium-")
        port = _free_port()
        self.proc = subprocess.Popen(
            [binary, *FLAGS, f"--user-data-dir={self.profile}", f"--remote-debugging-port={port}",
             f"--window-size={width},{height}", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.timeout = timeout
        self.console: list[dict[str, Any]] = []
        self.exceptions: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        try:
            ws_url = self._page_target(port)
            self.ws = websocket.create_connection(ws_url, timeout=timeout, suppress_origin=True)
            for domain in ("Page", "Runtime", "Log"):
                self.call(f"{domain}.enable")
            self.call("Emulation.setDeviceMetricsOverride", width=width, height=height, deviceScaleFactor=1,
                      mobile=False)  # fmt: skip
        except BaseException:
            self.close()
            raise

    def _page_target(self, port: int) -> str:
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=2) as r:
                    targets = json.load(r)
                pages = [t for t in targets if t.get("type") == "page" and t.get("webSocketDebuggerUrl")]
                if pages:
                    return str(pages[0]["webSocketDebuggerUrl"])
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("chromium did not start its DevTools endpoint")
            time.sleep(0.1)

    def _record(self, msg: dict[str, Any]) -> None:
        method, params = msg.get("method"), msg.get("params", {})
        if method == "Runtime.consoleAPICalled":
            text = " ".join(str(a.get("value", a.get("description", ""))) for a in params.get("args", []))
            self.console.append({"level": params.get("type"), "text": text})
        elif method == "Log.entryAdded":
            entry = params.get("entry", {})
            self.console.append({"level": entry.get("level"), "text": entry.get("text"), "url": entry.get("url")})
        elif method == "Runtime.exceptionThrown":
            self.exceptions.append(params.get("exceptionDetails", {}))

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        """Send one command and wait for its answer, recording events on the way."""
        ident = next(self._ids)
        self.ws.send(json.dumps({"id": ident, "method": method, "params": params}))
        deadline = time.monotonic() + self.timeout
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == ident:
                if "error" in msg:
                    raise RuntimeError(f"{method}: {msg['error']}")
                return dict(msg.get("result", {}))
            self._record(msg)
        raise TimeoutError(method)

    def open(self, path: Path) -> None:
        """Load a file, after a blank page so that no answer can come from the previous document."""
        for url in ("about:blank", path.resolve().as_uri()):
            self.call("Page.navigate", url=url)
            self.wait_for(f"location.href === {json.dumps(url)} && document.readyState !== 'loading'")

    def eval(self, expression: str) -> Any:
        """Evaluate JavaScript in the page (promises awaited) and return its JSON value."""
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"evaluate failed: {result['exceptionDetails']}")
        return result.get("result", {}).get("value")

    def wait_for(self, expression: str, timeout: float | None = None) -> Any:
        """Poll until `expression` is truthy; return its value."""
        deadline = time.monotonic() + (timeout or self.timeout)
        while time.monotonic() < deadline:
            value = self.eval(expression)
            if value:
                return value
            time.sleep(0.05)
        raise TimeoutError(expression)

    def screenshot(self, path: Path) -> Path:
        data = self.call("Page.captureScreenshot", format="png", captureBeyondViewport=False)["data"]
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(base64.b64decode(data))
        return path

    def drain(self, seconds: float = 0.3) -> None:
        """Read pending events (console messages) for a moment."""
        self.ws.settimeout(seconds)
        try:
            while True:
                self._record(json.loads(self.ws.recv()))
        except Exception:  # websocket timeout: nothing more pending
            pass
        finally:
            self.ws.settimeout(self.timeout)

    def problems(self) -> list[str]:
        """Console errors/warnings and uncaught exceptions seen so far."""
        out = [f"{m['level']}: {m['text']}" for m in self.console if m.get("level") in ("error", "warning", "assert")]
        out += [f"exception: {e.get('exception', {}).get('description') or e.get('text')}" for e in self.exceptions]
        return out

    def close(self) -> None:
        ws = getattr(self, "ws", None)
        if ws is not None:
            try:
                ws.close()
            except Exception:
                pass
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)

    def __enter__(self) -> "Browser":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def artifacts_dir() -> Path:
    """Where tests leave screenshots: $MSPROBE_ARTIFACTS, else tests/artifacts/ (gitignored)."""
    return Path(os.environ.get("MSPROBE_ARTIFACTS") or Path(__file__).parent / "artifacts")
