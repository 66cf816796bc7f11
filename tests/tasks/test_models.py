import json
from pathlib import Path

import pytest

from pytest_reactbench.tasks import Reward, TaskError, find_tasks, load_task
from pytest_reactbench.tasks.load import parse_json
from pytest_reactbench.tasks.models import TestsConfig

V10 = """
version = "1.0"
[[artifacts]]
source = "/app"
destination = "workspace"
exclude = ["**/node_modules/**"]
[metadata]
difficulty = "easy"
category = "smoke"
tags = ["smoke", "real-repo"]
[agent]
timeout_sec = 900.0
[verifier]
timeout_sec = 300.0
environment_mode = "separate"
[verifier.environment]
cpus = 2
memory_mb = 4096
[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 2048
allow_internet = false
"""

V13 = """
schema_version = "1.3"
[[artifacts]]
source = "/app/src"
destination = "agent-src"
[task]
name = "react-bench/fix-something"
description = "Fix it"
authors = []
keywords = ["react"]
[metadata]
difficulty = "hard"
base_sha = "abc"
[agent]
timeout_sec = 1800.0
"""


def make_task(root: Path, toml: str, *, skip: tuple[str, ...] = ()) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "task.toml").write_text(toml)
    for name in ("instruction.md", "environment/Dockerfile", "tests/Dockerfile", "tests/test.sh"):
        if name in skip:
            continue
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x\n")
    return root


def test_version_1_0_form(tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path / "hello", V10))
    assert task.id == "hello"
    assert task.config.agent.timeout_sec == 900.0
    assert task.config.verifier_environment.cpus == 2
    assert task.config.environment.memory_mb == 2048
    assert task.config.artifacts[0].exclude == ["**/node_modules/**"]
    assert task.markers == ["easy", "smoke", "real-repo"]


def test_schema_1_3_form_with_task_table(tmp_path: Path) -> None:
    task = load_task(make_task(tmp_path / "drop", V13))
    assert task.config.task is not None
    assert task.config.task.name == "react-bench/fix-something"
    assert task.config.artifacts[0].source == "/app/src"
    # Without [verifier.environment] the verifier shares the task's environment limits.
    assert task.config.verifier_environment == task.config.environment
    assert task.config.metadata.model_extra == {"base_sha": "abc"}


@pytest.mark.parametrize(
    ("toml", "field", "expected"),
    [
        ('version = "1.0"\n[agent]\ntimeout_sec = -5', "agent.timeout_sec", "greater than 0"),
        ('version = "1.0"\n[agent]\ntimeout_sec = "soon"', "agent.timeout_sec", "valid number"),
        ('version = "9.9"', "(top level)", "'9.9' is not one of"),
        ("[agent]\ntimeout_sec = 5", "(top level)", "declares no format version"),
        ('version = "1.0"\n[environment]\nmemory_mb = 99999999999', "environment.memory_mb",
         "less than or equal"),
        ('version = "1.0"\n[[artifacts]]\nsource = "app"', "artifacts[0].source", "absolute path"),
        ('version = "1.0"\n[[artifacts]]\nsource = "/etc"', "artifacts[0].source",
         "outside the agent workspace"),
        # A typo'd key would leave the default in force unnoticed: refused, with a suggestion.
        ('version = "1.0"\n[agent]\ntimout_sec = 5', "agent",
         "unknown key 'timout_sec'; did you mean 'timeout_sec'?"),
        ('version = "1.0"\n[verifier.environment]\nmemory = 4096', "verifier.environment",
         "unknown key 'memory'; did you mean 'memory_mb'?"),
        ('version = "1.0"\n[[artifacts]]\nsource = "/app"\nexclud = []', "artifacts[0]",
         "unknown key 'exclud'; did you mean 'exclude'?"),
        ('version = "1.0"\n[enviroment]\ncpus = 2', "(top level)",
         "unknown key 'enviroment'; did you mean 'environment'?"),
        ('version = "1.0"\nzzz = 1', "(top level)", "unknown key 'zzz'; known keys: agent, artifacts"),
    ],
)
def test_bad_task_toml_names_file_and_field(tmp_path: Path, toml: str, field: str,
                                            expected: str) -> None:
    root = make_task(tmp_path / "bad", toml)
    with pytest.raises(TaskError) as info:
        load_task(root)
    message = str(info.value)
    assert message.startswith(f"{root / 'task.toml'}: {field}: ")
    assert expected in message


