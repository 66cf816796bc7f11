"""A newcomer's first run: the README's first command in a fresh clone, with an empty
bake cache and an empty download cache.

    python benchmarks/newcomer.py [--backend local] [--setup]

Clones this checkout's HEAD into a temporary folder and runs there, as the README
says, `pytest --reactbench-agent=oracle` (with `--reactbench-sandbox` when the backend
is not the default), the clone's own plugin first on the path, and `REACTBENCH_CACHE`
an empty folder (the download cache is inside it). It prints the wall time, what the
bakes fetched (the download cache's size afterwards: every package a bake fetches
goes through it), what this machine received over the network meanwhile (the
non-loopback interfaces of /proc/net/dev: anything else fetched shows there), and
pytest's last line.

`--setup` runs `bash .ci/setup` in the clone first and times it too. It installs the
clone's package (`pip install -e`): the script installs this checkout's again at the
end. On a machine that has run the setup before, its time is not a fresh machine's.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import ROOT


def received_bytes() -> int:
    """Bytes received so far by this machine's non-loopback interfaces."""
    total = 0
    for line in Path("/proc/net/dev").read_text().splitlines()[2:]:
        name, _, fields = line.partition(":")
        if name.strip() != "lo":
            total += int(fields.split()[0])
    return total


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.is_symlink())


def timed(command: list[str], cwd: Path, env: dict[str, str]) -> tuple[float, int, str]:
    before, started = received_bytes(), time.monotonic()
    proc = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True)
    seconds, fetched = time.monotonic() - started, received_bytes() - before
    lines = proc.stdout.strip().splitlines()
    if proc.returncode not in (0, 1):
        print("\n".join(lines[-40:]) + proc.stderr[-4000:], file=sys.stderr)
    return seconds, fetched, lines[-1].strip("= ") if lines else f"exit {proc.returncode}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", default="local")
    parser.add_argument("--setup", action="store_true", help="run `bash .ci/setup` in the clone first")
    parser.add_argument("--keep", type=Path, metavar="DIR",
                        help="the bake cache to use (empty, made if missing) and keep, to look into")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="reactbench-newcomer-") as name:
        tmp = Path(name)
        clone = tmp / "clone"
        subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
        cache = args.keep or tmp / "cache"
        cache.mkdir(parents=True)
        path = [str(clone), *filter(None, [os.environ.get("PYTHONPATH")])]
        env = {**os.environ, "REACTBENCH_CACHE": str(cache), "PYTHONPATH": os.pathsep.join(path)}
        if args.setup:
            try:
                seconds, fetched, last = timed(["bash", ".ci/setup"], clone, env)
                print(f"bash .ci/setup: {seconds:.0f} s, {fetched / 1e6:.0f} MB received ({last})")
            finally:
                subprocess.run([sys.executable, "-m", "pip", "install", "-q", "-e", str(ROOT)], check=False)
        command = ["pytest", "--reactbench-agent=oracle"]
        if args.backend != "local":
            command.append(f"--reactbench-sandbox={args.backend}")
        seconds, fetched, last = timed(command, clone, env)
        downloads = folder_bytes(cache / "downloads") if (cache / "downloads").is_dir() else 0
        print(f"command: python benchmarks/newcomer.py --backend {args.backend}"
              + (" --setup" if args.setup else ""))
        print(f"{' '.join(command)}: {seconds:.0f} s; packages fetched by the bakes "
              f"{downloads / 1e6:.0f} MB (the download cache); {fetched / 1e6:.0f} MB received "
              f"by the machine; pytest: {last}")


if __name__ == "__main__":
    main()
