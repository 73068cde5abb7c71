"""Every .py file under bench/ (its folders included) imports, so a helper that moves
breaks CI instead of the next bench run.

One child interpreter imports each file as `python bench/KIND/NAME.py` would see it (its
own folder first on sys.path, then whatever the file inserts itself; no
DJANGO_SETTINGS_MODULE from the test run), through importlib with the file's spec and
the file's own name, so `if __name__ == "__main__"` stays false: no main runs and
nothing is started. A child, not this process: some files set Django up with their own
settings or change os.environ at import. The repository root comes last on its
sys.path, as pytest puts it for bench/suite/suite_cpu.py (a plugin:
`PYTHONPATH=bench/suite pytest -p suite_cpu`).

Imports inside functions (bench_group.py's `from tests.support.sshd import ...`) run
only with the bench, so each file's project and sibling imports, at any depth, are also
read from its source and resolved, names included. Files that need torch (not in the
project's venv) are imported again in PyTorch's venv (`make torchenv`). Results are
keyed by the path under bench/: two targets are both named train.py.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.requirements import require_torch

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
FILES = sorted(BENCH.rglob("*.py"))
PROJECT = ("bench", "config", "profiles", "runs", "tests")

CHILD = r"""
import ast, importlib, importlib.util, json, os, sys, traceback
from pathlib import Path

bench, root, project, files = Path(sys.argv[1]), sys.argv[2], sys.argv[3].split(","), sys.argv[4:]
sys.path.append(root)


def own_folder_first(path):
    # As `python bench/KIND/NAME.py` starts: the script's folder leads sys.path.
    while str(path.parent) in sys.path:
        sys.path.remove(str(path.parent))
    sys.path.insert(0, str(path.parent))


def checked(tree):
    # (module, names) of every project or sibling import, at any depth.
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, []
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            yield node.module, [a.name for a in node.names if a.name != "*"]


results = {}
for file in files:  # first every file as its script would: some set Django up, some not
    path, name = Path(file), Path(file).stem
    result = results[str(path.relative_to(bench))] = {"import": "ok", "names": []}
    own_folder_first(path)
    try:
        if sys.modules.get(name) is None or sys.modules[name].__file__ != str(path):
            spec = importlib.util.spec_from_file_location(name, path)
            module = importlib.util.module_from_spec(spec)
            sys.modules[name] = module
            spec.loader.exec_module(module)
    except ModuleNotFoundError as exc:
        sys.modules.pop(name, None)
        result["import"] = "needs " + exc.name if exc.name == "torch" else traceback.format_exc()
    except BaseException:  # SystemExit too: an import must not exit
        sys.modules.pop(name, None)
        result["import"] = traceback.format_exc()

# Then the imports inside functions, which run after the bench has set Django up.
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings_test")
import django

django.setup()
for file in files:
    path, result = Path(file), results[str(Path(file).relative_to(bench))]
    own_folder_first(path)
    local = {sibling.stem for sibling in path.parent.glob("*.py")}
    for module_name, names in checked(ast.parse(path.read_text(), str(path))):
        top = module_name.split(".")[0]
        if top not in project and top not in local:
            continue
        if top in local and getattr(sys.modules.get(top), "__file__", None) != str(
            path.parent / f"{top}.py"
        ):  # a sibling of the same name elsewhere (train.py) was imported first
            sys.modules.pop(top, None)
        try:
            module = importlib.import_module(module_name)
        except BaseException as exc:
            result["names"].append(f"{module_name}: {type(exc).__name__}: {exc}")
            continue
        for attr in names:
            if not hasattr(module, attr):
                try:  # a submodule: `from tests.support import watch_sim`
                    importlib.import_module(f"{module_name}.{attr}")
                except ImportError:
                    result["names"].append(f"{module_name} has no {attr}")
print("RESULTS " + json.dumps(results))
"""


@pytest.fixture(scope="module")
def imported() -> dict[str, dict]:
    argv = [sys.executable, "-P", "-c", CHILD, str(BENCH), str(ROOT), ",".join(PROJECT)]
    return _results(argv + [str(path) for path in FILES], timeout_s=60)


def _results(argv: list[str], timeout_s: float) -> dict:
    """What a child prints on its `RESULTS` line (JSON), run without the test's
    DJANGO_SETTINGS_MODULE."""
    env = {k: v for k, v in os.environ.items() if k != "DJANGO_SETTINGS_MODULE"}
    done = subprocess.run(
        argv, cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout_s
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULTS ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    return json.loads(lines[-1].removeprefix("RESULTS "))


def test_there_are_bench_files_in_every_folder_walked():
    folders = {path.parent.relative_to(BENCH).as_posix() for path in FILES}
    assert {"app", "engine", "targets", "targets/loader_job", "recorders", "suite"} <= folders
    assert len(FILES) > 30


TORCH_CHILD = r"""
import importlib.util, json, sys, traceback
from pathlib import Path

bench = Path(sys.argv[1])
results = {}
for file in sys.argv[2:]:
    path = Path(file)
    sys.path.insert(0, str(path.parent))  # as `python bench/KIND/NAME.py` starts
    for sibling in path.parent.glob("*.py"):  # train.py is two files: take this one's
        if getattr(sys.modules.get(sibling.stem), "__file__", None) != str(sibling):
            sys.modules.pop(sibling.stem, None)
    try:
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)
        results[str(path.relative_to(bench))] = "ok"
    except BaseException:
        results[str(path.relative_to(bench))] = traceback.format_exc()
    sys.path.remove(str(path.parent))
print("RESULTS " + json.dumps(results))
"""


@pytest.fixture(scope="module")
def torch_imported(imported) -> dict[str, str]:
    """The files that need torch, imported in PyTorch's venv (one child for them all)."""
    files = [str(BENCH / name) for name, r in imported.items() if r["import"] == "needs torch"]
    if not files:
        return {}
    return _results([require_torch(), "-P", "-c", TORCH_CHILD, str(BENCH), *files], 120)


NAMES = [path.relative_to(BENCH).as_posix() for path in FILES]


@pytest.mark.parametrize("name", NAMES)
def test_a_bench_file_imports_and_its_project_imports_resolve(imported, name, request):
    result = imported[name]
    assert not result["names"], f"{name}: " + "; ".join(result["names"])
    if result["import"] == "needs torch":  # then in PyTorch's own venv
        result = {"import": request.getfixturevalue("torch_imported")[name]}
    assert result["import"] == "ok", f"{name} does not import:\n{result['import']}"