@pytest.mark.parametrize(("config", "field", "expected"), [
    ('{"test": {"cmd": "npx vitest run"}, "sourcez": ["src"]}', "(top level)",
     "unknown key 'sourcez'; did you mean 'sources'?"),
    ('{"test": {"cmd": "npx vitest run"}, "rd": {"timeout_secs": 60}}', "rd",
     "unknown key 'timeout_secs'; did you mean 'timeout_sec'?"),
])
def test_a_typo_in_tests_config_json_is_refused_when_the_task_is_loaded(
        tmp_path: Path, config: str, field: str, expected: str) -> None:
    """tests/config.json is checked with the task, as task.toml is: at collection, not
    first when a verifier reads it (a typo'd key would leave its default in force)."""
    root = make_task(tmp_path / "bad", 'version = "1.0"')
    (root / "tests" / "config.json").write_text(config)
    with pytest.raises(TaskError) as info:
        load_task(root)
    message = str(info.value)
    assert message.startswith(f"{root / 'tests' / 'config.json'}: {field}: ") and expected in message, message


PUBLIC_FORM = """
version = "1.0"
[[artifacts]]
source = "/app"
destination = "workspace"
exclude = ["**/node_modules/**"]
[metadata]
difficulty = "medium"
category = "state"
tags = ["write-react"]
origin = "mined"
base_sha = "abc"
head_sha = "def"
source = "upstream pull request"
keywords = ["react"]
[agent]
timeout_sec = 900.0
[verifier]
timeout_sec = 300.0
environment_mode = "separate"
env = { CI = "1" }
[verifier.environment]
build_timeout_sec = 600.0
cpus = 2
memory_mb = 4096
storage_mb = 10240
gpus = 0
allow_internet = false
[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 2048
storage_mb = 10240
gpus = 0
allow_internet = false
network_mode = "no-network"
[solution]
env = { CI = "1" }
"""


def test_every_form_of_the_public_suite_stays_valid(tmp_path: Path) -> None:
    """The keys the public suite's task.toml files write (both format versions, the
    free-form [metadata], network_mode) and Harbor's env tables load."""
    task = load_task(make_task(tmp_path / "public", PUBLIC_FORM))
    assert task.config.environment.network_mode == "no-network"
    assert task.config.verifier.env == {"CI": "1"}
    assert (task.config.metadata.model_extra or {})["origin"] == "mined"
    assert load_task(make_task(tmp_path / "v13", V13)).config.schema_version == "1.3"


def test_malformed_toml_names_the_file(tmp_path: Path) -> None:
    root = make_task(tmp_path / "bad", 'version = "1.0"\n[agent\n')
    with pytest.raises(TaskError, match=r"task\.toml: is not valid TOML"):
        load_task(root)


@pytest.mark.parametrize("missing", ["instruction.md", "tests/test.sh", "environment/Dockerfile"])
def test_missing_required_file(tmp_path: Path, missing: str) -> None:
    root = make_task(tmp_path / "bad", V10, skip=(missing,))
    with pytest.raises(TaskError) as info:
        load_task(root)
    assert str(info.value) == f"{root / missing}: file is missing (every task needs it)"


def test_find_tasks_skips_node_modules(tmp_path: Path) -> None:
    make_task(tmp_path / "b", V10)
    make_task(tmp_path / "a", V10)
    make_task(tmp_path / "a" / "node_modules" / "x", V10)
    assert [p.name for p in find_tasks(tmp_path)] == ["a", "b"]


