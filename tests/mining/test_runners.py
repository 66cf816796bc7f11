"""Package manager and test runner detection, and the verifier's test command."""

import json

import pytest

from pytest_reactbench.mining.changes import MiningError
from pytest_reactbench.mining.runners import (
    Runners,
    detect_runners,
    package_manager,
    source_roots,
    verifier_command,
)


@pytest.mark.parametrize(("files", "name", "install"), [
    ({"package.json", "pnpm-lock.yaml"}, "pnpm", "pnpm install --frozen-lockfile"),
    ({"package.json", "yarn.lock"}, "yarn", "yarn install --frozen-lockfile"),
    ({"package.json", "package-lock.json"}, "npm", "npm ci"),
    ({"package.json", "bun.lockb"}, "bun", "bun install --frozen-lockfile"),
    ({"package.json"}, "npm", "npm install"),
])
def test_package_manager_from_the_lockfile(files: set[str], name: str, install: str) -> None:
    manager = package_manager(files)
    assert manager.name == name and install in manager.install


def manifest(dev: dict[str, str] | None = None, scripts: dict[str, str] | None = None,
             **extra: object) -> str:
    return json.dumps({"devDependencies": dev or {}, "scripts": scripts or {}, **extra})


def no_file(_: str) -> None:
    return None


def test_runners_from_dependencies_scripts_and_configs() -> None:
    assert detect_runners(manifest({"vitest": "4"}), set(), no_file).names == ("vitest",)
    assert detect_runners(manifest(scripts={"test": "jest --coverage"}), set(), no_file).names == ("jest",)
    assert detect_runners(manifest(jest={"testEnvironment": "jsdom"}), set(), no_file).names == ("jest",)
    assert detect_runners(None, {"vitest.config.ts"}, no_file).names == ("vitest",)
    both = detect_runners(manifest({"vitest": "4", "jest": "29", "@playwright/test": "1"}), set(), no_file)
    assert both.names == ("vitest", "playwright")  # Jest kept only by history
    assert detect_runners(manifest({"left-pad": "1"}), {"README.md"}, no_file).names == ()
    with pytest.raises(MiningError, match=r"package\.json is not valid JSON"):
        detect_runners("{nope", set(), no_file)


def test_playwright_spec_folder_from_its_config() -> None:
    config = 'export default defineConfig({ testDir: "./browser-tests", timeout: 5000 });\n'
    runners = detect_runners(manifest({"vitest": "4", "@playwright/test": "1"}), {"playwright.config.ts"},
                             lambda name: config if name == "playwright.config.ts" else None)
    assert runners == Runners(("vitest", "playwright"), "browser-tests")
    assert runners.runner_of("browser-tests/home.spec.ts") == "playwright"
    assert runners.runner_of("e2e/home.spec.ts") == "vitest"  # the config says where e2e specs are


def test_the_command_runs_each_runner_on_exactly_its_specs() -> None:
    runners = Runners(("vitest", "playwright"))
    cmd = verifier_command(["src/a.spec.ts", "e2e/home.spec.ts", "src/b c.test.tsx"], runners,
                       package_manager({"pnpm-lock.yaml"}))
    assert cmd == (
        "pnpm exec vitest run --reporter=default --reporter=json "
        "--outputFile.json=/logs/verifier/vitest.json src/a.spec.ts 'src/b c.test.tsx'"
        " && pnpm exec playwright test --reporter=list,json e2e/home.spec.ts")
    jest = verifier_command(["src/a.test.js"], Runners(("jest",)), package_manager({"package-lock.json"}))
    assert jest == "npx --no-install jest --ci --json --outputFile=/logs/verifier/vitest.json src/a.test.js"


def test_source_roots() -> None:
    roots = source_roots(["src/a.ts", "lib/b.ts", "index.html"], {"src", "lib"})
    assert roots == ["index.html", "lib", "src"]
    assert source_roots(["app/a.tsx"], {"app", "src"}) == ["app", "src"]
    assert source_roots([".storybook/x.ts"], set()) == ["src"]
