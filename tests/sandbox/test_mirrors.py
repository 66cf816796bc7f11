"""Git mirrors for bakes: option parsing, the recipe-key rule, the Dockerfile copy the
docker backend builds, and real clones through git's insteadOf (a directory mirror and
the `git daemon` the docker backend serves it with)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from pytest_reactbench.sandbox.docker.mirrors import (
    MirrorDaemon,
    original_step,
    preferred_port,
    with_build_args,
)
from pytest_reactbench.sandbox.mirrors import (
    LOCAL_MOUNT,
    GitMirror,
    GitMirrorError,
    git_env,
    key_of,
    local_binds,
    parse_git_mirrors,
    relevant,
)


def bare_repository(root: Path, name: str) -> str:
    work = root / "work" / name
    work.mkdir(parents=True)
    (work / "README.md").write_text(f"{name}\n")
    run = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]
    subprocess.run([*run, "init", "-q", "-b", "main"], cwd=work, check=True)
    subprocess.run([*run, "add", "-A"], cwd=work, check=True)
    subprocess.run([*run, "commit", "-qm", "first"], cwd=work, check=True)
    target = root / "mirror" / f"{name}.git"
    target.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(target)], check=True)
    return subprocess.run(["git", "rev-parse", "HEAD"], cwd=work, check=True,
                          capture_output=True, text=True).stdout.strip()


def clone(url: str, dest: Path, env: dict[str, str], *flags: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("GIT_CONFIG")}
    return subprocess.run(["git", "clone", "-q", *flags, url, str(dest)], capture_output=True,
                          text=True, env={**clean, "GIT_TERMINAL_PROMPT": "0", **env}, timeout=60)


def test_parse_git_mirrors(tmp_path: Path) -> None:
    mirrors = parse_git_mirrors(
        [f"https://github.com/={tmp_path}", "https://gitlab.com/=git://mirror.example/gl/",
         f"https://github.com/={tmp_path}/../{tmp_path.name}", ""], "--reactbench-git-mirror")
    # The later entry for a prefix wins; directories are made absolute and resolved.
    assert mirrors == (GitMirror("https://github.com/", str(tmp_path.resolve())),
                       GitMirror("https://gitlab.com/", "git://mirror.example/gl/"))
    assert mirrors[0].is_directory and not mirrors[1].is_directory
    assert not GitMirror("x", "git@host.example:org/").is_directory


@pytest.mark.parametrize("entry, message", [
    ("https://github.com/", "must be PREFIX=LOCATION"),
    ("=/tmp", "must be PREFIX=LOCATION"),
    ("https://github.com/=/no/such/dir", "is neither a directory nor a git URL"),
])
def test_parse_git_mirrors_refuses(entry: str, message: str) -> None:
    with pytest.raises(GitMirrorError, match=f"ini reactbench_git_mirrors: git mirror .*{message}"):
        parse_git_mirrors([entry], "ini reactbench_git_mirrors")


def test_only_mirrors_a_recipe_can_use_join_its_key(tmp_path: Path) -> None:
    github = GitMirror("https://github.com/", str(tmp_path))
    gitlab = GitMirror("https://gitlab.com/", "git://m/")
    context = tmp_path / "context"
    context.mkdir()
    dockerfile = context / "Dockerfile"
    dockerfile.write_text("FROM x\nRUN bash /opt/prepare.sh\n")
    assert relevant([github, gitlab], dockerfile, context) == ()
    # A clone script in the context names the host: the mirror is used by this bake.
    (context / "prepare.sh").write_text("git clone https://github.com/o/r /app\n")
    assert relevant([github, gitlab], dockerfile, context) == (github,)
    assert key_of([gitlab, github]) == key_of([github, gitlab])
    assert key_of([github]) != key_of([GitMirror("https://github.com/", "/elsewhere")])


def test_git_env_is_what_git_reads() -> None:
    env = git_env({"/srv/m/": "https://github.com/"})
    assert env["GIT_CONFIG_COUNT"] == "3"
    assert (env["GIT_CONFIG_KEY_0"], env["GIT_CONFIG_VALUE_0"]) == ("url./srv/m/.insteadOf",
                                                                    "https://github.com/")
    shown = subprocess.run(["git", "config", "--get-regexp", r"^url\."], capture_output=True,
                           text=True, env={**os.environ, **env}).stdout
    assert shown.strip() == "url./srv/m/.insteadof https://github.com/"


def test_with_build_args_declares_after_every_from_and_maps_steps_back() -> None:
    text = ("ARG BASE=x\nFROM ${BASE} AS build\nRUN a \\\n && b\n"
            "FROM \\\n  scratch\nCOPY --from=build /a /a\n")
    built = with_build_args(text, ["GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0"])
    assert built.splitlines() == [
        "ARG BASE=x", "FROM ${BASE} AS build", "ARG GIT_CONFIG_COUNT GIT_CONFIG_KEY_0",
        "RUN a \\", " && b", "FROM \\", "  scratch", "ARG GIT_CONFIG_COUNT GIT_CONFIG_KEY_0",
        "COPY --from=build /a /a",
    ]
    assert with_build_args(text, []) == text
    # The engine's steps of the copy, in the original's numbering (ARG, FROM, RUN, FROM, COPY).
    assert [original_step(text, n) for n in range(1, 8)] == [1, 2, 2, 3, 4, 4, 5]


def test_a_directory_mirror_serves_a_clone_locally(tmp_path: Path) -> None:
    pinned = bare_repository(tmp_path, "org/app")
    binds, rewrites = local_binds([GitMirror("https://github.com/", str(tmp_path / "mirror"))])
    assert binds == {f"{LOCAL_MOUNT}/0": tmp_path / "mirror"}
    # Outside a sandbox the bind target does not exist: point the rewrite at the source.
    env = git_env({f"{tmp_path / 'mirror'}/": prefix for prefix in rewrites.values()})
    result = clone("https://github.com/org/app", tmp_path / "app", env)
    assert result.returncode == 0, result.stderr
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path / "app",
                          capture_output=True, text=True).stdout.strip()
    assert head == pinned


def test_the_daemon_serves_clones_and_partial_clones(tmp_path: Path) -> None:
    bare_repository(tmp_path, "org/app")
    mirror = GitMirror("https://github.com/", str(tmp_path / "mirror"))
    daemon = MirrorDaemon([mirror])
    try:
        rewrites = daemon.rewrites([mirror])
        (base,) = rewrites
        assert base.startswith("git://127.0.0.1:") and rewrites[base] == "https://github.com/"
        assert daemon.rewrites([mirror]) == rewrites  # one daemon per directory
        env = git_env(rewrites)
        result = clone("https://github.com/org/app", tmp_path / "full", env)
        assert result.returncode == 0, result.stderr
        assert (tmp_path / "full" / "README.md").read_text() == "org/app\n"
        result = clone("https://github.com/org/app", tmp_path / "partial", env, "--filter=blob:none")
        assert result.returncode == 0, result.stderr
        missing = clone("https://github.com/org/none", tmp_path / "none", env)
        assert missing.returncode != 0
    finally:
        daemon.close()
    # Closed: nothing listens any more.
    assert clone("https://github.com/org/app", tmp_path / "after", env).returncode != 0



def test_the_daemon_dies_with_its_session(tmp_path: Path) -> None:
    """A session killed before it could close the daemon leaves no git daemon behind."""
    bare_repository(tmp_path, "org/app")
    script = (
        "import sys, time\n"
        "from pytest_reactbench.sandbox.docker.mirrors import MirrorDaemon\n"
        "from pytest_reactbench.sandbox.mirrors import GitMirror\n"
        f"m = GitMirror('https://github.com/', {str(tmp_path / 'mirror')!r})\n"
        "print(next(iter(MirrorDaemon([m]).rewrites([m]))), flush=True)\n"
        "time.sleep(60)\n"
    )
    session = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert session.stdout is not None
    base = session.stdout.readline().strip()
    env = git_env({base: "https://github.com/"})
    assert clone("https://github.com/org/app", tmp_path / "during", env).returncode == 0
    session.kill()
    session.wait()
    deadline = time.monotonic() + 10
    while clone("https://github.com/org/app", tmp_path / "after", env).returncode == 0:
        assert time.monotonic() < deadline, "the git daemon outlived its session"
        shutil.rmtree(tmp_path / "after")
        time.sleep(0.2)


def daemons_of(directory: Path) -> list[int]:
    """The `git daemon` processes serving `directory` (any process's)."""
    found = []
    for proc in Path("/proc").iterdir():
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            state = (proc / "stat").read_bytes().rpartition(b")")[2].split()[0]
        except (OSError, IndexError):
            continue
        if state != b"Z" and argv[:1] == [b"git"] and f"--base-path={directory}".encode() in argv:
            found.append(int(proc.name))
    return found


def test_one_daemon_per_folder_at_one_address_whoever_asks(tmp_path: Path) -> None:
    """Two bakes at once, a bake in a thread that has ended since, a bake of another
    session: one daemon, at the folder's own address; it stops when the last user
    closes."""
    bare_repository(tmp_path, "org/app")
    folder = tmp_path / "mirror"
    mirror = GitMirror("https://github.com/", str(folder))
    root = tmp_path / "daemons"
    session = MirrorDaemon([mirror], root)
    other = MirrorDaemon([mirror], root)
    try:
        asked: list[dict[str, str]] = []
        start = threading.Barrier(2)

        def bake() -> None:
            start.wait()
            asked.append(session.rewrites([mirror]))

        threads = [threading.Thread(target=bake) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        (base,) = asked[0]
        assert asked[0] == asked[1] and base == f"git://127.0.0.1:{preferred_port(str(folder))}/"
        time.sleep(1)  # both threads ended a while ago: the daemon serves on
        env = git_env(asked[0])
        assert clone("https://github.com/org/app", tmp_path / "later", env).returncode == 0
        assert session.rewrites([mirror]) == asked[0] == other.rewrites([mirror])
        assert len(daemons_of(folder)) == 1
        session.close()
        # Another user still has it.
        assert clone("https://github.com/org/app", tmp_path / "still", env).returncode == 0
    finally:
        session.close()
        other.close()
    assert daemons_of(folder) == [] and not list(root.glob("*.json"))
    assert clone("https://github.com/org/app", tmp_path / "after", env).returncode != 0
    # A later session serves it at the same address again.
    later = MirrorDaemon([mirror], root)
    try:
        assert later.rewrites([mirror]) == asked[0]
    finally:
        later.close()
    assert daemons_of(folder) == []


def test_a_daemon_whose_users_died_is_swept(tmp_path: Path) -> None:
    """A session killed while the daemon's supervisor could not act (stopped): the
    record it left finds the daemon, and the next session's sweep ends it."""
    bare_repository(tmp_path, "org/app")
    folder = tmp_path / "mirror"
    root = tmp_path / "daemons"
    script = (
        "import sys, time\nfrom pathlib import Path\n"
        "from pytest_reactbench.sandbox.docker.mirrors import MirrorDaemon\n"
        "from pytest_reactbench.sandbox.mirrors import GitMirror\n"
        f"m = GitMirror('https://github.com/', {str(folder)!r})\n"
        f"print(next(iter(MirrorDaemon([m], Path({str(root)!r})).rewrites([m]))), flush=True)\n"
        "time.sleep(60)\n"
    )
    session = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})
    assert session.stdout is not None
    session.stdout.readline()
    (record,) = root.glob("*.json")
    supervisor = json.loads(record.read_text())["pid"]
    os.kill(supervisor, signal.SIGSTOP)
    try:
        session.kill()
        session.wait()
        assert len(daemons_of(folder)) == 1
        assert MirrorDaemon.sweep(root) == 1
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.kill(supervisor, signal.SIGCONT)
    deadline = time.monotonic() + 5
    while daemons_of(folder):
        assert time.monotonic() < deadline, "the swept daemon still runs"
        time.sleep(0.05)
    assert not record.exists() and MirrorDaemon.sweep(root) == 0


