"""The package downloads of every bake through one cache on the host: a caching npm
registry on loopback.

A bake's package managers (npm, pnpm, yarn 1, yarn berry) are pointed at it through
their registry variables, set for the bake's steps only (never in the image, never in
the recipe's key), so no task's Dockerfile changes. Tarballs are immutable and kept for
good; package metadata is kept and fetched again once it is older than
`METADATA_FRESH_SECONDS`, or served stale when the registry cannot be reached. Every
process serves the same directory: files are written whole and renamed into place, so
concurrent bakes, xdist workers and sessions share it safely.

A request the registry fails (no answer, a reset, a 5xx or 429) is tried again after
`RETRY_PAUSES` when there is nothing kept to serve instead: an install of thousands of
packages otherwise stops on one passing failure of one of them.

Metadata is served with the registry's tarball URLs pointing back here, so a lockfile
that names `registry.npmjs.org` (npm replaces that host by the configured registry)
fetches through the cache as well.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import http.server
import json
import os
import ssl
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

UPSTREAM = "https://registry.npmjs.org"
#: Yarn 1 writes this host into lockfiles; its tarballs are npm's.
YARN_UPSTREAM = "https://registry.yarnpkg.com"
#: Metadata younger than this is served without asking the registry.
METADATA_FRESH_SECONDS = 3600.0
#: Pauses before asking the registry again when it failed a request (no answer, or a
#: 5xx or 429) and nothing is kept to serve instead; then the cache answers 502.
RETRY_PAUSES: tuple[float, ...] = (1.0, 3.0)
#: Headers passed on from the registry's answer (the rest are the cache's own).
_KEPT_HEADERS = ("content-type",)
_HOP = {"connection", "keep-alive", "transfer-encoding", "host", "accept-encoding", "content-length"}


class _Server(http.server.ThreadingHTTPServer):
    """The cache's server: a backlog for a package manager's burst of connections (pnpm
    opens dozens at once; the default of 5 made requests wait 10 to 20 s), and a client
    that hangs up is no traceback in a trial's output."""

    request_queue_size = 256

    def handle_error(self, request: object, client_address: object) -> None:
        if not isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            super().handle_error(request, client_address)  # type: ignore[arg-type]


@dataclass
class Traffic:
    """What the cache moved: bytes fetched from the registry and bytes served to bakes."""

    fetched_bytes: int = 0
    served_bytes: int = 0
    hits: int = 0
    misses: int = 0

    def since(self, earlier: Traffic) -> Traffic:
        return Traffic(*(a - b for a, b in zip(asdict(self).values(), asdict(earlier).values(),
                                                strict=True)))

    def __add__(self, other: Traffic) -> Traffic:
        return Traffic(*(a + b for a, b in zip(asdict(self).values(), asdict(other).values(),
                                                strict=True)))


def preferred_port(root: Path) -> int:
    """The port the cache over `root` serves on when it is free: the same on every run,
    below Linux's ephemeral range (32768 and up), so no outgoing connection holds it."""
    digest = hashlib.sha256(str(root.resolve()).encode()).digest()
    return 20000 + int.from_bytes(digest[:4], "big") % 10000


