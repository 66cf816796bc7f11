"""Our verifier script (pytest_reactbench/verifier/grader/verifier.mjs): its pure
parts through Node, and a real grading where the scan runs beside the tests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_reactbench.results.load import junit_testcases

ROOT = Path(__file__).resolve().parents[2]
VERIFIER = ROOT / "pytest_reactbench" / "verifier" / "grader" / "verifier.mjs"

needs_node = pytest.mark.skipif(shutil.which("node") is None, reason="needs Node")


def call(function: str, *args: str) -> str:
    """`function(...args)` exported by the verifier, its result printed by Node."""
    script = (f"import {{ {function} }} from {json.dumps(str(VERIFIER))};"
              f"process.stdout.write(String({function}(...process.argv.slice(1))));")
    proc = subprocess.run(["node", "--input-type=module", "-e", script, *args],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


@needs_node
def test_pnpm_exec_of_a_dependency_binary_runs_it_directly_and_the_rest_goes_to_pnpm(
        tmp_path: Path) -> None:
    real = executable(tmp_path / "real pnpm's dir" / "pnpm", '#!/bin/sh\necho "pnpm $*"\n')
    wrapper = executable(tmp_path / "room-bin" / "pnpm", call("pnpmExec", str(real)))
    app = tmp_path / "app"
    executable(app / "node_modules" / ".bin" / "vitest",
               '#!/bin/sh\necho "vitest $*"\necho "first on PATH: ${PATH%%:*}"\n')
    (app / "node_modules" / ".bin" / "folder").mkdir()
    (app / "node_modules" / ".bin" / "not-executable").write_text("")

    def pnpm(*args: str) -> list[str]:
        proc = subprocess.run([str(wrapper), *args], cwd=app, capture_output=True, text=True,
                              timeout=30)
        assert proc.returncode == 0, proc.stderr
        return proc.stdout.splitlines()

    assert pnpm("exec", "vitest", "run", "a b.spec.ts") == [
        "vitest run a b.spec.ts", f"first on PATH: {app}/node_modules/.bin"]
    # Not a plain dependency binary, or not `exec`: pnpm itself, with every argument.
    for args in (("exec", "missing", "x"), ("exec", "../app/node_modules/.bin/vitest"),
                 ("exec", "-c", "vitest"), ("exec", "folder"), ("exec", "not-executable"),
                 ("exec",), ("install", "--frozen-lockfile"), ("vitest", "run")):
        assert pnpm(*args) == [f"pnpm {' '.join(args)}".rstrip()], args


@needs_node
def test_the_cpu_budget_is_the_cgroup_quota_where_there_is_one(tmp_path: Path) -> None:
    cores = float(subprocess.run(["node", "-p", "require('os').availableParallelism()"],
                                 capture_output=True, text=True, check=True).stdout)

    def budget(files: dict[str, str]) -> float:
        cgroup = tmp_path / str(len(list(tmp_path.iterdir())))
        for name, text in files.items():
            (cgroup / name).parent.mkdir(parents=True, exist_ok=True)
            (cgroup / name).write_text(text)
        return float(call("cpuBudget", str(cgroup)))

    assert budget({}) == cores  # no quota: every core the process may run on
    assert budget({"cpu.max": "100000 100000\n"}) == 1  # the docker backend's cpus = 1
    assert budget({"cpu.max": "50000 100000\n"}) == 0.5
    assert budget({"cpu.max": "max 100000\n"}) == cores
    assert budget({"cpu/cpu.cfs_quota_us": "100000\n", "cpu/cpu.cfs_period_us": "100000\n"}) == 1
    assert budget({"cpu/cpu.cfs_quota_us": "-1\n", "cpu/cpu.cfs_period_us": "100000\n"}) == cores
    assert budget({"cpu.max": "800000 100000\n"}) == cores  # never more than the cores


@pytest.mark.slow
def test_the_scan_reads_the_graded_tree_beside_the_tests_never_the_hidden_specs(
        tmp_path: Path) -> None:
    """On the local backend the verifier may use every core: the scan of the
    submission runs beside the test commands, on a copy of the graded tree, and each
    part is still timed."""
    xml = tmp_path / "r.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--reactbench-agent=oracle",
         "--reactbench-sandbox=local", f"--reactbench-records={tmp_path / 'records'}",
         f"--junitxml={xml}", str(ROOT / "tasks" / "counter-reset")],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert xml.exists(), proc.stdout + proc.stderr
    [(_, props)] = junit_testcases(xml)
    assert props["reactbench.verdict"] == "passed", proc.stdout[-4000:]
    logs = Path(props["reactbench.record"]) / "verifier"
    grade = json.loads((logs / "grade.json").read_text())
    alongside = (os.cpu_count() or 1) >= 2
    assert grade["react_doctor"]["alongside_tests"] is alongside
    timings = grade["timings"]
    assert set(timings) >= {"clean_room", "scan", "test_command", "grading"}
    assert timings["scan"] > 0 and timings["test_command"] > 0
    # Side by side, the two overlap; one after the other, they add up.
    together = timings["scan"] + timings["test_command"]
    assert timings["grading"] < together if alongside else timings["grading"] >= together
    # The copy the scan read held the submission, and none of the hidden specs that
    # the test room had in /app at the same time.
    [project] = json.loads((logs / "rd-after.json").read_text())["projects"]
    assert "src/Counter.tsx" in project["analyzedFiles"]
    assert not [f for f in project["analyzedFiles"] if "__verifier__" in f or f.startswith("e2e/")]


@pytest.mark.docker
def test_the_room_loads_its_commands_from_a_compile_cache_it_cannot_change(bake_cache: Path) -> None:
    """The bake's run of the hidden tests on the base fills Node's compile cache with
    what a grading's room commands load (the bundler of the e2e build among them); the
    room's user reads it (a hit per module), owns nothing in it, and cannot write it."""
    from pytest_reactbench.plugin.options import environment_sandbox_options
    from pytest_reactbench.sandbox.base import ImageRecipe, Limits
    from pytest_reactbench.sandbox.docker import DockerBackend
    from pytest_reactbench.verifier.layer import grader_layer

    backend = DockerBackend(environment_sandbox_options(cache=bake_cache))
    tests = ROOT / "tasks" / "counter-reset" / "tests"
    try:
        image = backend.bake(ImageRecipe("counter-reset/tests", tests / "Dockerfile", tests, timeout=1800,
                                         layer=grader_layer()),
                             lambda _: None)
        box = backend.boot(image, network=False, limits=Limits(), labels={})
        try:
            cache = "/opt/reactbench/state/compile-cache"
            owners = box.exec(f"find {cache} \\( ! -user root -o -perm /022 \\) -print", timeout=60)
            assert owners.ok and owners.text.strip() == "", owners.text + owners.error_text
            room = ("cd /app && setpriv --reuid=65534 --regid=65534 --clear-groups env "
                    f"NODE_COMPILE_CACHE={cache} NODE_DEBUG_NATIVE=COMPILE_CACHE")
            loaded = box.exec(f"{room} node_modules/.bin/vite --version 2>&1; "
                              f"{room} sh -c 'echo x > {cache}/planted' 2>&1", timeout=120)
        finally:
            box.close()
    finally:
        backend.close()
    accepted = [line for line in loaded.text.splitlines()
                if "was accepted" in line and "/deps/node_modules/" in line]
    assert len(accepted) >= 5, loaded.text[-3000:]
    assert "Permission denied" in loaded.text.splitlines()[-1], loaded.text[-500:]


