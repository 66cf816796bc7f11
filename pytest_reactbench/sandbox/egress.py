"""The egress gate every backend runs for an agent that declares model hosts: the
allowlisting proxy (`egress.cjs`), how a sandbox's commands are pointed at it, and
how its request records are read back."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

#: The gate between an agent that declares model hosts and the network.
EGRESS_SCRIPT = Path(__file__).with_name("egress.cjs")
EGRESS_PORT = 3128


def proxy_env(url: str) -> dict[str, str]:
    return {"HTTPS_PROXY": url, "HTTP_PROXY": url, "https_proxy": url, "http_proxy": url,
            "NO_PROXY": "localhost,127.0.0.1", "no_proxy": "localhost,127.0.0.1"}


def egress_lines(text: str) -> list[dict[str, Any]]:
    """The proxy's request records from its output (JSON lines among its other lines)."""
    seen = []
    for line in text.splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                record = json.loads(line)
                if isinstance(record, dict):
                    seen.append(record)
    return seen
