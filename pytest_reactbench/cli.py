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
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from pytest_reactbench import __version__
from pytest_reactbench.controls import CONTROLS, run_controls, stop_controls_on_sigterm
from pytest_reactbench.mining import MiningError, Request, commits_in, mine, mine_many, write_summary
from pytest_reactbench.plugin.extensions import command_hook, registered
from pytest_reactbench.plugin.items import check_dockerfiles
from pytest_reactbench.plugin.options import add_sandbox_options, resolve_command, sandbox_options
from pytest_reactbench.results import BaseImage
from pytest_reactbench.results.compare import ALPHA, EXIT_MEANINGS, compare
from pytest_reactbench.results.compare_page import write_comparison
from pytest_reactbench.results.harbor_export import export_harbor
from pytest_reactbench.results.load import ResultsError, load_outcomes, load_run, missing_shards
from pytest_reactbench.results.manifest import TrialManifest
from pytest_reactbench.results.render import markdown
from pytest_reactbench.results.site import RunInfo, junit_run_info, write_site
from pytest_reactbench.sandbox.bake import BakingBackend
from pytest_reactbench.sandbox.base import Backend, ImageRecipe, Progress
from pytest_reactbench.sandbox.dockerfile import DockerfileError
from pytest_reactbench.sandbox.errors import SandboxError
from pytest_reactbench.sandbox.heartbeat import heartbeat
from pytest_reactbench.sandbox.options import SandboxOptions
from pytest_reactbench.sandbox.recipes import recipe_dir
from pytest_reactbench.tasks import TaskError, load_task
from pytest_reactbench.tasks.load import parse_json
from pytest_reactbench.tasks.models import TestsConfig

REPORT_TITLE = "ReactBench results"
COMPARE_TITLE = "ReactBench: baseline and candidate"


def _validate(args: argparse.Namespace) -> int:
    stop_controls_on_sigterm()
    problems = 0
    tasks = []
    for raw in args.tasks:
        folder = Path(raw).resolve()
        try:
            task = load_task(folder)
            if not (task.solution_dir / "solve.sh").is_file():
                raise TaskError(task.solution_dir / "solve.sh", "file is missing (the oracle runs it)")
            if (task.tests_dir / "config.json").is_file():
                parse_json(task.tests_dir / "config.json", TestsConfig)
            check_dockerfiles(task)
        except (TaskError, DockerfileError) as exc:
            print(f"INVALID {exc}")
            problems += 1
            continue
        print(f"schema  ok   {folder}")
        tasks.append(task)
    if not tasks:
        return 1
    records = Path(args.records) if args.records else Path(".reactbench", "records")
    try:
        controls = run_controls([t.path for t in tasks], sandbox=args.sandbox,
                                records=records.resolve(), workers=args.n,
                                echo=lambda line: print(line, flush=True))
    except KeyboardInterrupt:
        print("reactbench validate: interrupted", file=sys.stderr)
        return 130
    for task in tasks:
        for agent, expected in CONTROLS.items():
            got = controls.verdict(task.id, agent)
            ok = got == expected
            problems += not ok
            reason = controls.reason(task.id, agent)
            print(f"{'ok     ' if ok else 'WRONG  '} {task.id}: {agent} {got}"
                  + ("" if ok else f" (must be {expected})") + (f": {reason}" if reason else ""))
            result = controls.result(task.id, agent)
            if not ok and result is not None and result.record:
                print(f"          record: {result.record}")
    for run in controls.run_dirs:
        print(f"records: {run}")
    if problems and args.verbose:
        print(controls.output[-6000:])
    elif problems:
        print("(the controls' pytest output: run again with -v)")
    return 1 if problems else 0


def _base_image(backend: Backend, public: str, recipe: ImageRecipe,
                progress: Progress | None) -> BaseImage | None:
    """How a bake on `backend` resolves FROM `public`: baked (with progress) or looked up."""
    if isinstance(backend, BakingBackend):
        return backend.base_image(public, progress)
    image = backend.bake(recipe, progress) if progress else backend.baked(recipe)
    return BaseImage(name=public, digest=image.digest, origin="stand-in") if image else None


