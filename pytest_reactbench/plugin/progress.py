"""Progress lines for long work (bakes) that show up live, also from xdist workers,
each bake decision once per session."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

#: A decision about one image, whichever task's recipe asked for it.
_REUSE = re.compile(r"^.*?: (reusing baked image \S+)$")


class OncePerSession:
    """Says whether a progress line is new to the session: every item of every xdist
    worker asks for the same images, and their decision is worth one line, not one per
    item. Workers share the answer through empty files in a folder of the run."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._seen: set[str] = set()

    def __call__(self, line: str) -> bool:
        match = _REUSE.match(line)
        key = match.group(1) if match else line
        if key in self._seen:
            return False
        self._seen.add(key)
        try:
            self.folder.mkdir(parents=True, exist_ok=True)
            digest = hashlib.sha256(key.encode()).hexdigest()[:32]
            os.close(os.open(self.folder / digest, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
        except FileExistsError:
            return False
        except OSError:
            return True  # a folder we cannot write: better a line twice than none
        return True

    def remove(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


def progress_printer(config: pytest.Config,
                     once: Callable[[str], bool] | None = None) -> Callable[[str], None]:
    # Items run with output captured; the capture manager is the one way to write
    # to the terminal in the middle of a fixture (it is not public API). stderr of
    # an xdist worker is the controller's, so the lines appear there too.
    capman = config.pluginmanager.getplugin("capturemanager")
    worker = getattr(config, "workerinput", {}).get("workerid", "")
    prefix = f"[reactbench{' ' + worker if worker else ''}] "

    first = [True]

    def emit(line: str) -> None:
        if once is not None and not once(line):
            return
        # The first line leaves the item's own status line (`tasks/x::oracle `).
        text = ("\n" if first[0] and not worker else "") + prefix + line + "\n"
        first[0] = False
        if capman is not None:
            with capman.global_and_fixture_disabled():
                sys.stderr.write(text)
                sys.stderr.flush()
        else:
            sys.stderr.write(text)

    return emit
