"""The download cache every bake shares: a caching npm registry on loopback.

Against a registry of our own on loopback (the logic: what is kept, what is asked
again, what is served when the registry is down) and, on both backends, real bakes of
real npm installs from the public registry: the second bake fetches nothing."""

from __future__ import annotations

import http.server
import json
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from pytest_reactbench.plugin.options import environment_sandbox_options
from pytest_reactbench.sandbox.base import ImageRecipe, Limits
from pytest_reactbench.sandbox.downloads import DownloadCache, preferred_port
from pytest_reactbench.sandbox.registry import BUILTIN_BACKENDS
from tests.helpers import BACKENDS, LoopbackServer, http_get
from tests.sandbox.helpers import recipe

TARBALL = b"\x1f\x8b pretend tarball"


class Upstream:
    """A registry that serves one package and counts what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        upstream = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                upstream.asked.append(self.path)
                if self.path == "/left-pad":
                    body = json.dumps({"versions": {"1.0.0": {"dist": {
                        "tarball": f"{upstream.url}/left-pad/-/left-pad-1.0.0.tgz"}}}}).encode()
                    kind = "application/json"
                elif self.path == "/left-pad/-/left-pad-1.0.0.tgz":
                    body, kind = TARBALL, "application/octet-stream"
                else:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(200)
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
def upstream() -> Iterator[Upstream]:
    made = Upstream()
    yield made
    made.stop()




def test_tarballs_are_fetched_once_across_processes_and_metadata_points_here(
        tmp_path: Path, upstream: Upstream) -> None:
    first = DownloadCache(tmp_path / "downloads", upstream=upstream.url)
    status, body = http_get(first.url + "/left-pad")
    assert status == 200
    assert json.loads(body)["versions"]["1.0.0"]["dist"]["tarball"] == \
        f"{first.url}/left-pad/-/left-pad-1.0.0.tgz"
    assert http_get(first.url + "/left-pad/-/left-pad-1.0.0.tgz") == (200, TARBALL)
    served = first.url
    first.close()
    # Another process over the same directory: nothing is asked again. It serves on the
    # same port (the bakes' registry URL, in docker's key for each RUN step, is the same).
    second = DownloadCache(tmp_path / "downloads", upstream=upstream.url)
    assert second.url == f"http://127.0.0.1:{preferred_port(tmp_path / 'downloads')}" == served
    asked = len(upstream.asked)
    assert http_get(second.url + "/left-pad/-/left-pad-1.0.0.tgz") == (200, TARBALL)
    status, body = http_get(second.url + "/left-pad")
    assert json.loads(body)["versions"]["1.0.0"]["dist"]["tarball"].startswith(second.url + "/")
    assert len(upstream.asked) == asked
    assert second.snapshot().fetched_bytes == 0 and second.snapshot().hits == 2
    second.close()
    log = (tmp_path / "downloads" / "traffic.jsonl").read_text()
    logged = [json.loads(line) for line in log.splitlines()]
    assert [entry["fetched_bytes"] > 0 for entry in logged] == [True, False]


def test_a_missing_package_is_not_kept_and_stale_metadata_beats_a_registry_that_is_down(
        tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = DownloadCache(tmp_path / "downloads", upstream=upstream.url)
    try:
        assert http_get(cache.url + "/no-such-package")[0] == 404
        assert http_get(cache.url + "/no-such-package")[0] == 404
        assert upstream.asked.count("/no-such-package") == 2
        assert http_get(cache.url + "/left-pad")[0] == 200
        monkeypatch.setattr("pytest_reactbench.sandbox.downloads.METADATA_FRESH_SECONDS", 0.0)
        upstream.stop()
        status, body = http_get(cache.url + "/left-pad")
        assert status == 200 and b"left-pad-1.0.0.tgz" in body
        assert http_get(cache.url + "/never-seen")[0] == 502
    finally:
        cache.close()


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_second_bake_of_the_same_packages_downloads_nothing(tmp_path: Path, bake_cache: Path,
                                                                backend: str) -> None:
    made = BUILTIN_BACKENDS[backend](environment_sandbox_options(cache=bake_cache,
                                                                 download_cache=tmp_path / "downloads"))
    refs = []
    try:
        lines: list[str] = []
        for n in range(2):
            # A different key each time (the echo), the same install.
            r = recipe(tmp_path / str(n),
                       "FROM reactbench/system\nWORKDIR /app\n"
                       f"RUN echo {uuid.uuid4().hex} > /app/bake-id && npm install --no-audit --no-fund "
                       "is-number@7.0.0 && test -f node_modules/is-number/package.json\n",
                       timeout=600)
            refs.append(made.bake(r, lines.append))
        first, second = (b for b in made.bakes if b.how == "baked" and b.name == "test")
        assert first.fetched_bytes > 0 and first.served_bytes > 0, lines
        assert second.fetched_bytes == 0 and second.served_bytes > 0, lines
        assert any("MB served by the download cache" in line for line in lines)
    finally:
        if backend == "docker":
            for image in refs:
                made.client.images.remove(image.ref, force=True)  # type: ignore[attr-defined]
        made.close()


def test_concurrent_caches_over_one_directory_serve_whole_files(tmp_path: Path, upstream: Upstream) -> None:
    caches = [DownloadCache(tmp_path / "downloads", upstream=upstream.url) for _ in range(2)]
    # The second finds the cache's port taken, and serves on another.
    assert len({cache.url for cache in caches}) == 2
    answers: list[tuple[int, bytes]] = []

    def fetch(cache: DownloadCache) -> None:
        for _ in range(20):
            answers.append(http_get(cache.url + "/left-pad/-/left-pad-1.0.0.tgz"))

    threads = [threading.Thread(target=fetch, args=(cache,)) for cache in caches for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for cache in caches:
        cache.close()
    assert answers == [(200, TARBALL)] * 160
    assert not [p for p in (tmp_path / "downloads").rglob(".*") if p.is_file()]


IS_NUMBER = ("sha512-41Cifkg6e8TylSpdtTpeLVMqvSBEVzTttHvERD741+pnZ8ANv0004MRL43QKPDlK9cGvNp6NZWZU"
             "BlbGXYxxng==")
LOCKED = {
    "package.json": json.dumps({"name": "app", "version": "1.0.0", "dependencies": {"is-number": "7.0.0"}}),
    "pnpm-lock.yaml": f"""lockfileVersion: '9.0'

