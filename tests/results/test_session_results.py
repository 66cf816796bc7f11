"""Attempts, retries, the end-of-session table, the baseline gate, reports and replay,
through real sessions on tiny tasks (local backend)."""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
import xml.etree.ElementTree as ET
import zlib
from pathlib import Path

import pytest

from pytest_reactbench.cli import main
from tests.helpers import junit_results, run_folder, write_task

FLAKY_CONFTEST = """
import pytest
from pytest_reactbench.agents import Agent, AgentOutcome
from pytest_reactbench.sandbox.errors import SandboxError

RUNS = []


class Flaky(Agent):
    name = "flaky"

    def run(self, ctx):
        RUNS.append(1)
        if len(RUNS) == 1:
            raise SandboxError("the sandbox fell over (injected)")
        ctx.sandbox.exec("echo hello > /app/out.txt")
        return AgentOutcome("completed", 0)


@pytest.hookimpl
def pytest_reactbench_agents():
    return {"flaky": lambda arg, settings: Flaky()}
"""


def test_attempts_and_the_summary_table(suite: pytest.Pytester) -> None:
    write_task(suite.path / "tasks", "alpha")
    result = suite.runpytest("--reactbench-agent=oracle,nop", "--reactbench-attempts=2", "-v")
    result.stdout.fnmatch_lines([
        "*tasks/alpha::oracle#1 PASSED*", "*tasks/alpha::oracle#2 PASSED*",
        "*reactbench: 1 task(s) x 2 agent(s)*",
        "backend: local; NOT formal (4 scored trial(s) ran on the local backend)",
        "agent*score*95% CI*pass@1*pass@k*tasks*errors",
        "oracle*100%*100%*100% k=2*1/1*0/2",
        "nop*0%*0%*0% k=2*1/1*0/2",
        "alpha*pass 1.00*FAIL 0.00",
    ])
    run = next((suite.path / "records").iterdir())
    assert sorted(p.name for p in run.iterdir() if (p / "status.json").is_file()) == [
        "alpha__nop__1", "alpha__nop__2", "alpha__oracle__1", "alpha__oracle__2"]
    report = (run / "report.md").read_text()
    assert report.startswith("# ReactBench results\n\nbackend: local; NOT formal")


def test_errors_are_retried_and_each_retry_recorded(suite: pytest.Pytester) -> None:
    suite.makeconftest(FLAKY_CONFTEST)
    write_task(suite.path / "tasks", "alpha")
    result = suite.runpytest("--reactbench-agent=flaky", "--reactbench-retries=1",
                             "--junitxml=r.xml")
    result.assert_outcomes(passed=1)
    # The retry is said as it starts, with the error it answers.
    result.stderr.fnmatch_lines(["*alpha [[]flaky[]]#1: ended in an error (SandboxError: *); "
                                 "retry 1 of 1, in a fresh trial*"])
    result.stdout.fnmatch_lines(["alpha * pass 1.00 r1", "rN: that many retries after errors*"])
    run = next((suite.path / "records").iterdir())
    first = json.loads((run / "alpha__flaky__1" / "status.json").read_text())
    retry = json.loads((run / "alpha__flaky__1.1" / "status.json").read_text())
    assert first["verdict"] == "error" and first["failure"] == "SandboxError"
    assert retry["verdict"] == "passed"
    manifest = json.loads((run / "alpha__flaky__1.1" / "manifest.json").read_text())
    assert manifest["retry_of"].endswith("alpha__flaky__1")
    assert 1 in [r.retries for r in junit_results(suite.path / "r.xml")]
    # Without retries the same fault is an error, and fails are never retried. CI tools
    # read it as one: a JUnit <error>, never a <failure>.
    result = suite.runpytest("--reactbench-agent=flaky", "--junitxml=e.xml")
    result.assert_outcomes(errors=1)
    suite_xml = ET.parse(suite.path / "e.xml").getroot().find("testsuite")
    assert suite_xml is not None
    assert (suite_xml.get("errors"), suite_xml.get("failures")) == ("1", "0")
    (outcome,) = junit_results(suite.path / "e.xml")
    assert outcome.verdict == "error"


