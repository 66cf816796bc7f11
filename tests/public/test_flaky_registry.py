"""An install without a lockfile resolves and downloads thousands of packages through
the download cache in one bake (a library's `pnpm install` with `lockfile=false`); the
registry behind it may fail one of those requests now and then (a 502 from its edge, a
connection reset). The cache asks again before it gives up, so one passing failure is
not a failed bake; what the registry keeps failing, or answers with a 404, still reaches
the package manager as it is."""

from __future__ import annotations

import http.server
import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_reactbench.sandbox.downloads import DownloadCache
from tests.helpers import LoopbackServer, http_get

PACKAGES = [f"pkg-{n}" for n in range(12)]


def tarball(name: str) -> bytes:
    return f"tarball of {name}".encode()


class FlakyRegistry:
    """Serves PACKAGES; fails the first request of each path, in turn with a 502, a
    dropped connection and a 503. `broken` paths fail every time."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.broken: set[str] = set()
        self._lock = threading.Lock()
        registry = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:
                with registry._lock:
                    first = self.path not in registry.asked
                    registry.asked.append(self.path)
                    turn = len(set(registry.asked)) % 3
                name = self.path.strip("/").split("/")[0]
                if name not in PACKAGES:
                    return self._send(404, b"{}")
                if first or self.path in registry.broken:
                    if turn == 1:
                        self.close_connection = True
                        self.connection.close()  # no answer at all
                        return None
                    return self._send(502 if turn == 0 else 503, b"bad gateway")
                if self.path.endswith(".tgz"):
                    return self._send(200, tarball(name), "application/octet-stream")
                meta = {"name": name, "versions": {"1.0.0": {"dist": {
                    "tarball": f"{registry.url}/{name}/-/{name}-1.0.0.tgz"}}}}
                return self._send(200, json.dumps(meta).encode(), "application/json")

            def _send(self, status: int, body: bytes, kind: str = "text/plain") -> None:
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.loopback = LoopbackServer(Handler)
        self.url = self.loopback.url

    def stop(self) -> None:
        self.loopback.stop()


@pytest.fixture
def registry() -> Iterator[FlakyRegistry]:
    made = FlakyRegistry()
    yield made
    made.stop()


@pytest.fixture
def cache(tmp_path: Path, registry: FlakyRegistry,
          monkeypatch: pytest.MonkeyPatch) -> Iterator[DownloadCache]:
    monkeypatch.setattr("pytest_reactbench.sandbox.downloads.RETRY_PAUSES", (0.05, 0.1), raising=False)
    made = DownloadCache(tmp_path / "downloads", upstream=registry.url)
    yield made
    made.close()




def test_an_install_through_a_registry_that_fails_each_request_once_gets_every_package(
        cache: DownloadCache, registry: FlakyRegistry) -> None:
    got: dict[str, tuple[int, int]] = {}

    def install(name: str) -> None:
        status, body = http_get(f"{cache.url}/{name}")
        if status != 200:
            got[name] = (status, 0)
            return
        url = json.loads(body)["versions"]["1.0.0"]["dist"]["tarball"]
        assert url.startswith(cache.url + "/")  # pointed back at the cache
        status_tgz, data = http_get(url)
        got[name] = (status, status_tgz if data == tarball(name) else -1)

    # As a package manager does: many packages at once.
    threads = [threading.Thread(target=install, args=(name,)) for name in PACKAGES]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert got == {name: (200, 200) for name in PACKAGES}
    for name in PACKAGES:  # each path failed once and was asked again once
        assert registry.asked.count(f"/{name}") == 2
        assert registry.asked.count(f"/{name}/-/{name}-1.0.0.tgz") == 2


def test_what_the_registry_keeps_failing_or_lacks_reaches_the_package_manager(
        cache: DownloadCache, registry: FlakyRegistry) -> None:
    registry.broken.add("/pkg-0/-/pkg-0-1.0.0.tgz")
    assert http_get(f"{cache.url}/pkg-0/-/pkg-0-1.0.0.tgz")[0] == 502
    assert registry.asked.count("/pkg-0/-/pkg-0-1.0.0.tgz") == 3  # once and twice again
    assert http_get(f"{cache.url}/no-such-package")[0] == 404
    assert registry.asked.count("/no-such-package") == 1  # a 404 is an answer


def test_kept_metadata_is_served_at_once_when_the_registry_fails_to_refresh_it(
        cache: DownloadCache, registry: FlakyRegistry, monkeypatch: pytest.MonkeyPatch) -> None:
    assert http_get(f"{cache.url}/pkg-1")[0] == 200
    monkeypatch.setattr("pytest_reactbench.sandbox.downloads.METADATA_FRESH_SECONDS", 0.0)
    registry.broken.add("/pkg-1")
    asked = registry.asked.count("/pkg-1")
    status, body = http_get(f"{cache.url}/pkg-1")
    assert status == 200 and b"pkg-1-1.0.0.tgz" in body
    assert registry.asked.count("/pkg-1") == asked + 1  # stale beats waiting