def call_json(function: str, args: list[object], prepare: str = "") -> object:
    """`function(...args)` exported by the verifier, over JSON values (`prepare`, a
    JavaScript statement, may turn some into what the function takes)."""
    script = (f"import {{ {function} }} from {json.dumps(str(VERIFIER))};"
              f"const args = JSON.parse(process.argv[1]); {prepare};"
              f"process.stdout.write(JSON.stringify({function}(...args)));")
    proc = subprocess.run(["node", "--input-type=module", "-e", script, json.dumps(args)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def judged(expected: dict[str, list[str]], results: dict[str, str], allow_skipped: bool) -> list[str]:
    """The verifier's judgeTests over runner results given as "file > title" -> status."""
    as_map = ("args[1] = new Map(Object.entries(args[1]).map(([k, v]) => {"
              "  const [file, title] = k.split(' > '); return [`${file}\\u0000${title}`, v]; }))")
    return list(call_json("judgeTests", [expected, results, allow_skipped], as_map))  # type: ignore[call-overload]


@needs_node
def test_a_test_skipped_on_purpose_fails_only_where_nothing_says_it_may_be() -> None:
    results = {"a.test.tsx > counts": "passed", "a.test.tsx > sorts": "skipped",
               "a.test.tsx > later": "todo"}
    # No list and no allowance (a hand-written task of before the list): all must pass.
    assert judged({}, results, False) == ["a.test.tsx > sorts (skipped)", "a.test.tsx > later (todo)"]
    # A mined draft: skipped ones are the spec's own choice.
    assert judged({}, results, True) == []
    # A declared list: what it names must pass; an undeclared skip is not held against it.
    assert judged({"a.test.tsx": ["counts"]}, results, False) == []
    assert judged({"a.test.tsx": ["counts", "sorts"]}, results, False) == ["a.test.tsx > sorts (skipped)"]
    # A failure is a failure whatever the config says.
    assert judged({}, {**results, "a.test.tsx > more": "failed"}, True) == ["a.test.tsx > more (failed)"]
    assert judged({}, {"a.test.tsx > sorts": "skipped"}, True) == ["no test passed"]


@needs_node
def test_new_findings_the_task_tolerates_by_rule_file_and_title_one_per_entry() -> None:
    def finding(rule: str, file: str, title: str, line: int = 1) -> dict[str, object]:
        return {"rule": rule, "filePath": file, "title": title, "line": line}

    def compared(after: list[dict[str, object]], ignored: list[dict[str, str]]) -> dict[str, Any]:
        result = call_json("compareReports", [before, {"diagnostics": after}, [], ignored])
        assert isinstance(result, dict)
        return result

    index_key = finding("no-array-index-as-key", "src/List.tsx", "Index as key")
    deps = finding("exhaustive-deps", "src/Tree.tsx", "Missing dependency")
    before = {"diagnostics": [index_key]}
    after = [index_key, {**index_key, "line": 9}, deps]
    one = {"rule": "no-array-index-as-key", "filePath": "src/List.tsx", "title": "Index as key"}
    strict = compared(after, [])
    assert not strict["ok"] and len(strict["new"]) == 3
    # What the task tolerates is reported apart; anything else new still fails.
    some = compared(after, [one])
    assert not some["ok"] and [f["rule"] for f in some["new"]] == ["exhaustive-deps"]
    assert [f["file"] for f in some["ignored"]] == ["src/List.tsx"] * 2
    deps_entry = {"rule": "exhaustive-deps", "filePath": "Tree.tsx", "title": "Missing dependency"}
    assert compared(after, [one, deps_entry])["ok"] is True  # the file also as a path suffix
    # One entry tolerates one finding: a third of the rule in the file is one too many.
    more = compared([*after, {**index_key, "line": 12}], [one, deps_entry])
    assert not more["ok"] and [f["line"] for f in more["new"]] == [1, 9, 12]
    assert compared([*after, {**index_key, "line": 12}], [one, one, deps_entry])["ok"] is True
    # The title is part of what is tolerated: another finding of the rule is not.
    assert len(compared(after, [{**one, "title": "Something else"}, deps_entry])["new"]) == 2


def test_a_hidden_spec_that_does_not_compile_refuses_its_task_at_the_bake(tmp_path: Path,
                                                                         bake_cache: Path) -> None:
    """The base runs the unit command at the verifier's bake: a spec with a syntax error
    (it would fail every submission alike) is a harness error there, named with its line."""
    from pytest_reactbench.plugin.options import environment_sandbox_options
    from pytest_reactbench.sandbox.base import ImageRecipe
    from pytest_reactbench.sandbox.docker import DockerBackend
    from pytest_reactbench.sandbox.errors import BakeError
    from pytest_reactbench.verifier.layer import grader_layer

    tests = tmp_path / "tests"
    shutil.copytree(ROOT / "tasks" / "counter-reset" / "tests", tests)
    spec = tests / "specs" / "src" / "__verifier__" / "counter.spec.tsx"
    lines = spec.read_text().splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines) if "expect(" in line)
    lines[at] = lines[at].replace("expect(", "expect((", 1)
    spec.write_text("".join(lines))
    backend = DockerBackend(environment_sandbox_options(cache=bake_cache))
    try:
        with pytest.raises(BakeError) as refused:
            backend.bake(ImageRecipe("broken-spec/tests", tests / "Dockerfile", tests, timeout=900,
                                     layer=grader_layer()), lambda _: None)
    finally:
        backend.close()
    assert f"src/__verifier__/counter.spec.tsx:{at + 1}:" in str(refused.value), str(refused.value)[-2000:]
    assert "does not compile" in str(refused.value)
