"""The HTML report as a user sees it: a real session on tiny tasks (local backend)
whose verifier writes what ours writes (grade.json, vitest.json), the report command's
self-contained site moved away from the records, and each page opened in headless
Chromium."""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from pytest_reactbench.cli import main
from pytest_reactbench.results import TrialResult, Verdict
from pytest_reactbench.results.site import wilson, write_site
from tests.helpers import write_task
from tests.results.test_session_results import _pixels

AGENTS = """
import pytest
from pytest_reactbench.agents import Agent, AgentOutcome
from pytest_reactbench.sandbox.errors import SandboxError


class Tooler(Agent):
    name = "tooler"

    def run(self, ctx):
        ctx.sandbox.exec("echo wrong > /app/out.txt")
        ctx.event("tool", tool="write_file", args={"path": "out.txt", "content": "wrong"},
                  seconds=0.25, result_bytes=6)
        ctx.event("tool", tool="read_file", args={"path": "missing.txt"}, seconds=0.01,
                  error="missing.txt does not exist")
        ctx.event("usage", cost_usd=0.0123, input_tokens=1000, output_tokens=200)
        return AgentOutcome("timeout", None, "thinking about the counter\\nwrote out.txt\\n")


class Breaker(Agent):
    name = "breaker"

    def run(self, ctx):
        raise SandboxError("the engine went away (injected)")


@pytest.hookimpl
def pytest_reactbench_agents():
    return {"tooler": lambda arg, settings: Tooler(), "breaker": lambda arg, settings: Breaker()}
"""

# What our verifier leaves in /logs/verifier when a spec fails and React Doctor finds
# something new: reward.json, its progress, grade.json (with the spec's message, read
# from the runner's report) and Vitest's JSON report.
GRADES = r"""#!/bin/bash
if [ "$(cat /app/out.txt 2>/dev/null)" = hello ]; then
  echo '{"reward": 1, "tests": 1, "react_doctor": 1}' > /logs/verifier/reward.json
  exit 0
fi
printf '\033[31m FAIL \033[0m src/App.test.tsx > counter > resets\n'
echo '{"reward": 0, "tests": 0, "react_doctor": 0}' > /logs/verifier/reward.json
echo '{"grader": "reactbench-verifier", "version": 2, "phase": "done"}' > /logs/verifier/progress.json
cat > /logs/verifier/grade.json <<'JSON'
{"version": 2, "reward": 0,
 "tests": {"ok": false, "exit_code": 1, "failing": ["src/App.test.tsx > counter > resets (failed)"],
           "specs": [{"file": "src/App.test.tsx", "name": "counter > resets", "status": "failed",
                      "message": "AssertionError: expected 3 to be 0\n    at App.test.tsx:9:20"}]},
 "react_doctor": {"ok": false, "new": [{"rule": "no-array-index-key", "file": "src/App.tsx",
                                        "line": 12, "title": "Array index used as a key"}]}}
JSON
cat > /logs/verifier/vitest.json <<'JSON'
{"testResults": [{"name": "/app/src/App.test.tsx", "status": "failed", "assertionResults": [
  {"fullName": "counter resets", "status": "failed",
   "failureMessages": ["AssertionError: expected 3 to be 0\n    at App.test.tsx:9:20"]}]}]}
JSON
"""

# The workspace is a git repository, as the public suite's are: the diff is against it.
GIT_WORKSPACE = """FROM reactbench/system
WORKDIR /app
RUN echo hello > out.txt && git init -q && git add -A && git -c user.name=t -c user.email=t@t commit -qm base
"""

CHROMIUM = ["chromium", "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"]


def _browser(page: Path, profile: Path, *args: str) -> str:
    """What Chromium makes of a page: its DOM after load (or a screenshot, by args)."""
    result = subprocess.run([*CHROMIUM, f"--user-data-dir={profile}", *args, page.as_uri()],
                            # Chromium's helpers outlive it holding inherited pipes: a file.
                            stdout=(profile.parent / "dom.html").open("w"),
                            stderr=subprocess.DEVNULL, timeout=120, check=True)
    assert result.returncode == 0
    return (profile.parent / "dom.html").read_text()