def _images(args: argparse.Namespace) -> int:
    try:
        values = resolve_command(args, Path.cwd())
        backends = registered(command_hook(args.plugin))
        chosen = sorted(backends.backends) if args.list and not args.sandbox else [args.sandbox or "docker"]
        factories = {name: backends.backend(name, "--sandbox") for name in chosen}
    except (pytest.UsageError, ImportError) as exc:
        print(f"reactbench images: {exc}", file=sys.stderr)
        return 2
    options = sandbox_options(values)
    image_map = options.image_map
    names = args.only or sorted(k for k, v in image_map.items() if recipe_dir(v) is not None)
    recipes: dict[str, ImageRecipe] = {}
    for public in names:
        directory = recipe_dir(image_map.get(public, public))
        if directory is None:
            print(f"reactbench images: {public} has no recipe under images/", file=sys.stderr)
            return 2
        recipes[public] = ImageRecipe(directory.name, directory / "Dockerfile", directory, timeout=3600)
    started = time.monotonic()
    last = ["starting"]

    def progress(line: str) -> None:
        if "still running after" not in line:
            last[0] = line
        # With --json, stdout is the document alone.
        print(f"[{time.monotonic() - started:6.1f}s] {line}", flush=True,
              file=sys.stderr if args.json else sys.stdout)

    failed = 0
    found: dict[str, list[dict[str, str]]] = {}
    with heartbeat(progress, lambda: f"(after: {last[0]})"):
        for name in chosen:
            failed += _images_on(name, factories[name], options, args, recipes, progress,
                                 found.setdefault(name, []))
    if args.json:
        print(json.dumps(found, indent=2))
    return 1 if failed else 0


def _images_on(name: str, factory: Callable[[SandboxOptions], Backend], options: SandboxOptions,
               args: argparse.Namespace, recipes: dict[str, ImageRecipe], progress: Progress,
               found: list[dict[str, str]]) -> int:
    """Bake (or list, or prune) the stand-ins on the backend `name`, each added to
    `found`; 1 when that fails."""
    say = progress if args.json else print
    try:
        backend = factory(options)
    except SandboxError as exc:
        say(f"{name}: unavailable: {exc}")
        return 0 if args.list else 1
    if args.prune is not None:
        return _prune(name, backend, args.prune, progress)
    formal = backend.capabilities.formal
    say(f"{name} ({'its results can be formal' if formal else 'its results are not formal'})")
    try:
        for public, recipe in recipes.items():
            base = _base_image(backend, public, recipe, None if args.list else progress)
            entry = {"name": public, "origin": base.origin if base else "not baked",
                     "image": base.digest if base else "",
                     **({"recipe": f"images/{recipe.name}"} if base and base.origin == "stand-in" else {})}
            found.append(entry)
            shown = (f"{entry['origin']:9} {entry['image']}"
                     + (f" ({entry['recipe']})" if "recipe" in entry else "")) if base else "not baked"
            say(f"  {public:55} {shown}")
        if stand_ins := sum(e["origin"] == "stand-in" for e in found):
            say(f"{name}: {stand_ins} of {len(found)} image(s) are stand-ins: results on them are "
                "not formal" + ("" if stand_ins == len(found) else " (tasks on the public images are)"))
    except SandboxError as exc:
        print(f"reactbench images: {exc}", file=sys.stderr)
        return 1
    finally:
        backend.close()
    return 0


def _prune(name: str, backend: Backend, days: float, progress: Progress) -> int:
    """Remove `backend`'s images unused for `days`; 1 when it cannot prune."""
    try:
        if not isinstance(backend, BakingBackend):
            raise NotImplementedError(f"the {name} backend does not prune its images")
        pruned = backend.prune(days * 86400, progress)
    except (NotImplementedError, SandboxError) as exc:
        print(f"reactbench images --prune: {exc}", file=sys.stderr)
        return 1
    finally:
        backend.close()
    print(f"{name}: removed {pruned.images} image(s) unused for {days:g} day(s), "
          f"{pruned.freed_bytes / 1e9:.1f} GB freed"
          + (f"; {pruned.kept} stale image(s) kept (in use)" if pruned.kept else ""))
    return 0


def _run_infos(paths: list[str]) -> list[RunInfo]:
    """What each run folder's manifest (or a JUnit file alone) says of its run."""
    runs = []
    for raw in paths:
        folder = Path(raw)
        if folder.is_file():
            # A JUnit file alone: what it says of its run (incomplete, say).
            info = junit_run_info(folder, load_outcomes(folder))
            runs += [info] if info is not None else []
            continue
        for manifest in ([folder / "manifest.json"] if (folder / "manifest.json").is_file()
                         else sorted(folder.glob("*/manifest.json")) if folder.is_dir() else []):
            info = RunInfo.read(manifest.parent)
            if info is not None:
                runs.append(info)
    return runs


