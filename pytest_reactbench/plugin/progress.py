"""Progress lines for long work (bakes) that show up live, also from xdist workers."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest


def progress_printer(config: pytest.Config) -> Callable[[str], None]:
    # Items run with output captured; the capture manager is the one way to write
    # to the terminal in the middle of a fixture (it is not public API). stderr of
    # an xdist worker is the controller's, so the lines appear there too.
    capman = config.pluginmanager.getplugin("capturemanager")
    worker = getattr(config, "workerinput", {}).get("workerid", "")
    prefix = f"[reactbench{' ' + worker if worker else ''}] "

    first = [True]

    def emit(line: str) -> None:
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
