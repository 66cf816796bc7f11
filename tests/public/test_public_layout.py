"""The shipped tasks on images laid out like the public ones, as a user whose engine
reaches ghcr.io has them: no grader of ours and no React Doctor in the verifier base,
nothing under /opt/reactbench, no label of our bakes. They come through a registry
(Debian's `docker-registry` on loopback: pushed there, pulled back with the
registry's digests) into an engine of their own, a fresh one as a user's machine has,
and sit there under the public names, as a pull would leave them. (On the engine the
other tests share, a public name would reach their runs too, and vanish under them.)
`--reactbench-images=public` then never uses a stand-in: the controls must hold
(oracle 1, nop 0) with our grader baked on the public base, for the shipped tasks and
for a task `reactbench mine` wrote, and every base in the results must say public."""

from __future__ import annotations

import contextlib
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import pytest

from pytest_reactbench.cli import main
from pytest_reactbench.plugin.options import environment_sandbox_options
from pytest_reactbench.results import BaseImage, Gate
from pytest_reactbench.sandbox.base import ImageRecipe
from pytest_reactbench.sandbox.docker import RECIPE_LABEL, DockerBackend
from pytest_reactbench.sandbox.recipes import DEFAULT_IMAGE_MAP, images_dir
from pytest_reactbench.tasks import find_tasks
from tests.helpers import junit_results
from tests.mining.history import build_history
from tests.sandbox.extra_engines import ExtraEngine, extra_engine
from tests.sandbox.helpers import loopback_registry

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = sorted(p.name for p in find_tasks(ROOT / "tasks"))
PUBLIC = {f"{name}:latest": recipe for name, recipe in DEFAULT_IMAGE_MAP.items()}

#: What makes a stand-in look like the public image: our files and our bake label go.
#: (Docker cannot drop an inherited label; an empty one is not a bake's.)
PUBLIC_LAYOUT = """FROM {stand_in}
RUN rm -rf /opt/reactbench
ENV NODE_OPTIONS=
LABEL {label}=
"""


def test_public_layout_has_none_of_ours(public_images: PublicImages) -> None:
    client = public_images.engine.client()
    for name in PUBLIC:
        image = client.images.get(name)
        assert not (image.labels or {}).get(RECIPE_LABEL), name
        listed = client.containers.run(name, ["sh", "-c", "ls /opt; command -v react-doctor; true"],
                                       remove=True, entrypoint=[]).decode()
        assert "reactbench" not in listed, (name, listed)
        assert "react-doctor" not in listed, (name, listed)


def test_shipped_tasks_on_the_public_layout(tmp_path: Path, public_images: PublicImages) -> None:
    xml = tmp_path / "r.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-n", "2",
         "--reactbench-agent=oracle,nop", "--reactbench-sandbox=docker", "--reactbench-images=public",
         f"--reactbench-docker-host={public_images.engine.url}",
         f"--reactbench-records={tmp_path / 'records'}", f"--junitxml={xml}", "tasks"],
        cwd=ROOT, capture_output=True, text=True, timeout=2400,
    )
    assert xml.exists(), proc.stdout[-4000:] + proc.stderr[-4000:]
    verdicts = {(r.task, r.agent): r for r in junit_results(xml)}
    assert set(verdicts) == {(t, a) for t in SHIPPED for a in ("oracle", "nop")}, proc.stdout[-4000:]
    for task in SHIPPED:
        oracle, nop = verdicts[(task, "oracle")], verdicts[(task, "nop")]
        assert oracle.verdict == "passed", (task, proc.stdout[-6000:])
        assert nop.verdict == "failed", (task, proc.stdout[-6000:])
        assert nop.grading.gates.get(Gate.TESTS) is False
        for outcome in (oracle, nop):
            bases = outcome.provenance.bases
            assert all(base.origin != "stand-in" for base in bases), bases
            # The verifier's base as the registry has it, by its digest.
            assert any(BaseImage(name=name, digest=digest, origin="public") in bases
                       for name, digest in public_images.digests.items()), bases
            assert outcome.provenance.formal, outcome
    assert proc.returncode == 1  # the nop items fail, as they must


