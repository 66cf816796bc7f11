from pathlib import Path

import pytest

from pytest_reactbench.sandbox import dockerfile as df


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    return path


def test_parse_continuations_comments_flags_and_forms(tmp_path: Path) -> None:
    path = write(tmp_path, """# syntax=docker/dockerfile:1
ARG BASE_IMAGE=ghcr.io/millionco/react-bench-base:latest
FROM ${BASE_IMAGE}
LABEL a=b
WORKDIR /app
COPY --chown=node:node app/ /app/
RUN rm -rf .git \\
 # a comment inside
 && git init -q
RUN ["bash", "-c", "echo hi"]
CMD ["sleep", "infinity"]
""")
    steps = df.parse(path)
    assert [s.keyword for s in steps] == ["ARG", "FROM", "LABEL", "WORKDIR", "COPY", "RUN", "RUN"]
    assert steps[4].flags == {"chown": "node:node"}
    assert steps[4].args == "app/ /app/"
    assert steps[5].args == "rm -rf .git && git init -q"
    assert steps[5].line == 7
    assert steps[6].exec_form == ("bash", "-c", "echo hi")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("RUN echo\n", "has no FROM"),
        ("FROM x\nONBUILD RUN y\n", ":2: ONBUILD is not supported"),
        ("FROM x\nRUN <<EOF\nhi\nEOF\n", ":2: heredocs are not supported"),
    ],
)
def test_parse_errors_name_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(df.DockerfileError, match=message) as info:
        df.parse(write(tmp_path, text))
    assert str(info.value).startswith(str(tmp_path / "Dockerfile"))


def test_substitute() -> None:
    v = {"A": "1", "EMPTY": ""}
    assert df.substitute("$A/${A}/${B:-d}/${A:+x}/${EMPTY:-e}/${B:+y}", v) == "1/1/d/x/e/"
    assert df.substitute("\\$A", v) == "$A"


def test_expand_pairs_forms(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    assert df.expand_pairs('A=1 B="two words"', {}, path, 1) == [("A", "1"), ("B", "two words")]
    assert df.expand_pairs("LEGACY some value", {}, path, 1) == [("LEGACY", "some value")]
    with pytest.raises(df.DockerfileError, match="expected KEY=VALUE"):
        df.expand_pairs("A=1 B", {}, path, 3)
    with pytest.raises(df.DockerfileError, match="unterminated quote"):
        df.expand_pairs('A="open', {}, path, 4)


def test_expand_pairs_keeps_the_inherited_value(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    inherited = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/root"}
    assert df.expand_pairs("PATH=/opt/x/bin:$PATH", inherited, path, 1) == [
        ("PATH", "/opt/x/bin:/usr/local/bin:/usr/bin:/bin")
    ]
    assert df.expand_pairs('PATH="${HOME}/.bin:${PATH}"', inherited, path, 1) == [
        ("PATH", "/root/.bin:/usr/local/bin:/usr/bin:/bin")
    ]
    assert df.expand_pairs("PNPM_HOME=/pnpm PATH=$PNPM_HOME:$PATH", inherited, path, 1) == [
        # Docker: every pair of one ENV sees the values from before it.
        ("PNPM_HOME", "/pnpm"), ("PATH", ":/usr/local/bin:/usr/bin:/bin"),
    ]


def test_expand_pairs_quotes_and_escapes(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    v = {"A": "one two", "B": "b"}
    assert df.expand_pairs("X=$A Y='$B' Z=\\$B W=\"$B-\\$B\" V=${B}c", v, path, 1) == [
        ("X", "one two"), ("Y", "$B"), ("Z", "$B"), ("W", "b-$B"), ("V", "bc"),
    ]
    assert df.expand_pairs("LEGACY $A and $B", v, path, 1) == [("LEGACY", "one two and b")]
    assert df.expand_pairs("A=cost$ B=${MISSING:-d}", v, path, 1) == [("A", "cost$"), ("B", "d")]


def test_a_typo_is_an_unknown_instruction_whatever_the_backend(tmp_path: Path) -> None:
    path = tmp_path / "Dockerfile"
    path.write_text("FROM reactbench/system\n# a comment\nWORKDIR /app\nRUN echo a \\\n  b\n"
                    "COPPY app/ /app/\n")
    said = f"{path}:6: unknown instruction COPPY (did you mean COPY?)"
    with pytest.raises(df.DockerfileError) as checked:
        df.check_instructions(path)
    assert str(checked.value) == said
    # The local backend's reader says the same, not that it lacks a Docker instruction.
    with pytest.raises(df.DockerfileError) as parsed:
        df.parse(path)
    assert str(parsed.value) == said
    path.write_text("FROM x\nSTOPSIGNAL SIGINT\nBOGUS 1\n")
    with pytest.raises(df.DockerfileError, match=r":3: unknown instruction BOGUS$"):
        df.check_instructions(path)
    # Every instruction of Docker's passes, heredoc bodies are not instructions, and the
    # local backend's own limits stay its own (at bake time).
    path.write_text("FROM x\nONBUILD RUN true\nRUN <<EOF\napt-get update\nEOF\n"
                    'COPY <<-"END" /etc/x\n\thello\n\tEND\nhealthcheck CMD true\n')
    df.check_instructions(path)
    with pytest.raises(df.DockerfileError, match="ONBUILD is not supported by the local backend"):
        df.parse(path)


def test_an_image_key_holds_the_code_that_builds_and_not_its_prose(tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """The backends' keys hash the modules that build (`build_modules`): a change of
    what that code does rebakes, a comment or a docstring edited does not."""
    from pytest_reactbench.sandbox.docker import DockerBackend
    from pytest_reactbench.sandbox.local import LocalBackend
    from pytest_reactbench.sandbox.recipes import code_key

    monkeypatch.syspath_prepend(str(tmp_path))
    module = tmp_path / "reactbench_build_probe.py"

    def key_of(source: str) -> str:
        module.write_text(source)
        code_key.cache_clear()
        return code_key("reactbench_build_probe")

    first = key_of('"""Builds."""\ndef step():\n    """Runs."""\n    return "npm ci"  # one\n')
    assert key_of('"""Builds the image."""\n\n# a comment\ndef step():\n    """Runs it."""\n'
                  '    return "npm ci"  # two\n') == first
    assert key_of('"""Builds."""\ndef step():\n    """Runs."""\n    return "npm install"\n') != first
    with pytest.raises(ImportError, match="no_such_build_module"):
        code_key("no_such_build_module")
    # Each backend names modules that exist, and the two ways of building differ.
    code_key.cache_clear()
    assert code_key(*DockerBackend.build_modules) != code_key(*LocalBackend.build_modules)
