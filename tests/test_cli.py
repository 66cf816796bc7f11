"""The `reactbench` command, for real on the local backend."""

import subprocess
from pathlib import Path

from pytest_reactbench.cli import main
from pytest_reactbench.sandbox.base import Limits
from pytest_reactbench.sandbox.local import LocalBackend
from pytest_reactbench.sandbox.recipes import DEFAULT_IMAGE_MAP


def test_images_builds_the_playwright_stand_in(capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cache = Path.home() / ".cache" / "reactbench"
    public = "ghcr.io/millionco/react-bench-verifier-playwright"
    assert main(["images", "--sandbox", "local", "--cache", str(cache), "--only", public]) == 0
    out = capsys.readouterr().out
    assert public in out and ("(built)" in out or "(reused)" in out)
    # Chromium sits where the scaffold's Playwright looks for it, offline.
    backend = LocalBackend(cache, DEFAULT_IMAGE_MAP)
    directory = Path(__file__).resolve().parents[1] / "images" / "react-bench-verifier-playwright"
    from pytest_reactbench.sandbox.base import ImageRecipe

    image = backend.bake(ImageRecipe(directory.name, directory / "Dockerfile", directory),
                         lambda _: None)
    box = backend.boot(image, network=False, limits=Limits(), labels={})
    try:
        box.write_file("/app/e2e/home.spec.ts", (
            'import { expect, test } from "@playwright/test";\n'
            'test("renders", async ({ page }) => {\n'
            '  await page.setContent("<h1>ok</h1>");\n'
            '  await expect(page.getByRole("heading")).toHaveText("ok");\n'
            "});\n"))
        # The scaffold's config names Chromium itself; a bare config relies on the links.
        box.write_file("/app/bare.config.ts", 'export default { testDir: "./e2e" };\n')
        result = box.exec("pnpm exec playwright test -c bare.config.ts", cwd="/app", timeout=300)
        assert result.ok, result.text + result.error_text
        assert "1 passed" in result.text
    finally:
        box.close()


def test_images_rejects_a_bad_map_entry(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["images", "--image-map", "nonsense"]) == 2
    assert "must be FROM=TO" in capsys.readouterr().err


def test_console_script_is_installed() -> None:
    result = subprocess.run(["reactbench", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "images" in result.stdout


def test_validate_checks_schema_and_controls(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    from tests.conftest import write_task

    good = write_task(tmp_path, "good")
    lazy = write_task(tmp_path, "lazy", solve_sh="#!/bin/bash\ntrue\n")  # the oracle does nothing
    broken = write_task(tmp_path, "broken")
    (broken / "task.toml").write_text('version = "1.0"\n[verifier]\ntimeout_sec = 0\n')
    assert main(["validate", str(good), str(lazy), str(broken)]) == 1
    out = capsys.readouterr().out
    assert f"INVALID {broken / 'task.toml'}: verifier.timeout_sec: Input should be greater than 0" in out
    assert "ok      good: oracle passed" in out and "ok      good: nop failed" in out
    assert "WRONG   lazy: oracle failed (must be passed)" in out
    assert main(["validate", str(good)]) == 0