def _text(dom: str) -> str:
    """The page's text, as read on screen (tags out, whitespace folded)."""
    dom = re.sub(r"<(style|title)>.*?</\1>", " ", dom, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", dom)))


def _hrefs(page: Path) -> list[str]:
    return re.findall(r'href="([^"]+)"', page.read_text())


def test_wilson_interval() -> None:
    low, high = wilson(1, 1)
    assert high == 1 and 0.2 < low < 0.21
    assert wilson(0, 4)[0] == 0 and wilson(2, 4) == pytest.approx((0.15, 0.85), abs=0.01)


def test_report_says_why_and_travels_as_a_folder(suite: pytest.Pytester, tmp_path: Path) -> None:
    suite.makeconftest(AGENTS)
    write_task(suite.path / "tasks", "counter", test_sh=GRADES, environment=GIT_WORKSPACE)
    broken = write_task(suite.path / "tasks", "broken")
    (broken / "task.toml").write_text('version = "1.0"\n[agent]\ntimout_sec = 5\n')
    result = suite.runpytest("--reactbench-agent=oracle,tooler,breaker", "--junitxml=junit.xml")
    result.assert_outcomes(passed=1, failed=1, errors=2)
    (run,) = (suite.path / "records").iterdir()
    # The session's own report lists the task that failed to load.
    assert "collection-errors.json" in {p.name for p in run.iterdir()}
    profile = tmp_path / "profile"
    text = _text(_browser(run / "report.html", profile, "--dump-dom"))
    assert "Tasks that failed to load (1)" in text
    assert f"{broken / 'task.toml'}: agent: unknown key 'timout_sec'; did you mean 'timeout_sec'?" in text

    # The report command's site, moved away from the records it came from.
    assert main(["report", str(run), "--out", str(tmp_path / "site")]) == 0
    site = tmp_path / "moved"
    shutil.move(tmp_path / "site", site)
    shutil.rmtree(suite.path / "records")
    pages = [site / "report.html", *sorted((site / "trials").glob("*.html"))]
    assert len(pages) == 4
    for page in pages:
        for href in _hrefs(page):
            assert not re.match(r"[a-z]+:|/", href), f"{page}: {href} is not relative"
            target, _, anchor = href.partition("#")  # (an anchor of the page: #reason, #transcript)
            assert (page.parent / target).resolve().is_file(), f"{page}: {href} leads nowhere"
            assert (page.parent / target).resolve().is_relative_to(site)
            assert not anchor or f"id={anchor}" in (page.parent / target).read_text(), f"{page}: {href}"

    index = _text(_browser(site / "report.html", profile, "--dump-dom"))
    # The run header.
    assert f"run {run.name}" in index
    assert re.search(r"date \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC", index)
    assert "command pytest --reactbench-agent=oracle,tooler,breaker" in index
    assert "plugin version 0.1.0" in index and "backend local" in index
    assert "verdicts NOT formal (2 scored trial(s) ran on the local backend)" in index
    assert "Tasks that failed to load (1)" in index
    assert "#1 error" in index and "#1 failed" in index and "#1 passed" in index

    failed = _text(_browser(site / "trials" / "counter__tooler__1.html", profile, "--dump-dom"))
    assert "Failed (reward 0): failed gates tests, react_doctor" in failed
    assert "The agent's ending: timeout" in failed
    # The failing spec with its message, the finding as rule and file:line.
    assert "src/App.test.tsx > counter > resets (failed) AssertionError: expected 3 to be 0" in failed
    assert "no-array-index-key src/App.tsx:12 Array index used as a key" in failed
    assert "Instruction Write hello to /app/out.txt" in failed
    assert "The agent's diff (1 files, +1 -1)" in failed
    assert "-hello +wrong" in failed
    assert "thinking about the counter wrote out.txt" in failed
    assert "Transcript (2 tool call(s))" in failed
    # Each step: its time from the agent's start, how long it took, its arguments as code.
    step = r"#1 write_file \+\d+\.\d s · 0\.25 s · 6 bytes path out\.txt content wrong"
    assert re.search(step, failed), failed
    assert "missing.txt does not exist" in failed
    assert "cost $0.0123" in failed and "input tokens 1000" in failed
    assert "FAIL src/App.test.tsx" in failed and "\x1b" not in failed
    errored = _text(_browser(site / "trials" / "counter__breaker__1.html", profile, "--dump-dom"))
    assert "Error (SandboxError) : no score; the harness, a sandbox or the verifier broke" in errored
    assert "the engine went away (injected)" in errored

    # From the JUnit file alone, the records gone: the same leaderboard and reasons.
    assert main(["report", str(suite.path / "junit.xml"), "--out", str(tmp_path / "from-junit")]) == 0
    again = _text(_browser(tmp_path / "from-junit" / "report.html", profile, "--dump-dom"))
    board = re.compile(r"Leaderboard .*? (?=Usage|Trials)", re.S)
    assert (match := board.search(index)) is not None and "tooler" in match.group(0)
    assert match.group(0) in again
    junit_failed = _text(_browser(tmp_path / "from-junit" / "trials" / "counter__tooler__1.html",
                                  profile, "--dump-dom"))
    for said in ("Failed (reward 0): failed gates tests, react_doctor", "The agent's ending: timeout",
                 "src/App.test.tsx > counter > resets (failed) AssertionError: expected 3 to be 0",
                 "no-array-index-key src/App.tsx:12 Array index used as a key",
                 "thinking about the counter wrote out.txt", "FAIL src/App.test.tsx"):
        assert said in junit_failed, said

    # The chart draws each agent's score with its interval: the agents' colours show.
    shot = tmp_path / "report.png"
    _browser(site / "report.html", profile, f"--screenshot={shot}", "--window-size=1000,1200")
    colours = {pixel for row in _pixels(shot.read_bytes()) for pixel in row}
    assert (0x15, 0x65, 0xC0) in colours and (0xEF, 0x6C, 0x00) in colours


def test_a_page_made_without_the_record_says_where_the_diff_is(tmp_path: Path) -> None:
    from pytest_reactbench.results.trial_result import DiffStat, Provenance, Submission

    record = tmp_path / "elsewhere" / "run" / "counter__tooler__1"  # (not on this machine)
    result = TrialResult(task="counter", agent="tooler", attempt=1, verdict=Verdict.FAILED,
                         submission=Submission(diff=DiffStat(files=["src/App.tsx"], added=9, removed=1)),
                         provenance=Provenance(record=str(record)))
    write_site([result], tmp_path / "site")
    (page,) = (tmp_path / "site" / "trials").glob("*.html")
    section = html.unescape(page.read_text().split("<section id=diff>", 1)[1].split("</section>", 1)[0])
    assert "The agent's diff (1 files, +9 -1)" in section
    assert "No change." not in section
    assert f"the diff is in the trial's record, <code>{record / 'diff.patch'}</code>, which is not on " \
           "this machine" in section
    # A record at hand with an empty diff is no change.
    record.mkdir(parents=True)
    write_site([result], tmp_path / "site2")
    (page,) = (tmp_path / "site2" / "trials").glob("*.html")
    assert "<p>No change.</p>" in page.read_text()
