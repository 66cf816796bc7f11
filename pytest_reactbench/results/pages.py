"""What every page of the HTML report shares: its style and frame, and the report's
folder (`Site`), which copies in the record files its pages link from outside it. The
run's page is `site.py`'s, a trial's `trial_page.py`'s, a comparison's
`compare_page.py`'s."""

from __future__ import annotations

import html
import os
import shutil
from pathlib import Path
from urllib.parse import quote

_e = html.escape


STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 24px; color: #222; max-width: 1200px; }
table { border-collapse: collapse; margin: 12px 0 24px; }
th, td { border: 1px solid #ccc; padding: 5px 9px; text-align: left; vertical-align: top; }
td[data-verdict] { color: #fff; min-width: 140px; }
td[data-verdict] a, .badge a { color: #fff; }
.t { margin-top: 4px; } .key, .badge { color: #fff; padding: 2px 8px; margin-right: 6px; border-radius: 3px; }
dl.run { display: grid; grid-template-columns: max-content auto; gap: 2px 16px; }
dl.run dt { font-weight: 600; } dl.run dd { margin: 0; }
pre { background: #f6f8fa; padding: 10px; overflow-x: auto; white-space: pre-wrap;
      border: 1px solid #e1e4e8; }
pre.diff .add { color: #116329; background: #dafbe1; } pre.diff .del { color: #82071e; background: #ffebe9; }
pre.diff .hunk { color: #6639ba; }
.reason { border-left: 4px solid #c62828; padding: 4px 12px; background: #fff5f5; }
.reason.error { border-color: #6d4c41; background: #f7f1ef; }
.reason.passed { border-color: #2e7d32; background: #f1f8f1; }
section { margin: 18px 0; } code { background: #f0f0f0; padding: 0 3px; }
ol.steps { list-style: none; padding: 0; }
ol.steps > li { border-left: 3px solid #90a4ae; margin: 6px 0; padding: 2px 10px; }
ol.steps > li.failed { border-color: #c62828; } ol.steps > li.said { border-color: #1565c0; }
.step-head .meta { color: #555; font-size: 0.9em; margin-left: 8px; }
.arg-name { color: #555; margin-right: 6px; }
th[data-key] { cursor: pointer; }
pre.code { background: #f6f8fa; margin: 2px 0; } ol.steps pre { max-height: 24em; overflow: auto; }
"""


def page(title: str, body: str) -> str:
    return (f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{_e(title)}</title>'
            f"<style>{STYLE}</style></head><body>\n{body}\n</body></html>\n")


class Site:
    """The folder a report is written to."""

    def __init__(self, out: Path, up: tuple[str, str] | None = None) -> None:
        self.out = out.resolve()
        self.trials = self.out / "trials"
        #: A page this site is part of (its href from the site's folder, and its name).
        self.up = up

    def up_link(self, depth: int) -> list[str]:
        """The link to the page this site is part of, from a page `depth` folders down."""
        if self.up is None:
            return []
        return [f'<a id=up href="{"../" * depth}{self.up[0]}">↑ {_e(self.up[1])}</a>']

    def link(self, target: Path, slug: str, name: str) -> str:
        """A relative href to a record file from a trial page, copying the file into
        the site when it lies outside it."""
        target = target.resolve()
        if not target.is_relative_to(self.out):
            copy = self.trials / slug / name
            copy.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(target, copy)
            target = copy
        return quote(os.path.relpath(target, self.trials))
