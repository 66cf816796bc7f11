"""The docker stand-ins hold what the public tasks assume of the public images."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_reactbench.plugin.options import environment_sandbox_options, setting
from pytest_reactbench.sandbox.base import ImageRecipe, Limits
from pytest_reactbench.sandbox.docker import DockerBackend
from pytest_reactbench.sandbox.docker.images import ROOT_IMAGE
from pytest_reactbench.sandbox.errors import BakeError
from tests.sandbox.helpers import recipe

pytestmark = pytest.mark.docker


def test_the_agents_image_has_the_public_toolchain(tmp_path: Path, docker_backend: DockerBackend) -> None:
    image = docker_backend.bake(recipe(tmp_path, (
        "ARG BASE_IMAGE=ghcr.io/millionco/react-bench-agents:latest\nFROM ${BASE_IMAGE}\n"
        # The working directory is not /app: the public tasks replace /app from it.
        'RUN test "$(pwd)" = / && test ! -e /app\n'), timeout=1800), lambda _: None)
    box = docker_backend.boot(image, network=False, limits=Limits(), labels={})
    try:
        result = box.exec(
            "node -e 'const [a, b] = process.versions.node.split(\".\").map(Number);"
            " process.exit(a > 22 || (a === 22 && b >= 13) ? 0 : 1)'"
            " && corepack --version && yarn --version && pnpm --version && npm --version"
            " && git --version && curl --version && unzip -v && python3 --version && make --version"
            # No agent CLI: an agent's own layer brings it when that agent runs.
            " && ! command -v claude && ! command -v codex"
            # Neither Mesa's drivers nor an init system, and apt's state is consistent.
            " && ! dpkg -s libllvm15 >/dev/null 2>&1 && ! dpkg -s systemd >/dev/null 2>&1"
            " && apt-get check -q >/dev/null", timeout=120)
        assert result.ok, result.text + result.error_text
        versions = result.text.splitlines()
        assert versions[1].startswith("1.") and versions[2].startswith("11.")  # yarn 1, pnpm 11
    finally:
        box.close()


def test_the_debian_root_is_slim_and_apt_installs(tmp_path: Path, docker_backend: DockerBackend) -> None:
    """The root under every image carries no apt lists or caches, manuals, documentation
    (copyright notices aside) or translations: in its own layer, not just hidden by the
    system layer's; and a task's `apt-get update && apt-get install` works as before."""
    docker_backend.bake(recipe(tmp_path, "FROM reactbench/system\n", timeout=1800), lambda _: None)
    left = docker_backend.client.containers.run(ROOT_IMAGE, [
        "sh", "-c", "find /var/lib/apt/lists /var/cache/apt /usr/share/man /usr/share/info"
                    " /usr/share/locale -type f ! -name lock ! -name locale.alias;"
                    " find /usr/share/doc -type f ! -name copyright"],
        remove=True)
    assert left.decode() == ""
    assert docker_backend.client.images.get(ROOT_IMAGE).attrs["Size"] < 100e6
    image = docker_backend.bake(recipe(tmp_path / "apt", (
        "FROM reactbench/system\n"
        "RUN apt-get update -q && apt-get install -y -q --no-install-recommends jq && jq --version\n"),
        timeout=1800), lambda _: None)
    assert image.ref


#: A pnpm the stand-ins do not carry, pinned as a project pins it.
PINNED_PNPM = "11.5.0"


def pinned_pnpm_recipe(tmp_path: Path, label: str) -> ImageRecipe:
    """(`label`: the variables of a bake are not in its key, so each bake here has
    a recipe of its own.)"""
    return recipe(tmp_path, (
        "ARG BASE_IMAGE=ghcr.io/millionco/react-bench-agents:latest\nFROM ${BASE_IMAGE}\n"
        "WORKDIR /app\n"
        f"RUN echo '{{\"name\": \"pinned\", \"packageManager\": \"pnpm@{PINNED_PNPM}\"}}' > package.json"
        f" && pnpm --version && echo {label}\n"), timeout=1800)


def test_a_registry_without_signatures_is_accepted_only_when_the_user_says_so(
        tmp_path: Path, docker_backend: DockerBackend) -> None:
    """pnpm 11 switches to a project's pinned pnpm only once npm's signature of it
    verifies. With --reactbench-unsigned-registry the bake and the offline sandbox run
    the pnpm they have; without it, on a registry that serves no signatures, the bake
    stops with a hint naming the option."""
    trusting = DockerBackend(environment_sandbox_options(cache=docker_backend.options.cache,
                                                         unsigned_registry=True))
    try:
        image = trusting.bake(pinned_pnpm_recipe(tmp_path / "trusting", "trusting"), lambda _: None)
        box = trusting.boot(image, network=False, limits=Limits(), labels={})
        try:
            offline = box.exec("cd /app && pnpm --version", timeout=120)
            assert offline.ok and offline.text.strip().startswith("11."), offline.text + offline.error_text
        finally:
            box.close()
    finally:
        trusting.close()
    strict = DockerBackend(environment_sandbox_options(cache=docker_backend.options.cache,
                                                       unsigned_registry=False))
    try:
        if setting("unsigned_registry"):  # this machine's registry: no signatures
            with pytest.raises(BakeError) as refused:
                strict.bake(pinned_pnpm_recipe(tmp_path / "strict", "strict"), lambda _: None)
            assert f"Refusing to run pnpm@{PINNED_PNPM}" in str(refused.value), refused.value
            assert "--reactbench-unsigned-registry" in str(refused.value), refused.value
        else:  # a registry with npm's signatures: the pinned pnpm verifies and runs
            strict.bake(pinned_pnpm_recipe(tmp_path / "strict", "strict"), lambda _: None)
    finally:
        strict.close()


#: Records a page with Playwright (the served ffmpeg encodes it) and prints the size.
RECORD_VIDEO = (
    "const { chromium } = require(\"playwright-core\");"
    "(async () => { const browser = await chromium.launch();"
    " const context = await browser.newContext({ recordVideo: { dir: \"/tmp/video\" } });"
    " const page = await context.newPage(); await page.setContent(\"<h1>recorded</h1>\");"
    " await page.waitForTimeout(800); const video = page.video(); await context.close();"
    " const file = await video.path(); await browser.close();"
    " console.log(\"video \" + require(\"fs\").statSync(file).size); })()"
    ".catch((error) => { console.error(error); process.exit(1); });"
)

#: Clears a WebGL canvas to green and reads a pixel back, naming the renderer.
WEBGL = (
    "const { chromium } = require(\"playwright-core\");"
    "(async () => { const browser = await chromium.launch(); const page = await browser.newPage();"
    " const found = await page.evaluate(() => { const gl = document.createElement(\"canvas\")"
    ".getContext(\"webgl\"); if (!gl) return \"none\"; gl.clearColor(0, 1, 0, 1);"
    " gl.clear(gl.COLOR_BUFFER_BIT); const px = new Uint8Array(4);"
    " gl.readPixels(0, 0, 1, 1, gl.RGBA, gl.UNSIGNED_BYTE, px);"
    " const info = gl.getExtension(\"WEBGL_debug_renderer_info\");"
    " const renderer = gl.getParameter(info.UNMASKED_RENDERER_WEBGL);"
    " return (renderer.includes(\"SwiftShader\") ? \"SwiftShader \" : renderer + \" \") + px.join(\",\"); });"
    " await browser.close(); console.log(\"webgl \" + found); })()"
    ".catch((error) => { console.error(error); process.exit(1); });"
)


def test_playwright_install_finds_chromium_and_ffmpeg_served(tmp_path: Path,
                                                               docker_backend: DockerBackend) -> None:
    """`playwright install chromium` in a verifier built FROM the base: nothing to
    download (the CDN is out of reach offline), the system's binaries are linked."""
    image = docker_backend.bake(recipe(tmp_path, (
        "ARG BASE_IMAGE=ghcr.io/millionco/react-bench-base:latest\nFROM ${BASE_IMAGE}\n"
        "WORKDIR /opt/harness\n"
        "RUN echo '{\"private\": true}' > package.json"
        " && npm install --no-audit --no-fund playwright-core@1.49.1\n"
        "RUN node node_modules/playwright-core/cli.js install chromium\n"
        "RUN test \"$(readlink /opt/ms-playwright/chromium-1148/chrome-linux/chrome)\" = /usr/bin/chromium"
        " && test \"$(readlink /opt/ms-playwright/ffmpeg-1010/ffmpeg-linux)\" = /usr/local/bin/ffmpeg\n"
    ), timeout=1800), lambda _: None)
    box = docker_backend.boot(image, network=False, limits=Limits(), labels={})
    try:
        probe = box.exec("node /opt/reactbench/playwright-probe.cjs /opt/harness", timeout=120)
        assert probe.ok and "Chromium" in probe.text, probe.text + probe.error_text
        # The ffmpeg served records: Playwright's video of a page is a WebM file.
        recorded = box.exec("cd /opt/harness && node -e '" + RECORD_VIDEO + "'", timeout=120)
        assert recorded.ok, recorded.text + recorded.error_text
        assert recorded.text.startswith("video ") and int(recorded.text.split()[1]) > 1000, recorded.text
        # WebGL without Mesa's drivers: Chromium renders it on its own SwiftShader.
        webgl = box.exec("cd /opt/harness && node -e '" + WEBGL + "'", timeout=120)
        assert webgl.ok, webgl.text + webgl.error_text
        assert webgl.text.strip() == "webgl SwiftShader 0,255,0,255"
    finally:
        box.close()


def test_a_missing_browser_fails_the_bake(tmp_path: Path, docker_backend: DockerBackend) -> None:
    with pytest.raises(BakeError, match=r"Dockerfile:4: .*\n(.|\n)*Chromium does not launch"):
        docker_backend.bake(recipe(tmp_path, (
            "ARG BASE_IMAGE=ghcr.io/millionco/react-bench-base:latest\nFROM ${BASE_IMAGE}\n"
            "ENV CHROMIUM_PATH=/nonexistent PLAYWRIGHT_BROWSERS_PATH=/tmp/empty-browsers\n"
            "RUN node /opt/reactbench/playwright-probe.cjs /app\n"), timeout=1800), lambda _: None)
