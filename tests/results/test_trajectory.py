"""Trajectories in ATIF and runs exported as Harbor job folders, read by Harbor itself:
Harbor from PyPI in a Python >= 3.12 virtual environment (made once per machine, the one
benchmarks/harbor_compare.py uses), its own pydantic models validating what we wrote, its
`harbor view` serving an exported run, and headless Chromium reading a trial there."""

from __future__ import annotations

import contextlib
import fcntl
import html
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from benchmarks.harbor_compare import DEFAULT_WORK, BenchError, ensure_harbor, find_python312
from pytest_reactbench.agents import ToolAgent
from pytest_reactbench.agents.command import CommandAgent, CommandSpec
from pytest_reactbench.agents.tools import ToolError, Tools
from pytest_reactbench.cli import main
from pytest_reactbench.plugin.options import environment_sandbox_options
from pytest_reactbench.results import RunRecords, TrialResult, Verdict
from pytest_reactbench.results.manifest import RunManifest
from pytest_reactbench.results.trajectory import TRAJECTORY, write_trajectory
from pytest_reactbench.sandbox.base import Image, Sandbox
from pytest_reactbench.sandbox.errors import SandboxError
from pytest_reactbench.sandbox.local import LocalBackend
from pytest_reactbench.tasks import Task, load_task
from pytest_reactbench.trial import Stages, Trial
from pytest_reactbench.trial.stages import Role
from tests.helpers import write_task

HERE = Path(__file__).parent
RECORDED = HERE.parent / "agents" / "transcripts"
INSTRUCTION = "Add a Reset button to the counter.\n"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"

#: Run in Harbor's virtual environment: each file given validated by the model named.
VALIDATE = """
import json, sys
from harbor.models.job.config import JobConfig
from harbor.models.job.result import JobResult
from harbor.models.trajectories import Trajectory
from harbor.models.trial.config import TrialConfig
from harbor.models.trial.result import TrialResult
models = {"trajectory": Trajectory, "job-config": JobConfig, "job-result": JobResult,
          "trial-config": TrialConfig, "trial-result": TrialResult}
read = {}
for kind, path in json.loads(sys.argv[1]):
    value = models[kind].model_validate(json.loads(open(path, encoding="utf-8").read()))
    read[path] = len(value.steps) if kind == "trajectory" else type(value).__name__
print(json.dumps(read))
"""


def _managed_python(work: Path) -> Path:
    """A Python >= 3.12 where the machine has none (Debian 12's is 3.11): a CPython that
    uv (from PyPI) installs under `work`."""
    uv = work / "uv" / "bin" / "uv"
    if not uv.exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(work / "uv"), "uv"],
                       check=True)
    env = {**os.environ, "UV_PYTHON_INSTALL_DIR": str(work / "pythons")}
    subprocess.run([str(uv), "python", "install", "3.12"], check=True, env=env)
    found = subprocess.run([str(uv), "python", "find", "3.12"], check=True, env=env,
                           capture_output=True, text=True)
    return Path(found.stdout.strip())


