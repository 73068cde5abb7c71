"""Command line: `python -m profiles.pyspy analyze|export|dump|lag|job|stacks|timeline ...`.

Exit 0 with JSON (or folded text) on stdout; exit 2 with one line on stderr when
the input cannot be used. A bug still ends in one line (exit 1), never a traceback.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

from .core.frames import ThreadFilter
from .core.profile import Profile
from .count.analysis import AnalysisOptions, analyze
from .count.keywords import load_keywords
from .errors import ProfileError
from .formats.dump import parse_dump
from .formats.export import to_folded, to_speedscope
from .formats.log import analyze_lag
from .formats.reading import read_profile, read_text
from .jobcli import add_job_parser, run_job
from .rules.rule_table import load_state_rules
from .stackscli import add_stacks_parser, run_stacks


class _Formatter(argparse.HelpFormatter):
    """A fixed width: argparse would import shutil (and bz2, lzma) to ask the terminal,
    on every add_argument, which cost each CLI run ~6 ms."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, width=100)


class _Parser(argparse.ArgumentParser):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", _Formatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        raise ProfileError(f"usage: {message}")


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m profiles.pyspy", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    an = sub.add_parser("analyze", help="statistics + flamegraph JSON of a raw/speedscope file")
    an.add_argument("file")
    an.add_argument("--log", help="py-spy's stdout, for the lag analysis")
    an.add_argument("--keywords", default="gpu", help="gpu | none | PATH (JSON or `cat: kw` lines)")
    an.add_argument("--max-nodes", type=int, default=8192)
    an.add_argument("--thread", action="append", help="only this thread name or tid (repeatable)")
    an.add_argument("--top", type=int, default=50, help="length of the top lists (>= 30)")
    an.add_argument("--no-flamegraph", action="store_true")
    an.add_argument("--state-rules", help="extra thread-state rules (JSON or `state: name` lines)")
    an.add_argument(
        "--library",
        action="append",
        default=[],
        help="package or path prefix that is library code, not yours (repeatable)",
    )
    an.add_argument(
        "--idle",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="py-spy recorded with (--idle) or without (--no-idle) idle samples; default: infer",
    )
    ex = sub.add_parser("export", help="convert a raw/speedscope file")
    ex.add_argument("file")
    ex.add_argument("--to", choices=["folded", "speedscope"], required=True)
    dump = sub.add_parser("dump", help="per-thread stacks of `py-spy dump` text or --json")
    dump.add_argument("file")
    lag = sub.add_parser("lag", help="lag report from py-spy's stdout")
    lag.add_argument("file")
    add_job_parser(sub)
    add_stacks_parser(sub)
    tl = sub.add_parser("timeline", help="each thread's states bucket by bucket (needs a track)")
    tl.add_argument("file", help="the capture's raw text (as split from speedscope)")
    tl.add_argument("--track", required=True, help="its time track (JSON, maybe gzip)")
    tl.add_argument("--bucket", type=float, help="seconds per bucket (default: a few hundred)")
    return parser


def _analyze(args: argparse.Namespace) -> None:
    if args.max_nodes < 2:
        raise ProfileError("--max-nodes must be at least 2")
    options = AnalysisOptions(
        keywords=load_keywords(args.keywords),
        max_nodes=args.max_nodes,
        threads=frozenset(args.thread) if args.thread else None,
        top_n=args.top,
        include_flamegraph=not args.no_flamegraph,
        state_rules=load_state_rules(args.state_rules) if args.state_rules else None,
        library=tuple(args.library),
        idle=args.idle,
    )
    log_text = read_text(args.log) if args.log else None
    profile = read_profile(args.file)
    if options.threads is not None:
        _check_threads(profile, options.threads)
    stats = analyze(profile, options, log_text=log_text)
    if args.log and stats.get("lag") is None:
        raise ProfileError(
            f"{Path(args.log).name} is not a py-spy log: it holds none of py-spy's lines"
        )
    _print_json(stats)


def _check_threads(profile: Profile, wanted: frozenset[str]) -> None:
    """Exit 2 naming the file's threads when --thread matches none of them."""
    threads = sorted(set(profile.frame_info().thread.values()), key=lambda t: (t[1], str(t[0])))
    chosen = ThreadFilter(wanted)
    if any(chosen.matches(tid, name) for tid, name, _ in threads):
        return
    asked = ", ".join(sorted(wanted))
    if not threads:
        raise ProfileError(
            f"--thread {asked}: the file has no thread frames (record with py-spy --threads)"
        )
    listed = ", ".join(f"{name} ({tid})" if name else str(tid) for tid, name, _ in threads)
    raise ProfileError(f"--thread {asked} matches no thread; the file has: {listed}")


def _export(args: argparse.Namespace) -> None:
    profile = read_profile(args.file)
    if args.to == "speedscope":
        _print_json(to_speedscope(profile, name=Path(args.file).name))
        return
    out = sys.stdout
    for line in to_folded(profile):
        out.write(line + "\n")


def _lag(args: argparse.Namespace) -> None:
    report = analyze_lag(read_text(args.file))
    if report is None:
        raise ProfileError(
            f"{Path(args.file).name} is not a py-spy log: it holds none of py-spy's lines"
        )
    _print_json(report)


def _timeline(args: argparse.Namespace) -> None:
    # Imported here: the other commands do not pay for the time modules.
    from .formats.time_track import load_track
    from .timed.timed_capture import TimedCapture
    from .timed.timeline import timeline

    try:
        data = Path(args.track).read_bytes()
    except OSError as exc:
        raise ProfileError(f"{Path(args.track).name}: cannot read it ({exc.strerror})") from None
    track = load_track(data, Path(args.track).name)
    _print_json(timeline(TimedCapture(read_text(args.file), track), args.bucket))


def _print_json(value: object) -> None:
    # json.dumps to one string uses the C encoder; json.dump to a stream runs the
    # pure-Python one chunk by chunk and took half the CLI's time on a big capture.
    sys.stdout.write(json.dumps(value, separators=(",", ":")) + "\n")


_COMMANDS = {
    "analyze": _analyze,
    "export": _export,
    "dump": lambda a: _print_json(parse_dump(read_text(a.file))),
    "lag": _lag,
    "job": lambda a: run_job(a, _print_json),
    "stacks": lambda a: run_stacks(a, read_text, _print_json),
    "timeline": _timeline,
}


def main(argv: Sequence[str] | None = None) -> int:
    try:
        args = _parser().parse_args(argv)
        _COMMANDS[args.command](args)
    except ProfileError as exc:
        print(_one_line(str(exc)), file=sys.stderr)
        return 2
    except MemoryError:
        print("input too large to analyse in the memory available", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except Exception as exc:  # noqa: BLE001 - the contract is one line, never a traceback
        print(_one_line(f"internal error ({type(exc).__name__}: {exc})"), file=sys.stderr)
        return 1
    return 0


def _one_line(text: str) -> str:
    return " ".join(text.split())[:2000]
