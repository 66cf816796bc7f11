"""The docker stand-ins hold what the public tasks assume of the public images."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_reactbench.sandbox.base import BakeError, Limits
from pytest_reactbench.sandbox.docker import DockerBackend
from pytest_reactbench.sandbox.options import SandboxOptions, default_ca_bundle
from tests.sandbox.helpers import recipe

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def backend() -> DockerBackend:
    b = DockerBackend(SandboxOptions(cache=Path.home() / ".cache" / "reactbench",
                                     ca_bundle=default_ca_bundle()))
    yield b
    b.close()


def test_the_agents_image_has_the_public_toolchain(tmp_path: Path, backend: DockerBackend) -> None:
    image = backend.bake(recipe(tmp_path, (
        "ARG BASE_IMAGE=ghcr.io/millionco/react-bench-agents:latest\nFROM ${BASE_IMAGE}\n"
        # The working directory is not /app: the public tasks replace /app from it.
        'RUN test "$(pwd)" = / && test ! -e /app\n'), timeout=1800), lambda _: None)
    box = backend.boot(image, network=False, limits=Limits(), labels={})
    try:
        result = box.exec(
            "node -e 'const [a, b] = process.versions.node.split(\".\").map(Number);"
            " process.exit(a > 22 || (a === 22 && b >= 13) ? 0 : 1)'"
            " && corepack --version && yarn --version && pnpm --version && npm --version"
            " && git --version && curl --version && unzip -v && python3 --version && make --version"
            " && claude --version && codex --version", timeout=120)
        assert result.ok, result.text + result.error_text
        versions = result.text.splitlines()
        assert versions[1].startswith("1.") and versions[2].startswith("11.")  # yarn 1, pnpm 11
    finally:
        box.close()


def test_playwright_install_finds_chromium_and_ffmpeg_served(tmp_path: Path,
                                                               backend: DockerBackend) -> None:
    """`playwright install chromium` in a verifier built FROM the base: nothing to
    download (the CDN is out of reach offline), the system's binaries are linked."""
    image = backend.bake(recipe(tmp_path, (
        "ARG BASE_IMAGE=ghcr.io/millionco/react-bench-base:latest\nFROM ${BASE_IMAGE}\n"
        "WORKDIR /opt/harness\n"
        "RUN echo '{\"private\": true}' > package.json"
        " && npm install --no-audit --no-fund playwright-core@1.49.1\n"
        "RUN node node_modules/playwright-core/cli.js install chromium\n"
        "RUN test \"$(readlink /opt/ms-playwright/chromium-1148/chrome-linux/chrome)\" = /usr/bin/chromium"
        " && test \"$(readlink /opt/ms-playwright/ffmpeg-1010/ffmpeg-linux)\" = /usr/bin/ffmpeg\n"
    ), timeout=1800), lambda _: None)
    box = backend.boot(image, network=False, limits=Limits(), labels={})
    try:
        probe = box.exec("node /opt/reactbench/playwright-probe.cjs /opt/harness", timeout=120)
        assert probe.ok and "Chromium" in probe.text, probe.text + probe.error_text
    finally:
        box.close()


def test_a_missing_browser_fails_the_bake(tmp_path: Path, backend: DockerBackend) -> None:
    with pytest.raises(BakeError, match=r"Dockerfile:4: .*\n(.|\n)*Chromium does not launch"):
        backend.bake(recipe(tmp_path, (
            "ARG BASE_IMAGE=ghcr.io/millionco/react-bench-base:latest\nFROM ${BASE_IMAGE}\n"
            "ENV CHROMIUM_PATH=/nonexistent PLAYWRIGHT_BROWSERS_PATH=/tmp/empty-browsers\n"
            "RUN node /opt/reactbench/playwright-probe.cjs /app\n"), timeout=1800), lambda _: None)
