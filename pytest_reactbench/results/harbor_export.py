"""Runs as Harbor job folders (`reactbench export --harbor RUN... --out DIR`), so that
`harbor view DIR` lists each run and shows each trial's reward, exception and
trajectory, beside the user's other benchmarks.

A run becomes `DIR/<run id>/`: the job's `config.json` and `result.json`, and a folder
per trial record (every record, retries included, named as the record is) holding its
`config.json`, `result.json`, `agent/trajectory.json` (ATIF: the record's, or made from
the record when an older version wrote none), the agent's log and the verifier's files
under `verifier/`. The JSON is written by this module alone, in the shapes Harbor's job
and trial models read; nothing of Harbor is needed to write it.

A trial that ended in an error (ours: a harness, sandbox or model API failure) is a
Harbor trial with an exception (its type our failure class, its message ours) and no
reward; a scored trial has the reward `reward` (1 or 0), with our verdict, failure
class, message and gates kept in its agent result's metadata.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pytest_reactbench.results.errors import ResultsError
from pytest_reactbench.results.events import Event
from pytest_reactbench.results.load import read_record
from pytest_reactbench.results.manifest import MANIFEST, RunManifest, TrialManifest
from pytest_reactbench.results.trajectory import TRAJECTORY, build_trajectory
from pytest_reactbench.results.trial_result import TrialResult, Verdict

#: The dataset a trial is of, as Harbor's statistics name it.
SOURCE = "reactbench"
#: A job's or trial's id: the same run exported twice keeps its ids.
_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://github.com/pytest-reactbench/job")


@dataclass(frozen=True)
class Exported:
    run_id: str
    job: Path
    trials: int
    trajectories: int


def _iso(seconds: float | None) -> str | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC).isoformat()


def _write(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def _events(record: Path) -> list[dict[str, Any]]:
    try:
        lines = (record / "events.jsonl").read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    found = []
    for line in lines:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if isinstance(event, dict) and isinstance(event.get("t"), int | float):
            found.append(event)
    return found


def _span(events: Sequence[dict[str, Any]], start: Event, end: Event) -> dict[str, str | None] | None:
    began = next((e["t"] for e in events if e.get("event") == start), None)
    ended = next((e["t"] for e in reversed(events) if e.get("event") == end), None)
    if began is None:
        return None
    return {"started_at": _iso(began), "finished_at": _iso(ended)}


def _checksum(task_path: str) -> str:
    """Of the task's definition (task.toml and instruction.md), when it is at hand."""
    digest = hashlib.sha256()
    for name in ("task.toml", "instruction.md"):
        try:
            digest.update((Path(task_path) / name).read_bytes())
        except OSError:
            continue
    return digest.hexdigest()


def _model(manifest: TrialManifest, trajectory: dict[str, Any] | None) -> dict[str, str] | None:
    """The model, where the agent says it: `tools:<provider>/<model>`, or the model its
    trajectory names (Claude Code's session)."""
    spec = manifest.agent_spec or ""
    if spec.startswith("tools:") and "/" in spec:
        provider, _, name = spec.partition(":")[2].partition("/")
        return {"name": name, "provider": provider}
    named = (trajectory or {}).get("agent", {}).get("model_name")
    return {"name": str(named)} if named else None


def _trajectory(record: Path, result: TrialResult) -> dict[str, Any] | None:
    written = record / TRAJECTORY
    if written.is_file():
        try:
            data = json.loads(written.read_text(encoding="utf-8"))
            return data if isinstance(data, dict) else None
        except (OSError, ValueError):
            return None
    run = result.agent_run
    try:
        made = build_trajectory(record, input_tokens=run.input_tokens, output_tokens=run.output_tokens,
                                cost_usd=run.cost_usd)
    except (ResultsError, ValueError):
        return None  # a record too damaged to tell what the agent did: the trial without one
    return None if made is None else json.loads(made.to_json())


