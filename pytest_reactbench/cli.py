"""The `reactbench` command: work that is not a test run.

    reactbench images [--sandbox NAME] [--list]    the base images: bake them, or list them
    reactbench images --prune [DAYS]               remove baked images no run used for DAYS
    reactbench validate TASK_DIR... [--sandbox X]  check tasks before committing them
    reactbench report RUN... [--out DIR]           Markdown and HTML leaderboard (shards: one run)
    reactbench report RUN --baseline BASE --out D  a baseline beside a candidate (as compare --html)
    reactbench export --harbor RUN... --out DIR    runs as Harbor job folders (`harbor view DIR`)
    reactbench compare BASE NEW                    the regression gate (exit 1 on a regression)
    reactbench compare --base A... --new B...      the same, each side the shards of one run
    reactbench compare BASE NEW --html DIR         and a page of the two side by side, flips first
    reactbench replay RECORD                       run one recorded trial again
    reactbench mine --repo R --base A --head B     a task from a change of a repository's history
    reactbench mine --repo R --range A..B          a task from each change of a range, in parallel
"""

from __future__ import annotations

import argparse
import os
import signal
import sys

from pytest_reactbench import __version__
from pytest_reactbench.commands.images import run_images
from pytest_reactbench.commands.mine import run_mine
from pytest_reactbench.commands.replay import run_replay
from pytest_reactbench.commands.results import (
    COMPARE_TITLE,
    REPORT_TITLE,
    run_compare,
    run_export,
    run_report,
)
from pytest_reactbench.commands.validate import run_validate
from pytest_reactbench.plugin.options import add_sandbox_options
from pytest_reactbench.results.compare import ALPHA, EXIT_MEANINGS


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="reactbench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"reactbench {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    images = commands.add_parser(
        "images", help="bake the base images of the image map (public or stand-in), or list them")
    images.add_argument("--sandbox", help="backend to bake for (default docker; with --list: every one)")
    images.add_argument("--list", action="store_true",
                        help="build and pull nothing: say what each backend would use")
    images.add_argument("-p", dest="plugin", action="append", default=[], metavar="MODULE",
                        help="a module that registers backends through the hook (repeatable)")
    # The session's sandbox options, from the plugin's table (each as --X and --reactbench-X).
    add_sandbox_options(images)
    images.add_argument("--only", action="append", metavar="IMAGE",
                        help="a public image name (repeatable; default: every one the map covers)")
    images.add_argument("--json", action="store_true",
                        help="print what each backend uses as JSON on stdout ({backend: [{name, origin, "
                             "image, recipe}]}), progress on stderr")
    images.add_argument("--prune", type=float, metavar="DAYS", nargs="?", const=7.0,
                        help="bake nothing: remove the images the backend baked that no run used "
                             "for DAYS days (default 7; 0: every one not in use)")
    images.set_defaults(run=run_images)
    validate = commands.add_parser(
        "validate", help="check task directories: schema, files, oracle scores 1 and nop 0")
    validate.add_argument("tasks", nargs="+", metavar="TASK_DIR")
    validate.add_argument("--sandbox", default="local", help="backend for the controls (default local)")
    validate.add_argument("--records",
                          help="where the controls' run records go (default .reactbench/records)")
    validate.add_argument("-v", "--verbose", action="store_true",
                          help="print the controls' pytest output when a check fails")
    validate.add_argument("-n", type=int, default=0, help="xdist workers for the controls")
    validate.set_defaults(run=run_validate)
    report = commands.add_parser("report", help="a leaderboard from run records or JUnit XML")
    report.add_argument("runs", nargs="+", metavar="RUN", help="run record directories or JUnit XML files")
    report.add_argument("--out", help="the folder of report.md, report.html and the trial pages, "
                        "self-contained (default: the first run)")
    report.add_argument("--title", help=f"the page's title (default {REPORT_TITLE!r}; with --baseline "
                        f"{COMPARE_TITLE!r})")
    report.add_argument("--merge-runs", action="store_true",
                        help="rank different runs of one backend on one leaderboard (by default "
                        "only one run, or the shards of one, is reported)")
    report.add_argument("--baseline", nargs="+", metavar="BASE",
                        help="a baseline run (or its shards): --out DIR/compare.html shows it beside RUN, "
                        "the candidate (flips first, then every task side by side), each run's report and "
                        "trial pages under DIR/baseline and DIR/candidate; it exits as `reactbench compare` "
                        "does")
    report.set_defaults(run=run_report)
    exporting = commands.add_parser(
        "export", help="runs as Harbor job folders, for Harbor's viewer (`harbor view DIR`)")
    exporting.add_argument("--harbor", nargs="+", required=True, metavar="RUN",
                           help="run record directories (or a folder of runs)")
    exporting.add_argument("--out", required=True, metavar="DIR",
                           help="the folder of the job folders (one per run, replaced if there)")
    exporting.set_defaults(run=run_export)
    comparing = commands.add_parser(
        "compare", help="flips and regressions between two runs",
        epilog="exit codes: " + "; ".join(f"{code} {meaning}" for code, meaning in EXIT_MEANINGS.items())
               + "; 2 the runs could not be read or compared")
    comparing.add_argument("base_run", nargs="?", metavar="BASE",
                           help="the baseline: a JUnit XML file or run record directory")
    comparing.add_argument("new_run", nargs="?", metavar="NEW", help="the new run, the same kinds")
    comparing.add_argument("--base", nargs="+", action="extend", default=[], metavar="PATH",
                           help="the baseline's shards (JUnit files or run folders), merged into one run")
    comparing.add_argument("--new", nargs="+", action="extend", default=[], metavar="PATH",
                           help="the new run's shards, merged into one run")
    comparing.add_argument("--alpha", type=float, default=ALPHA, help="significance level (0.05)")
    comparing.add_argument("--allow-missing", action="store_true",
                           help="a baseline item missing from the new run is not a regression")
    comparing.add_argument("--html", metavar="DIR",
                           help="also write DIR/compare.html: the verdict, the flips (each linking the trial "
                           "pages of both runs), then every task side by side; each run's report and "
                           "trial pages under DIR/baseline and DIR/candidate")
    comparing.add_argument("--title", default=COMPARE_TITLE, help="the page's title, with --html")
    comparing.set_defaults(run=run_compare)
    replay = commands.add_parser("replay", help="run a recorded trial again (same task, agent, options)")
    replay.add_argument("record", help="a trial's record directory")
    replay.add_argument("--records", help="where the replay's records go")
    replay.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    replay.set_defaults(run=run_replay)
    mining = commands.add_parser("mine", help="make a task of a change in a repository's history")
    mining.add_argument("--repo", required=True, help="the local git repository")
    mining.add_argument("--base", help="the revision the agent starts from")
    mining.add_argument("--head", help="the revision whose change is the task")
    mining.add_argument("--merge", help="a merge commit: base is its first parent")
    mining.add_argument("--range", help="BASE..HEAD: mine each first-parent commit of the range "
                        "against its first parent")
    mining.add_argument("--merges", nargs="+", metavar="REV", help="mine each of these commits "
                        "against its first parent")
    mining.add_argument("--jobs", type=int, default=2,
                        help="with --range or --merges: changes mined at once (default 2)")
    mining.add_argument("--out", help="the task directory to write (default tasks/<repo>-<head>); "
                        "with --range or --merges the folder of the tasks (default tasks), with "
                        "logs/ and summary.json")
    mining.add_argument("--title", help="the instruction's title (default: from the commits)")
    mining.add_argument("--body-file", help="the instruction's description, Markdown")
    mining.add_argument("--pr", help="a pull request URL: title and body from the GitHub CLI, if present")
    mining.add_argument("--keep-anyway", action="store_true",
                        help="write a refused change too, the reasons recorded in mining.json")
    mining.add_argument("--strict-react-doctor", action="store_true",
                        help="refuse a change whose reference adds React Doctor findings (by default "
                        "the task tolerates exactly those, by rule, file and title)")
    mining.add_argument("--sandbox", default="local", help="backend for the controls (default local)")
    mining.add_argument("--records", help="keep the controls' run records here")
    mining.set_defaults(run=run_mine)
    args = parser.parse_args(argv)
    try:
        return int(args.run(args))
    except BrokenPipeError:
        # The reader went away (`reactbench compare ... | head -1`): what is left to say
        # goes nowhere, and the exit is a broken pipe's, as a shell tool's would be.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + signal.SIGPIPE


if __name__ == "__main__":
    sys.exit(main())
