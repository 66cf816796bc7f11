"""Baking on the host: a Dockerfile's steps replayed into a new layer over its
parent's, published by an atomic rename under a file lock."""

from __future__ import annotations

import glob
import json
import os
import re
import shlex
import time
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from pytest_reactbench.results import BaseImage
from pytest_reactbench.sandbox import dockerfile as df
from pytest_reactbench.sandbox.bake import BakingBackend
from pytest_reactbench.sandbox.base import Image, ImageRecipe, Progress
from pytest_reactbench.sandbox.bases import Parent
from pytest_reactbench.sandbox.buildlog import step_failure
from pytest_reactbench.sandbox.errors import BakeError, SandboxError
from pytest_reactbench.sandbox.local.sandbox import (
    CA_MOUNT,
    CONTEXT_MOUNT,
    DEFAULT_ENV,
    ROOTS,
    LocalSandbox,
    _rmtree,
)
from pytest_reactbench.sandbox.local.seal import SEAL, seal, verify
from pytest_reactbench.sandbox.mirrors import git_env, local_binds, relevant
from pytest_reactbench.sandbox.recipes import SYSTEM_IMAGE, declare_arg
from pytest_reactbench.sandbox.tls import ca_env, tls_hint

USE_DOCKER = "use --reactbench-sandbox=docker"
GITCONFIG_MOUNT = "/run/reactbench/gitconfig"
# Steps that write the host's read-only system directories, which a replay over the
# host cannot do: refused before the bake starts, with the line that asks for them.
HOST_WRITES = (
    (re.compile(r"\bapt(-get)?\s+(-\S+\s+)*(install|update|upgrade|remove)\b"),
     "installs system packages into the host's read-only /usr"),
    (re.compile(r"\b(apk|dnf|yum)\s+(add|install)\b"), "installs system packages"),
    (re.compile(r"\bcorepack\s+enable\b(?![^&;|]*--install-directory)"),
     "puts package-manager shims next to node in the host's read-only /usr"),
)


#: COPY as Docker's: the files belong to the image's root, whoever owns them on the host.
COPY = "cp -a --no-preserve=ownership"


def _writable(path: str, where: str, keyword: str) -> None:
    """Refuses a WORKDIR or COPY destination outside the sandbox's writable roots."""
    top = path.strip("/").split("/", 1)[0]
    if top and top not in ROOTS:
        raise BakeError(f"{where}: {keyword} {path} is outside {', '.join('/' + r for r in ROOTS)}, "
                        f"which the local backend cannot write; {USE_DOCKER}")


