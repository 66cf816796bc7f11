"""A failed bake step's error: its own output, and the cause the exit code hides (a
host that could not be resolved anywhere in the build, a missing command on 127)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pytest_reactbench.sandbox.buildlog import BuildLog, step_failure
from pytest_reactbench.sandbox.errors import BakeError
from tests.sandbox.helpers import recipe

#: As the public task printed it: curl's failure, then the rest of the chained RUN,
#: then the command curl was to install missing.
CHAINED = (
    "curl: (6) Could not resolve host: bun.sh\n"
    + "".join(f"hint: detached HEAD advice line {n}\n" for n in range(30))
    + "/bin/sh: 1: bun: not found\n"
)


def test_the_first_line_names_the_host_and_the_missing_command_and_where() -> None:
    log = BuildLog()
    log.step("environment/Dockerfile:17")
    log.add("resolving deps ...\nbun.sh says hel")  # lines come in pieces
    log.add("lo\n")
    log.step("environment/Dockerfile:21")
    log.add(CHAINED)
    said = log.failure("environment/Dockerfile:21", 127)
    first, *rest = said.splitlines()
    assert first.startswith("environment/Dockerfile:21: step failed with exit code 127: ")
    assert "a host could not be resolved (bun.sh): 'curl: (6) Could not resolve host: bun.sh'" in first
    assert "a command was not found (bun): '/bin/sh: 1: bun: not found'" in first
    # The step's own last lines, and the cause's line, which they no longer show.
    assert rest[0] == "  curl: (6) Could not resolve host: bun.sh" and rest[1] == "  ..."
    assert rest[-1] == "  /bin/sh: 1: bun: not found" and len(rest) == 2 + 15
    assert "resolving deps" not in said


def test_a_cause_printed_by_an_earlier_step_names_that_step() -> None:
    log = BuildLog()
    log.step("Dockerfile:3")
    log.add("npm ERR! request to https://registry.example/x failed, reason: getaddrinfo ENOTFOUND "
            "registry.example\n")
    log.step("Dockerfile:5")
    log.add("bash: line 1: pnpm: command not found\n")
    first = log.failure("Dockerfile:5", 127).splitlines()[0]
    assert "a host could not be resolved (registry.example)" in first
    assert "(printed by Dockerfile:3)" in first and "a command was not found (pnpm)" in first


@pytest.mark.parametrize("output, code, named", [
    ("make: *** [all] Error 2\n", 2, None),
    ("foo: not found\n", 1, None),  # a missing command is named on 127 only
    ("npm ERR! 404 Not Found - GET https://registry.npmjs.org/nope\n", 1, None),
    ("env: 'node': No such file or directory\n", 127, "a command was not found (node)"),
    ("wget: unable to resolve host address 'example.invalid'\n", 4,
     "a host could not be resolved (example.invalid)"),
    # A package manager's "failed to resolve" is of a version, not of a host.
    (" ERR_PNPM_NO_MATCHING_VERSION  Failed to resolve three-fenestra@^0.3.0 in package mirror\n", 1, None),
    ("Failed to resolve 'dependency' of rapid-form@3.1.0\n", 1, None),
    ("urllib3: Failed to resolve 'pypi.invalid' ([Errno -3] Temporary failure in name resolution)\n", 1,
     "a host could not be resolved (pypi.invalid)"),
])
def test_what_is_named_and_what_is_not(output: str, code: int, named: str | None) -> None:
    first = step_failure("Dockerfile:2", code, output).splitlines()[0]
    if named is None:
        assert first == f"Dockerfile:2: step failed with exit code {code}"
    else:
        assert first.startswith(f"Dockerfile:2: step failed with exit code {code}: {named}")


@pytest.mark.docker
def test_a_docker_bake_names_a_download_that_failed_far_from_the_last_lines(
        tmp_path: Path, docker_backend: object) -> None:
    from pytest_reactbench.sandbox.docker import DockerBackend

    assert isinstance(docker_backend, DockerBackend)
    r = recipe(tmp_path, "FROM reactbench/system\nRUN echo early-step\n"
               # One stream, so that the engine keeps the order the lines were printed in.
               "RUN exec 2>&1; (curl -fsSL https://bun.invalid/install | sh || true) "
               "&& for i in $(seq 1 40); do echo \"advice line $i\"; done && bun install\n",
               timeout=600)
    with pytest.raises(BakeError) as info:
        docker_backend.bake(r, lambda _: None)
    first, *rest = str(info.value).splitlines()
    assert first.startswith(f"{r.dockerfile}:3: step failed with exit code 127: "
                            "a host could not be resolved (bun.invalid): 'curl: (6) Could not resolve host")
    assert "a command was not found (bun)" in first
    assert rest[0].startswith("  curl: (6) Could not resolve host: bun.invalid")
    assert not any("early-step" in line or "Step 2/3" in line for line in rest)
