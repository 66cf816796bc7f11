"""Backends by name: the built-ins and those added through the hook, the same for a
test run and for `reactbench images`."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_reactbench.cli import main
from pytest_reactbench.plugin.extensions import command_hook, registered
from pytest_reactbench.sandbox.options import SandboxOptions
from pytest_reactbench.sandbox.registry import BUILTIN_BACKENDS, BackendRegistryError, merge_backends
from tests.helpers import write_task
from tests.sandbox.wrapped import WrappedBackend


def test_a_name_registered_twice_is_refused() -> None:
    def other(options: SandboxOptions) -> WrappedBackend:
        return WrappedBackend(options)

    assert merge_backends([BUILTIN_BACKENDS, BUILTIN_BACKENDS]) == dict(BUILTIN_BACKENDS)
    with pytest.raises(BackendRegistryError, match="two plugins register the sandbox backend 'local'"):
        merge_backends([BUILTIN_BACKENDS, {"local": other}])


def test_the_registry_has_the_built_ins_and_the_hooks_backends() -> None:
    """One function composes both registries, for a session and for a command."""
    built_in = registered(command_hook([]))
    assert set(built_in.backends) >= {"local", "docker"}
    assert set(built_in.agents) >= {"oracle", "nop", "patch", "claude-code"}
    assert registered(command_hook(["tests.sandbox.wrapped"])).backends["wrapped"] is WrappedBackend
    with pytest.raises(pytest.UsageError, match=r"--sandbox: unknown backend 'lokal'; known: .*local"):
        built_in.backend("lokal", "--sandbox")


def test_the_images_command_reads_the_sandbox_options_as_a_session_does(
        capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same rows, the same checks and messages, the same environment variables."""
    assert main(["images", "--list", "--ca-bundle", str(tmp_path / "absent.pem")]) == 2
    assert f"--reactbench-ca-bundle: {tmp_path / 'absent.pem'} is not a file" in capsys.readouterr().err
    assert main(["images", "--list", "--image-map", "no-equals-sign"]) == 2
    assert "--reactbench-image-map" in capsys.readouterr().err
    assert main(["images", "--list", "--sandbox", "lokal"]) == 2
    assert "unknown backend 'lokal'" in capsys.readouterr().err
    # REACTBENCH_CACHE is the command's cache too: a stand-in baked there is listed.
    monkeypatch.setenv("REACTBENCH_CACHE", str(tmp_path / "cache"))
    public = "ghcr.io/millionco/react-bench-base"
    assert main(["images", "--list", "--sandbox", "local", "--only", public]) == 0
    assert (tmp_path / "cache" / "local").is_dir()


def test_images_lists_every_registered_backend(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    public = "ghcr.io/millionco/react-bench-base"
    assert main(["images", "--list", "-p", "tests.sandbox.wrapped", "--cache", str(tmp_path),
                 "--only", public]) == 0
    out = capsys.readouterr().out
    # Nothing is baked in an empty cache, and the listing built nothing.
    assert "wrapped (its results are not formal)" in out and "local (its results are not formal)" in out
    assert out.count(f"  {public}") >= 2 and "not baked" in out
    assert "docker (its results can be formal)" in out or "docker: unavailable" in out
    assert not list((tmp_path / "local" / "images").glob("*"))


def test_images_names_an_unknown_backend(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["images", "--sandbox", "nowhere"]) == 2
    assert "unknown backend 'nowhere'; known: docker, local" in capsys.readouterr().err


def test_a_hook_registered_backend_runs_trials(suite: pytest.Pytester) -> None:
    write_task(suite.path / "tasks", "t")
    result = suite.runpytest("-p", "tests.sandbox.wrapped", "--reactbench-sandbox=wrapped",
                             "--reactbench-agent=oracle,nop")
    result.assert_outcomes(passed=1, failed=1)
