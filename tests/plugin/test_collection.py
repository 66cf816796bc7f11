import pytest

from tests.helpers import write_task


def test_items_are_task_path_and_agent(suite: pytest.Pytester) -> None:
    write_task(suite.path / "tasks", "alpha")
    write_task(suite.path / "tasks", "beta", tags=("write-react",))
    result = suite.runpytest("--reactbench-agent=oracle,nop", "--collect-only", "-q")
    result.stdout.fnmatch_lines([
        "tasks/alpha::oracle", "tasks/alpha::nop", "tasks/beta::oracle", "tasks/beta::nop",
        "4 tests collected*",
    ])
    # Collecting starts no trial, so it leaves no run folder behind.
    assert not (suite.path / "records").exists() or not any((suite.path / "records").iterdir())


def test_select_with_k_and_metadata_markers(suite: pytest.Pytester) -> None:
    write_task(suite.path / "tasks", "alpha")
    write_task(suite.path / "tasks", "beta", tags=("write-react",))
    result = suite.runpytest("--reactbench-agent=oracle,nop", "--collect-only", "-q",
                             "-k", "beta and nop")
    result.stdout.fnmatch_lines(["tasks/beta::nop", "1/4 tests collected (3 deselected)*"])
    # A tag is a marker under the name written in task.toml.
    result = suite.runpytest("--reactbench-agent=nop", "--collect-only", "-q",
                             "-m", "write-react and not easy", "--strict-markers")
    result.stdout.fnmatch_lines(["no tests collected (2 deselected)*"])
    result = suite.runpytest("--reactbench-agent=nop", "--collect-only", "-q",
                             "-m", "write-react", "--strict-markers")
    result.stdout.fnmatch_lines(["tasks/beta::nop", "1/2 tests collected (1 deselected)*"])


def test_task_tags_are_listed_by_markers(suite: pytest.Pytester) -> None:
    write_task(suite.path / "tasks", "beta", tags=("write-react", "React 19", "not"))
    result = suite.runpytest("--markers")
    result.stdout.fnmatch_lines([
        "@pytest.mark.easy: tasks tagged 'easy'*",
        "@pytest.mark.write-react: tasks tagged 'write-react'*",
        # What -m cannot name as written gets the documented mapping.
        "@pytest.mark.React_19: tasks tagged 'React 19'*",
        "@pytest.mark.not_: tasks tagged 'not'*",
    ])
    result = suite.runpytest("--reactbench-agent=nop", "--collect-only", "-q", "--strict-markers",
                             "-m", "React_19 and not_")
    result.stdout.fnmatch_lines(["tasks/beta::nop", "1 test collected*"])


def test_nothing_is_collected_without_an_agent(suite: pytest.Pytester) -> None:
    write_task(suite.path / "tasks", "alpha")
    suite.makepyfile(test_plain="def test_plain():\n    assert True\n")
    result = suite.runpytest("--collect-only", "-q")
    result.stdout.fnmatch_lines(["test_plain.py::test_plain", "1 test collected*"])
    assert "alpha" not in result.stdout.str()
    # With nothing collected at all, pytest says so and the plugin says how to run the tasks.
    (suite.path / "test_plain.py").unlink()
    result = suite.runpytest()
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED
    result.stdout.fnmatch_lines(["reactbench: tasks are under tasks, but no agent was asked for; "
                                 "run them with --reactbench-agent=oracle*"])


def test_malformed_task_is_a_collection_error_and_the_rest_still_run(
    suite: pytest.Pytester,
) -> None:
    write_task(suite.path / "tasks", "good")
    bad = write_task(suite.path / "tasks", "bad")
    (bad / "task.toml").write_text('version = "1.0"\n[agent]\ntimeout_sec = -1\n')
    result = suite.runpytest("--reactbench-agent=oracle")
    result.stdout.fnmatch_lines([
        f"*{bad / 'task.toml'}: agent.timeout_sec: Input should be greater than 0 (got -1)*",
    ])
    result.assert_outcomes(passed=1, errors=1)


def test_a_dockerfile_typo_is_a_collection_error_on_every_backend(suite: pytest.Pytester) -> None:
    write_task(suite.path / "tasks", "good")
    bad = write_task(suite.path / "tasks", "bad")
    dockerfile = bad / "environment" / "Dockerfile"
    dockerfile.write_text("FROM reactbench/system\nWORKDIR /app\nCOPPY app/ /app/\n")
    for backend in ("local", "docker"):
        # (collected only: nothing is baked, so no engine is needed)
        result = suite.runpytest("--reactbench-agent=oracle", f"--reactbench-sandbox={backend}",
                                 "--collect-only")
        result.stdout.fnmatch_lines([f"*{dockerfile}:3: unknown instruction COPPY (did you mean COPY?)*"])
        result.stdout.no_fnmatch_line("*not supported by the local backend*")
        result.assert_outcomes(errors=1)


