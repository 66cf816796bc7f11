"""Declared model hosts are the only network an agent gets, on both backends."""

from __future__ import annotations

import http.server
import ipaddress
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pytest_reactbench.plugin.options import environment_sandbox_options
from pytest_reactbench.sandbox.base import Limits
from pytest_reactbench.sandbox.docker import DockerBackend
from pytest_reactbench.sandbox.egress import EGRESS_PORT
from pytest_reactbench.sandbox.local import LocalBackend
from tests.sandbox.helpers import recipe

# A request through the proxy named by the sandbox's environment; prints status and body.
CLIENT = """
const http = require("http");
const proxy = new URL(process.env.HTTP_PROXY);
const req = http.request({host: proxy.hostname, port: proxy.port, method: "GET", path: process.argv[1]},
  (res) => {
    let b = "";
    res.on("data", (c) => b += c);
    res.on("end", () => console.log(res.statusCode, b.trim()));
  });
req.on("error", (e) => console.log("ERR", e.code));
req.end();
"""


@pytest.fixture(scope="module")
def server() -> Iterator[int]:
    class Hello(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"model says hi")

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hello)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()


@pytest.fixture(scope="module")
def host_server() -> Iterator[int]:
    """A server on every address of this host (as a gateway a user runs beside the
    engine may be): what an agent that ignores the proxy would reach."""
    httpd = http.server.ThreadingHTTPServer(("0.0.0.0", 0), http.server.SimpleHTTPRequestHandler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield httpd.server_address[1]
    httpd.shutdown()


def direct(box, url: str) -> str:  # type: ignore[no-untyped-def]
    """A request that ignores every proxy variable: curl's HTTP status, 000 for none."""
    return box.exec(["curl", "--noproxy", "*", "-sS", "-m", "5", "-o", "/dev/null", "-w", "%{http_code}",
                     url], timeout=30).stdout.decode().strip()


def _gateway(network: dict[str, Any]) -> str:
    """A Docker network's gateway address (the engine leaves it out of some configs:
    then the first address of the subnet, which is the one it uses)."""
    config = network["IPAM"]["Config"][0]
    return str(config.get("Gateway") or next(ipaddress.ip_network(config["Subnet"]).hosts()))


def fetch(box, url: str) -> str:  # type: ignore[no-untyped-def]
    return box.exec(["node", "-e", CLIENT, url], timeout=30).text.strip()


def test_local_egress_reaches_only_the_declared_hosts(tmp_path: Path, bake_cache: Path,
                                                      server: int) -> None:
    backend = LocalBackend(environment_sandbox_options(cache=bake_cache, image_map={}))
    image = backend.bake(recipe(tmp_path, "FROM reactbench/system\n"), lambda _: None)
    box = backend.boot(image, network=False, limits=Limits(), labels={}, egress=("127.0.0.1",))
    try:
        assert box.exec("echo $HTTPS_PROXY").text.strip() == f"http://127.0.0.1:{EGRESS_PORT}"
        assert fetch(box, f"http://127.0.0.1:{server}/") == "200 model says hi"
        assert fetch(box, "http://not-allowed.example/") == (
            "403 egress to not-allowed.example is not allowed")
        # No way around the proxy: the sandbox's own loopback has nothing on that port.
        around = box.exec(["node", "-e", f"require('http').get('http://127.0.0.1:{server}/')"
                           ".on('error', e => console.log(e.code))"], timeout=30)
        assert around.text.strip() == "ECONNREFUSED"
        # And it has no other network: not the host's other addresses, not the internet,
        # not a name.
        assert direct(box, "http://172.17.0.1/") == "000"
        assert direct(box, "http://1.1.1.1/") == "000"
        resolved = box.exec("getent hosts example.com || echo unresolved", timeout=30).text.strip()
        assert resolved == "unresolved", resolved
    finally:
        box.close()
    assert box.egress is not None and box.egress.poll() is not None


@pytest.mark.docker
def test_docker_egress_reaches_only_the_declared_hosts(tmp_path: Path, bake_cache: Path,
                                                       host_server: int) -> None:
    backend = DockerBackend(environment_sandbox_options(cache=bake_cache,
                                                        ca_bundle=Path("/etc/ssl/certs/ca-certificates.crt")))
    image = backend.bake(recipe(tmp_path, "FROM reactbench/system\n", timeout=1800), lambda _: None)
    box = backend.boot(image, network=False, limits=Limits(), labels={"task": "egress"},
                       egress=("127.0.0.1",))
    try:
        gate = box.gate
        assert gate is not None
        # A model host stand-in inside the proxy's own network namespace.
        gate.proxy.exec_run(["node", "-e", "require('http').createServer((q, r) => "
                             "r.end('model says hi')).listen(8080, '127.0.0.1')"], detach=True)
        # The stand-in starts in the background: give it a few seconds to listen.
        deadline = time.monotonic() + 15
        answer = fetch(box, "http://127.0.0.1:8080/")
        while not answer.endswith("model says hi") and time.monotonic() < deadline:
            time.sleep(0.3)
            answer = fetch(box, "http://127.0.0.1:8080/")
        assert answer.endswith("model says hi"), answer
        assert fetch(box, "http://not-allowed.example/") == (
            "403 egress to not-allowed.example is not allowed")
        # The agent's only network is internal: the engine routes nothing out of it.
        gate.network.reload()
        assert gate.network.attrs["Internal"] is True
        attached = backend.api.inspect_container(box.container.id)["NetworkSettings"]["Networks"]
        assert list(attached) == [gate.network.name]
        # Around the proxy, nothing answers: not the host (on the default bridge's
        # address, or the agent network's own gateway), not the internet.
        import docker

        client = docker.from_env()
        bridge = _gateway(client.networks.get("bridge").attrs)
        own = _gateway(gate.network.attrs)
        client.close()
        assert direct(box, f"http://{bridge}:{host_server}/") == "000"
        assert direct(box, f"http://{own}:{host_server}/") == "000"
        assert direct(box, "http://1.1.1.1/") == "000"
        # Nor another container on the default bridge (the proxy's own address there,
        # a server listening on it), nor a name off the list.
        networks = backend.api.inspect_container(gate.proxy.id)["NetworkSettings"]["Networks"]
        gate.proxy.exec_run(["node", "-e", "require('http').createServer((q, r) => r.end('hi'))"
                             ".listen(8081, '0.0.0.0')"], detach=True)
        assert direct(box, f"http://{networks['bridge']['IPAddress']}:8081/") == "000"
        resolved = box.exec("getent hosts example.com || echo unresolved", timeout=30).text.strip()
        assert resolved == "unresolved", resolved
        # The proxy, its one peer, still answers.
        assert direct(box, f"http://egress:{EGRESS_PORT}/") != "000"
    finally:
        box.close()
        backend.close()
    import docker

    client = docker.from_env()
    assert client.containers.list(all=True, filters={"name": gate.proxy.name}) == []
    assert client.networks.list(names=[gate.network.name]) == []


@pytest.mark.docker
def test_docker_egress_reaches_a_gateway_on_the_host_loopback_and_only_its_port(
        tmp_path: Path, bake_cache: Path, server: int) -> None:
    backend = DockerBackend(environment_sandbox_options(cache=bake_cache,
                                                        ca_bundle=Path("/etc/ssl/certs/ca-certificates.crt")))
    image = backend.bake(recipe(tmp_path, "FROM reactbench/system\n", timeout=1800), lambda _: None)
    # `server` listens on this host's 127.0.0.1 only, as a local gateway does.
    # Declared as `localhost`: any loopback name of the port is the same gateway.
    box = backend.boot(image, network=False, limits=Limits(), labels={"task": "egress"},
                       egress=(f"localhost:{server}",))
    try:
        assert box.gate is not None and len(box.gate.relays) == 1
        assert fetch(box, f"http://127.0.0.1:{server}/") == "200 model says hi"
        assert fetch(box, f"http://localhost:{server}/") == "200 model says hi"
        assert direct(box, f"http://localhost:{server}/") == "200"
        # Another port of the host's loopback is not the gateway's.
        assert fetch(box, f"http://127.0.0.1:{server + 1 if server < 65535 else server - 1}/").startswith(
            "403 egress to 127.0.0.1")
        # A client that skips the proxy for 127.0.0.1 (NO_PROXY) finds the gateway there
        # too, tunnelled through the proxy; no other port of the host's loopback.
        assert direct(box, f"http://127.0.0.1:{server}/") == "200"
        assert direct(box, f"http://127.0.0.1:{server + 1 if server < 65535 else server - 1}/") == "000"
        # What the proxy saw, for the trial's record: the gateway's answers, the refusal.
        seen = box.egress_requests()
        assert {"method": "GET", "host": "127.0.0.1", "port": server, "status": 200} in [
            {k: v for k, v in r.items() if k != "t"} for r in seen], seen
        assert any(r.get("refused") for r in seen), seen
    finally:
        relay = box.gate.relays[0] if box.gate else None
        box.close()
        backend.close()
    # The relay went with the sandbox.
    assert relay is not None
    with pytest.raises(OSError):
        socket.create_connection(relay.address, timeout=2).close()


def test_local_egress_reaches_a_gateway_on_the_host_loopback_and_only_its_port(
        tmp_path: Path, bake_cache: Path, server: int) -> None:
    backend = LocalBackend(environment_sandbox_options(cache=bake_cache, image_map={}))
    image = backend.bake(recipe(tmp_path, "FROM reactbench/system\n"), lambda _: None)
    # Declared as `localhost`: any loopback name of the port is the same gateway.
    box = backend.boot(image, network=False, limits=Limits(), labels={}, egress=(f"localhost:{server}",))
    try:
        assert fetch(box, f"http://127.0.0.1:{server}/") == "200 model says hi"
        assert direct(box, f"http://127.0.0.1:{server}/") == "200"
        assert fetch(box, f"http://localhost:{server}/") == "200 model says hi"
        assert direct(box, f"http://localhost:{server}/") == "200"
        other = server + 1 if server < 65535 else server - 1
        assert fetch(box, f"http://127.0.0.1:{other}/").startswith("403 egress to 127.0.0.1")
        assert direct(box, f"http://127.0.0.1:{other}/") == "000"
        seen = box.egress_requests()
        assert {"method": "GET", "host": "127.0.0.1", "port": server, "status": 200} in [
            {k: v for k, v in r.items() if k != "t"} for r in seen], seen
        assert {"method": "GET", "host": "127.0.0.1", "port": other, "refused": True} in [
            {k: v for k, v in r.items() if k != "t"} for r in seen], seen
    finally:
        box.close()


def test_the_gate_agrees_with_every_spelling_of_a_declared_base_url() -> None:
    from pytest_reactbench.agents.command import base_url_hosts, base_url_targets
    from pytest_reactbench.sandbox.relay import egress_refusals

    for url in ("http://localhost:18080/v1", "http://127.0.0.1:18080", "http://[::1]:18080/v1",
                "https://Gateway.Example.:8443/v1", "https://api.example.com/"):
        env = {"OPENAI_BASE_URL": url}
        assert egress_refusals(base_url_hosts(env), base_url_targets(env)) == [], url
    # The same question answered no where the gate would say no.
    assert egress_refusals(["127.0.0.1:18080"], ["127.0.0.1:9999", "[::1]:18080"]) == ["127.0.0.1:9999"]