@pytest.fixture(scope="session")
def harbor() -> Path:
    """The bin folder of Harbor's virtual environment, made once per machine (xdist
    workers wait for the one that makes it)."""
    work = DEFAULT_WORK
    work.mkdir(parents=True, exist_ok=True)
    with (work / ".venv.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        saved = os.environ.get("PATH", "")
        try:
            try:
                find_python312()
            except BenchError:
                # ensure_harbor looks for python3.12 on PATH: the managed one, for it.
                shim = work / "bin"
                shim.mkdir(exist_ok=True)
                (shim / "python3.12").unlink(missing_ok=True)
                (shim / "python3.12").symlink_to(_managed_python(work))
                os.environ["PATH"] = f"{shim}{os.pathsep}{saved}"
            return ensure_harbor(work).parent
        finally:
            os.environ["PATH"] = saved


def harbor_reads(bin_dir: Path, files: list[tuple[str, Path]]) -> dict[str, Any]:
    """What Harbor's own models make of our files (a file they refuse fails the test)."""
    given = json.dumps([(kind, str(path)) for kind, path in files])
    read = subprocess.run([str(bin_dir / "python"), "-c", VALIDATE, given], capture_output=True, text=True,
                          timeout=120)
    assert read.returncode == 0, f"Harbor's models refuse what we wrote:\n{read.stderr[-3000:]}"
    result: dict[str, Any] = json.loads(read.stdout)
    return result


def cli_record(root: Path, name: str, log: str, agent: str) -> Path:
    """A trial record as a CLI preset leaves it: its stream in agent.log."""
    record = root / name
    record.mkdir(parents=True)
    (record / "manifest.json").write_text(json.dumps(
        {"task": "counter-reset", "agent": agent, "agent_version": "2.1.332", "run_id": "run-cli"}))
    (record / "agent.log").write_text(log)
    (record / "events.jsonl").write_text(json.dumps({"t": 1765000000.0, "event": "agent-start"}) + "\n")
    return record


def test_claude_code_and_codex_streams_become_atif_trajectories(tmp_path: Path, harbor: Path) -> None:
    claude = write_trajectory(cli_record(tmp_path, "claude", (HERE / "trajectories" / "claude-code.jsonl")
                                         .read_text(), "claude-code"), INSTRUCTION)
    codex = write_trajectory(cli_record(tmp_path, "codex", (HERE / "trajectories" / "codex.jsonl")
                                        .read_text(), "codex"), INSTRUCTION)
    assert claude is not None and codex is not None
    trajectory = json.loads(claude.read_text())
    assert trajectory["schema_version"] == "ATIF-v1.7"
    assert trajectory["session_id"] == "5f0c2a4e-8d1b-4c3e-9a7f-2b6d1e0c9a11"
    assert trajectory["agent"]["model_name"] == "claude-sonnet-4-5"
    user, *steps = trajectory["steps"]
    assert (user["source"], user["message"]) == ("user", INSTRUCTION)
    # One step per model message (its streamed parts merged), each call answered.
    assert [[c["function_name"] for c in s.get("tool_calls", [])] for s in steps] == \
        [["Read"], ["Bash"], ["Edit"], []]
    read, bash, edit, last = steps
    assert read["message"] == "I'll look at the counter first."
    assert read["metrics"] == {"prompt_tokens": 3030, "completion_tokens": 58, "cached_tokens": 1200}
    assert bash["observation"]["results"] == [
        {"source_call_id": "toolu_02B", "content": "sh: 1: vitest: not found\n", "extra": {"is_error": True}}]
    assert "Reset</button>" in edit["tool_calls"][0]["arguments"]["new_string"]  # as given, not cut
    assert edit["observation"]["results"][0]["content"] == "The file /app/src/Counter.tsx has been updated."
    assert last["message"].startswith("Added a Reset button")
    assert trajectory["final_metrics"] == {"total_prompt_tokens": 13976, "total_completion_tokens": 278,
                                           "total_cached_tokens": 11380, "total_cost_usd": 0.0213,
                                           "total_steps": 5}

    trajectory = json.loads(codex.read_text())
    assert trajectory["session_id"] == "0199a6e1-7c2b-7d40-b3f1-5e8a2c4d6f10"
    steps = trajectory["steps"][1:]
    assert steps[0]["reasoning_content"] == "**Locating the counter component**"
    commands = [s for s in steps if s.get("tool_calls")]
    ended = [(c["tool_calls"][0]["function_name"],
              c["observation"]["results"][0].get("extra", {}).get("exit_code")) for c in commands]
    assert ended == [("command_execution", 0), ("command_execution", 1), ("file_change", None)]
    assert commands[1]["tool_calls"][0]["arguments"] == {"command": "bash -lc 'pnpm test'"}
    assert "Missing script: test" in commands[1]["observation"]["results"][0]["content"]
    assert commands[2]["observation"]["results"][0]["content"] == "update /app/src/Counter.tsx"
    assert steps[-1]["message"].startswith("Added a Reset button")
    assert trajectory["final_metrics"] == {"total_prompt_tokens": 14210, "total_completion_tokens": 612,
                                           "total_cached_tokens": 9984, "total_steps": 6}

    # What the pinned CLIs printed against the scripted model server reads the same way.
    recorded = [write_trajectory(cli_record(tmp_path, f"recorded-{name}",
                                            (RECORDED / f"{name}.jsonl").read_text(), name), INSTRUCTION)
                for name in ("claude-code", "codex")]
    assert all(recorded)
    files = [("trajectory", path) for path in (claude, codex, *recorded) if path is not None]
    assert harbor_reads(harbor, files) == {str(claude): 5, str(codex): 6, str(recorded[0]): 3,
                                           str(recorded[1]): 5}


class Writer(ToolAgent):
    """Works through the tools API, two model calls reported: a listing, a failing
    command, a refused edit, a file."""

    name = "writer"

    def solve(self, instruction: str, tools: Tools) -> None:
        tools.model_replied(1200, 40, seconds=0.5, model="scripted")
        tools.said("Looking around first.")
        tools.view(".")
        tools.bash("ls /nowhere")
        with contextlib.suppress(ToolError):
            tools.str_replace("base.txt", "absent", "x")
        tools.create("out.txt", "hello\n")
        tools.model_replied(1500, 20, seconds=0.25, model="scripted")
        tools.said("Wrote out.txt.")
        tools.submit()


class AgentBootFails(Stages):
    def boot(self, task: Task, role: Role, image: Image, egress: tuple[str, ...] = ()) -> Sandbox:
        if role == "agent":
            raise SandboxError("the engine refused to start the agent's sandbox")
        return super().boot(task, role, image, egress)


@dataclass
class Run:
    folder: Path
    results: dict[str, TrialResult]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory, bake_cache: Path) -> Iterator[Run]:
    """A small run on the local backend: a tools-API agent that passes, a command agent
    that fails, and a trial that ends in an error before its agent acts."""
    root = tmp_path_factory.mktemp("harbor-run")
    task = load_task(write_task(root / "tasks", "alpha"))
    backend = LocalBackend(environment_sandbox_options(cache=bake_cache))
    records = RunRecords(root / "records", "run-harbor")
    records.write_manifest(RunManifest(run_id="run-harbor", agents=["writer", "echo", "unlucky"], attempts=1))
    results = {}
    try:
        echo = CommandAgent(CommandSpec("echo", "echo working; ls /missing; exit 3"))
        unlucky = CommandAgent(CommandSpec("unlucky", "true"))
        for agent, stages in ((Writer(), Stages), (echo, Stages), (unlucky, AgentBootFails)):
            trial = Trial(task, agent, stages=stages(backend, lambda line: None, {}), records=records)
            results[agent.name] = trial.run()
    finally:
        backend.close()
    yield Run(records.run_dir, results)


