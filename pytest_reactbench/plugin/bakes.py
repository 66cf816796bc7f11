"""The session's bakes as the run records them: which process bakes ahead of the
trials (the only one, or the first of xdist's workers to ask; the others find the
images baked, or wait on the same per-key file locks), and what the bakes cost, summed
up at the end in the terminal and in the run's `bakes.json` (and the download cache's
traffic, counted once for the session, in `downloads.json`). The bakes themselves are
scheduled by the sandbox layer (`sandbox/prebake.py`).
"""

from __future__ import annotations

import json
import os
import shutil
from dataclasses import asdict
from pathlib import Path
from typing import Any

from pytest_reactbench.sandbox.base import Backend
from pytest_reactbench.sandbox.downloads import Traffic

#: The workers' bake records, merged by the controller into bakes.json.
PARTS = ".bakes"
#: When the same image is settled several ways in one run, the costliest one counts.
_RANK = {"baked": 0, "pulled": 1, "reused": 2}


def session_folder(run_dir: Path, session: str | None) -> Path | None:
    """The folder the processes of an xdist session (`session`, its id) share for what
    one learns for all (SandboxOptions.session_dir); None without xdist. Removed with
    the bake parts when the session ends."""
    return None if session is None else run_dir / PARTS / f"session-{session}"


def claims_prebake(run_dir: Path, session: str | None) -> bool:
    """Whether this process bakes the session's images ahead of its trials: without
    xdist (`session` None) the one process does; with it, the first worker to ask, by
    creating a file only one process can (the session's, so a resumed run bakes again).
    The parts' folder, and the claim with it, is removed when the parts are merged."""
    if session is None:
        return True
    folder = run_dir / PARTS
    folder.mkdir(parents=True, exist_ok=True)
    try:
        os.close(os.open(folder / f"prebake-{session}.claim", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        return False
    return True


def write_part(run_dir: Path, worker: str, backend: Backend | None) -> None:
    """This process's bake records and the download traffic of its caches (a pool of
    engines has one per engine: the caches' own counts, each byte once, however many
    bakes ran side by side; a bake's own figures are the traffic while it ran, which
    bakes beside it share), for the controller to merge."""
    records = backend.bake_records() if backend is not None else ()
    traffic = backend.download_traffic() if backend is not None else Traffic()
    if not records and traffic == Traffic():
        return
    folder = run_dir / PARTS
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{worker}.json").write_text(json.dumps({"bakes": [asdict(r) for r in records],
                                                      "downloads": asdict(traffic)}))


def merge_parts(run_dir: Path) -> tuple[list[dict[str, Any]], Traffic]:
    """Every process's records, one per image (its costliest settling), written to
    the run's bakes.json, and the download traffic of the session (every process's,
    summed), written to its downloads.json; the parts are removed."""
    folder = run_dir / PARTS
    if not folder.is_dir():
        return [], Traffic()
    by_key: dict[str, dict[str, Any]] = {}
    traffic = Traffic()
    for part in sorted(folder.glob("*.json")):
        try:
            content = json.loads(part.read_text())
            records = content["bakes"]
            traffic = traffic + Traffic(**content["downloads"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        for record in records:
            known = by_key.get(record["key"])
            if known is None or _RANK[record["how"]] < _RANK[known["how"]]:
                by_key[record["key"]] = record
    shutil.rmtree(folder, ignore_errors=True)
    merged = sorted(by_key.values(), key=lambda r: (_RANK[r["how"]], -r["seconds"]))
    if merged:
        (run_dir / "bakes.json").write_text(json.dumps(merged, indent=1) + "\n")
    if traffic != Traffic():
        (run_dir / "downloads.json").write_text(json.dumps(asdict(traffic), indent=1) + "\n")
    return merged, traffic


def summary_lines(records: list[dict[str, Any]], traffic: Traffic | None = None) -> list[str]:
    """What the session's bakes cost, by how each image was had, and what the download
    cache moved for them (`traffic`, the session's)."""
    lines = []
    for how, label in (("baked", "baked here"), ("pulled", "pulled from the image registry"),
                       ("reused", "reused")):
        chosen = [r for r in records if r["how"] == how]
        if not chosen:
            continue
        line = f"{len(chosen)} image(s) {label}"
        if how != "reused":
            slowest = max(chosen, key=lambda r: r["seconds"])
            line += (f": {sum(r['seconds'] for r in chosen):.0f} s in all, the longest "
                     f"{slowest['name']} ({slowest['seconds']:.0f} s)")
        lines.append(line)
    if traffic is not None and traffic.served_bytes:
        lines.append(f"packages: {traffic.served_bytes / 1e6:.1f} MB served to bakes by the download "
                     f"cache, {traffic.fetched_bytes / 1e6:.1f} MB of it fetched from the registry")
    return lines