def test_task_roots_option_and_explicit_paths(suite: pytest.Pytester) -> None:
    write_task(suite.path / "elsewhere", "gamma")
    write_task(suite.path / "tasks", "alpha")
    result = suite.runpytest("--reactbench-agent=nop", "--reactbench-tasks=elsewhere",
                             "--collect-only", "-q")
    result.stdout.fnmatch_lines(["elsewhere/gamma::nop", "1 test collected*"])
    result = suite.runpytest("--reactbench-agent=nop", "tasks/alpha", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["tasks/alpha::nop", "1 test collected*"])


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--reactbench-agent=wizard"],
         "*unknown agent 'wizard' (known: aider, claude-code, codex, nop, oracle, patch, python, tools)*"),
        (["--reactbench-agent=orcale"],
         "*unknown agent 'orcale'; did you mean 'oracle'? (known: aider, claude-code, codex, nop, oracle,*"),
        (["--reactbench-agent=nop", "--reactbench-sandbox=cloud"],
         "*unknown backend 'cloud'; known: *local*"),
        (["--reactbench-agent=nop", "--reactbench-image-map=ghcr.io/x"],
         "*image map entry 'ghcr.io/x' must be FROM=TO*"),
        (["--reactbench-agent=nop", "--reactbench-tasks=missing"], "*missing does not exist*"),
        (["--reactbench-agent=nop", "--reactbench-git-mirror=https://github.com/"],
         "*git mirror 'https://github.com/' must be PREFIX=LOCATION*"),
        (["--reactbench-agent=nop", "--reactbench-git-mirror=https://github.com/=/no/such/dir"],
         "*/no/such/dir is neither a directory nor a git URL*"),
    ],
)
def test_usage_errors(suite: pytest.Pytester, args: list[str], message: str) -> None:
    write_task(suite.path / "tasks", "alpha")
    result = suite.runpytest(*args)
    assert result.ret != 0
    result.stderr.fnmatch_lines([message])
    assert not (suite.path / "records").exists() or not any((suite.path / "records").iterdir())


def test_oracle_needs_a_solution(suite: pytest.Pytester) -> None:
    task = write_task(suite.path / "tasks", "alpha")
    (task / "solution" / "solve.sh").unlink()
    result = suite.runpytest("--reactbench-agent=oracle")
    result.stdout.fnmatch_lines(["*agent oracle: *solution/solve.sh: file is missing*"])


def test_printed_ids_run_again_as_arguments(suite: pytest.Pytester) -> None:
    write_task(suite.path / "tasks", "alpha")
    write_task(suite.path / "tasks", "beta")
    result = suite.runpytest("--reactbench-agent=oracle,nop", "--reactbench-attempts=2",
                             "tasks/alpha::nop#2", "tasks/beta::oracle", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["tasks/alpha::nop#2", "tasks/beta::oracle#1", "tasks/beta::oracle#2",
                                 "3/8 tests collected (5 deselected)*"])
    # And through xdist, where the workers collect.
    result = suite.runpytest("--reactbench-agent=nop", "tasks/alpha::nop", "-n", "2")
    result.assert_outcomes(failed=1)
    # --lf takes the failures of the last run back.
    first = suite.runpytest("--reactbench-agent=oracle,nop", "-p", "cacheprovider")
    first.assert_outcomes(passed=2, failed=2)
    result = suite.runpytest("--reactbench-agent=oracle,nop", "-p", "cacheprovider", "--lf", "-q")
    result.assert_outcomes(failed=2)


def test_a_printed_id_runs_as_printed(suite: pytest.Pytester) -> None:
    write_task(suite.path / "tasks", "alpha")
    write_task(suite.path / "tasks", "beta")
    # No --reactbench-agent: the agent is the id's. nop leaves the task undone.
    result = suite.runpytest("tasks/alpha::nop")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["FAILED: reward 0; failed gate tests*"])
    assert "beta" not in result.stdout.str()
    # An id of an agent not in the run, or of an attempt it does not make, names what is.
    for args, wanted, has in (
            (["--reactbench-agent=oracle", "tasks/alpha::nop"], "tasks/alpha::nop", "tasks/alpha::oracle"),
            (["--reactbench-agent=nop", "--reactbench-attempts=2", "tasks/alpha::nop#3"],
             "tasks/alpha::nop#3", "tasks/alpha::nop#1, tasks/alpha::nop#2")):
        refused = suite.runpytest(*args)
        assert refused.ret == pytest.ExitCode.USAGE_ERROR
        refused.stderr.fnmatch_lines([f"ERROR: {wanted}: no such item in this run; tasks/alpha has {has} *"])
    # A misspelt agent in the id is an unknown agent, with the nearest known one.
    refused = suite.runpytest("tasks/alpha::oracel")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    refused.stderr.fnmatch_lines(["*'oracel'*did you mean 'oracle'*"])


def test_last_failed_alone_runs_the_agents_its_ids_name(suite: pytest.Pytester) -> None:
    write_task(suite.path / "tasks", "alpha")
    write_task(suite.path / "tasks", "beta")
    cache = suite.path / ".pytest_cache" / "v" / "cache"
    cache.mkdir(parents=True)
    (cache / "lastfailed").write_text('{"tasks/beta::nop": true}')
    result = suite.runpytest("-p", "cacheprovider", "--lf", "--collect-only", "-q")
    result.stdout.fnmatch_lines(["tasks/beta::nop", "1/2 tests collected (1 deselected)*"])
