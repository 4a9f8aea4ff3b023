"""Test helpers that look at web pages the way a user does.

- :class:`StrippingProxy`: a reverse proxy that forwards
  ``/driver-proxy/o/<org>/<cluster>/<port>/<path>`` to ``http://<upstream>:<port>/<path>``
  with the prefix removed, HTTP and websockets, as the Databricks driver proxy does. It
  logs every request (path, upstream status); a request outside the prefix is answered
  404 and logged, so a page that escapes the prefix is caught.
- :class:`Chromium`: headless Debian ``chromium`` driven over the Chrome DevTools
  protocol (a websocket, spoken with tornado, which comes with distributed): open a
  page, evaluate JavaScript, record every network request, take a PNG screenshot.
- :func:`chromium_or_skip`: the browser's path; without it the test is skipped locally
  and fails when ``CI`` is set (``.ci/install-browser`` installs it).
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
from dataclasses import dataclass, field

import pytest
from tornado import httpclient, httpserver, web, websocket
from tornado.ioloop import IOLoop
from tornado.netutil import bind_sockets

# --------------------------------------------------------------------------- proxy

PROXY_PATH = re.compile(r"^/driver-proxy/o/(?P<org>[^/]+)/(?P<cluster>[^/]+)/(?P<port>\d+)(?P<rest>/.*)?$")
HOP_BY_HOP = {
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "te", "trailer",
    "transfer-encoding", "upgrade", "host", "content-length",
}  # fmt: skip


@dataclass
class ProxyEntry:
    """One request the proxy saw."""

    method: str
    path: str  # as the browser asked for it (with the query)
    upstream: str | None  # the URL it was forwarded to, None when outside the prefix
    status: int  # upstream status (101 for an accepted websocket), 404 outside the prefix
    websocket: bool = False
    to_browser: int = 0  # websocket messages forwarded upstream -> browser
    to_upstream: int = 0  # websocket messages forwarded browser -> upstream


def split_proxy_path(path: str, org: str, cluster: str) -> tuple[int, str] | None:
    """``(port, path without the prefix)`` for a driver-proxy path of ``org``/``cluster``.

    >>> split_proxy_path("/driver-proxy/o/1/c-2/9001/status?x=1", "1", "c-2")
    (9001, '/status?x=1')
    >>> split_proxy_path("/driver-proxy/o/1/c-2/9001", "1", "c-2")
    (9001, '/')
    >>> split_proxy_path("/static/js/bokeh.min.js", "1", "c-2") is None
    True
    """
    m = PROXY_PATH.match(path.split("?", 1)[0])
    if not m or m["org"] != org or m["cluster"] != cluster:
        return None
    query = path[len(path.split("?", 1)[0]) :]
    return int(m["port"]), (m["rest"] or "/") + query


class _Forward(websocket.WebSocketHandler):
    """Forwards one request (plain HTTP, or a websocket upgrade) with the prefix removed."""

    def initialize(self, proxy: StrippingProxy):
        self.proxy = proxy
        self.entry: ProxyEntry | None = None
        self.upstream_ws = None

    def check_origin(self, origin):  # the upstream server decides about origins
        return True

    def _target(self) -> str | None:
        found = split_proxy_path(self.request.uri, self.proxy.org, self.proxy.cluster)
        if found is None:
            return None
        port, rest = found
        return f"http://{self.proxy.upstream_host}:{port}{rest}"

    def _record(self, status: int, upstream: str | None, ws: bool = False) -> ProxyEntry:
        entry = ProxyEntry(self.request.method, self.request.uri, upstream, status, ws)
        self.proxy.log.append(entry)
        return entry

    async def get(self, *args, **kwargs):
        if self.request.headers.get("Upgrade", "").lower() != "websocket":
            return await self._http()
        target = self._target()
        if target is None:
            self._record(404, None, ws=True)
            raise web.HTTPError(404)
        headers = {
            k: v for k, v in self.request.headers.get_all()
            if k.lower() in ("origin", "cookie", "user-agent")
        }  # fmt: skip
        subprotocols = [
            p.strip() for p in self.request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()
        ]
        request = httpclient.HTTPRequest("ws" + target[4:], headers=headers, connect_timeout=10, request_timeout=30)
        try:
            self.upstream_ws = await websocket.websocket_connect(
                request, subprotocols=subprotocols or None, max_message_size=1 << 28
            )
        except httpclient.HTTPClientError as e:
            self._record(e.code, target, ws=True)
            raise web.HTTPError(e.code) from None
        except OSError:
            self._record(502, target, ws=True)
            raise web.HTTPError(502) from None
        self.entry = self._record(101, target, ws=True)
        await super().get(*args, **kwargs)

    def select_subprotocol(self, subprotocols):
        chosen = self.upstream_ws.selected_subprotocol if self.upstream_ws is not None else None
        return chosen if chosen in subprotocols else None

    async def open(self, *args, **kwargs):
        asyncio.ensure_future(self._pump_from_upstream())

    async def _pump_from_upstream(self):
        while True:
            msg = await self.upstream_ws.read_message()
            if msg is None:
                self.close()
                return
            self.entry.to_browser += 1
            try:
                await self.write_message(msg, binary=isinstance(msg, bytes))
            except websocket.WebSocketClosedError:
                self.upstream_ws.close()
                return

    async def on_message(self, message):
        self.entry.to_upstream += 1
        await self.upstream_ws.write_message(message, binary=isinstance(message, bytes))

    def on_close(self):
        if self.upstream_ws is not None:
            self.upstream_ws.close()

    async def _http(self):
        target = self._target()
        if target is None:
            self._record(404, None)
            self.set_status(404)
            self.finish("outside the driver-proxy prefix")
            return
        headers = {k: v for k, v in self.request.headers.get_all() if k.lower() not in HOP_BY_HOP}
        body = self.request.body if self.request.method in ("POST", "PUT", "PATCH") else None
        request = httpclient.HTTPRequest(
            target,
            method=self.request.method,
            headers=headers,
            body=body,
            follow_redirects=False,  # a Location header goes back to the browser as it is
            decompress_response=False,
            connect_timeout=10,
            request_timeout=60,
        )
        try:
            response = await httpclient.AsyncHTTPClient().fetch(request, raise_error=False)
        except OSError:
            self._record(502, target)
            self.set_status(502)
            self.finish("upstream unreachable")
            return
        self._record(response.code, target)
        self.set_status(response.code, response.reason)
        self.clear_header("Content-Type")
        for k, v in response.headers.get_all():
            if k.lower() not in HOP_BY_HOP:
                self.add_header(k, v)
        if response.body and response.code not in (204, 304):
            self.write(response.body)
        self.finish()

    post = put = delete = patch = _http

    async def head(self, *args, **kwargs):
        await self._http()


class StrippingProxy:
    """A prefix-stripping reverse proxy in a thread of its own (the Databricks driver
    proxy as tools that work through it observe it: the path after
    ``/driver-proxy/o/<org>/<cluster>/<port>`` reaches ``<upstream_host>:<port>``).

    Parameters
    ----------
    org, cluster : str
        The only org id and cluster id it serves (anything else: 404).
    upstream_host : str
        Where the driver's servers listen: the proxy connects to the driver's address.
    """

    def __init__(self, org: str, cluster: str, upstream_host: str):
        self.org, self.cluster, self.upstream_host = org, cluster, upstream_host
        self.log: list[ProxyEntry] = []
        self.port: int | None = None
        self._loop: IOLoop | None = None
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stripping-proxy", daemon=True)

    def _run(self):
        asyncio.set_event_loop(asyncio.new_event_loop())
        self._loop = IOLoop.current()
        app = web.Application([(r".*", _Forward, {"proxy": self})])
        self._server = httpserver.HTTPServer(app)
        sockets = bind_sockets(0, "127.0.0.1")
        self._server.add_sockets(sockets)
        self.port = sockets[0].getsockname()[1]
        self._ready.set()
        self._loop.start()
        self._loop.close(all_fds=True)

    def __enter__(self) -> StrippingProxy:
        self._thread.start()
        assert self._ready.wait(10), "the proxy did not start"
        return self

    def __exit__(self, *exc):
        def stop():
            self._server.stop()
            self._loop.stop()

        self._loop.add_callback(stop)
        self._thread.join(10)

    def url(self, port: int, path: str = "") -> str:
        """The browser URL of ``path`` on driver port ``port``, through this proxy."""
        return f"http://127.0.0.1:{self.port}/driver-proxy/o/{self.org}/{self.cluster}/{int(port)}/{path.lstrip('/')}"


# --------------------------------------------------------------------------- browser

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--hide-scrollbars",
    "--remote-debugging-port=0",
]


def find_chromium() -> str | None:
    """Debian's ``chromium`` (or a Chrome) on PATH, else None."""
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def chromium_or_skip() -> str:
    """The browser's path. Missing: skip with the reason locally, FAIL under ``CI``."""
    path = find_chromium()
    if path is None:
        reason = (
            "headless chromium is not installed (run .ci/install-browser, or "
            "apt-get install chromium); the dashboard and widget are checked in a real browser"
        )
        if os.environ.get("CI"):
            pytest.fail("CI is set but " + reason, pytrace=False)
        pytest.skip(reason)
    return path


