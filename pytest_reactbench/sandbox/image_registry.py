"""Baked images shared between engines through a registry (`--reactbench-image-registry`).

An image's tag is the content hash of its recipe and inputs, so the registry needs no
index: before a bake, the backend pulls `HOST[:PORT]/PREFIX/<name>:<key>`; after one, it
pushes it. The registry is a cache: a registry that is down or refuses costs one
warning and the bake goes on as if there were none. Credentials are the engine's own
(`docker login`, read by docker-py from ~/.docker/config.json).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: host, an optional port, then one or more lowercase path components.
_REGISTRY = re.compile(
    r"^(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9a-fA-F:]+\])(?::(?P<port>\d{1,5}))?"
    r"/(?P<prefix>[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)$"
)

#: What a registry answers for a tag it does not hold (a miss, not a failure).
_MISSING = re.compile(r"manifest unknown|not found|does not exist", re.IGNORECASE)
#: ... unless the registry could not be reached at all to say so.
_UNREACHABLE = re.compile(r"no such host|connection refused|dial tcp|timeout|unauthorized|denied",
                          re.IGNORECASE)


class RegistryUnavailable(Exception):
    """The registry is down, refuses us, or broke a transfer; the text says which."""


def parse_image_registry(value: str, source: str) -> str:
    """`HOST[:PORT]/PREFIX` checked, or a ValueError naming `source`."""
    value = value.strip().rstrip("/")
    if not value:
        return ""
    if "://" in value:
        raise ValueError(f"{source}: {value!r} must be HOST[:PORT]/PREFIX, without a scheme "
                         "(the engine chooses https, or http for a registry on loopback)")
    match = _REGISTRY.match(value)
    if match is None or "/" not in value:
        raise ValueError(f"{source}: {value!r} must be HOST[:PORT]/PREFIX, e.g. "
                         "registry.example.com:5000/reactbench (a lowercase path, no tag)")
    port = match.group("port")
    if port is not None and not 0 < int(port) < 65536:
        raise ValueError(f"{source}: {value!r}: port {port} is out of range")
    return value


@dataclass(frozen=True)
class ImageRegistry:
    """A registry prefix and how our tags map into it."""

    prefix: str

    def remote(self, local: str) -> str:
        """The registry's name of a local tag: `reactbench/x:key` -> `PREFIX/x:key`."""
        repository, _, tag = local.rpartition(":")
        name = repository.removeprefix("reactbench/")
        return f"{self.prefix}/{name}:{tag}"


def is_missing(error: str) -> bool:
    """Whether a pull's error says the registry does not hold the tag (a miss), rather
    than that the registry could not be asked."""
    return bool(_MISSING.search(error)) and not _UNREACHABLE.search(error)
