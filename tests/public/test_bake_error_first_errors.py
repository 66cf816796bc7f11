"""A yarn berry install that fails on one package it cannot fetch goes on printing a
line for every other package (`YN0013 ... will be fetched from the remote registry`),
so the last lines of the failed step are progress alone. The bake's error keeps the
step's first error lines too: the package that failed and the registry's answer."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_reactbench.sandbox.buildlog import step_failure
from pytest_reactbench.sandbox.errors import BakeError
from tests.sandbox.helpers import recipe

#: What an install of a project whose one private package the registry lacks prints
#: (written here in the style of yarn berry without a terminal).
INSTALL = "\n".join([
    "printf '%s\\n' '➤ YN0000: ┌ Resolution step' '➤ YN0000: └ Completed' '➤ YN0000: ┌ Fetch step'",
    "printf '%s\\n' '➤ YN0035: │ @acme/private-icons@npm:2.0.1: The remote server failed to provide the "
    "requested resource' '➤ YN0035: │   Response Code: 404 (Not Found)' '➤ YN0035: │   Request Method: GET' "
    "'➤ YN0035: │   Request URL: http://127.0.0.1:4873/@acme/private-icons/-/private-icons-2.0.1.tgz'",
    "for n in $(seq 1 60); do",
    "  echo \"➤ YN0013: │ dep-$n@npm:1.0.$n can't be found in the cache\""
    " \"and will be fetched from the remote registry\"",
    "done",
    "printf '%s\\n' '➤ YN0000: └ Completed in 1s' '➤ YN0000: Failed with errors in 1s'",
    "exit 1",
    "",
])


def check(said: str, where: str) -> None:
    first, *rest = said.splitlines()
    assert first == f"{where}: step failed with exit code 1"
    # The failed package and the registry's answer come first, then the step's last lines.
    assert rest[0] == "  ➤ YN0035: │ @acme/private-icons@npm:2.0.1: The remote server failed to provide " \
        "the requested resource"
    assert rest[1] == "  ➤ YN0035: │   Response Code: 404 (Not Found)"
    assert rest[4] == "  ..."
    assert rest[-1] == "  ➤ YN0000: Failed with errors in 1s"
    assert len(rest) == 4 + 1 + 15


def test_the_error_of_a_step_whose_last_lines_are_progress_shows_its_first_error(tmp_path: Path) -> None:
    import subprocess

    (tmp_path / "install.sh").write_text(INSTALL)
    out = subprocess.run(["sh", str(tmp_path / "install.sh")], capture_output=True, text=True)
    assert out.returncode == 1
    check(step_failure("environment/Dockerfile:9", 1, out.stdout), "environment/Dockerfile:9")


def test_a_step_whose_error_is_among_its_last_lines_is_shown_as_before() -> None:
    output = "".join(f"progress {n}\n" for n in range(40)) + "npm error 404 Not Found - GET http://r/x\n"
    said = step_failure("Dockerfile:4", 1, output)
    assert "  ..." not in said.splitlines()
    assert said.splitlines()[-1] == "  npm error 404 Not Found - GET http://r/x"


@pytest.mark.docker
def test_a_docker_bake_of_that_install_names_the_package(tmp_path: Path, docker_backend: object) -> None:
    from pytest_reactbench.sandbox.docker import DockerBackend

    assert isinstance(docker_backend, DockerBackend)
    r = recipe(tmp_path, "FROM reactbench/system\nWORKDIR /app\nCOPY install.sh /tmp/install.sh\n"
               "RUN sh /tmp/install.sh\n", files={"install.sh": INSTALL}, timeout=600)
    with pytest.raises(BakeError) as info:
        docker_backend.bake(r, lambda _: None)
    check(str(info.value), f"{r.dockerfile}:4")
