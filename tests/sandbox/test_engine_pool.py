"""The docker backend over a pool of three engines: the main one and two more started
here (their own sockets, data roots and bridges, loopback only), which start empty and
get the tasks' images copied from the main engine by the pool itself. The shipped
suite runs over them once (its images are gigabytes: the copies are most of that
test's minutes); the other runs use tiny tasks (a static busybox), so they cost
seconds: the engines, not the tasks, are under test there. Also: the room ledger that
keeps an engine from being asked for more than it has, across processes, and the
pool's placement and image logic over fake engines."""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from pytest_reactbench.results import Gate
from pytest_reactbench.sandbox.base import Capabilities, Image, ImageRecipe
from pytest_reactbench.sandbox.docker import wanted as wanted_module
from pytest_reactbench.sandbox.docker.ledger import Ledger, Room
from pytest_reactbench.sandbox.docker.pool import EnginePool
from pytest_reactbench.sandbox.errors import EngineLost, SandboxError
from pytest_reactbench.sandbox.options import SandboxOptions
from pytest_reactbench.sandbox.prebake import prebake
from tests.helpers import junit_results
from tests.sandbox.extra_engines import ExtraEngine, build_tiny_base, extra_engine, tiny_task

MAIN = "unix:///var/run/docker.sock"
ROOT = Path(__file__).resolve().parents[2]
#: This process's tasks (and so its images): xdist workers running these tests apart
#: remove only their own.
PREFIX = f"pool-{uuid.uuid4().hex[:6]}"
@pytest.fixture(scope="module")
def engines() -> Iterator[list[ExtraEngine]]:
    if shutil.which("busybox") is None:
        pytest.fail("these tests need busybox-static (.ci/setup installs it)")
    with extra_engine(1) as first, extra_engine(2) as second:
        yield [first, second]


