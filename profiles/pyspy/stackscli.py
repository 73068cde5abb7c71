"""`python -m profiles.pyspy stacks FILE... [--names NAME...] [--step-thread NAME]`.

Each FILE is one `py-spy dump` of one rank (`--json` or text; a whole-job dump's stored
series of dumps counts as that many dumps). `--names` pairs with the files in order; a
name given several times marks successive dumps of that rank, oldest first, so
`a.json b.json c.json d.json --names rank-0 rank-0 rank-1 rank-1` is two dumps of two
ranks. Without `--names`, a file's name up to its first dot names its rank
(`rank-3.1.json` is a dump of rank-3). Prints stacks.analyze_stacks's JSON.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .core.types import DumpThread
from .errors import ProfileError
from .formats.dump import parse_dump, parse_dump_series
from .job.dump_verdict import analyze_stacks


def add_stacks_parser(sub: Any) -> None:
    stacks = sub.add_parser("stacks", help="where every rank stands: a whole-job dump's verdict")
    stacks.add_argument("files", nargs="+", metavar="FILE", help="`py-spy dump --json` outputs")
    stacks.add_argument(
        "--names", nargs="+", default=[], help="rank name per FILE, repeated for its next dumps"
    )
    stacks.add_argument(
        "--step-thread", action="append", default=[], help="step thread name or tid (repeatable)"
    )


def run_stacks(
    args: argparse.Namespace, read_text: Callable[[str], str], print_json: Callable
) -> None:
    files, names = args.files, args.names
    if names and len(names) != len(files):
        raise ProfileError(f"--names needs one name per FILE ({len(files)}), got {len(names)}")
    names = names or [Path(f).name.split(".")[0] or Path(f).name for f in files]
    ranks: dict[str, list[list[DumpThread]]] = {}
    for path, name in zip(files, names, strict=True):
        ranks.setdefault(name, []).extend(read_dumps(path, read_text))
    print_json(analyze_stacks(list(ranks.items()), args.step_thread))


def read_dumps(path: str, read_text: Callable[[str], str]) -> list[list[DumpThread]]:
    """The dumps in one file: one, or each of a stored series; ProfileError naming the file."""
    text = read_text(path)
    try:
        series = parse_dump_series(text)
        return [threads for _, threads in series] if series else [parse_dump(text)]
    except ProfileError as exc:
        raise ProfileError(f"{Path(path).name}: {exc}") from None