def test_tests_config(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"rd": {"scan_root": "/app"}, "test": {"cmd": "pnpm test", "cwd": "/opt/h"}}')
    config = parse_json(path, TestsConfig)
    assert config.rd.mode == "gate" and config.test.cwd == "/opt/h"
    path.write_text('{"rd": {}}')
    with pytest.raises(TaskError, match=r"config\.json: test: Field required"):
        parse_json(path, TestsConfig)


def test_reward_gates() -> None:
    assert Reward.model_validate({"reward": 1, "tests": 1, "react_doctor": 1}).reward == 1
    with pytest.raises(ValueError, match="reward is 1 while a gate failed"):
        Reward.model_validate({"reward": 1, "tests": 1, "react_doctor": 0})
    # React Doctor as telemetry only does not bear on the reward.
    telemetry = {"reward": 1, "tests": 1, "react_doctor": 0, "react_doctor_gates_reward": 0}
    assert Reward.model_validate(telemetry).reward == 1
    with pytest.raises(ValueError):
        Reward.model_validate({"reward": 1.5})


def test_tests_config_reads_every_form_of_the_public_grader(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({
        "rd": {
            "mode": "health",
            "scan_root": "/app/packages/ui",
            "targets": [{"rule": "no-derived-state", "filePath": "src/Form.tsx",
                         "title": "Derived value copied into state"}],
            "ignored_new_footguns": [{"rule": "exhaustive-deps", "filePath": "src/Form.tsx",
                                      "title": "Missing effect dependencies"}],
            "ignored_titles": ["Array index used as key"],
            "exclude_rules": ["exhaustive-deps"],
            "telemetry_only": True,
        },
        "verifier_timeout_sec": 900,
        "env": {"TZ": "UTC"},
        "pre_test": {"cmd": "node /tests/check.mjs", "fail_closed": False},
        "pre_test_cleanup": ["/app/.cache"],
        "post_restore_cmd": "pnpm install --offline",
        "reset_globs": ["jest.config.*"],
        "reset_spec_surface": True,
        "test": {"cmd": "npx jest --json --outputFile=/tmp/jest.json", "cwd": "/opt/harness",
                 "timeout_ms": 600000, "mode": "jest_json", "json_file": "/tmp/jest.json"},
    }))
    config = parse_json(path, TestsConfig)
    target = config.rd.targets[0]
    assert not isinstance(target, str) and target.filePath == "src/Form.tsx"
    assert config.pre_test is not None and config.pre_test.fail_closed is False
    assert config.test.mode == "jest_json"


def test_tests_config_refuses_unknown_keys_by_name(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text('{"rd": {"scan_root": "/app", "taregts": []}, "test": {"cmd": "pnpm test"}}')
    with pytest.raises(TaskError, match=r"config\.json: rd: unknown key 'taregts'; did you mean 'targets'\?"):
        parse_json(path, TestsConfig)
    path.write_text('{"test": {"cmd": "pnpm test", "timeout": 5}}')
    with pytest.raises(TaskError,
                       match=r"config\.json: test: unknown key 'timeout'; did you mean 'timeout_ms'\?"):
        parse_json(path, TestsConfig)
    path.write_text('{"rd": {"targets": ["no-derived-state"]}, "test": {"cmd": "pnpm test"}}')
    with pytest.raises(TaskError, match=r"rd\.targets: 'no-derived-state' must be rule@file"):
        parse_json(path, TestsConfig)
    path.write_text('{"test": {"cmd": "jest", "mode": "jest_json"}}')
    with pytest.raises(TaskError, match=r"test: mode jest_json needs json_file"):
        parse_json(path, TestsConfig)


def test_the_shipped_tasks_config_files_are_valid() -> None:
    shipped = sorted((Path(__file__).parents[2] / "tasks").glob("*/tests/config.json"))
    assert shipped
    for path in shipped:
        parse_json(path, TestsConfig)