@pytest.fixture(scope="module")
def base_image(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A tiny base image on the main engine only; what was built on it goes with it."""
    client = docker.from_env()
    tag = build_tiny_base(client, tmp_path_factory.mktemp("busybox"))
    try:
        yield tag
    finally:
        # By tag, not by id: another xdist worker's base is the same image (the same
        # build), and the image goes when its last tag does.
        # Already gone is fine: a concurrent test's prune may have taken them.
        with contextlib.suppress(docker.errors.NotFound):
            for image in client.images.list(filters={"label": "reactbench.recipe"}):
                for name in image.tags:
                    if name.startswith(f"reactbench/{PREFIX}"):
                        client.images.remove(name)
            client.images.remove(tag)
        client.close()


def _verdicts(xml: Path) -> dict[str, tuple[str, str]]:
    return {f"{r.task}::{r.agent}": (r.verdict, r.provenance.engine) for r in junit_results(xml)}


def _our_containers(url: str, run_dirs: list[Path]) -> list[str]:
    client = docker.DockerClient(base_url=url, timeout=30)
    try:
        runs = {d.name for d in run_dirs}
        found = [c.name for c in client.containers.list(all=True, filters={"label": "reactbench.owner"})
                 if c.labels.get("reactbench.run") in runs]
        found += [n.name for n in client.networks.list(filters={"label": "reactbench.owner"})
                  if (n.attrs.get("Labels") or {}).get("reactbench.run") in runs]
        return found
    finally:
        client.close()


def _image_ids(url: str) -> set[str]:
    client = docker.DockerClient(base_url=url, timeout=30)
    try:
        return {str(image.id) for image in client.images.list()}
    finally:
        client.close()


def _run_dirs(suite: pytest.Pytester) -> list[Path]:
    return [p for p in (suite.path / "records").iterdir() if (p / "manifest.json").is_file()]


@pytest.mark.slow
@pytest.mark.docker
def test_the_shipped_suite_over_three_engines_has_the_verdicts_of_one(
        tmp_path: Path, engines: list[ExtraEngine]) -> None:
    hosts = [MAIN, engines[0].url, engines[1].url]
    xml, records = tmp_path / "pool.xml", tmp_path / "records"
    # The bake cache is the user's (as the shipped suite's own test): the images on the
    # main engine are found there, or baked once for both tests.
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "3",
         "--reactbench-agent=oracle,nop", "--reactbench-sandbox=docker",
         # The stand-ins, whatever the main engine holds under the public names (the
         # public-layout test tags them there while it runs): the keys stay those baked.
         "--reactbench-images=stand-in",
         f"--reactbench-records={records}", f"--junitxml={xml}",
         *(f"--reactbench-docker-host={h}" for h in hosts)],
        cwd=ROOT, capture_output=True, text=True, timeout=1800)
    output = (proc.stdout + proc.stderr)[-4000:]
    assert xml.exists(), output
    results = {(r.task, r.agent): r for r in junit_results(xml)}
    shipped = sorted(path.name for path in (ROOT / "tasks").iterdir() if (path / "task.toml").is_file())
    assert set(results) == {(t, a) for t in shipped for a in ("oracle", "nop")}, output
    # The verdicts of one engine (tests/integration/test_shipped_tasks.py): every
    # reference solution scores 1, the untouched repository 0.
    for task in shipped:
        assert results[(task, "oracle")].verdict == "passed", output
        assert results[(task, "oracle")].grading.gates.get(Gate.REACT_DOCTOR) is True
        assert results[(task, "nop")].verdict == "failed", output
        assert results[(task, "nop")].grading.gates.get(Gate.TESTS) is False
    assert proc.returncode == 1, output  # the nop items fail, as they must
    # Every engine ran trials, and the run's manifest and records name them.
    assert {r.provenance.engine for r in results.values()} == set(hosts), output
    run = next(records.iterdir())
    assert json.loads((run / "manifest.json").read_text())["engines"] == hosts
    for status in run.glob("*/status.json"):
        assert json.loads(status.read_text())["provenance"]["engine"] in hosts
    # A task's images are the same (the same ids) on whichever engine its trials ran:
    # the empty engines got copies, not builds of their own.
    # Each empty engine got the suite's images in the prebake's spread (one save), and
    # at most one more save per trial placed there that waited for its image's bake
    # (then copied with what was listed by then); not one copy per image.
    copies = re.findall(r"copied (\d+) image\(s\) to (\S+) in", proc.stderr)
    for engine in engines:
        placed = sum(1 for r in results.values() if r.provenance.engine == engine.url)
        assert 1 <= len([n for n, url in copies if url == engine.url]) <= placed + 1, copies
    held = {engine.url: _image_ids(engine.url) for engine in engines}
    for task in shipped:
        for role in ("agent", "verifier"):
            digests = {results[(task, agent)].provenance.images[role] for agent in ("oracle", "nop")}
            assert len(digests) == 1, (task, role, digests)
            assert all(digests <= ids for ids in held.values()), (task, role, digests)
    for url in hosts:
        assert _our_containers(url, [run]) == [], url


@pytest.mark.docker
def test_a_lost_engine_ends_its_trials_in_errors_retried_on_the_others(
        suite: pytest.Pytester, engines: list[ExtraEngine], base_image: str) -> None:
    names = [f"{PREFIX}-lost-{n}" for n in range(3)]
    for name in names:
        # Long enough to stop the engine while the agent works.
        tiny_task(suite.path / "tasks", name, base_image, solve="sleep 8; echo hello > /app/out.txt")
    with extra_engine(3) as doomed:
        # Listed first: the first trial goes to it.
        hosts = [doomed.url, MAIN, engines[0].url]
        command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2",
                   "--reactbench-sandbox=docker", "--reactbench-agent=oracle", "--reactbench-retries=1",
                   "--junitxml=lost.xml", *(f"--reactbench-docker-host={h}" for h in hosts)]
        # Its own process group: a failure below stops its xdist workers too.
        run = subprocess.Popen(command, cwd=suite.path, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, start_new_session=True)
        watcher = doomed.client()
        # Generous: on a loaded machine starting pytest and its workers alone takes minutes.
        deadline = time.monotonic() + 600
        while not watcher.containers.list(filters={"label": "reactbench.role=agent"}):
            if run.poll() is not None or time.monotonic() > deadline:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(run.pid, signal.SIGKILL)
                pytest.fail(f"no trial reached the doomed engine:\n{run.communicate()[0][-4000:]}")
            time.sleep(0.2)
        watcher.close()
        doomed.stop()
        output, _ = run.communicate(timeout=300)
    assert run.returncode == 0, output[-3000:]
    results = _verdicts(suite.path / "lost.xml")
    assert {v for v, _ in results.values()} == {"passed"}
    assert doomed.url not in {engine for _, engine in results.values()}
    # The trial that was on the lost engine: its first record is marked incomplete,
    # its retry (another record) passed elsewhere.
    run_dir = max(_run_dirs(suite), key=lambda p: p.name)
    statuses = {s.parent.name: json.loads(s.read_text()) for s in run_dir.glob("*/status.json")}
    lost = [name for name, s in statuses.items() if s["status"] == "incomplete"]
    assert lost, statuses
    for name in lost:
        assert "was lost mid-trial" in statuses[name]["reason"]
        assert statuses[name]["provenance"]["engine"] == doomed.url
        retry = statuses[f"{name}.1"]
        assert retry["status"] == "complete" and retry["verdict"] == "passed"
        assert retry["provenance"]["engine"] in hosts[1:]
    for url in hosts[1:]:
        assert _our_containers(url, _run_dirs(suite)) == [], url


def _hold(path: str, seconds: float, started: Any) -> None:
    ledger = Ledger(Path(path), Room(2, 4096))
    holder, _ = ledger.reserve("other-trial", 2, 1024)
    started.set()
    time.sleep(seconds)
    ledger.release(holder)


def test_the_ledger_makes_a_worker_wait_for_room(tmp_path: Path) -> None:
    path = tmp_path / "engine.json"
    ledger = Ledger(path, Room(2, 4096))
    started = multiprocessing.get_context("fork").Event()
    other = multiprocessing.get_context("fork").Process(target=_hold, args=(str(path), 1.5, started))
    other.start()
    assert started.wait(10)
    assert ledger.free() == Room(0, 3072)
    began = time.monotonic()
    holder, waited = ledger.reserve("trial", 1, 1024)  # the other process holds both CPUs
    assert time.monotonic() - began > 1.0 and waited > 1.0  # told, to be booked as a wait
    # The trial's second sandbox joins its room at once: the group holds the larger.
    second, joined = ledger.reserve("trial", 1, 2048)
    assert joined < 0.5
    assert ledger.free() == Room(1, 2048)
    ledger.release(holder)
    ledger.release(second)
    other.join(10)
    assert ledger.free() == Room(2, 4096)


def test_a_dead_process_gives_its_room_back(tmp_path: Path) -> None:
    path = tmp_path / "engine.json"
    started = multiprocessing.get_context("fork").Event()
    other = multiprocessing.get_context("fork").Process(target=_hold, args=(str(path), 60, started))
    other.start()
    assert started.wait(10)
    other.kill()
    other.join(10)
    assert Ledger(path, Room(2, 4096)).free() == Room(2, 4096)


def test_a_sandbox_larger_than_the_engine_is_refused_at_once(tmp_path: Path) -> None:
    expected = "asks for 1 CPU(s) and 8192 MiB; the engine has 2 CPU(s), 4096 MiB in all"
    with pytest.raises(SandboxError, match=re.escape(expected)):
        Ledger(tmp_path / "engine.json", Room(2, 4096)).reserve("trial", 1, 8192)


@pytest.fixture(autouse=True)
def _copies_start_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    # The fakes' lists change only under the test's own hand: no settling to wait for.
    monkeypatch.setattr(wanted_module, "WANTED_SETTLE_SECONDS", 0.0)


class FakeEngine:
    """What the pool asks of an engine, without one: the placement logic alone."""

    capabilities = Capabilities(formal=True)

    def __init__(self, options: SandboxOptions, host: str) -> None:
        self.engine = host
        self.ledger = Ledger(options.cache / f"{host.rsplit('/', 1)[-1]}.json", Room(2, 4096))
        self.up = True
        self.images: dict[str, Image] = {}
        self.loaded: list[list[str]] = []
        #: What the run's image registry holds (refs), as this engine pulls from it.
        self.registry: set[str] = set()
        self.pulled: list[str] = []

    def alive(self) -> bool:
        return self.up

    def baked(self, recipe: ImageRecipe) -> Image | None:
        return self.images.get(recipe.name)

    def bake(self, recipe: ImageRecipe, progress: object) -> Image:
        if not self.up:
            raise SandboxError("connection refused")
        self.images[recipe.name] = Image(f"reactbench/{recipe.name}:k", "sha256:1", "docker", cached=False)
        return self.images[recipe.name]

    def has_image(self, ref: str) -> bool:
        return any(i.ref == ref for i in self.images.values())

    def pull_baked(self, ref: str, progress: object) -> bool:
        if ref not in self.registry:
            return False
        self.pulled.append(ref)
        self.images[ref.split("/")[1].split(":")[0]] = Image(ref, "sha256:1", "docker", cached=True)
        return True

    def save_images(self, refs: list[str]) -> Iterator[bytes]:
        return iter([" ".join(refs).encode()])

    def load_image(self, data: Iterator[bytes]) -> None:
        refs = b"".join(data).decode().split()
        self.loaded.append(refs)
        for ref in refs:
            self.images[ref.split("/")[1].split(":")[0]] = Image(ref, "sha256:1", "docker", cached=True)


def test_the_pool_spreads_trials_copies_images_and_skips_a_lost_engine(tmp_path: Path) -> None:
    options = SandboxOptions(cache=tmp_path, docker_hosts=("unix:///a", "unix:///b", "unix:///c"))
    pool = EnginePool(options, member=FakeEngine)  # type: ignore[arg-type]
    _, b, c = pool.members
    recipe = ImageRecipe("t", tmp_path / "Dockerfile", tmp_path)
    placed = []
    for _ in range(6):
        pool.bake(recipe, lambda _: None)
        placed.append(pool.placement())
        pool.end_placement()  # the trial ended
    assert placed == ["unix:///a", "unix:///b", "unix:///c"] * 2
    # Baked once (on a), copied to b and c rather than baked there again.
    assert b.loaded == c.loaded == [["reactbench/t:k"]]  # type: ignore[attr-defined]
    # c dies between trials: the next trials go to the engines that answer.
    c.up = False  # type: ignore[attr-defined]
    placed = []
    for _ in range(4):
        pool.bake(recipe, lambda _: None)
        placed.append(pool.placement())
        pool.end_placement()
    assert set(placed) == {"unix:///a", "unix:///b"}
    assert pool.lost == {"unix:///c"}
    # b dies under a trial placed on it: the trial's next step is EngineLost.
    while pool.bake(recipe, lambda _: None) and pool.placement() != "unix:///b":
        pool.end_placement()
    b.up = False  # type: ignore[attr-defined]
    with pytest.raises(EngineLost, match="unix:///b was lost mid-trial"):
        pool.bake(ImageRecipe("u", tmp_path / "Dockerfile", tmp_path), lambda _: None)
    assert pool.placement() == ""


def test_workers_placing_at_once_see_each_others_trials(tmp_path: Path) -> None:
    # Two workers' pools over the same engines (one cache, as xdist workers share).
    options = SandboxOptions(cache=tmp_path, docker_hosts=("unix:///a", "unix:///b"))
    first, second = EnginePool(options, member=FakeEngine), EnginePool(options, member=FakeEngine)  # type: ignore[arg-type]
    recipe = ImageRecipe("t", tmp_path / "Dockerfile", tmp_path)
    first.bake(recipe, lambda _: None)
    second.bake(recipe, lambda _: None)
    assert {first.placement(), second.placement()} == {"unix:///a", "unix:///b"}
    assert [m.ledger.load()[0] for m in first.members] == [1, 1]
    first.end_placement()
    assert [m.ledger.load()[0] for m in first.members] == [0, 1]


def test_engines_take_turns_whatever_they_ran_in_earlier_runs(tmp_path: Path) -> None:
    options = SandboxOptions(cache=tmp_path, docker_hosts=("unix:///a", "unix:///b"))
    recipe = ImageRecipe("t", tmp_path / "Dockerfile", tmp_path)

    def placements(pool: EnginePool, trials: int) -> list[str]:
        placed = []
        for _ in range(trials):
            pool.bake(recipe, lambda _: None)
            placed.append(pool.placement())
            pool.end_placement()
        return placed

    earlier = placements(EnginePool(options, member=FakeEngine), 6)  # type: ignore[arg-type]
    assert sorted(earlier) == ["unix:///a"] * 3 + ["unix:///b"] * 3
    # A run that adds an engine: the new one takes its turn, and so do the old ones
    # (by the count of trials they ever ran, the new engine would get every trial).
    grown = SandboxOptions(cache=tmp_path, docker_hosts=("unix:///a", "unix:///b", "unix:///c"))
    assert sorted(placements(EnginePool(grown, member=FakeEngine), 3)) == [  # type: ignore[arg-type]
        "unix:///a", "unix:///b", "unix:///c"]


def test_the_prebake_bakes_on_one_engine_and_places_no_trial(tmp_path: Path) -> None:
    options = SandboxOptions(cache=tmp_path, docker_hosts=("unix:///a", "unix:///b"))
    pool = EnginePool(options, member=FakeEngine)  # type: ignore[arg-type]
    a, b = pool.members
    a.up = False  # type: ignore[attr-defined]
    recipes = [ImageRecipe(name, tmp_path / name / "Dockerfile", tmp_path / name) for name in ("t", "u", "v")]
    prebake(pool, recipes, lambda _: None)
    # The engine that answers baked all three; no claim is left for the first trial
    # to inherit, so it is placed like any other.
    assert sorted(b.images) == ["t", "u", "v"]  # type: ignore[attr-defined]
    assert pool.placement() == "" and pool.lost == {"unix:///a"}
    assert [m.ledger.load() for m in pool.members] == [(0, 0), (0, 0)]


def _recipes(tmp_path: Path, *names: str) -> list[ImageRecipe]:
    return [ImageRecipe(name, tmp_path / name / "Dockerfile", tmp_path / name) for name in names]


def test_the_prebake_spreads_every_image_to_every_engine_in_one_save(tmp_path: Path) -> None:
    options = SandboxOptions(cache=tmp_path, docker_hosts=("unix:///a", "unix:///b", "unix:///c"))
    pool = EnginePool(options, member=FakeEngine)  # type: ignore[arg-type]
    a, b, c = pool.members
    t, u, v = _recipes(tmp_path, "t", "u", "v")
    a.bake(t, None)
    a.bake(u, None)  # baked by an earlier run; v is baked by this one
    prebake(pool, [t, u, v], lambda _: None)
    assert sorted(a.images) == ["t", "u", "v"]  # type: ignore[attr-defined]
    # Each empty engine got the three images in one save (one load), not one per image.
    everything = ["reactbench/t:k", "reactbench/u:k", "reactbench/v:k"]
    assert b.loaded == c.loaded == [everything]  # type: ignore[attr-defined]
    assert a.loaded == []  # type: ignore[attr-defined]
    assert all(pool.baked(r) is not None for r in (t, u, v))
    assert pool.placement() == ""
    # Nothing is left listed as wanted: a later copy sends only what it is asked for.
    assert [pool.wanted(m).listed() for m in pool.members] == [[], [], []]


def test_a_copy_brings_every_image_wanted_on_the_engine_and_pulls_what_the_registry_has(
        tmp_path: Path) -> None:
    options = SandboxOptions(cache=tmp_path, docker_hosts=("unix:///a", "unix:///b"))
    pool = EnginePool(options, member=FakeEngine)  # type: ignore[arg-type]
    a, b = pool.members
    t, u, v = _recipes(tmp_path, "t", "u", "v")
    for recipe in (t, u, v):
        a.bake(recipe, None)
    # Another process listed u as wanted on b (its prebake, say); the registry holds v.
    pool.wanted(b).add(["reactbench/u:k", "reactbench/v:k"])
    b.registry = {"reactbench/v:k"}  # type: ignore[attr-defined]
    image = pool._bake_on(b, t, lambda _: None)
    assert image.ref == "reactbench/t:k"
    assert b.pulled == ["reactbench/v:k"]  # type: ignore[attr-defined]
    assert b.loaded == [["reactbench/t:k", "reactbench/u:k"]]  # type: ignore[attr-defined]
    assert pool.wanted(b).listed() == []
    # An image no engine has cannot be copied: the trial is told so.
    with pytest.raises(SandboxError, match="no engine of the pool has reactbench/w:k"):
        pool.deliver(b, ["reactbench/w:k"], lambda _: None)
