"""`Sandbox.get_archive` over an engine that loses a command's output: a tar stream
is never empty, so an empty one is taken again, and a second loss is a SandboxError
rather than an empty archive that reads as "no files"."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from pytest_reactbench.sandbox.base import ExecResult, Sandbox, SandboxError, tar_of


class LossySandbox(Sandbox):
    backend = "lossy"

    def __init__(self, outputs: list[bytes]) -> None:
        self.outputs = outputs
        self.calls = 0

    def exec(self, cmd: str | Sequence[str], *, cwd: str | None = None, env: Mapping[str, str] | None = None,
             timeout: float | None = None, user: str | None = None) -> ExecResult:
        self.calls += 1
        return ExecResult(0, self.outputs.pop(0), b"", 0.0)

    def put_archive(self, dest: str, data: bytes) -> None:
        raise NotImplementedError

    def close(self) -> None:
        pass


def test_an_archive_whose_output_was_lost_once_is_taken_again() -> None:
    tar = tar_of({"reward.txt": b"1"})
    box = LossySandbox([b"", tar])
    assert box.get_archive("/logs/verifier") == tar
    assert box.calls == 2


def test_an_archive_lost_twice_is_an_error_naming_the_directory() -> None:
    box = LossySandbox([b"", b""])
    with pytest.raises(SandboxError, match=r"could not archive /logs/verifier: .*lost"):
        box.get_archive("/logs/verifier")