class LocalImages(BakingBackend):
    """The bake template's steps, as trees in the backend's cache."""

    name = "local"
    #: Set by LocalBackend: where the image trees are, and whether the note on the
    #: image registry was given.
    images: Path
    _noted_registry: bool

    def fetch(self, key: str, recipe: ImageRecipe, progress: Progress) -> Image | None:
        # Its images are directory trees over the host's own root, meaningful on this
        # host only: a registry of them would share nothing another machine can run.
        if self.options.image_registry and not self._noted_registry:
            self._noted_registry = True
            progress(f"note: the local backend does not use the image registry "
                     f"{self.options.image_registry}; its images are baked on this host")
        return None

    # -- images -----------------------------------------------------------------

    def _image_meta(self, key: str) -> dict[str, object] | None:
        meta = self.images / key / "image.json"
        if not meta.is_file():
            return None
        loaded: dict[str, object] = json.loads(meta.read_text())
        return loaded

    def _layers(self, key: str) -> list[Path]:
        meta = self._image_meta(key)
        if meta is None:
            raise SandboxError(f"local image {key} is not baked")
        return self._sealed(meta["chain"])  # type: ignore[arg-type]

    def _sealed(self, chain: Sequence[str]) -> list[Path]:
        """The layers of `chain`, bottom first, each checked against its seal."""
        layers = [self.images / str(k) / "layer" for k in chain]
        for layer in layers:
            verify(layer, layer.parent / SEAL)
        return layers

    def find(self, key: str, recipe: ImageRecipe) -> Image | None:
        meta = self._image_meta(key)
        if meta is None:
            return None
        return Image(key, key, self.name, cached=True, labels=meta.get("labels", {}))  # type: ignore[arg-type]

    def system_layer(self, progress: Progress, deadline: float, *, build: bool) -> Parent:
        # The host's /usr and /etc stand for the system layer.
        host = BaseImage(name=SYSTEM_IMAGE, digest="host", origin="system")
        return Parent(SYSTEM_IMAGE, "", "host", (host,))

    def check(self, recipe: ImageRecipe, instructions: Sequence[df.Instruction]) -> None:
        froms = [ins for ins in instructions if ins.keyword == "FROM"]
        if len(froms) > 1:
            raise BakeError(f"{recipe.dockerfile}:{froms[1].line}: multi-stage builds are not "
                            f"supported by the local backend; {USE_DOCKER}")
        for ins in instructions:
            if ins.keyword == "SHELL" or (ins.keyword == "USER"
                                          and ins.args.split(":")[0].strip() not in ("root", "0")):
                # Every step and command runs as root under /bin/sh here: a Dockerfile
                # that says otherwise would be built and graded as something it is not.
                raise BakeError(f"{recipe.dockerfile}:{ins.line}: {ins.keyword} {ins.args.strip()} is "
                                f"not supported by the local backend; {USE_DOCKER}")
            if ins.keyword != "RUN":
                continue
            text = " ".join(ins.exec_form) if ins.exec_form else ins.args
            for pattern, why in HOST_WRITES:
                if found := pattern.search(text):
                    raise BakeError(f"{recipe.dockerfile}:{ins.line}: `{found.group(0)}` {why}, which "
                                    f"the local backend cannot do; {USE_DOCKER}")

    def build(self, recipe: ImageRecipe, key: str, parents: Sequence[Parent], progress: Progress,
              deadline: float) -> Image:
        instructions = df.parse(recipe.dockerfile)
        first_from = next(i for i, ins in enumerate(instructions) if ins.keyword == "FROM")
        # Global ARGs serve FROM, and a stage's value-less ARG of the same name.
        global_args: dict[str, str] = {}
        for ins in instructions[:first_from]:
            if ins.keyword == "ARG":
                declare_arg(ins, recipe.build_args, global_args)
        parent = parents[0].image
        # No image, or one with no ref: the host stands for the system layer.
        parent_meta = self._image_meta(parent.ref) if parent and parent.ref else None
        self._replay(recipe, instructions[first_from + 1 :], {}, global_args, parent_meta, key,
                     progress, deadline)
        image = self.find(key, recipe)
        assert image is not None
        return image

    def _replay(
        self,
        recipe: ImageRecipe,
        steps: Sequence[df.Instruction],
        variables: dict[str, str],
        global_args: Mapping[str, str],
        parent_meta: Mapping[str, object] | None,
        key: str,
        progress: Progress,
        deadline: float,
    ) -> None:
        env: dict[str, str] = dict(parent_meta["env"]) if parent_meta else {}  # type: ignore[call-overload]
        workdir = str(parent_meta["workdir"]) if parent_meta else "/"
        labels: dict[str, str] = dict(parent_meta["labels"]) if parent_meta else {}  # type: ignore[call-overload]
        chain = list(parent_meta["chain"]) if parent_meta else []  # type: ignore[call-overload]
        building = self.images / f"{key}.tmp-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        layers = list(reversed(self._sealed(chain)))
        box, bake_only = self._bake_box(recipe, building, layers, env, workdir)
        progress(f"{recipe.name}: baking {recipe.dockerfile} ({len(steps)} steps)")
        started = time.monotonic()
        try:
            for number, ins in enumerate(steps, start=1):
                where = f"{recipe.dockerfile}:{ins.line}"
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise BakeError(f"{where}: build_timeout_sec ran out before {ins.keyword}")
                if ins.keyword in ("RUN", "COPY", "ADD"):
                    progress(f"{recipe.name}: step {number}/{len(steps)} {ins.keyword} "
                             f"{ins.args[:70]} ({time.monotonic() - started:.0f} s)")
                if ins.keyword == "ARG":
                    name = ins.args.partition("=")[0].strip()
                    if "=" not in ins.args and name in global_args:
                        variables[name] = global_args[name]
                    declare_arg(ins, recipe.build_args, variables)
                elif ins.keyword == "ENV":
                    # $VAR sees the inherited environment too (the host's PATH for the
                    # system layer), so `ENV PATH=/x:$PATH` keeps it.
                    for k, v in df.expand_pairs(ins.args, {**DEFAULT_ENV, **variables, **env},
                                                recipe.dockerfile, ins.line):
                        env[k] = v
                    box.env = {**DEFAULT_ENV, **env, **bake_only}
                elif ins.keyword == "LABEL":
                    for k, v in df.expand_pairs(ins.args, {**DEFAULT_ENV, **variables, **env},
                                                recipe.dockerfile, ins.line):
                        labels[k] = v
                elif ins.keyword == "WORKDIR":
                    target = df.substitute(ins.args, {**variables, **env})
                    workdir = os.path.normpath(os.path.join(workdir, target))
                    _writable(workdir, where, "WORKDIR")
                    self._step(box, ["mkdir", "-p", workdir], where, remaining, progress, "/")
                    box.workdir = workdir
                elif ins.keyword in ("COPY", "ADD"):
                    script = self._copy_script(ins, recipe, {**variables, **env}, workdir)
                    self._step(box, ["sh", "-c", script], where, remaining, progress, "/")
                elif ins.keyword == "RUN":
                    argv = (list(ins.exec_form) if ins.exec_form
                            else ["/bin/sh", "-c", ins.args])
                    self._step(box, argv, where, remaining, progress, workdir,
                               {k: v for k, v in variables.items() if k not in env})
                # USER root is the default; another USER and SHELL are refused by check().
            meta = {"chain": [*chain, key], "env": env, "workdir": workdir, "labels": labels,
                    "recipe": str(recipe.dockerfile), "baked_at": time.time()}
            box.close()
            seal(building / "layer", building / SEAL)
            (building / "image.json").write_text(json.dumps(meta, indent=2))
            os.rename(building, self.images / key)
        except BaseException:
            box.close()
            _rmtree(building)
            raise

    def _bake_box(self, recipe: ImageRecipe, building: Path, layers: list[Path], env: Mapping[str, str],
                  workdir: str) -> tuple[LocalSandbox, dict[str, str]]:
        """The sandbox a bake's steps run in, writing its new layer, and the bake's own
        variables (CA, git mirrors, download cache, registry): in every step, never in
        the image."""
        mirrors = relevant(self.options.git_mirrors, recipe.dockerfile, recipe.context)
        mirror_binds, rewrites = local_binds(mirrors)
        ro_binds = {CONTEXT_MOUNT: recipe.context.resolve(), **mirror_binds}
        bake_only = {**(ca_env(CA_MOUNT) if self.ca_bundle else {}),
                     **(git_env(rewrites) if mirrors else {}),
                     **(self.downloads.env() if self.downloads else {}),
                     **self.options.package_manager_env}
        if self.ca_bundle:
            ro_binds[CA_MOUNT] = self.ca_bundle.resolve()
        if mirror_binds:
            # A directory mirror is the host's, not the sandbox root's: git's upload-pack
            # trusts it only by a protected configuration, and it drops the variables
            # that git_env sets, so the trust is the system configuration's here.
            building.mkdir(parents=True, exist_ok=True)
            (building / "gitconfig").write_text(
                '[safe]\n\tdirectory = *\n[protocol "file"]\n\tallow = always\n')
            ro_binds[GITCONFIG_MOUNT] = building / "gitconfig"
            bake_only["GIT_CONFIG_SYSTEM"] = GITCONFIG_MOUNT
        box = LocalSandbox(building / "box", layers, network=True, env={**DEFAULT_ENV, **env, **bake_only},
                           workdir=workdir, upper=building / "layer", ro_binds=ro_binds)
        return box, bake_only

    def _step(
        self,
        box: LocalSandbox,
        argv: list[str],
        where: str,
        timeout: float,
        progress: Progress,
        cwd: str,
        env: Mapping[str, str] | None = None,
    ) -> None:
        result = box.exec(argv, cwd=cwd, timeout=timeout, env=env)
        if result.timed_out:
            raise BakeError(f"{where}: build_timeout_sec ran out during this step")
        if result.exit_code != 0:
            output = result.text + result.error_text
            if "Read-only file system" in output:
                raise BakeError(f"{where}: this step writes outside {', '.join('/' + r for r in ROOTS)} "
                                f"(Read-only file system), which the local backend cannot do; {USE_DOCKER}")
            raise BakeError(step_failure(where, result.exit_code, output) + tls_hint(output)
                            + root_hint(output))

    def _copy_script(
        self, ins: df.Instruction, recipe: ImageRecipe, variables: Mapping[str, str], workdir: str
    ) -> str:
        where = f"{recipe.dockerfile}:{ins.line}"
        if "from" in ins.flags:
            raise BakeError(f"{where}: COPY --from is not supported by the local backend")
        sources, dest = df.copy_operands(ins, recipe.dockerfile)
        dest = df.substitute(dest, variables)
        dest_abs = os.path.normpath(os.path.join(workdir, dest))
        _writable(dest_abs, where, ins.keyword)
        into_dir = dest.endswith("/") or len(sources) > 1
        context = recipe.context.resolve()
        commands: list[str] = []
        for raw in sources:
            pattern = df.substitute(raw, variables)
            if pattern.startswith(("http://", "https://")):
                raise BakeError(f"{where}: ADD from a URL is not supported by the local backend")
            matches = sorted(glob.glob(str(context / pattern.lstrip("/")))) or []
            if not matches:
                raise BakeError(f"{where}: COPY source {pattern!r} not found in {recipe.context}")
            for match in matches:
                path = Path(match).resolve()
                if path != context and context not in path.parents:
                    raise BakeError(f"{where}: COPY source {pattern!r} is outside the build context")
                inside = CONTEXT_MOUNT + "/" + path.relative_to(context).as_posix()
                q_src, q_dest = shlex.quote(inside), shlex.quote(dest_abs)
                if path.is_dir():
                    commands.append(f"mkdir -p {q_dest} && {COPY} {q_src}/. {q_dest}/")
                elif into_dir or len(matches) > 1:
                    commands.append(f"mkdir -p {q_dest} && {COPY} {q_src} {q_dest}/")
                else:
                    commands.append(
                        f"if [ -d {q_dest} ]; then {COPY} {q_src} {q_dest}/; "
                        f"else mkdir -p $(dirname {q_dest}) && {COPY} {q_src} {q_dest}; fi"
                    )
        if "chmod" in ins.flags:
            commands.append(f"chmod -R {shlex.quote(ins.flags['chmod'])} {shlex.quote(dest_abs)}")
        return "set -e\n" + "\n".join(commands)

    # -- sandboxes -----------------------------------------------------------------


def root_hint(output: str) -> str:
    """A step that removes a writable root (`rm -rf /app && git clone ... /app`): each
    is a mount point here, which only the docker backend can replace."""
    if any(f"cannot remove '/{name}': Device or resource busy" in output for name in ROOTS):
        return ("\nhint: the local backend's /app, /opt, /tests... are mount points and cannot "
                "be removed; build this task with --reactbench-sandbox=docker")
    return ""
