"""The `reactbench` command, for real on the local backend."""

import json
import subprocess
from pathlib import Path

import pytest

from pytest_reactbench.cli import main
from pytest_reactbench.plugin.options import environment_sandbox_options
from pytest_reactbench.sandbox.base import Limits
from pytest_reactbench.sandbox.local import LocalBackend


@pytest.mark.slow
def test_images_builds_the_playwright_stand_in(capsys, tmp_path: Path,  # type: ignore[no-untyped-def]
                                               bake_cache: Path) -> None:
    cache = bake_cache  # the session's, never the user's
    public = "ghcr.io/millionco/react-bench-verifier-playwright"
    assert main(["images", "--sandbox", "local", "--cache", str(cache), "--only", public]) == 0
    out = capsys.readouterr().out
    # The verifier base's stand-in serves the Playwright verifier's name.
    assert f"{public} " in out and "(images/react-bench-verifier-base)" in out
    assert "local: 1 of 1 image(s) are stand-ins: results on them are not formal" in out
    # Each image found baked is said once, however many FROMs lead to it.
    reused = [line.split("] ", 1)[1] for line in out.splitlines() if "reusing baked image" in line]
    assert len(reused) == len(set(reused)), reused
    # For scripts: the same as a document on stdout, progress on stderr.
    assert main(["images", "--sandbox", "local", "--cache", str(cache), "--only", public, "--json"]) == 0
    said = capsys.readouterr()
    ((entry,),) = json.loads(said.out).values()
    assert entry["name"] == public and entry["origin"] == "stand-in" and entry["image"]
    assert entry["recipe"] == "images/react-bench-verifier-base" and "reusing baked image" in said.err
    # Chromium sits where the scaffold's Playwright looks for it, offline.
    backend = LocalBackend(environment_sandbox_options(cache=cache))
    directory = Path(__file__).resolve().parents[1] / "images" / "react-bench-verifier-base"
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


def test_an_image_and_its_latest_tag_are_one_name() -> None:
    from pytest_reactbench.sandbox.recipes import tagged

    assert tagged("ghcr.io/o/app") == tagged("ghcr.io/o/app:latest") == "ghcr.io/o/app:latest"
    assert tagged("localhost:5000/o/app") == "localhost:5000/o/app:latest"
    assert tagged("o/app:1.2") == "o/app:1.2" and tagged("o/app@sha256:ab") == "o/app@sha256:ab"


def test_images_rejects_a_bad_map_entry(capsys) -> None:  # type: ignore[no-untyped-def]
    assert main(["images", "--image-map", "nonsense"]) == 2
    assert "must be FROM=TO" in capsys.readouterr().err


def test_images_prune_removes_what_no_run_used(capsys, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from tests.sandbox.helpers import recipe

    backend = LocalBackend(environment_sandbox_options(cache=tmp_path / "cache"))
    try:
        image = backend.bake(recipe(tmp_path, "FROM reactbench/system\nRUN echo x > /app/x\n"),
                             lambda _: None)
    finally:
        backend.close()
    args = ["images", "--sandbox", "local", "--cache", str(tmp_path / "cache"), "--prune"]
    assert main(args) == 0  # a week by default: just used, it stays
    assert "local: removed 0 image(s) unused for 7 day(s)" in capsys.readouterr().out
    assert main([*args, "0"]) == 0
    out = capsys.readouterr().out
    assert f"removed {image.ref}" in out and "local: removed 1 image(s) unused for 0 day(s)" in out
    assert not (tmp_path / "cache" / "local" / "images" / image.ref).exists()


def test_console_script_is_installed() -> None:
    result = subprocess.run(["reactbench", "--help"], capture_output=True, text=True)
    assert result.returncode == 0 and "images" in result.stdout


def test_validate_checks_schema_and_controls(tmp_path: Path, capsys, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from tests.helpers import CHECKS_OUT, write_task

    monkeypatch.chdir(tmp_path)
    good = write_task(tmp_path, "good")
    # The oracle does nothing, and the verifier's log is coloured.
    coloured = CHECKS_OUT.replace("#!/bin/bash\n", "#!/bin/bash\nprintf '\\033[31mred\\033[0m\\n'\n")
    lazy = write_task(tmp_path, "lazy", solve_sh="#!/bin/bash\ntrue\n", test_sh=coloured)
    broken = write_task(tmp_path, "broken")
    (broken / "task.toml").write_text('version = "1.0"\n[verifier]\ntimeout_sec = 0\n')
    # A typo in a Dockerfile fails the schema check, before any control runs.
    typo = write_task(tmp_path, "typo")
    (typo / "tests" / "Dockerfile").write_text("FROM reactbench/system\nCOPPY test.sh /tests/test.sh\n")
    assert main(["validate", str(good), str(lazy), str(broken), str(typo)]) == 1
    out = capsys.readouterr().out
    assert f"INVALID {broken / 'task.toml'}: verifier.timeout_sec: Input should be greater than 0" in out
    assert (f"INVALID {typo / 'tests' / 'Dockerfile'}:2: unknown instruction COPPY (did you mean COPY?)\n"
            in out)
    assert "typo: oracle" not in out and f"schema  ok   {typo}" not in out
    assert "ok      good: oracle passed\n" in out
    assert "ok      good: nop failed: tests: failed gate tests" in out
    # A wrong control says why, and the record it names is still there.
    assert "WRONG   lazy: oracle failed (must be passed): tests: failed gate tests" in out
    record = Path(out.split("WRONG   lazy: oracle", 1)[1].split("record: ", 1)[1].split("\n", 1)[0])
    assert record.is_relative_to(tmp_path / ".reactbench" / "records")
    assert (record / "status.json").is_file() and (record / "verifier").is_dir()
    assert f"records: {record.parent}" in out
    # No raw pytest output unless asked for; asked for, it has no colour codes.
    assert "short test summary" not in out
    assert "run again with -v" in out
    assert main(["validate", str(lazy), "-v", "--records", str(tmp_path / "kept")]) == 1
    out = capsys.readouterr().out
    assert "short test summary" in out and "red" in out and "\x1b[" not in out
    assert any((tmp_path / "kept").iterdir())
    assert main(["validate", str(good)]) == 0