def _report(args: argparse.Namespace) -> int:
    if args.baseline:
        # Two runs (of one agent, most often) are two sides, not the shards of one.
        if not args.out:
            print("reactbench report: --baseline writes a folder of its own: give --out DIR", file=sys.stderr)
            return 2
        return _side_by_side("report", args.baseline, args.runs, out=Path(args.out),
                             title=args.title or COMPARE_TITLE)
    try:
        # The runs (or the shards of one run) as one leaderboard.
        outcomes = load_run([Path(raw) for raw in args.runs], merge_runs=args.merge_runs)
        runs = _run_infos(args.runs)
    except ResultsError as exc:
        print(f"reactbench report: {exc}", file=sys.stderr)
        return 2
    title = args.title or REPORT_TITLE
    out = Path(args.out) if args.out else Path(args.runs[0] if Path(args.runs[0]).is_dir() else ".")
    out.mkdir(parents=True, exist_ok=True)
    incomplete = [f"run {r.run_id}: {r.incomplete}" for r in runs if r.incomplete]
    if partial := missing_shards(outcomes):
        print(f"reactbench report: warning: {partial}", file=sys.stderr)
        incomplete.append(partial)
    text = markdown(outcomes, title, incomplete=incomplete)
    (out / "report.md").write_text(text)
    index = write_site(outcomes, out, title=title, runs=runs)
    print(text)
    print(f"wrote {out / 'report.md'} and {index} (with a page per trial under {out / 'trials'})")
    return 0


def _export(args: argparse.Namespace) -> int:
    out = Path(args.out)
    try:
        exported = export_harbor([Path(raw) for raw in args.harbor], out)
    except ResultsError as exc:
        print(f"reactbench export: {exc}", file=sys.stderr)
        return 2
    for job in exported:
        print(f"{job.job}: {job.trials} trial(s), {job.trajectories} with a trajectory")
    print(f"open them in Harbor's viewer: harbor view {out}")
    return 0


def _compare(args: argparse.Namespace) -> int:
    base = [*([args.base_run] if args.base_run else []), *args.base]
    new = [*([args.new_run] if args.new_run else []), *args.new]
    if not base or not new:
        print("reactbench compare: give a baseline and a new run (BASE NEW, or --base ... --new ...)",
              file=sys.stderr)
        return 2
    return _side_by_side("compare", base, new, out=Path(args.html) if args.html else None, title=args.title,
                         alpha=args.alpha, allow_missing=args.allow_missing)


def _side_by_side(command: str, base: list[str], new: list[str], *, out: Path | None, title: str,
                  alpha: float = ALPHA, allow_missing: bool = False) -> int:
    """The regression gate between a baseline and a new run (each the shards of one
    run), and with `out` the page that shows them side by side; the gate's exit code."""
    inside = [p for p in (*base, *new) if out is not None and out.resolve().is_relative_to(Path(p).resolve())]
    if inside:
        # The pages copy the records they link: copies inside a run would be read as its trials.
        print(f"reactbench {command}: {out} is inside {inside[0]}: write the pages outside the runs",
              file=sys.stderr)
        return 2
    try:
        sides = {"baseline": load_run([Path(p) for p in base]), "new run": load_run([Path(p) for p in new])}
        runs = (_run_infos(base), _run_infos(new)) if out is not None else ([], [])
    except ResultsError as exc:
        print(f"reactbench {command}: {exc}", file=sys.stderr)
        return 2
    for side, outcomes in sides.items():
        if partial := missing_shards(outcomes):
            print(f"reactbench {command}: warning: the {side}'s {partial}", file=sys.stderr)
    comparison = compare(sides["baseline"], sides["new run"], alpha=alpha, allow_missing=allow_missing)
    print(comparison.summary())
    if comparison.only_new:
        print("  only in the new run: " + ", ".join(f"{t} [{a}]" for t, a in comparison.only_new))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        index = write_comparison(comparison, sides["baseline"], sides["new run"], out, title=title, runs=runs)
        print(f"wrote {index} (each run's report and trial pages under {out / 'baseline'} and "
              f"{out / 'candidate'})")
    return comparison.exit_code