def test_a_tools_api_trial_and_a_command_trial_write_their_trajectories(run: Run, harbor: Path) -> None:
    verdicts = {name: (r.verdict, r.failure) for name, r in run.results.items()}
    assert verdicts == {"writer": (Verdict.PASSED, ""), "echo": (Verdict.FAILED, "tests"),
                        "unlucky": (Verdict.ERROR, "SandboxError")}
    writer = Path(run.results["writer"].record) / TRAJECTORY
    echo = Path(run.results["echo"].record) / TRAJECTORY
    assert not (Path(run.results["unlucky"].record) / TRAJECTORY).exists()  # its agent never acted
    trajectory = json.loads(writer.read_text())
    assert trajectory["agent"] == {"name": "writer", "version": "unknown"}
    user, *steps = trajectory["steps"]
    assert user == {"step_id": 1, "timestamp": user["timestamp"], "source": "user",
                    "message": "Write hello to /app/out.txt\n"}
    # A step per model call: what it said, the tool calls it made, its tokens and time.
    assert [(s["message"], [c["function_name"] for c in s["tool_calls"]], s["metrics"], s["extra"])
            for s in steps] == [
        ("Looking around first.", ["view", "bash", "str_replace", "create"],
         {"prompt_tokens": 1200, "completion_tokens": 40}, {"seconds": 0.5}),
        ("Wrote out.txt.", ["submit"], {"prompt_tokens": 1500, "completion_tokens": 20}, {"seconds": 0.25})]
    assert {s["model_name"] for s in steps} == {"scripted"} and {s["llm_call_count"] for s in steps} == {1}
    # Each call's observation answers it: its output, exit code, or what the agent was told.
    calls = steps[0]["tool_calls"]
    answers = {r["source_call_id"]: r for r in steps[0]["observation"]["results"]}
    bash = answers[calls[1]["tool_call_id"]]
    assert calls[1]["arguments"] == {"command": "ls /nowhere"}
    assert bash["extra"]["exit_code"] == 2 and "No such file or directory" in bash["content"]
    refused = answers[calls[2]["tool_call_id"]]
    assert refused["content"] == "error: old_str does not occur in /app/base.txt"
    assert calls[3]["arguments"] == {"path": "/app/out.txt", "file_text": "hello\n"}
    assert all(s["timestamp"].endswith("Z") for s in trajectory["steps"])
    assert trajectory["final_metrics"] == {"total_prompt_tokens": 2700, "total_completion_tokens": 60,
                                           "total_steps": 3}

    trajectory = json.loads(echo.read_text())
    (step,) = trajectory["steps"][1:]
    assert step["tool_calls"] == [{"tool_call_id": "call-1", "function_name": "command",
                                   "arguments": {"command": "echo working; ls /missing; exit 3"}}]
    (result,) = step["observation"]["results"]
    assert result["content"].startswith("working\nls: cannot access '/missing'")
    assert result["extra"] == {"exit_code": 3, "ending": "exited-nonzero"}
    read = harbor_reads(harbor, [("trajectory", writer), ("trajectory", echo)])
    assert read == {str(writer): 3, str(echo): 2}


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=30) as answer:
        return json.loads(answer.read())