class DownloadCache:
    """The caching registry over `root`; started on first use, stopped by `close()`."""

    def __init__(self, root: Path, ca_bundle: Path | None = None, upstream: str = UPSTREAM) -> None:
        self.root = root
        self.upstream = upstream.rstrip("/")
        self.traffic = Traffic()
        self._lock = threading.Lock()
        self._starting = threading.Lock()
        self._ssl = ssl.create_default_context(cafile=str(ca_bundle) if ca_bundle else None)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        """The cache's registry URL (it starts the server)."""
        with self._starting:  # concurrent bakes of one process share one server
            if self._server is None:
                self._start()
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def env(self) -> dict[str, str]:
        """The variables that send a bake's package managers here."""
        url = self.url + "/"
        return {
            "npm_config_registry": url,
            # pnpm 11 and later read their own prefix only.
            "pnpm_config_registry": url,
            "YARN_REGISTRY": url,
            "YARN_NPM_REGISTRY_SERVER": self.url,
            "YARN_UNSAFE_HTTP_WHITELIST": "127.0.0.1",
        }

    def snapshot(self) -> Traffic:
        with self._lock:
            return Traffic(**asdict(self.traffic))

    def _count(self, *, fetched: int = 0, served: int = 0, hit: bool | None = None) -> None:
        with self._lock:
            self.traffic.fetched_bytes += fetched
            self.traffic.served_bytes += served
            if hit is True:
                self.traffic.hits += 1
            elif hit is False:
                self.traffic.misses += 1

    def _start(self) -> None:
        (self.root / "files").mkdir(parents=True, exist_ok=True)
        cache = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                cache._get(self)

            def do_HEAD(self) -> None:
                cache._get(self, body=False)

            def do_POST(self) -> None:
                cache._pass(self)

            def log_message(self, format: str, *args: object) -> None:
                pass

        # The bakes' registry URL is in each RUN step's environment, and so in docker's
        # key for that step's layer: one port per cache (while it is free) lets a recipe
        # changed in a late step (a task's config.json) reuse its earlier steps' layers
        # across sessions. The prebake runs in one process, which gets that port.
        try:
            self._server = _Server(("127.0.0.1", preferred_port(self.root)), Handler)
        except OSError:  # taken (another session, another worker): any port serves
            self._server = _Server(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="reactbench-downloads",
                                        daemon=True)
        self._thread.start()

    def close(self) -> None:
        """Stop serving, and add this process's traffic to the cache's log."""
        if self._server is None:
            return
        self._server.shutdown()
        self._server.server_close()
        self._server = None
        traffic = self.snapshot()
        if traffic.hits or traffic.misses:
            with contextlib.suppress(OSError), (self.root / "traffic.jsonl").open("a") as log:
                log.write(json.dumps({"time": time.time(), **asdict(traffic)}) + "\n")

    # -- serving ------------------------------------------------------------------------

    def _file(self, path: str, accept: str) -> tuple[Path, bool]:
        """Where an answer is kept, and whether it is immutable (a tarball)."""
        tarball = "/-/" in path and path.endswith(".tgz")
        variant = "" if tarball else ("corgi" if "install-v1" in accept else "full")
        digest = hashlib.sha256(f"{path}|{variant}".encode()).hexdigest()
        return self.root / "files" / digest[:2] / digest, tarball

    def _get(self, handler: http.server.BaseHTTPRequestHandler, *, body: bool = True) -> None:
        path = handler.path
        accept = handler.headers.get("accept", "")
        stored, immutable = self._file(path, accept)
        meta_path = stored.with_suffix(".json")
        fresh = stored.is_file() and meta_path.is_file() and (
            immutable or time.time() - stored.stat().st_mtime < METADATA_FRESH_SECONDS)
        if fresh:
            self._count(hit=True)
        else:
            stale = stored.is_file() and meta_path.is_file()
            status, headers, data = self._fetch_read(path, accept, () if stale else RETRY_PAUSES)
            if status == 200:
                self._count(fetched=len(data), hit=False)
                self._keep(stored, meta_path, headers, data)
            elif stale:
                self._count(hit=True)  # the registry is unreachable: stale beats nothing
            else:
                self._count(fetched=len(data), hit=False)
                self._answer(handler, status, headers, data, body)
                return
        headers = json.loads(meta_path.read_text())
        data = stored.read_bytes()
        if not immutable and "json" in headers.get("content-type", "json"):
            data = self._pointed_here(data)
        self._answer(handler, 200, headers, data, body)

    def _pointed_here(self, data: bytes) -> bytes:
        here = self.url.encode()
        return data.replace(self.upstream.encode(), here).replace(YARN_UPSTREAM.encode(), here)

    def _fetch_read(self, path: str, accept: str,
                    pauses: tuple[float, ...]) -> tuple[int, dict[str, str], bytes]:
        """A read from the registry, asked again after each pause while it fails; a
        registry that gave no answer is a 502."""
        for pause in (*pauses, None):
            try:
                status, headers, data = self._fetch(path, accept)
            except (OSError, http.client.HTTPException):
                status, headers, data = 502, {}, b""
            if pause is None or not (status >= 500 or status == 429):
                return status, headers, data
            time.sleep(pause)
        raise AssertionError("unreachable")

    def _fetch(self, path: str, accept: str, method: str = "GET", payload: bytes | None = None,
               extra: Mapping[str, str] | None = None) -> tuple[int, dict[str, str], bytes]:
        request = urllib.request.Request(self.upstream + path, data=payload, method=method,
                                         headers={**(extra or {}), **({"Accept": accept} if accept else {})})
        try:
            with urllib.request.urlopen(request, context=self._ssl, timeout=120) as response:
                return response.status, _kept(response.headers), response.read()
        except urllib.error.HTTPError as exc:
            return exc.code, _kept(exc.headers), exc.read()

    @staticmethod
    def _keep(stored: Path, meta_path: Path, headers: Mapping[str, str], data: bytes) -> None:
        stored.parent.mkdir(parents=True, exist_ok=True)
        for target, content in ((stored, data), (meta_path, json.dumps(dict(headers)).encode())):
            tmp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}")
            tmp.write_bytes(content)
            os.replace(tmp, target)

    def _pass(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        """Anything but a read (npm's audit) goes to the registry as it is."""
        length = int(handler.headers.get("content-length") or 0)
        payload = handler.rfile.read(length) if length else None
        extra = {k: v for k, v in handler.headers.items() if k.lower() not in _HOP}
        try:
            status, headers, data = self._fetch(handler.path, "", "POST", payload, extra)
        except OSError:
            status, headers, data = 502, {}, b""
        self._count(fetched=len(data))
        self._answer(handler, status, headers, data, True)

    def _answer(self, handler: http.server.BaseHTTPRequestHandler, status: int,
                headers: Mapping[str, str], data: bytes, body: bool) -> None:
        self._count(served=len(data) if body else 0)
        try:
            handler.send_response(status)
            for name, value in headers.items():
                handler.send_header(name, value)
            handler.send_header("Content-Length", str(len(data)))
            handler.end_headers()
            if body:
                handler.wfile.write(data)
        except OSError:
            pass  # the client went away


def _kept(headers: object) -> dict[str, str]:
    get = getattr(headers, "get", None)
    if get is None:
        return {}
    return {name: str(get(name)) for name in _KEPT_HEADERS if get(name)}