def _replay(args: argparse.Namespace) -> int:
    record = Path(args.record).resolve()
    try:
        manifest = TrialManifest.read(record)
        if not manifest.task_path:
            raise ResultsError(f"{record / 'manifest.json'}: task_path: missing")
    except ResultsError as exc:
        trials = sorted(d.name for d in record.glob("*") if (d / "status.json").is_file())
        if trials:
            # A run's directory: replay is of one of its trials.
            shown = ", ".join(trials[:10]) + (f" (and {len(trials) - 10} more)" if len(trials) > 10 else "")
            print(f"reactbench replay: {record} is a run, not a trial: give one of its trial "
                  f"directories, e.g. {record / trials[0]} (it holds {shown})", file=sys.stderr)
            return 2
        print(f"reactbench replay: {record} is not a trial's record (not a trial's manifest: {exc})",
              file=sys.stderr)
        return 2
    task_path = Path(manifest.task_path)
    # The replay's records go beside the recorded run's, one trial: this attempt alone.
    records = Path(args.records) if args.records else record.parent.parent
    command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
               f"--reactbench-agent={manifest.agent_spec or manifest.agent}", *manifest.options,
               f"--reactbench-records={records}", "--reactbench-attempts=1",
               f"--rootdir={task_path.parent}", str(task_path), *args.pytest_args]
    print("replay: " + " ".join(command[3:]), flush=True)
    return subprocess.run(command, cwd=task_path.parent).returncode


def _mine(args: argparse.Namespace) -> int:
    try:
        body = Path(args.body_file).read_text() if args.body_file else None
    except OSError as exc:
        print(f"reactbench mine: {exc}", file=sys.stderr)
        return 2
    request = Request(
        repo=Path(args.repo), base=args.base, head=args.head, merge=args.merge,
        out=Path(args.out) if args.out else None, title=args.title, body=body,
        pull_request=args.pr, keep_anyway=args.keep_anyway, sandbox=args.sandbox,
        strict_react_doctor=args.strict_react_doctor,
        records=Path(args.records) if args.records else None,
    )
    stop_controls_on_sigterm()
    if args.range or args.merges:
        return _mine_many(args, request)
    try:
        outcome = mine(request, echo=lambda line: print(line, flush=True))
    except MiningError as exc:
        print(f"reactbench mine: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("reactbench mine: interrupted", file=sys.stderr)
        return 130  # as a shell reports a command Ctrl-C stopped
    for reason in outcome.reasons:
        print(f"{'FAILED ' if reason.failed else 'REFUSED'}  {reason}")
    if outcome.task is not None:
        state = "kept anyway (the reasons are in mining.json)" if outcome.reasons else "accepted"
        print(f"{state}: {outcome.task}")
    return 0 if outcome.accepted else 1


def _mine_many(args: argparse.Namespace, request: Request) -> int:
    if args.base or args.head or args.merge or args.title or args.body_file or args.pr:
        print("reactbench mine: --range and --merges take no --base, --head, --merge, --title, "
              "--body-file or --pr (each change is described by its own commits)", file=sys.stderr)
        return 2
    out = Path(args.out or "tasks")
    try:
        commits = commits_in(request.repo, args.range) if args.range else list(args.merges)
        result = mine_many(request, commits, out, jobs=args.jobs,
                           progress=lambda line: print(line, flush=True))
    except MiningError as exc:
        print(f"reactbench mine: {exc}", file=sys.stderr)
        return 2
    write_summary(result, request.repo, args.range or " ".join(args.merges), out,
                  echo=lambda line: print(line, flush=True))
    if result.interrupted:
        return 130  # as a shell reports a command Ctrl-C stopped
    return 0 if result.count("mined") else 1


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
    images.set_defaults(run=_images)
    validate = commands.add_parser(
        "validate", help="check task directories: schema, files, oracle scores 1 and nop 0")
    validate.add_argument("tasks", nargs="+", metavar="TASK_DIR")
    validate.add_argument("--sandbox", default="local", help="backend for the controls (default local)")
    validate.add_argument("--records",
                          help="where the controls' run records go (default .reactbench/records)")
    validate.add_argument("-v", "--verbose", action="store_true",
                          help="print the controls' pytest output when a check fails")
    validate.add_argument("-n", type=int, default=0, help="xdist workers for the controls")
    validate.set_defaults(run=_validate)
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
    report.set_defaults(run=_report)
    exporting = commands.add_parser(
        "export", help="runs as Harbor job folders, for Harbor's viewer (`harbor view DIR`)")
    exporting.add_argument("--harbor", nargs="+", required=True, metavar="RUN",
                           help="run record directories (or a folder of runs)")
    exporting.add_argument("--out", required=True, metavar="DIR",
                           help="the folder of the job folders (one per run, replaced if there)")
    exporting.set_defaults(run=_export)
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
    comparing.set_defaults(run=_compare)
    replay = commands.add_parser("replay", help="run a recorded trial again (same task, agent, options)")
    replay.add_argument("record", help="a trial's record directory")
    replay.add_argument("--records", help="where the replay's records go")
    replay.add_argument("pytest_args", nargs="*", help="more pytest arguments (after --)")
    replay.set_defaults(run=_replay)
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
    mining.set_defaults(run=_mine)
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