@contextlib.contextmanager
def harbor_view(bin_dir: Path, folder: Path) -> Iterator[str]:
    port = _free_port()
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "HARBOR_TELEMETRY": "0", "NO_COLOR": "1"}
    log = folder.parent / "harbor-view.log"
    with log.open("w") as out:
        server = subprocess.Popen([str(bin_dir / "harbor"), "view", str(folder), "--jobs", "--no-build",
                                   "--host", "127.0.0.1", "--port", str(port)],
                                  stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                _get(f"{base}/api/health")
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.3)
        yield base
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()


def page_text(url: str, profile: Path) -> str:
    """What headless Chromium shows of a page once its scripts ran."""
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                          f"--user-data-dir={profile}", "--virtual-time-budget=15000", "--dump-dom", url],
                         capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    text = re.sub(r"<script.*?</script>|<style.*?</style>", "", dom.stdout, flags=re.S)
    return re.sub(r"\s+", " ", html.unescape(re.sub(r"<[^>]+>", " ", text)))


def test_an_exported_run_opens_in_harbors_viewer(run: Run, harbor: Path, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    # A record of an older version has no trajectory: the export makes it from the record.
    records = shutil.copytree(run.folder, tmp_path / "records" / run.folder.name)
    echo = Path(run.results["echo"].record).name
    (records / echo / TRAJECTORY).unlink()
    out = tmp_path / "jobs"
    assert main(["export", "--harbor", str(records), "--out", str(out)]) == 0
    job = out / "run-harbor"
    assert f"{job}: 3 trial(s), 2 with a trajectory" in capsys.readouterr().out
    trials = {name: job / Path(r.record).name for name, r in run.results.items()}
    made = json.loads((trials["echo"] / TRAJECTORY).read_text())
    assert made == json.loads((run.folder / echo / TRAJECTORY).read_text())
    files = [("job-config", job / "config.json"), ("job-result", job / "result.json")]
    for folder in trials.values():
        files += [("trial-config", folder / "config.json"), ("trial-result", folder / "result.json")]
    harbor_reads(harbor, files)
    assert (trials["writer"] / "verifier" / "test-stdout.txt").is_file()

    with harbor_view(harbor, out) as base:
        (listed,) = _get(f"{base}/api/jobs")["items"]
        assert (listed["name"], listed["n_total_trials"], listed["n_errored_trials"]) == ("run-harbor", 3, 1)
        assert listed["agents"] == ["echo", "unlucky", "writer"]
        shown = {t["agent_name"]: (t["reward"], t["error_type"])
                 for t in _get(f"{base}/api/jobs/run-harbor/trials")["items"]}
        assert shown == {"writer": (1.0, None), "echo": (0.0, None), "unlucky": (None, "SandboxError")}
        trial = _get(f"{base}/api/jobs/run-harbor/trials/{trials['unlucky'].name}")
        assert "refused to start the agent's sandbox" in trial["exception_info"]["exception_message"]
        steps = _get(f"{base}/api/jobs/run-harbor/trials/{trials['writer'].name}/trajectory")["steps"]
        assert len(steps) == 3
        # The trial's page, as a browser shows it: its reward and its steps.
        text = page_text(f"{base}/jobs/run-harbor/trials/{trials['writer'].name}", tmp_path / "chromium")
        assert "reward 1.00" in text and "Trajectory 3 steps" in text, text[:3000]
        assert 'command: "ls /nowhere"' in text and "Wrote out.txt." in text, text[:3000]


#: Where each part of a page begins, once Chromium laid it out (in the page's body).
FIRST_SCREEN = """<script>addEventListener("load", () => {
  const top = id => document.getElementById(id)?.getBoundingClientRect().top ?? null;
  const parts = ["verdict", "reason", "step-1", "instruction"].map(id => [id, top(id)]);
  document.body.dataset.tops = JSON.stringify(Object.fromEntries([...parts, ["screen", innerHeight]]));
});</script>"""


def test_a_cli_trial_page_opens_on_its_verdict_reason_and_transcript(tmp_path: Path) -> None:
    from pytest_reactbench.results import AgentRun, Gate, Grading, Provenance
    from pytest_reactbench.results.site import write_site

    task = tmp_path / "tasks" / "counter-reset"
    task.mkdir(parents=True)
    (task / "instruction.md").write_text("# Reset\n\n" + "Add a Reset button to the counter.\n" * 40)
    record = cli_record(tmp_path / "records", "counter-reset__claude-code__1",
                        (HERE / "trajectories" / "claude-code.jsonl").read_text(), "claude-code")
    manifest = json.loads((record / "manifest.json").read_text())
    (record / "manifest.json").write_text(json.dumps({**manifest, "task_path": str(task)}))
    (record / "diff.patch").write_text("diff --git a/src/Counter.tsx b/src/Counter.tsx\n" + "+line\n" * 300)
    assert write_trajectory(record) is not None
    result = TrialResult(task="counter-reset", agent="claude-code", attempt=1, verdict=Verdict.FAILED,
                         failure="tests", message="failed gate tests",
                         agent_run=AgentRun(ending="completed", input_tokens=13976, output_tokens=278),
                         grading=Grading(reward=0.0, gates={Gate.TESTS: False, Gate.REACT_DOCTOR: True}),
                         provenance=Provenance(record=str(record)))
    write_site([result], tmp_path / "site")
    page = tmp_path / "site" / "trials" / f"{record.name}.html"
    probe = page.with_name("probe.html")
    probe.write_text(page.read_text().replace("</body>", FIRST_SCREEN + "</body>"))
    dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                          f"--user-data-dir={tmp_path / 'c'}", "--window-size=1280,800",
                          "--virtual-time-budget=5000", "--dump-dom", probe.as_uri()],
                         capture_output=True, text=True, timeout=120)
    found = re.search(r'data-tops="([^"]+)"', dom.stdout)
    assert found, dom.stdout[-2000:]
    tops = json.loads(html.unescape(found.group(1)))
    # The verdict, why, and the first step of the transcript on the first screen; the
    # instruction (long) and the diff below them.
    assert all(tops[part] is not None and tops[part] < tops["screen"]
               for part in ("verdict", "reason", "step-1")), tops
    assert tops["reason"] < tops["step-1"] < tops["instruction"], tops
    text = page_text(page.as_uri(), tmp_path / "c")
    # The step's tokens, and its arguments as written (not escaped JSON).
    first = "#1 assistant 3030 tokens in (1200 cached), 58 out I'll look at the counter first."
    assert first in text, text[:2000]
    assert "file_path /app/src/Counter.tsx" in text and "#5 Edit" in text
    assert "<button onClick={() => setCount(0)} disabled={count === 0}>Reset</button>" in text


