"""What a backend is made from: `SandboxOptions`, whose values the option table
(plugin/options.py) resolves from flags, ini keys and the environment; this layer reads
no setting from the environment itself, it is given each one."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pytest_reactbench.sandbox.mirrors import GitMirror
from pytest_reactbench.sandbox.recipes import DEFAULT_IMAGE_MAP

HOST_CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")

#: Which side of the image map a bake uses for a public base image: the public image
#: when the engine has it or can pull it, else its stand-in (`auto`); only the public
#: image (`public`: a bake fails if it cannot be had); only the stand-in (`stand-in`).
ImagesMode = Literal["auto", "public", "stand-in"]
IMAGES_MODES: tuple[ImagesMode, ...] = ("auto", "public", "stand-in")


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return Path(base) / "reactbench"


def default_ca_bundle() -> Path | None:
    """The default of `--reactbench-ca-bundle`: bakes trust what the host trusts (a
    TLS-inspecting proxy's CA included, when it is installed there)."""
    return HOST_CA_BUNDLE if HOST_CA_BUNDLE.is_file() else None


#: An image registry (`--reactbench-image-registry`): host, an optional port, then one
#: or more lowercase path components.
_REGISTRY = re.compile(
    r"^(?P<host>[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9a-fA-F:]+\])(?::(?P<port>\d{1,5}))?"
    r"/(?P<prefix>[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*)$"
)


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


YES = ("1", "true", "yes", "on")
NO = ("0", "false", "no", "off", "")


def parse_yes(text: str, source: str) -> bool:
    """A yes-or-no setting's text (1/0, true/false, yes/no, on/off)."""
    value = text.strip().lower()
    if value not in YES + NO:
        raise ValueError(f"{source}: {text!r} is not a yes or no (1/0, true/false, yes/no, on/off)")
    return value in YES


#: What docker-py reaches an engine through.
DOCKER_SCHEMES = ("unix://", "tcp://", "ssh://", "npipe://")


def parse_docker_hosts(values: list[str], source: str) -> tuple[str, ...]:
    """Engine URLs, each once, in order."""
    hosts: list[str] = []
    for value in values:
        url = value.strip()
        if not url.startswith(DOCKER_SCHEMES):
            raise ValueError(f"{source}: {value!r} is not an engine URL ({', '.join(DOCKER_SCHEMES)})")
        if url not in hosts:
            hosts.append(url)
    return tuple(hosts)


def images_mode(value: str, source: str) -> ImagesMode:
    if value not in IMAGES_MODES:
        raise ValueError(f"{source}: {value!r} is not one of {', '.join(IMAGES_MODES)}")
    return value


#: What makes the package managers accept a registry that serves no npm signatures (a
#: mirror's, a company's proxy): corepack skips its signature check, and pnpm runs as
#: installed where it would switch to a project's pinned version only once its
#: signature verified. In bakes and sandboxes alike: a verifier runs the pnpm its bake
#: ran (offline, it could not switch anyway).
UNSIGNED_REGISTRY_ENV: Mapping[str, str] = {
    "COREPACK_INTEGRITY_KEYS": "0", "pnpm_config_pm_on_fail": "ignore"}

#: The package managers as the public images run them, in bakes and sandboxes: no
#: release-age policy (pnpm 11 enables one by default and checks every lockfile entry
#: of a frozen install against the registry's full metadata, its publish time: a
#: download a locked install does not need at bake time, and a lookup an offline
#: verifier cannot make at grade time), and no look for a newer pnpm.
PACKAGE_MANAGER_ENV: Mapping[str, str] = {"pnpm_config_minimum_release_age": "0",
                                          "pnpm_config_update_notifier": "false"}


@dataclass(frozen=True)
class SandboxOptions:
    """Everything a backend is made from."""

    #: Where baked images, locks and build contexts live (shared by xdist workers).
    cache: Path = field(default_factory=default_cache)
    #: Public image name -> stand-in recipe (under images/, or a directory) or image.
    image_map: Mapping[str, str] = field(default_factory=lambda: dict(DEFAULT_IMAGE_MAP))
    #: A CA bundle that downloads during bakes trust.
    ca_bundle: Path | None = None
    #: Bakes and sandboxes accept a package registry that serves no npm signatures (a
    #: mirror's): UNSIGNED_REGISTRY_ENV.
    unsigned_registry: bool = False
    images: ImagesMode = "auto"
    #: Git URL prefixes fetched from local mirrors during bakes (`--reactbench-git-mirror`).
    git_mirrors: tuple[GitMirror, ...] = ()
    #: Where baked images are shared between engines (`HOST[:PORT]/PREFIX`), or "".
    image_registry: str = ""
    #: The host cache of package downloads that every bake shares (npm, pnpm, yarn),
    #: or None for none.
    download_cache: Path | None = None
    @property
    def package_manager_env(self) -> dict[str, str]:
        """The package managers' variables for bakes and sandboxes: PACKAGE_MANAGER_ENV,
        and those of `unsigned_registry`."""
        return {**PACKAGE_MANAGER_ENV, **(UNSIGNED_REGISTRY_ENV if self.unsigned_registry else {})}

    #: Who owns the sandboxes (host:pid by default): a later run removes those of
    #: owners that died.
    owner: str = ""
    #: A folder every process of the session shares (xdist's workers), where what one
    #: learned is kept for the others: the public images that could not be had. None:
    #: the one process keeps it.
    session_dir: Path | None = None
    #: The docker backend's engines: one is one engine, several are a pool; none is
    #: DOCKER_HOST (or the local socket).
    docker_hosts: tuple[str, ...] = ()
