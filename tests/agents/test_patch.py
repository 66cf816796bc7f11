import json
from pathlib import Path

import pytest

from pytest_reactbench.agents import PatchInputError, load_predictions
from tests.helpers import junit_results, write_task

DIFF = """diff --git a/out.txt b/out.txt
new file mode 100644
--- /dev/null
+++ b/out.txt
@@ -0,0 +1 @@
+hello
"""
STALE = """--- a/base.txt
+++ b/base.txt
@@ -1 +1 @@
-something else
+hello
"""


def test_three_input_forms(tmp_path: Path) -> None:
    single = tmp_path / "fix.diff"
    single.write_text(DIFF)
    assert load_predictions(single)["patch"]["*"].patch == DIFF
    folder = tmp_path / "patches"
    folder.mkdir()
    (folder / "alpha.patch").write_text(DIFF)
    assert set(load_predictions(folder)["patch"]) == {"alpha"}
    preds = tmp_path / "preds.jsonl"
    preds.write_text(json.dumps({"task_id": "alpha", "model_patch": DIFF, "agent_name": "gpt-x"}) + "\n")
    assert load_predictions(preds)["gpt-x"]["alpha"].source == f"{preds}:1"
    as_json = tmp_path / "preds.json"
    as_json.write_text(json.dumps([{"task_id": "alpha", "model_patch": DIFF, "agent_name": "a"},
                                   {"task_id": "alpha", "model_patch": DIFF, "agent_name": "b"}]))
    assert set(load_predictions(as_json)) == {"a", "b"}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"task_id": "a", "model_patch": "x"}\n{"task_id": "a", "model_patch": "y"}\n',
         r"preds\.jsonl:2: task_id 'a' is predicted twice for 'patch' \(first at .*preds\.jsonl:1\)"),
        ('{"task_id": "a"}\n', r"preds\.jsonl:1: model_patch: expected a string"),
        ("{nope\n", r"preds\.jsonl:1: not valid JSON"),
        (json.dumps({"task_id": "a", "model_patch": "--- a/../../etc/passwd\n+++ b/../../etc/passwd\n"}),
         r"preds\.jsonl:1: model_patch for 'a' touches paths outside /app: \.\./\.\./etc/passwd"),
    ],
)
def test_bad_predictions_name_file_and_record(tmp_path: Path, content: str, message: str) -> None:
    preds = tmp_path / "preds.jsonl"
    preds.write_text(content)
    with pytest.raises(PatchInputError, match=message):
        load_predictions(preds)


def test_patch_agent_end_to_end(suite: pytest.Pytester) -> None:
    for name in ("alpha", "beta", "gamma"):
        write_task(suite.path / "tasks", name)
    preds = suite.path / "preds.jsonl"
    preds.write_text("\n".join(json.dumps(r) for r in [
        {"task_id": "alpha", "model_patch": DIFF, "agent_name": "gpt-x"},
        {"task_id": "beta", "model_patch": STALE, "agent_name": "gpt-x"},
    ]) + "\n")
    result = suite.runpytest("--reactbench-agent=patch", f"--reactbench-patch={preds}",
                             "--junitxml=r.xml", "-rA")
    result.stdout.fnmatch_lines([
        # The headline says the patch did not apply, with git's words, before the gates.
        "FAILED: *; the patch from *preds.jsonl:2 did not apply (error: patch failed: base.txt:1*",
        "*The agent ended: exited-nonzero.*",
        "*error: patch failed: base.txt:1*",
        "tasks/gamma::gpt-x: not attempted: no patch for task 'gamma' in *preds.jsonl",
    ])
    assert "1 failed, 1 passed, 1 not attempted in" in result.stdout.lines[-1]
    assert "not-attempted" in {r.verdict for r in junit_results(suite.path / "r.xml")}


def test_single_diff_applies_to_every_task(suite: pytest.Pytester) -> None:
    for name in ("alpha", "beta"):
        write_task(suite.path / "tasks", name)
    diff = suite.path / "fix.diff"
    diff.write_text(DIFF)
    result = suite.runpytest("--reactbench-agent=patch", f"--reactbench-patch={diff}", "-v")
    result.stdout.fnmatch_lines(["*tasks/alpha::patch PASSED*", "*tasks/beta::patch PASSED*"])


@pytest.mark.parametrize(
    ("records", "message"),
    [
        ([{"task_id": "nowhere", "model_patch": DIFF}],
         "*preds.jsonl:1: task_id 'nowhere' is not a task here*"),
        ([], None),
    ],
)
def test_unknown_task_ids_are_refused(suite: pytest.Pytester, records: list[dict[str, str]],
                                      message: str | None) -> None:
    write_task(suite.path / "tasks", "alpha")
    preds = suite.path / "preds.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = suite.runpytest("--reactbench-agent=patch", f"--reactbench-patch={preds}")
    if message:
        result.stderr.fnmatch_lines([message])
        assert result.ret == 4
    else:
        result.stdout.fnmatch_lines(["*1 not attempted*"])


def test_patch_agent_needs_a_patch(suite: pytest.Pytester) -> None:
    write_task(suite.path / "tasks", "alpha")
    result = suite.runpytest("--reactbench-agent=patch")
    result.stderr.fnmatch_lines(["*--reactbench-agent=patch needs --reactbench-patch=PATH*"])