def test_the_run_page_filters_and_sorts_its_trials_and_a_trial_page_leads_on(tmp_path: Path) -> None:
    from pytest_reactbench.results import Grading, Provenance
    from pytest_reactbench.results.site import write_site

    # alpha/oracle passed on its second try: the first ended in an error.
    first, second = tmp_path / "records" / "alpha__oracle__1", tmp_path / "records" / "alpha__oracle__1.1"
    for record, retry_of in ((first, None), (second, str(first))):
        record.mkdir(parents=True)
        (record / "manifest.json").write_text(json.dumps({"task": "alpha", "agent": "oracle",
                                                          "retry_of": retry_of}))
    (first / "status.json").write_text(json.dumps({"status": "complete", "verdict": "error",
                                                   "failure": "AgentAPIError",
                                                   "message": "the model API failed: HTTP 500"}))

    def trial(task: str, agent: str, verdict: Verdict, failure: str = "", seconds: float = 1.0,
              record: Path | None = None) -> TrialResult:
        reward = {Verdict.PASSED: 1.0, Verdict.FAILED: 0.0}.get(verdict)
        return TrialResult(task=task, agent=agent, attempt=1, verdict=verdict, failure=failure,
                           retries=1 if record else 0, durations={"agent": seconds},
                           grading=Grading(reward=reward), provenance=Provenance(record=str(record or "")))

    outcomes = [trial("alpha", "oracle", Verdict.PASSED, seconds=3, record=second),
                trial("alpha", "nop", Verdict.FAILED, "tests", seconds=2),
                trial("beta", "oracle", Verdict.ERROR, "SandboxError", seconds=9),
                trial("beta", "nop", Verdict.FAILED, "tests+react_doctor", seconds=5)]
    index = write_site(outcomes, tmp_path / "site")
    page = (tmp_path / "site" / "trials" / "alpha__oracle__1.1.html").read_text()
    # Previous and next by task, agent and attempt.
    links = dict(re.findall(r'<a id=(prev|next) rel=\w+ href="([^"]+)"', page))
    assert links == {"prev": "alpha__nop__1.html", "next": "beta__nop__1.html"}
    assert all((index.parent / "trials" / href).is_file() for href in links.values())
    text = page_text((index.parent / "trials" / "alpha__oracle__1.1.html").as_uri(), tmp_path / "c")
    retried = "Retries before this result (1) alpha__oracle__1 : AgentAPIError the model API failed: HTTP 500"
    assert retried in text, text[:3000]

    def shown(query: str) -> list[str]:
        """The trial list's rows a browser shows at `report.html#query`, in order."""
        dom = subprocess.run([CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu",
                              f"--user-data-dir={tmp_path / 'c'}", "--virtual-time-budget=5000", "--dump-dom",
                              f"{index.as_uri()}#{query}"], capture_output=True, text=True, timeout=120)
        table = dom.stdout.split('<table id="trials">', 1)[1].split("</table>", 1)[0]
        rows = re.finditer(r'<tr data-task="([^"]+)" data-agent="([^"]+)"([^>]*)>', table)
        return [f"{m[1]}/{m[2]}" for m in rows if "hidden" not in m[3]]

    assert shown("verdict=failed") == ["alpha/nop", "beta/nop"]
    assert shown("failure=SandboxError") == ["beta/oracle"]
    assert shown("agent=oracle&sort=seconds-desc") == ["beta/oracle", "alpha/oracle"]
    assert shown("sort=seconds-asc") == ["alpha/nop", "alpha/oracle", "beta/nop", "beta/oracle"]