def test_baseline_gate_fails_the_session_on_a_regression(suite: pytest.Pytester) -> None:
    write_task(suite.path / "tasks", "alpha")
    write_task(suite.path / "tasks", "beta")
    suite.runpytest("--reactbench-agent=oracle", "--junitxml=base.xml").assert_outcomes(passed=2)
    # beta breaks: its solution no longer solves it.
    (suite.path / "tasks" / "beta" / "solution" / "solve.sh").write_text("#!/bin/bash\ntrue\n")
    result = suite.runpytest("--reactbench-agent=oracle", "--reactbench-baseline=base.xml")
    result.stdout.fnmatch_lines(["*reactbench compare: FAIL: 1 regression(s); baseline 100.0% -> now 50.0% "
                                 "over the 2 item(s) scored in both*",
                                 "*beta [[]oracle[]]: pass->fail (1/1 -> 0/1)*"])
    assert result.ret == 1
    # pytest's own last line counts the gate's finding: not a plain "1 passed".
    assert "1 failed, 1 passed, 1 failed the baseline gate in" in result.stdout.lines[-1]
    # The same comparison from the command line, and a run compared with itself.
    run = run_folder(result)
    assert main(["compare", str(suite.path / "base.xml"), str(suite.path / "base.xml")]) == 0
    assert main(["compare", str(suite.path / "base.xml"), str(run)]) == 1
    # Items of the baseline that never ran are not a pass by omission.
    result = suite.runpytest("--reactbench-agent=oracle", "--reactbench-baseline=base.xml", "tasks/alpha")
    result.stdout.fnmatch_lines(["*1 baseline item(s) missing from the new run*",
                                 "*beta [[]oracle[]]: missing*"])
    assert result.ret == 1
    assert "1 passed, 1 failed the baseline gate in" in result.stdout.lines[-1]
    result = suite.runpytest("--reactbench-agent=oracle", "--reactbench-baseline=base.xml", "tasks/alpha",
                             "--reactbench-allow-missing")
    assert result.ret == 0


def test_baseline_gate_over_items_that_only_errored_exits_inconclusive(suite: pytest.Pytester) -> None:
    write_task(suite.path / "tasks", "alpha")
    write_task(suite.path / "tasks", "beta")
    suite.runpytest("--reactbench-agent=oracle", "--junitxml=base.xml").assert_outcomes(passed=2)
    # beta cannot be set up now: an error, no verdict, neither a pass nor a regression.
    (suite.path / "tasks" / "beta" / "environment" / "Dockerfile").write_text(
        "FROM reactbench/system\nRUN exit 7\n")
    result = suite.runpytest("--reactbench-agent=oracle", "--reactbench-baseline=base.xml")
    result.stdout.fnmatch_lines(["*reactbench compare: INCONCLUSIVE: no regression, 1 item(s) without a "
                                 "verdict in the new run*", "*beta [[]oracle[]]: no verdict (errors)*"])
    assert result.ret == 3
    assert "1 without a verdict for the baseline gate" in result.stdout.lines[-1]
    # A regression beside it is a regression: exit 1.
    (suite.path / "tasks" / "alpha" / "solution" / "solve.sh").write_text("#!/bin/bash\ntrue\n")
    result = suite.runpytest("--reactbench-agent=oracle", "--reactbench-baseline=base.xml")
    assert result.ret == 1


def _paeth(a: int, b: int, c: int) -> int:
    p = a + b - c
    if abs(p - a) <= abs(p - b) and abs(p - a) <= abs(p - c):
        return a
    return b if abs(p - b) <= abs(p - c) else c


