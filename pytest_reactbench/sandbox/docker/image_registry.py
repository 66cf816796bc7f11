"""Baked images shared between engines through a registry (`--reactbench-image-registry`).

An image's tag is the content hash of its recipe and inputs, so the registry needs no
index: before a bake, the backend pulls `HOST[:PORT]/PREFIX/<name>:<key>`; after one, it
pushes it. The registry is a cache: a registry that is down or refuses costs one
warning and the bake goes on as if there were none (the option's value is checked by
`sandbox/options.py`, which every backend reads). Credentials are the engine's own
(`docker login`, read by docker-py from ~/.docker/config.json).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: What a registry answers for a tag it does not hold (a miss, not a failure).
_MISSING = re.compile(r"manifest unknown|not found|does not exist", re.IGNORECASE)
#: ... unless the registry could not be reached at all to say so.
_UNREACHABLE = re.compile(r"no such host|connection refused|dial tcp|timeout|unauthorized|denied",
                          re.IGNORECASE)


class RegistryUnavailable(Exception):
    """The registry is down, refuses us, or broke a transfer; the text says which."""


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