def test_a_mined_task_on_the_public_layout(tmp_path: Path, public_images: PublicImages,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    history = build_history(tmp_path / "counter")
    task = tmp_path / "tasks" / "counter-decrement"
    # Mined as a user mines (its controls on the default backend)...
    code = main(["mine", "--repo", str(history.repo), "--merge", history.feature, "--out", str(task)])
    out = capsys.readouterr().out
    assert code == 0, out
    # ... and run where the public images are.
    xml = tmp_path / "r.xml"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--reactbench-agent=oracle,nop",
         "--reactbench-sandbox=docker", "--reactbench-images=public",
         f"--reactbench-docker-host={public_images.engine.url}",
         f"--reactbench-records={tmp_path / 'records'}", f"--junitxml={xml}", f"--rootdir={tmp_path}",
         str(task)], cwd=tmp_path, capture_output=True, text=True, timeout=1800)
    verdicts = {r.agent: r for r in junit_results(xml)} if xml.exists() else {}
    assert set(verdicts) == {"oracle", "nop"}, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert verdicts["oracle"].verdict == "passed", proc.stdout[-6000:]
    assert verdicts["nop"].verdict == "failed", proc.stdout[-6000:]
    for outcome in verdicts.values():
        bases = outcome.provenance.bases
        assert all(base.origin != "stand-in" for base in bases), bases


@dataclass
class PublicImages:
    #: A fresh engine holding the four public names, and nothing else of ours.
    engine: ExtraEngine
    #: Public name -> the registry's digest of it.
    digests: dict[str, str]


@pytest.fixture(scope="module")
def public_images(tmp_path_factory: pytest.TempPathFactory, bake_cache: Path,
                  docker_client: docker.DockerClient) -> Iterator[PublicImages]:
    """The four public names on an engine of their own, laid out like the public images
    and pulled there from a loopback registry. The stand-ins they are made from are the
    suite's (on the shared engine, reused); what the fixture pushes there is removed
    afterwards, and the extra engine goes with everything on it."""
    client = docker_client
    root = tmp_path_factory.mktemp("public-layout")
    made: list[str] = []
    try:
        # As the suite's runs bake them (its cache, CA bundle and download cache): reused.
        backend = DockerBackend(environment_sandbox_options(
            cache=bake_cache, download_cache=bake_cache / "downloads", images="stand-in"))
        try:
            stand_ins = {name: backend.bake(_recipe(recipe), print).ref for name, recipe in PUBLIC.items()}
        finally:
            backend.close()
        digests: dict[str, str] = {}
        with (loopback_registry(root / "registry") as port, extra_engine(11) as engine,
              contextlib.closing(engine.client()) as field):
            for name, stand_in in stand_ins.items():
                # By the public name: one stand-in serves two of them.
                context = root / name.removesuffix(":latest").rsplit("/", 1)[-1]
                context.mkdir()
                layout = PUBLIC_LAYOUT.format(stand_in=stand_in, label=RECIPE_LABEL)
                (context / "Dockerfile").write_text(layout)
                pushed_as = f"127.0.0.1:{port}/{name.removeprefix('ghcr.io/')}"
                client.images.build(path=str(context), tag=pushed_as, rm=True)
                made.append(pushed_as)
                pushed = [line for line in client.images.push(pushed_as, stream=True, decode=True)
                          if "aux" in line or "error" in line]
                assert pushed and "aux" in pushed[-1], pushed
                digests[name] = pushed[-1]["aux"]["Digest"]
                # Into the fresh engine, as a pull from ghcr.io would leave it.
                field.images.pull(pushed_as)
                field.images.get(pushed_as).tag(name)
            yield PublicImages(engine, digests)
    finally:
        for ref in reversed(made):
            with contextlib.suppress(docker.errors.ImageNotFound):
                client.images.remove(ref)


def _recipe(name: str) -> ImageRecipe:
    directory = images_dir() / name
    return ImageRecipe(name, directory / "Dockerfile", directory, timeout=3600)