@dataclass
class PageRecord:
    """What the browser did while showing a page."""

    requests: list[str] = field(default_factory=list)  # every URL it asked for (HTTP and ws)
    responses: dict[str, int] = field(default_factory=dict)  # URL -> status
    failures: list[str] = field(default_factory=list)  # "URL: error"
    websockets: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # uncaught exceptions, console errors


class Chromium:
    """A headless chromium spoken to over the DevTools protocol (async).

    >>> async with Chromium(path) as browser:        # doctest: +SKIP
    ...     await browser.open(url)
    ...     png = await browser.screenshot()
    """

    def __init__(self, path: str, width: int = 1400, height: int = 1000):
        self.path, self.width, self.height = path, width, height
        self.record = PageRecord()
        self._ids = 0
        self._pending: dict[int, asyncio.Future] = {}
        self._events: list[dict] = []
        self._event_waiters: list[tuple[str, asyncio.Future]] = []

    async def __aenter__(self) -> Chromium:
        self._profile = tempfile.mkdtemp(prefix="spark-dask-chromium-")
        self.proc = subprocess.Popen(
            [self.path, *CHROMIUM_FLAGS, f"--user-data-dir={self._profile}",
             f"--window-size={self.width},{self.height}", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            start_new_session=True,  # its helper processes go with its process group
        )  # fmt: skip
        try:
            port_file = os.path.join(self._profile, "DevToolsActivePort")
            deadline = time.monotonic() + 60
            while not (os.path.exists(port_file) and open(port_file).read().count("\n") >= 1):
                if self.proc.poll() is not None:
                    raise RuntimeError(f"chromium exited: {self.proc.stderr.read().decode()[-2000:]}")
                if time.monotonic() > deadline:
                    raise RuntimeError("chromium did not open its DevTools port in 60 s")
                await asyncio.sleep(0.1)
            port = int(open(port_file).read().split()[0])
            targets = await asyncio.to_thread(self._json, f"http://127.0.0.1:{port}/json/list")
            page = next(t for t in targets if t["type"] == "page")
            self.ws = await websocket.websocket_connect(page["webSocketDebuggerUrl"], max_message_size=1 << 28)
            self._reader = asyncio.ensure_future(self._read())
            for domain in ("Page", "Network", "Runtime", "Log"):
                await self.send(f"{domain}.enable")
            await self.send(
                "Emulation.setDeviceMetricsOverride",
                width=self.width, height=self.height, deviceScaleFactor=1, mobile=False,
            )  # fmt: skip
        except BaseException:
            await self.__aexit__()
            raise
        return self

    async def __aexit__(self, *exc):
        with _suppress():
            self.ws.close()
        with _suppress():
            os.killpg(self.proc.pid, signal.SIGTERM)
        try:
            await asyncio.to_thread(self.proc.wait, 10)
        except subprocess.TimeoutExpired:
            with _suppress():
                os.killpg(self.proc.pid, signal.SIGKILL)
            await asyncio.to_thread(self.proc.wait, 10)
        # helpers (renderer, zygote) in the same process group
        with _suppress():
            os.killpg(self.proc.pid, signal.SIGKILL)
        shutil.rmtree(self._profile, ignore_errors=True)

    @staticmethod
    def _json(url: str):
        with urllib.request.urlopen(url, timeout=10) as r:
            return json.loads(r.read())

    async def _read(self):
        while True:
            raw = await self.ws.read_message()
            if raw is None:
                for fut in self._pending.values():
                    if not fut.done():
                        fut.set_exception(RuntimeError("the DevTools connection closed"))
                return
            msg = json.loads(raw)
            if "id" in msg:
                fut = self._pending.pop(msg["id"], None)
                if fut is not None and not fut.done():
                    if "error" in msg:
                        fut.set_exception(RuntimeError(f"DevTools: {msg['error']}"))
                    else:
                        fut.set_result(msg.get("result", {}))
                continue
            self._on_event(msg["method"], msg.get("params", {}))

    def _on_event(self, method: str, p: dict):
        rec = self.record
        if method == "Network.requestWillBeSent":
            rec.requests.append(p["request"]["url"])
        elif method == "Network.responseReceived":
            rec.responses[p["response"]["url"]] = p["response"]["status"]
        elif method == "Network.loadingFailed":
            rec.failures.append(f"{p.get('type')}: {p.get('errorText')} ({p.get('blockedReason', '')})")
        elif method == "Network.webSocketCreated":
            rec.websockets.append(p["url"])
            rec.requests.append(p["url"])
        elif method == "Runtime.exceptionThrown":
            d = p["exceptionDetails"]
            rec.errors.append(f"exception: {d.get('exception', {}).get('description') or d.get('text')}")
        elif method == "Runtime.consoleAPICalled" and p.get("type") == "error":
            rec.errors.append(
                "console.error: " + " ".join(str(a.get("value", a.get("description", ""))) for a in p["args"])
            )
        elif method == "Log.entryAdded" and p["entry"].get("level") == "error":
            rec.errors.append(f"log: {p['entry'].get('text')} {p['entry'].get('url', '')}")
        for name, fut in list(self._event_waiters):
            if name == method and not fut.done():
                fut.set_result(p)
                self._event_waiters.remove((name, fut))

    async def send(self, method: str, timeout: float = 60, **params):
        self._ids += 1
        fut = asyncio.get_running_loop().create_future()
        self._pending[self._ids] = fut
        await self.ws.write_message(json.dumps({"id": self._ids, "method": method, "params": params}))
        return await asyncio.wait_for(fut, timeout)

    async def open(self, url: str, timeout: float = 60) -> None:
        """Navigate and wait for the page's load event."""
        loaded = asyncio.get_running_loop().create_future()
        self._event_waiters.append(("Page.loadEventFired", loaded))
        result = await self.send("Page.navigate", url=url)
        if result.get("errorText"):
            raise RuntimeError(f"navigation to {url} failed: {result['errorText']}")
        await asyncio.wait_for(loaded, timeout)

    async def evaluate(self, expression: str):
        """The value of a JavaScript expression in the page (promises awaited)."""
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"JavaScript failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, timeout: float = 60, interval: float = 0.25):
        """Poll a JavaScript expression until it is truthy; return its last value."""
        deadline = time.monotonic() + timeout
        value = None
        while time.monotonic() < deadline:
            value = await self.evaluate(expression)
            if value:
                return value
            await asyncio.sleep(interval)
        return value

    async def screenshot(self, path: str) -> str:
        """A PNG of the viewport, written to ``path``."""
        result = await self.send("Page.captureScreenshot", format="png")
        with open(path, "wb") as f:
            f.write(base64.b64decode(result["data"]))
        return path


class _suppress:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return True


# JavaScript: canvases Bokeh drew (its views live in shadow roots), with a painted pixel.
PAINTED_CANVASES_JS = r"""
(() => {
  const out = [];
  const walk = (root) => {
    for (const el of root.querySelectorAll('*')) {
      if (el.tagName === 'CANVAS' && el.width > 0 && el.height > 0) {
        let painted = false;
        try {
          const ctx = el.getContext('2d');
          if (ctx) {
            const d = ctx.getImageData(0, 0, el.width, el.height).data;
            for (let i = 3; i < d.length; i += 4 * 7) { if (d[i] !== 0) { painted = true; break; } }
          }
        } catch (e) {}
        out.push({w: el.width, h: el.height, painted});
      }
      if (el.shadowRoot) walk(el.shadowRoot);
    }
  };
  walk(document);
  return out;
})()
"""
