"""The options' table: each option is declared once and read the same way (command
line, then environment, then ini, then default), and a value that does not parse is
a usage error naming where it was read."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_reactbench.plugin.options import OPTIONS, REPLAYED, environment_sandbox_options, setting
from pytest_reactbench.plugin.session import replay_options
from pytest_reactbench.plugin.settings import Settings, read_settings
from pytest_reactbench.sandbox.options import (
    PACKAGE_MANAGER_ENV,
    UNSIGNED_REGISTRY_ENV,
    SandboxOptions,
    default_ca_bundle,
)

Read = Callable[..., Settings]


@pytest.fixture
def settings(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Read:
    monkeypatch.delenv("REACTBENCH_UNSIGNED_REGISTRY", raising=False)
    monkeypatch.delenv("REACTBENCH_CACHE", raising=False)
    (pytester.path / "tasks").mkdir()

    def read(*args: str, ini: str = "") -> Settings:
        pytester.makeini("[pytest]\n" + ini)
        return read_settings(pytester.parseconfig("--reactbench-agent=oracle", *args))
    return read


def test_every_option_is_declared_with_its_ini_key_and_variable(pytester: pytest.Pytester) -> None:
    config = pytester.parseconfig()
    fields = set(Settings.__dataclass_fields__) | {"resume_id"}
    for option in OPTIONS:
        assert option.field in fields, option.field
        assert hasattr(config.option, option.dest), option.flag
        if option.ini:
            config.getini(option.ini)  # declared: no ValueError
            assert f"ini: {option.ini}" in option.full_help()
        if option.env:
            assert f"env {option.env}" in option.full_help()
    result = pytester.runpytest("--help")
    result.stdout.fnmatch_lines(["*--reactbench-unsigned-registry*"])
    result.stdout.fnmatch_lines(["*reactbench_unsigned_registry (bool):*"])


def test_the_command_line_beats_the_environment_which_beats_the_ini(
        settings: Read, pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> None:
    # An ini path is relative to the ini file's folder; a command line's to the cwd.
    assert settings(ini="reactbench_cache = from-ini").cache == pytester.path / "from-ini"
    monkeypatch.setenv("REACTBENCH_CACHE", "/from/env")
    assert settings(ini="reactbench_cache = from-ini").cache == Path("/from/env")
    assert settings("--reactbench-cache=/from/cli", ini="reactbench_cache = x").cache == Path("/from/cli")
    # A bool: off by default, then the ini, the variable and the flag.
    assert settings().unsigned_registry is False
    assert settings(ini="reactbench_unsigned_registry = true").unsigned_registry is True
    monkeypatch.setenv("REACTBENCH_UNSIGNED_REGISTRY", "0")
    assert settings(ini="reactbench_unsigned_registry = true").unsigned_registry is False
    assert settings("--reactbench-unsigned-registry").unsigned_registry is True
    # The download cache follows the cache unless it is given; 'none' is none.
    monkeypatch.delenv("REACTBENCH_CACHE")
    assert settings("--reactbench-cache=/c").download_cache == Path("/c/downloads")
    assert settings("--reactbench-download-cache=none").download_cache is None


def test_a_replay_gives_back_every_replayed_setting_whatever_the_ini_says(settings: Read) -> None:
    """The table's replayed rows, as a replay writes them, read back to the same
    settings, over an ini that says otherwise for each."""
    given = settings(
        "--reactbench-sandbox=docker", "--reactbench-docker-host=unix:///var/run/a.sock",
        "--reactbench-image-map=ghcr.io/x/base:1=images/base", "--reactbench-images=stand-in",
        "--reactbench-unsigned-registry", "--reactbench-strict", "--reactbench-patch=fix.diff",
        "--reactbench-agent-command=mine=echo hi", "--reactbench-agent-env=MY_KEY",
        "--reactbench-model-host=api.example.com", "--reactbench-timeout-multiplier=2.5")
    ini = ("reactbench_sandbox = local\nreactbench_images = public\nreactbench_timeout_multiplier = 3\n"
           "reactbench_agent_env = OTHER\nreactbench_model_hosts = other.example.com\n"
           "reactbench_image_map = a=b\nreactbench_agent_commands = x=true\n")
    again = settings(*replay_options(given), ini=ini)
    for row in REPLAYED:
        assert getattr(again, row.field) == getattr(given, row.field), row.flag
    # A flag that was off stays off under an ini that turns it on.
    plain = settings()
    again = settings(*replay_options(plain),
                     ini="reactbench_strict = true\nreactbench_unsigned_registry = true\n")
    assert (again.strict, again.unsigned_registry) == (False, False)


def test_repeated_options_add_to_the_ini_or_replace_it(settings: Read) -> None:
    assert settings("--reactbench-model-host=b.example", ini="reactbench_model_hosts = a.example b.example"
                    ).model_hosts == ("a.example", "b.example")
    assert settings("--reactbench-docker-host=unix:///b.sock",
                    ini="reactbench_docker_hosts = unix:///a.sock").docker_hosts == ("unix:///b.sock",)
    assert settings(ini="reactbench_docker_hosts = unix:///a.sock").docker_hosts == ("unix:///a.sock",)


@pytest.mark.parametrize(("args", "ini", "said"), [
    ((), "reactbench_attempts = two", "ini reactbench_attempts: expected a whole number, got 'two'"),
    (("--reactbench-attempts=0",), "", "--reactbench-attempts: 0 is outside 1..100"),
    (("--reactbench-timeout-multiplier=0",), "", "--reactbench-timeout-multiplier: 0 must be above 0"),
    ((), "reactbench_docker_hosts = localhost:2375",
     "ini reactbench_docker_hosts: 'localhost:2375' is not an engine URL"),
    (("--reactbench-agent-command=nothing",), "",
     "--reactbench-agent-command: 'nothing' must be NAME=COMMAND"),
    (("--reactbench-shard=3/2",), "", "--reactbench-shard: '3/2' must be K/N"),
])
def test_a_value_that_does_not_parse_names_where_it_was_read(
        settings: Read, args: tuple[str, ...], ini: str, said: str) -> None:
    with pytest.raises(pytest.UsageError) as refused:
        settings(*args, ini=ini)
    assert said in str(refused.value)


def test_a_garbled_variable_is_a_usage_error_naming_it(settings: Read,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REACTBENCH_UNSIGNED_REGISTRY", "maybe")
    said = "env REACTBENCH_UNSIGNED_REGISTRY: 'maybe' is not a yes or no"
    with pytest.raises(pytest.UsageError, match=said):
        settings()


def test_the_unsigned_registry_reaches_bakes_and_sandboxes_only_when_asked(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REACTBENCH_UNSIGNED_REGISTRY", raising=False)
    assert SandboxOptions().package_manager_env == dict(PACKAGE_MANAGER_ENV)
    assert SandboxOptions(unsigned_registry=True).package_manager_env == {**PACKAGE_MANAGER_ENV,
                                                                        **UNSIGNED_REGISTRY_ENV}
    # The sandbox layer is given it, never reads the variable: outside a pytest session
    # (a script, a test fixture) the table reads it.
    monkeypatch.setenv("REACTBENCH_UNSIGNED_REGISTRY", "yes")
    assert SandboxOptions().unsigned_registry is False
    assert setting("unsigned_registry") is True
    assert environment_sandbox_options().unsigned_registry is True
    assert environment_sandbox_options(unsigned_registry=False).unsigned_registry is False


def test_outside_a_session_the_table_reads_the_environment_then_the_default(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REACTBENCH_CA_BUNDLE", raising=False)
    monkeypatch.delenv("REACTBENCH_CACHE", raising=False)
    assert setting("ca_bundle") == default_ca_bundle()
    bundle = tmp_path / "proxy.pem"
    bundle.write_text("-----BEGIN CERTIFICATE-----\n")
    monkeypatch.setenv("REACTBENCH_CA_BUNDLE", str(bundle))
    monkeypatch.setenv("REACTBENCH_CACHE", str(tmp_path / "cache"))
    made = environment_sandbox_options(image_map={})
    assert (made.ca_bundle, made.cache, made.image_map) == (bundle, tmp_path / "cache", {})
    assert environment_sandbox_options(cache=tmp_path / "given").cache == tmp_path / "given"
    monkeypatch.setenv("REACTBENCH_CA_BUNDLE", "none")
    assert setting("ca_bundle") is None
    # A value that does not parse names the variable, as in a session.
    monkeypatch.setenv("REACTBENCH_CA_BUNDLE", str(tmp_path / "missing.pem"))
    with pytest.raises(pytest.UsageError, match=r"env REACTBENCH_CA_BUNDLE: .* is not a file"):
        environment_sandbox_options()
    with pytest.raises(KeyError):
        setting("no_such_field")