def _pixels(png: bytes) -> list[list[tuple[int, int, int]]]:
    """The RGB rows of a non-interlaced 8-bit RGB(A) PNG (what Chromium writes)."""
    pos, chunks, header = 8, b"", b""
    while pos < len(png):
        length, kind = struct.unpack(">I4s", png[pos:pos + 8])
        data = png[pos + 8:pos + 8 + length]
        header = data if kind == b"IHDR" else header
        chunks += data if kind == b"IDAT" else b""
        pos += 12 + length
    width, height, _depth, colour = struct.unpack(">IIBB", header[:10])
    channels = {2: 3, 6: 4}[colour]
    raw, stride, rows, prev = zlib.decompress(chunks), width * channels, [], bytearray(width * channels)
    for row in range(height):
        start = row * (stride + 1)
        kind, line = raw[start], bytearray(raw[start + 1:start + 1 + stride])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b, c = prev[i], prev[i - channels] if i >= channels else 0
            pred = [0, a, b, (a + b) // 2, _paeth(a, b, c)][kind]
            line[i] = (line[i] + pred) & 0xFF
        rows.append(line)
        prev = line
    return [[(r[i], r[i + 1], r[i + 2]) for i in range(0, stride, channels)] for r in rows]


def test_report_renders_in_a_real_browser(suite: pytest.Pytester, tmp_path: Path) -> None:
    write_task(suite.path / "tasks", "alpha")
    suite.runpytest("--reactbench-agent=oracle,nop", "--junitxml=r.xml")
    out = tmp_path / "report"
    assert main(["report", str(suite.path / "r.xml"), "--out", str(out)]) == 0
    page = (out / "report.html").read_text()
    assert 'data-verdict="passed"' in page and 'data-verdict="failed"' in page
    shot = tmp_path / "report.png"
    subprocess.run(["chromium", "--headless", "--no-sandbox", "--disable-gpu",
                    "--disable-background-networking", "--disable-component-update", "--disable-sync",
                    "--no-first-run", f"--user-data-dir={tmp_path / 'profile'}",
                    f"--screenshot={shot}", "--window-size=900,1100", f"file://{out / 'report.html'}"],
                   # Chromium's helpers outlive it holding inherited pipes: no pipes.
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=120, check=True)
    artifacts = Path(__file__).resolve().parents[2] / ".reactbench" / "test-artifacts"
    artifacts.mkdir(parents=True, exist_ok=True)
    shutil.copy(shot, artifacts / "report.png")
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    # The matrix shows a green cell (oracle passed) and a red one (nop failed).
    image = _pixels(png)
    colours = {image[y][x] for x in range(30, 700, 6) for y in range(0, len(image), 6)}
    assert (0x2E, 0x7D, 0x32) in colours and (0xC6, 0x28, 0x28) in colours


def test_replay_runs_a_recorded_trial_again(suite: pytest.Pytester, tmp_path: Path) -> None:
    write_task(suite.path / "tasks", "alpha")
    suite.runpytest("--reactbench-agent=oracle").assert_outcomes(passed=1)
    (record,) = (suite.path / "records").glob("*/alpha__oracle__1")
    assert main(["replay", str(record), "--records", str(tmp_path / "again")]) == 0
    (again,) = (tmp_path / "again").glob("*/alpha__oracle__1")
    assert json.loads((again / "status.json").read_text())["verdict"] == "passed"


def test_replay_is_one_trial_beside_the_recorded_run(suite: pytest.Pytester, bake_cache: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    suite.makeini(f"""
        [pytest]
        reactbench_cache = {bake_cache}
        reactbench_records = records
        reactbench_attempts = 2
    """)
    write_task(suite.path / "tasks", "alpha")
    suite.runpytest("--reactbench-agent=oracle").assert_outcomes(passed=2)
    (first_run,) = (suite.path / "records").iterdir()
    # The run's own directory: replay names the trials it holds.
    assert main(["replay", str(first_run)]) == 2
    said = capsys.readouterr().err
    assert f"{first_run} is a run, not a trial" in said and "alpha__oracle__1, alpha__oracle__2" in said, said
    assert main(["replay", str(first_run / "alpha__oracle__2")]) == 0
    (replayed,) = set((suite.path / "records").iterdir()) - {first_run}
    assert sorted(p.name for p in replayed.iterdir() if (p / "status.json").is_file()) == [
        "alpha__oracle__1"]
    status = json.loads((replayed / "alpha__oracle__1" / "status.json").read_text())
    assert status["verdict"] == "passed"


def test_replay_of_a_folder_that_is_not_a_trial_says_so(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "manifest.json").write_text("{}")
    assert main(["replay", str(tmp_path)]) == 2
    assert "not a trial's manifest" in capsys.readouterr().err