def _trial(record: Path, job_dir: Path, job_id: uuid.UUID) -> tuple[dict[str, Any], bool]:
    """Writes the trial's folder; returns its result (Harbor's shape) and whether it has
    a trajectory."""
    result = read_record(record)
    manifest = TrialManifest.read(record)
    events = _events(record)
    status: dict[str, Any] = {}
    try:
        status = json.loads((record / "status.json").read_text())
    except (OSError, ValueError):
        status = {}
    name = record.name
    folder = job_dir / name
    task_path = manifest.task_path or result.task
    trajectory = _trajectory(record, result)
    model = _model(manifest, trajectory)
    agent: dict[str, Any] = {"name": result.agent}
    if model:
        agent["model_name"] = "/".join(filter(None, [model.get("provider"), model["name"]]))
    config = {"task": {"path": task_path}, "trial_name": name, "trials_dir": str(job_dir),
              "timeout_multiplier": manifest.timeout_multiplier, "agent": agent, "job_id": str(job_id)}
    started = events[0]["t"] if events else None
    finished = status.get("finished_at") if isinstance(status.get("finished_at"), int | float) else (
        events[-1]["t"] if events else None)
    run, grading = result.agent_run, result.grading
    ours = {"verdict": result.verdict.value, "failure": result.failure, "message": result.message,
            "gates": {gate.value: passed for gate, passed in grading.gates.items()},
            "agent_ending": run.ending, "retries": result.retries, "backend": result.provenance.backend,
            "formal": result.provenance.formal, "record": str(record)}
    harbor: dict[str, Any] = {
        "id": str(uuid.uuid5(job_id, name)),
        "task_name": result.task,
        "trial_name": name,
        "trial_uri": folder.resolve().as_uri(),
        "task_id": {"path": task_path},
        "source": SOURCE,
        "task_checksum": _checksum(task_path),
        "config": config,
        "agent_info": {"name": result.agent, "version": run.version or manifest.agent_version or "unknown",
                       "model_info": model},
        "agent_result": {"n_input_tokens": run.input_tokens, "n_output_tokens": run.output_tokens,
                         "cost_usd": run.cost_usd, "metadata": {"reactbench": ours}},
        "verifier_result": ({"rewards": {"reward": grading.reward}}
                            if result.verdict.valid and grading.reward is not None else None),
        "verifier_environment_mode": "separate",
        "exception_info": None,
        "started_at": _iso(started),
        "finished_at": _iso(finished),
        "environment_setup": _span(events, Event.TRIAL_START, Event.AGENT_START),
        "agent_execution": _span(events, Event.AGENT_START, Event.AGENT_END),
        "verifier": _span(events, Event.VERIFY_START, Event.VERIFY_END),
    }
    if not result.verdict.valid:
        kind = result.failure or ("NotAttempted" if result.verdict is Verdict.NOT_ATTEMPTED else "Error")
        harbor["exception_info"] = {"exception_type": kind, "exception_message": result.message,
                                    "exception_traceback": "", "occurred_at": _iso(finished) or _iso(started)
                                    or datetime.now(UTC).isoformat()}
        (folder / "exception.txt").parent.mkdir(parents=True, exist_ok=True)
        (folder / "exception.txt").write_text(f"{kind}: {result.message}\n", encoding="utf-8")
    _write(folder / "config.json", config)
    _write(folder / "result.json", harbor)
    if trajectory is not None:
        _write(folder / "agent" / "trajectory.json", trajectory)
    if (record / "agent.log").is_file():
        (folder / "agent").mkdir(parents=True, exist_ok=True)
        shutil.copyfile(record / "agent.log", folder / "agent" / "agent.log")
    if (record / "verifier").is_dir():
        shutil.copytree(record / "verifier", folder / "verifier", dirs_exist_ok=True)
    return harbor, trajectory is not None


