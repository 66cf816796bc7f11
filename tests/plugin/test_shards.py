"""CI shards through real sessions (local backend, tiny tasks): the shards split the
items by task, and merged they are the run one session makes."""

from __future__ import annotations

import json

import pytest

from pytest_reactbench.cli import main
from pytest_reactbench.plugin.shards import parse_shard, shard_of
from pytest_reactbench.results.aggregate import score_agents
from pytest_reactbench.results.load import load_run
from tests.helpers import write_task

TASKS = ("alpha", "beta", "gamma", "delta", "epsilon", "zeta")


def test_a_task_keeps_its_shard_when_tasks_are_added() -> None:
    few = {t: shard_of(t, 3) for t in TASKS}
    many = {t: shard_of(t, 3) for t in (*TASKS, *(f"task-{i}" for i in range(200)))}
    assert all(many[t] == shard for t, shard in few.items())
    # Balanced by task: each of 3 shards holds about a third of 200 tasks.
    counts = [sum(1 for t in many if many[t] == k) for k in (1, 2, 3)]
    assert all(50 <= c <= 85 for c in counts), counts


@pytest.mark.parametrize("text", ["0/3", "4/3", "3", "a/b", "1/0", ""])
def test_a_bad_shard_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="K/N"):
        parse_shard(text)


def test_three_shards_merged_are_the_run_of_one_session(suite: pytest.Pytester) -> None:
    for name in TASKS:
        write_task(suite.path / "tasks", name)
    # gamma's solution no longer solves it: the leaderboard has a fail to keep.
    (suite.path / "tasks" / "gamma" / "solution" / "solve.sh").write_text("#!/bin/bash\ntrue\n")
    agents = "--reactbench-agent=oracle,nop"
    suite.runpytest(agents, "--junitxml=all.xml", "-p", "no:cacheprovider")
    seen: dict[str, int] = {}
    for k in (1, 2, 3):
        result = suite.runpytest(agents, f"--reactbench-shard={k}/3", f"--junitxml=shard-{k}.xml",
                                 "-p", "no:cacheprovider")
        assert result.ret == 1  # nop fails everywhere
        for outcome in load_run([suite.path / f"shard-{k}.xml"]):
            seen[f"{outcome.task}::{outcome.agent}"] = k
            assert shard_of(outcome.task, 3) == k
    # Every item ran in exactly one shard (these six tasks fill all three); each
    # shard's run manifest says which shard it was.
    assert sorted(seen) == sorted(f"{t}::{a}" for t in TASKS for a in ("oracle", "nop"))
    assert set(seen.values()) == {1, 2, 3}
    manifests = [json.loads(m.read_text()) for m in (suite.path / "records").glob("*/manifest.json")]
    assert sorted(m["shard"] for m in manifests if "shard" in m) == ["1/3", "2/3", "3/3"]
    shards = [suite.path / f"shard-{k}.xml" for k in (1, 2, 3)]
    whole = score_agents(load_run([suite.path / "all.xml"]))
    merged = score_agents(load_run(shards))
    assert [(s.agent, s.per_task, s.score, s.ranked) for s in merged] == \
        [(s.agent, s.per_task, s.score, s.ranked) for s in whole]
    assert whole[0].agent == "oracle" and whole[0].per_task["gamma"] == 0.0
    # The command line reads the shards as one run: one leaderboard, no regression
    # against the one session's run.
    assert main(["report", *map(str, shards), "--out", str(suite.path / "merged")]) == 0
    report = (suite.path / "merged" / "report.md").read_text()
    assert all(t in report for t in TASKS)
    assert main(["compare", "--base", str(suite.path / "all.xml"), "--new", *map(str, shards)]) == 0
    # ... and the baseline option takes the shards too.
    result = suite.runpytest(agents, "-p", "no:cacheprovider",
                             *(f"--reactbench-baseline={s}" for s in shards))
    result.stdout.fnmatch_lines(["*reactbench compare: ok: no regression*"])


def test_a_trial_in_two_shards_is_an_error_naming_both(suite: pytest.Pytester, capsys) -> None:  # type: ignore[no-untyped-def]
    write_task(suite.path / "tasks", "alpha")
    suite.runpytest("--reactbench-agent=oracle", "--junitxml=a.xml").assert_outcomes(passed=1)
    suite.runpytest("--reactbench-agent=oracle", "--junitxml=b.xml").assert_outcomes(passed=1)
    a, b = suite.path / "a.xml", suite.path / "b.xml"
    assert main(["report", str(a), str(b), "--out", str(suite.path / "out")]) == 2
    err = capsys.readouterr().err
    assert f"alpha [oracle] attempt 1 is in both {a} and {b}" in err
    assert main(["compare", "--base", str(a), str(b), "--new", str(a)]) == 2
    result = suite.runpytest("--reactbench-agent=oracle", f"--reactbench-baseline={a}",
                             f"--reactbench-baseline={b}")
    result.stdout.fnmatch_lines([f"*alpha [[]oracle[]] attempt 1 is in both {a} and {b}*"])


def test_a_bad_shard_or_engine_url_is_a_usage_error(suite: pytest.Pytester) -> None:
    write_task(suite.path / "tasks", "alpha")
    result = suite.runpytest("--reactbench-agent=oracle", "--reactbench-shard=4/3")
    result.stderr.fnmatch_lines(["*--reactbench-shard: '4/3' must be K/N with 1 <= K <= N*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result = suite.runpytest("--reactbench-agent=oracle", "--reactbench-docker-host=big-box:2376")
    result.stderr.fnmatch_lines(["*--reactbench-docker-host: 'big-box:2376' is not an engine URL*"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
