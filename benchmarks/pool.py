"""A pool of Docker engines on this one machine: how the shipped images reach an empty
engine, a pool of 2 engines against 1, and what the pool's bookkeeping costs per trial.

    python benchmarks/pool.py images [--ways one-by-one,one-save,registry,bake]
    python benchmarks/pool.py sessions [--tasks 8] [--workers 4] [--seconds 6]
    python benchmarks/pool.py bookkeeping [--rounds 200]

`images`: the shipped suite's 8 task images, baked on the main engine (a run of the
suite bakes them first), brought to a fresh empty engine (its own dockerd, data root
and bridge; removed after each way) in each of these ways, timed:

- `one-by-one`: `docker save | docker load` of one image at a time (the first two
  images; the others cost as much each, since each save streams every layer again);
- `one-save`: one `docker save` of all of them (a shared layer is in it once);
- `registry`: pushed from the main engine to Debian's `docker-registry` on loopback,
  then pulled (a pull skips the layers the engine has); the push is timed apart, since
  a run with `--reactbench-image-registry` pushes at bake time anyway;
- `bake`: baked on the empty engine itself with the shared download cache (after
  copying the Debian root); its images are its own (other ids, and other keys for
  what builds on them), not the main engine's.

`sessions`: starts a second engine, bakes tiny tasks (a static busybox) on the main
engine, and times the same session (`-n WORKERS`, oracle only) over 1 engine and over
the pool of 2, for two kinds of agent: one that waits (`sleep`: an agent waiting for
its model, the usual case) and one that computes (a busy loop on one core). Each trial
asks for 1 CPU, so one engine of NCPU cores holds NCPU trials at once (the room
ledger): the pool doubles the trials that run at once, which helps waiting agents and
cannot help computing ones beyond the machine's cores.

`bookkeeping`: the pool's own work for one trial: placing it (a ledger read per engine,
a ping of the chosen one), reserving and releasing its room.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import docker  # noqa: E402

from pytest_reactbench.plugin.options import environment_sandbox_options, setting  # noqa: E402
from pytest_reactbench.sandbox.base import Image, ImageRecipe  # noqa: E402
from pytest_reactbench.sandbox.docker import ROOT_IMAGE, DockerBackend  # noqa: E402
from pytest_reactbench.sandbox.docker.pool import EnginePool  # noqa: E402
from pytest_reactbench.sandbox.options import SandboxOptions  # noqa: E402
from tests.sandbox.extra_engines import build_tiny_base, extra_engine, tiny_task  # noqa: E402
from tests.sandbox.helpers import loopback_registry  # noqa: E402

MAIN = "unix:///var/run/docker.sock"
AGENTS = {
    "waits": "sleep {s}; echo hello > /app/out.txt",
    "computes": "end=$(( $(date +%s) + {s} )); while [ $(date +%s) -lt $end ]; do :; done; "
                "echo hello > /app/out.txt",
}
WAYS = ("one-by-one", "one-save", "registry", "bake")


# -- images ------------------------------------------------------------------------------

def shipped_recipes() -> list[ImageRecipe]:
    return [ImageRecipe(f"{task.name}/{folder}", task / folder / "Dockerfile", task / folder)
            for task in sorted((ROOT / "tasks").iterdir()) if (task / "task.toml").is_file()
            for folder in ("environment", "tests")]


def shipped_images(main: DockerBackend) -> list[Image]:
    images = []
    for recipe in shipped_recipes():
        image = main.baked(recipe)
        if image is None:
            raise SystemExit(f"{recipe.name} is not baked on the main engine: run the suite once first "
                             "(pytest --reactbench-sandbox=docker --reactbench-agent=oracle)")
        images.append(image)
    return images


def unique_bytes(client: docker.DockerClient, refs: list[str]) -> tuple[int, int]:
    """(bytes of the images one by one, bytes of their distinct layers)."""
    total, layers = 0, {}
    for ref in refs:
        for entry in client.api.history(ref):
            total += int(entry["Size"])
            if entry["Size"]:
                layers[(entry["Id"], entry["CreatedBy"], entry["Created"])] = int(entry["Size"])
    return total, sum(layers.values())


def timed(what: str, step: Callable[[], object]) -> float:
    started = time.monotonic()
    step()
    seconds = time.monotonic() - started
    print(f"  {what}: {seconds:.1f} s", flush=True)
    return seconds


def through_registry(main: DockerBackend, target: DockerBackend, refs: list[str]) -> None:
    with tempfile.TemporaryDirectory(prefix="reactbench-registry-") as tmp, \
            loopback_registry(Path(tmp)) as port:
        remote = {ref: f"127.0.0.1:{port}/bench/{ref.removeprefix('reactbench/')}" for ref in refs}

        def push() -> None:
            for ref, name in remote.items():
                repository, _, tag = name.rpartition(":")
                main.api.tag(ref, repository, tag)
                for chunk in main.api.push(repository, tag, stream=True, decode=True):
                    if "error" in chunk:
                        raise SystemExit(chunk["error"])

        def pull() -> None:
            for name in remote.values():
                repository, _, tag = name.rpartition(":")
                target.api.pull(repository, tag)

        try:
            timed(f"push of {len(refs)} images (at bake time in a run with a registry)", push)
            timed(f"pull of {len(refs)} images", pull)
        finally:
            for name in remote.values():
                with contextlib.suppress(docker.errors.DockerException):
                    main.api.remove_image(name)


@contextlib.contextmanager
def empty_engine(options: SandboxOptions) -> Iterator[DockerBackend]:
    with extra_engine(8) as engine:
        member = DockerBackend(options, engine.url)
        try:
            yield member
        finally:
            member.close()


def images(args: argparse.Namespace) -> None:
    cache = setting("cache")
    # The suite's own bake options: the keys are those of its images on the main engine.
    options = environment_sandbox_options(cache=cache, download_cache=cache / "downloads")
    main = DockerBackend(options, MAIN)
    try:
        wanted = shipped_images(main)
        refs = [image.ref for image in wanted]
        one_by_one, distinct = unique_bytes(main.client, refs)
        print(f"{len(refs)} task images: {one_by_one / 1e9:.1f} GB one by one, "
              f"{distinct / 1e9:.1f} GB of distinct layers")
        for way in args.ways.split(","):
            print(f"{way}:", flush=True)
            with empty_engine(options) as target:
                if way == "one-by-one":
                    for ref in refs[:2]:
                        timed(f"save | load {ref}",
                              lambda ref=ref: target.load_image(main.save_images([ref])))
                elif way == "one-save":
                    timed(f"one save | load of {len(refs)} images",
                          lambda: target.load_image(main.save_images(refs)))
                elif way == "registry":
                    through_registry(main, target, refs)
                elif way == "bake":
                    timed(f"copy of {ROOT_IMAGE}",
                          lambda: target.load_image(main.save_images([ROOT_IMAGE])))

                    def bake() -> None:
                        with ThreadPoolExecutor(max_workers=target.capabilities.bake_slots) as pool:
                            list(pool.map(lambda r: target.bake(r, lambda _: None), shipped_recipes()))

                    timed(f"bake of {len(refs)} images, {target.capabilities.bake_slots} at a time", bake)
                else:
                    raise SystemExit(f"--ways: {way!r} is not one of {', '.join(WAYS)}")
                missing = [ref for ref in refs if not target.has_image(ref)]
                if way == "bake":
                    # Its system layer is an image of its own (another id), so every key
                    # built on it differs from the main engine's.
                    print(f"  images under the main engine's tags: {len(refs) - len(missing)} of {len(refs)}")
                elif way != "one-by-one" and missing:
                    raise SystemExit(f"{way}: the engine lacks {missing}")
    finally:
        main.close()


# -- sessions ----------------------------------------------------------------------------

def session(folder: Path, hosts: list[str], workers: int, cache: Path) -> float:
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "-n", str(workers),
         "--reactbench-sandbox=docker", "--reactbench-agent=oracle", f"--reactbench-cache={cache}",
         "--reactbench-records=records", *(f"--reactbench-docker-host={h}" for h in hosts), "tasks"],
        cwd=folder, capture_output=True, text=True)
    seconds = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"the session failed:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
    return seconds


def sessions(args: argparse.Namespace) -> None:
    client = docker.from_env()
    info = client.info()
    print(f"machine: {info['NCPU']} CPU(s), {int(info['MemTotal']) // 2**20} MiB; "
          f"{args.tasks} trials of 1 CPU each, -n {args.workers}, agents work {args.seconds}s")
    with tempfile.TemporaryDirectory(prefix="reactbench-pool-") as tmp, extra_engine(9) as second:
        folder, cache = Path(tmp), Path(tmp, "cache")
        base = build_tiny_base(client, Path(tempfile.mkdtemp(dir=tmp)))
        try:
            for kind, solve in AGENTS.items():
                tasks = folder / "tasks"
                if tasks.exists():
                    subprocess.run(["rm", "-rf", str(tasks)], check=True)
                for n in range(args.tasks):
                    tiny_task(tasks, f"bench-{kind}-{n}", base, solve=solve.format(s=args.seconds))
                # Bakes on the main engine and copies to the second, not measured.
                session(folder, [MAIN, second.url], args.workers, cache)
                one = session(folder, [MAIN], args.workers, cache)
                two = session(folder, [MAIN, second.url], args.workers, cache)
                print(f"agent that {kind:8}: 1 engine {one:6.1f}s, pool of 2 {two:6.1f}s, "
                      f"ratio {one / two:.2f}x", flush=True)
        finally:
            for image in client.images.list(filters={"label": "reactbench.recipe"}):
                for name in image.tags:
                    if name.startswith("reactbench/bench-"):
                        client.images.remove(name)
            client.images.remove(base)


# -- bookkeeping -------------------------------------------------------------------------

def bookkeeping(args: argparse.Namespace) -> None:
    """Milliseconds per trial of placing it and of taking and giving back its room."""
    with tempfile.TemporaryDirectory(prefix="reactbench-pool-") as tmp, extra_engine(9) as second:
        pool = EnginePool(SandboxOptions(cache=Path(tmp), docker_hosts=(MAIN, second.url)))
        try:
            place, room = [], []
            for _ in range(args.rounds):
                began = time.perf_counter()
                engine = pool._place()  # the step a trial's first bake takes
                place.append(time.perf_counter() - began)
                pool.end_placement()
                began = time.perf_counter()
                holder = engine.ledger.reserve("benchmark", 1, 512)
                engine.ledger.release(holder)
                room.append(time.perf_counter() - began)
        finally:
            pool.close()
    print(f"bookkeeping per trial: placing {1000 * statistics.median(place):.2f} ms, "
          f"room (reserve + release) {1000 * statistics.median(room):.2f} ms per sandbox")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    ways = commands.add_parser("images", help="how the shipped images reach an empty engine")
    ways.add_argument("--ways", default=",".join(WAYS), help=f"some of {', '.join(WAYS)}")
    ratio = commands.add_parser("sessions", help="a pool of 2 engines against 1")
    ratio.add_argument("--tasks", type=int, default=8)
    ratio.add_argument("--workers", type=int, default=4)
    ratio.add_argument("--seconds", type=int, default=6, help="how long each agent works")
    rounds = commands.add_parser("bookkeeping", help="the pool's own work per trial")
    rounds.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    {"images": images, "sessions": sessions, "bookkeeping": bookkeeping}[args.command](args)


if __name__ == "__main__":
    main()