settings:
  autoInstallPeers: true
  excludeLinksFromLockfile: false

importers:

  .:
    dependencies:
      is-number:
        specifier: 7.0.0
        version: 7.0.0

packages:

  is-number@7.0.0:
    resolution: {{integrity: {IS_NUMBER}}}
    engines: {{node: '>=0.12.0'}}

snapshots:

  is-number@7.0.0: {{}}
"""}


def metadata_kept(downloads: Path) -> int:
    """How many package documents (not tarballs) the download cache fetched."""
    return sum(1 for meta in (downloads / "files").rglob("*.json")
               if "json" in json.loads(meta.read_text()).get("content-type", ""))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_locked_pnpm_install_fetches_tarballs_only_as_the_public_images_do(
        tmp_path: Path, bake_cache: Path, backend: str) -> None:
    """pnpm 11 and later check every entry of a frozen lockfile against the registry's
    full metadata (a release-age policy on by default), which the public images'
    package managers do not: a locked install fetches its tarballs only, and a sandbox
    (a verifier's, offline) runs pnpm the same way."""
    downloads = tmp_path / "downloads"
    made = BUILTIN_BACKENDS[backend](environment_sandbox_options(cache=bake_cache, download_cache=downloads))
    image = None
    try:
        # The system layer first (on docker its packages are packed through the cache).
        made.bake(recipe(tmp_path / "system", "FROM reactbench/system\n", timeout=600), lambda _: None)
        before = metadata_kept(downloads)
        r = recipe(tmp_path, "FROM reactbench/system\nWORKDIR /app\nCOPY . /app/\n"
                   f"RUN echo {uuid.uuid4().hex} > bake-id && pnpm install --frozen-lockfile "
                   "&& test -f node_modules/is-number/package.json\n", LOCKED, timeout=600)
        lines: list[str] = []
        image = made.bake(r, lines.append)
        assert metadata_kept(downloads) == before, lines[-20:]
        assert any((downloads / "files").rglob("*")), "the install did not go through the download cache"
        box = made.boot(image, network=False, limits=Limits(), labels={})
        try:
            policy = box.exec("pnpm config get minimum-release-age", cwd="/app", timeout=120)
        finally:
            box.close()
        assert policy.stdout.decode().strip() == "0", policy.text + policy.error_text
    finally:
        if backend == "docker" and image is not None:
            made.client.images.remove(image.ref, force=True)  # type: ignore[attr-defined]
        made.close()


def test_each_byte_is_counted_once_for_the_session_with_bakes_side_by_side(
        tmp_path: Path, upstream: Upstream, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two bakes of one worker at once, and a bake of another worker, through one cache
    directory: the session's packages are what the caches served, not the sum of each
    bake's figures (which count what a bake beside it fetched meanwhile)."""
    from pytest_reactbench.plugin import bakes
    from pytest_reactbench.sandbox.local import LocalBackend

    tarball = b"\x1f\x8b" + b"0" * 999_998  # a megabyte, as the summary counts
    monkeypatch.setattr(f"{__name__}.TARBALL", tarball)

    def backend() -> LocalBackend:
        made = LocalBackend(environment_sandbox_options(cache=tmp_path / "cache", image_map={}))
        made.downloads = DownloadCache(tmp_path / "downloads", upstream=upstream.url)
        return made

    def download(n: int) -> ImageRecipe:
        # Each its own key; the download half-way through the other's bake.
        return recipe(tmp_path / str(n), "FROM reactbench/system\n"
                      f"RUN echo {n} && sleep 1 && curl -sf \"${{npm_config_registry}}left-pad/-/"
                      "left-pad-1.0.0.tgz\" -o /app/left-pad.tgz && sleep 1\n")

    run = tmp_path / "run"
    first, second = backend(), backend()
    try:
        threads = [threading.Thread(target=first.bake, args=(download(n), lambda _: None)) for n in (1, 2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        second.bake(download(3), lambda _: None)
        baked = [b for b in first.bakes + second.bakes if b.how == "baked" and b.name == "test"]
        assert len(baked) == 3
        bakes.write_part(run, "gw0", first)
        bakes.write_part(run, "gw1", second)
    finally:
        first.close()
        second.close()
    records, traffic = bakes.merge_parts(run)
    assert traffic.served_bytes == 3 * len(tarball)
    assert len(tarball) <= traffic.fetched_bytes <= 2 * len(tarball)
    served = f"{3 * len(tarball) / 1e6:.1f} MB served"
    assert any(line.startswith(f"packages: {served}") for line in bakes.summary_lines(records, traffic))
    assert json.loads((run / "downloads.json").read_text())["served_bytes"] == 3 * len(tarball)
    # What the caches logged, the session's figure: one count of each byte.
    log = (tmp_path / "downloads" / "traffic.jsonl").read_text()
    logged = [json.loads(line) for line in log.splitlines()]
    assert sum(entry["served_bytes"] for entry in logged) == traffic.served_bytes


def test_a_client_that_hangs_up_is_no_traceback_and_a_burst_is_queued(
        capfd: pytest.CaptureFixture[str]) -> None:
    import http.server
    import socket
    import threading

    from pytest_reactbench.sandbox import downloads

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path == "/reset":
                raise ConnectionResetError(104, "Connection reset by peer")
            raise ValueError("a fault of the cache's own")

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = downloads._Server(("127.0.0.1", 0), Handler)
    assert server.request_queue_size >= 128  # pnpm's burst of connections waits in the backlog
    for path in ("/reset", "/bug"):
        thread = threading.Thread(target=server.handle_request)
        thread.start()
        with socket.create_connection(server.server_address[:2], timeout=10) as client:
            client.sendall(f"GET {path} HTTP/1.0\r\n\r\n".encode())
            client.recv(100)
        thread.join(10)
        err = capfd.readouterr().err
        assert ("Traceback" in err) == (path == "/bug"), (path, err)
    server.server_close()
