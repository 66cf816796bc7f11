"""One port of this host's loopback, served on another of its addresses: how a model
gateway on 127.0.0.1 reaches the egress proxy of a container, whose own 127.0.0.1 is
its own. Only that port: nothing else of the host's loopback is reachable through it."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
from collections.abc import Sequence

#: Names of a host's own loopback, as a base URL gives them.
LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})


def loopback_port(host: str) -> int | None:
    """The port of a model host that is a port of this host's loopback
    (`127.0.0.1:8080`), else None."""
    name, _, port = host.rpartition(":")
    return int(port) if name.strip("[]") in LOOPBACK_HOSTS and port.isdigit() else None


def loopback_ports(hosts: Sequence[str]) -> list[int]:
    """The ports of this host's loopback among `hosts`, each once."""
    return list(dict.fromkeys(port for port in map(loopback_port, hosts) if port is not None))


def with_loopback_names(hosts: Sequence[str]) -> list[str]:
    """`hosts`, with each port of this host's loopback under every name a base URL may
    give it (127.0.0.1, localhost, [::1]): one gateway, whichever name the agent's
    client uses or its proxy asks for."""
    named = list(hosts)
    for port in loopback_ports(hosts):
        named += [alias for alias in (f"127.0.0.1:{port}", f"localhost:{port}", f"[::1]:{port}")
                  if alias not in named]
    return named


def egress_refusals(hosts: Sequence[str], targets: Sequence[str]) -> list[str]:
    """Of `targets` (host:port), those the egress proxy over `hosts` would refuse: asked
    of the proxy's own code, before any sandbox, so that a model host the agent was
    given and the gate disagree on is a configuration error, not an API fault in every
    trial."""
    from pytest_reactbench.sandbox.egress import EGRESS_SCRIPT

    if not targets:
        return []
    proc = subprocess.run(["node", str(EGRESS_SCRIPT), "check", ",".join(with_loopback_names(hosts)),
                           *targets], capture_output=True, text=True, timeout=60)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"egress check exited {proc.returncode}: {proc.stderr.strip()}")
    return proc.stdout.split()


class LoopbackRelay:
    """Listens on `bind` (an address of this host a container can reach, e.g. the
    Docker bridge's) on a port of its choosing, and relays every connection to
    127.0.0.1:`target`; `close()` stops it and every connection it holds."""

    def __init__(self, bind: str, target: int, loopback: str = "127.0.0.1") -> None:
        self.target = (loopback, target)
        self._server = socket.create_server((bind, 0))
        self.address: tuple[str, int] = (bind, self._server.getsockname()[1])
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, name=f"reactbench-relay-{target}", daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._server.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        with self._lock:
            if self._closed:
                client.close()
                upstream.close()
                return
            self._open.update((client, upstream))
        pump = threading.Thread(target=self._pump, args=(upstream, client), daemon=True)
        pump.start()
        self._pump(client, upstream)
        pump.join()
        with self._lock:
            self._open.difference_update((client, upstream))
        client.close()
        upstream.close()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while chunk := source.recv(65536):
                sink.sendall(chunk)
        except OSError:
            pass
        with contextlib.suppress(OSError):
            sink.shutdown(socket.SHUT_WR)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            held = list(self._open)
        # A thread blocked in accept() keeps a closed socket listening: wake it first.
        with contextlib.suppress(OSError):
            self._server.shutdown(socket.SHUT_RDWR)
        self._server.close()
        for sock in held:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
