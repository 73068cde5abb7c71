"""Every failure cause the product can give has an entry in docs/troubleshooting.md.

The causes are read from the code itself: the remote seam's `Cause` type, and every
string the app code hands over as a cause (`cause="x"`, `error_cause="x"`, a
`BudgetExceeded("x", …)`, a `cause = "x"` default, a refusal's `("x", message)`).
"""

import ast
import re
import typing
from pathlib import Path

from runs.remote.model import Cause

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "troubleshooting.md"
NAME = re.compile(r"[a-z]+(_[a-z]+)*\Z")


def _str(node: ast.AST | None) -> list[str]:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value] if NAME.match(node.value) else []
    if isinstance(node, ast.IfExp):
        return _str(node.body) + _str(node.orelse)
    return []


def _causes_in(tree: ast.AST) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg in ("cause", "error_cause"):
                    found.update(_str(keyword.value))
            func = (
                node.func.id if isinstance(node.func, ast.Name) else getattr(node.func, "attr", "")
            )
            if func in ("BudgetExceeded", "RemoteError", "_fail", "_fail_all") or func.endswith(
                "_fail"
            ):
                found.update(s for arg in node.args for s in _str(arg))
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name) and target.id == "cause":
                    found.update(_str(node.value))
                if isinstance(target, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    for name, value in zip(target.elts, node.value.elts, strict=False):
                        if isinstance(name, ast.Name) and name.id == "cause":
                            found.update(_str(value))
        elif isinstance(node, ast.FunctionDef) and "refusal" in node.name:
            for ret in ast.walk(node):
                if isinstance(ret, ast.Return) and isinstance(ret.value, ast.Tuple):
                    found.update(_str(ret.value.elts[0]))
    return found


def causes_in_the_code() -> set[str]:
    found = set(typing.get_args(Cause))
    for package in ("profiles", "runs", "config"):
        for path in (ROOT / package).rglob("*.py"):
            if "migrations" not in path.parts:
                found |= _causes_in(ast.parse(path.read_text(), str(path)))
    return found


def test_the_scan_finds_the_causes_of_every_layer():
    found = causes_in_the_code()
    expected = {"worker_lost", "queue_unavailable", "pid_busy", "own_process", "not_python"}
    expected |= {"analysis_time_limit", "analysis_memory_limit", "analysis_lost", "no_output"}
    expected |= {"host", "parse", "time_limit", "unreachable", "bound_exceeded"}
    assert expected <= found, expected - found


def test_troubleshooting_lists_every_failure_cause_the_code_gives():
    listed = set(re.findall(r"^\| `([a-z_]+)` \|", PAGE.read_text(), re.M))
    missing = sorted(causes_in_the_code() - listed)
    assert not missing, f"docs/troubleshooting.md has no entry for: {', '.join(missing)}"