def test_a_stopped_supervisor_goes_only_once_its_daemon_is_gone(tmp_path: Path) -> None:
    """Whoever stops a daemon (the last user's close, a sweep) finds it gone when the
    stop returns, however long the daemon takes to end: here a daemon that takes half a
    second to die."""
    import fcntl

    from pytest_reactbench.sandbox.docker import mirrors

    folder = str(tmp_path / "mirror")
    pid_file = tmp_path / "daemon.pid"
    slow = f"echo $$ > {pid_file}; trap 'sleep 0.5; exit 0' TERM; while :; do sleep 0.05; done"
    lease = (tmp_path / "lease").open("a")
    fcntl.flock(lease, fcntl.LOCK_SH)  # a user: the supervisor does not stop it on its own
    supervisor = subprocess.Popen([sys.executable, "-c", mirrors._SUPERVISOR, str(tmp_path / "lock"),
                                   str(tmp_path / "lease"), str(tmp_path / "record"),
                                   "sh", "-c", slow, "daemon", f"--base-path={folder}"],
                                  start_new_session=True)
    try:
        deadline = time.monotonic() + 10
        while not pid_file.exists() or not pid_file.read_text().strip():
            assert time.monotonic() < deadline and supervisor.poll() is None
            time.sleep(0.02)
        daemon = int(pid_file.read_text())
        mirrors._stop(supervisor.pid, folder)
        assert not mirrors._alive(daemon)
    finally:
        supervisor.kill()
        supervisor.wait()
        lease.close()