def _stats(results: Sequence[dict[str, Any]], retries: int) -> dict[str, Any]:
    """The job's statistics, per agent as Harbor keys them (agent, model, dataset)."""
    evals: dict[str, dict[str, Any]] = {}
    stats: dict[str, Any] = {"n_completed_trials": len(results), "n_errored_trials": 0, "n_running_trials": 0,
                             "n_pending_trials": 0, "n_cancelled_trials": 0, "n_retries": retries}
    rewards: dict[str, list[float]] = {}
    for result in results:
        model = result["agent_info"]["model_info"]
        named = [result["agent_info"]["name"], model["name"] if model else None, SOURCE]
        key = "__".join(filter(None, named))
        group = evals.setdefault(key, {"n_trials": 0, "n_errors": 0, "metrics": [], "pass_at_k": {},
                                       "reward_stats": {}, "exception_stats": {}})
        verified = result["verifier_result"]
        if verified is not None:
            group["n_trials"] += 1
            reward = verified["rewards"]["reward"]
            group["reward_stats"].setdefault("reward", {}).setdefault(str(reward), []).append(
                result["trial_name"])
            rewards.setdefault(key, []).append(float(reward))
        if result["exception_info"] is not None:
            group["n_errors"] += 1
            stats["n_errored_trials"] += 1
            group["exception_stats"].setdefault(result["exception_info"]["exception_type"], []).append(
                result["trial_name"])
        used = result["agent_result"]
        for ours, theirs in (("n_input_tokens", "n_input_tokens"), ("n_output_tokens", "n_output_tokens"),
                             ("cost_usd", "cost_usd")):
            if used.get(ours) is not None:
                stats[theirs] = (stats.get(theirs) or 0) + used[ours]
    for key, values in rewards.items():
        evals[key]["metrics"] = [{"mean": sum(values) / len(values)}]
    stats["evals"] = evals
    return stats


def _trial_records(run_dir: Path) -> list[Path]:
    return sorted(p.parent for p in run_dir.glob("*/status.json"))


def export_run(run_dir: Path, out: Path) -> Exported:
    """One run's records as the Harbor job folder `out/<run id>` (replaced if there)."""
    manifest = RunManifest.read(run_dir)
    records = _trial_records(run_dir)
    if not records:
        raise ResultsError(f"{run_dir}: the run has no trial records")
    job_dir = out / manifest.run_id
    if job_dir.exists():
        shutil.rmtree(job_dir)
    job_dir.mkdir(parents=True)
    job_id = uuid.uuid5(_NAMESPACE, manifest.run_id)
    results, trajectories = [], 0
    for record in records:
        harbor, has_trajectory = _trial(record, job_dir, job_id)
        results.append(harbor)
        trajectories += has_trajectory
    agents: dict[str, dict[str, Any]] = {}
    for result in results:
        agents.setdefault(result["agent_info"]["name"], result["config"]["agent"])
    tasks = list(dict.fromkeys(result["config"]["task"]["path"] for result in results))
    config = {"job_name": manifest.run_id, "jobs_dir": str(out),
              "n_attempts": max(manifest.attempts or 1, 1),
              "timeout_multiplier": manifest.timeout_multiplier or 1.0,
              "retry": {"max_retries": manifest.retries or 0},
              "agents": list(agents.values()), "tasks": [{"path": path} for path in tasks]}
    starts = [r["started_at"] for r in results if r["started_at"]]
    ends = [r["finished_at"] for r in results if r["finished_at"]]
    began = _iso(manifest.started_at) or (min(starts) if starts else datetime.now(UTC).isoformat())
    retries = sum(1 for record in records if TrialManifest.read(record).retry_of)
    job = {"id": str(job_id), "started_at": began, "updated_at": max(ends) if ends else began,
           "finished_at": None if manifest.incomplete else (max(ends) if ends else began),
           "n_total_trials": len(results), "stats": _stats(results, retries)}
    _write(job_dir / "config.json", config)
    _write(job_dir / "result.json", job)
    return Exported(manifest.run_id, job_dir, len(results), trajectories)


def runs_in(paths: Iterable[Path]) -> list[Path]:
    """The run folders given: a run (its manifest.json in it) or a folder of runs."""
    runs: list[Path] = []
    for path in paths:
        if (path / MANIFEST).is_file():
            runs.append(path)
        elif path.is_dir() and (found := sorted(p.parent for p in path.glob(f"*/{MANIFEST}")
                                                if _trial_records(p.parent))):
            runs += found
        else:
            raise ResultsError(f"{path}: not a run's record folder (no {MANIFEST}) nor a folder of runs")
    return list(dict.fromkeys(runs))


def export_harbor(paths: Sequence[Path], out: Path) -> list[Exported]:
    """Each run under `paths` as a Harbor job folder under `out`."""
    runs = runs_in(paths)
    out.mkdir(parents=True, exist_ok=True)
    return [export_run(run, out) for run in runs]
