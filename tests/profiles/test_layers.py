"""The capture path reads one way: views/API -> services -> tasks -> enqueue ->
pipeline -> analysis -> runs.remote; services and tasks both send through enqueue,
which finds tasks by name and imports neither. Checked on the source with `ast` (imports inside
functions count too), so a new upward import fails here, not at some import time."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Top to bottom; a module may import only modules of layers below its own.
LAYERS = [
    ["profiles.api", "profiles.views", "profiles.group_views", "profiles.beat"],
    ["profiles.jobs"],
    ["profiles.services"],
    ["profiles.tasks"],
    ["profiles.enqueue"],
    ["profiles.group_pipeline"],
    ["profiles.pipeline"],
    ["profiles.analysis"],
    ["profiles.states"],
    ["runs.remote"],
]
PATH_MODULES = [m for layer in LAYERS for m in layer]


def _module_file(name: str) -> Path | None:
    base = ROOT / Path(*name.split("."))
    for path in (base.with_suffix(".py"), base / "__init__.py"):
        if path.exists():
            return path
    return None


def _files(name: str) -> list[Path]:
    """A module's file, or every file of a package (runs.remote is one seam)."""
    base = ROOT / Path(*name.split("."))
    return sorted(base.rglob("*.py")) if base.is_dir() else [base.with_suffix(".py")]


def _package_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1]) if parts[-1] != "__init__" else ".".join(parts[:-1])


def imports_of(path: Path, package: str | None = None) -> set[str]:
    """Every module `path` imports, absolute, at any depth of the code."""
    found: set[str] = set()
    package = package or _package_of(path)
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            for alias in node.names:
                full = f"{base}.{alias.name}"
                found.add(full if _module_file(full) else base)
    return found


def _layer_of(module: str) -> int | None:
    for index, layer in enumerate(LAYERS):
        if any(module == m or module.startswith(f"{m}.") for m in layer):
            return index
    return None


def upward_imports() -> list[str]:
    wrong = []
    for index, layer in enumerate(LAYERS):
        for name in layer:
            for path in _files(name):
                for target in imports_of(path):
                    level = _layer_of(target)
                    if level is not None and level <= index and not target.startswith(name):
                        wrong.append(f"{path.relative_to(ROOT)} imports {target}")
    return wrong


def test_no_module_of_the_capture_path_imports_one_at_or_above_its_layer():
    assert upward_imports() == []


def test_the_checker_sees_relative_and_function_level_imports(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("from .models import Capture\ndef f():\n    from . import tasks\n")
    assert imports_of(probe, package="profiles") == {"profiles.models", "profiles.tasks"}
    pipeline = imports_of(ROOT / "profiles" / "pipeline.py")
    assert {"profiles.states", "runs.remote", "profiles.pyspy"} <= pipeline
    services = imports_of(ROOT / "profiles" / "services.py")
    assert "profiles.enqueue" in services and "profiles.tasks" not in services
    assert "profiles.enqueue" in imports_of(ROOT / "profiles" / "tasks.py")


def test_every_layer_names_a_module_that_exists():
    assert all(_module_file(name) for name in PATH_MODULES)


# --- app to app ------------------------------------------------------------------------
# `profiles` (captures) imports `runs` (hosts, runs, the remote seam), never the reverse,
# not even through a `config` module: what shows or launches captures on a run's or a
# host's page lives in profiles (run_views.py), the commands that run the whole product
# in config (serve, bootstrap, preflight). The one exception is the engine,
# `profiles.pyspy`, a standard-library package that imports nothing of either app.

ENGINE = "profiles.pyspy"


def _own(module: str) -> bool:
    return module.split(".")[0] in ("runs", "profiles", "config")


def _app_files(app: str) -> list[Path]:
    return sorted((ROOT / app).rglob("*.py"))


def paths_into_profiles(start: Path, package: str | None = None) -> list[str]:
    """Every import chain from `start` (a module of `package`) into a profiles module
    other than the engine, following runs and config modules on the way."""
    found, seen = [], set()
    stack = [(start, [start.name], package)]
    while stack:
        path, chain, package = stack.pop()
        for target in sorted(t for t in imports_of(path, package) if _own(t)):
            if target.split(".")[0] == "profiles":
                if not (target == ENGINE or target.startswith(f"{ENGINE}.")):
                    found.append(" -> ".join([*chain, target]))
            elif target not in seen and (file := _module_file(target)):
                seen.add(target)
                stack.append((file, [*chain, target], None))
    return found


def test_runs_never_imports_profiles_not_even_through_config():
    wrong = [
        f"{path.relative_to(ROOT)}: {chain}"
        for path in _app_files("runs")
        for chain in paths_into_profiles(path)
    ]
    assert wrong == []


def test_the_engine_imports_nothing_of_either_app():
    wrong = [
        f"{path.relative_to(ROOT)} imports {target}"
        for path in sorted((ROOT / "profiles" / "pyspy").rglob("*.py"))
        for target in imports_of(path)
        if _own(target) and not target.startswith(ENGINE)
    ]
    assert wrong == []


def test_the_app_guard_follows_imports_through_config(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def ready():\n    import config.checks\nfrom profiles.pyspy import raw\n")
    chains = paths_into_profiles(probe, package="runs")
    # config.checks reads the state rules of profiles.pipeline: a runs module that
    # imported it would close the circle; the engine (profiles.pyspy) is allowed.
    assert chains and all("config.checks -> profiles.pipeline" in c for c in chains)
    assert not any(c.endswith("profiles.pyspy.raw") for c in chains)


# --- pages only read ----------------------------------------------------------------
# What a page shows about a capture or a whole job was computed at analysis time and
# stored: modules that serve pages and the API (views, APIs, selectors, template tags)
# read stored stats, trees and reports, through the storage module (capture_files),
# never through the worker modules, and never classify samples themselves.

WORKER_MODULES = {
    "profiles.analysis",
    "profiles.pipeline",
    "profiles.group_pipeline",
    "profiles.group_report",
    "profiles.tasks",
}
CLASSIFIER_MODULES = {
    f"profiles.pyspy.{name}"
    for name in (
        "analysis", "states", "state_rules", "rule_table", "matching", "keywords",
        "usercode", "findings", "job", "straggler", "functions", "activity", "reading",
        "raw", "speedscope", "waiting",
    )
}  # fmt: skip
CLASSIFYING_CALLS = {
    "analyze", "analyze_job", "analyze_lag", "classify", "count_states", "node_states",
    "findings_for_capture", "findings_for_threads", "step_threads", "thread_tables",
    "thread_functions", "read_profile", "parse_profile_text", "parse_raw_lines",
    "parse_dump", "parse_keyword", "is_user_frame", "matcher_for", "wait_split",
}  # fmt: skip
PAGE_NAME = ("views", "api", "selectors")


def page_files() -> list[Path]:
    """Every module that serves a page or the API: `*views.py`, `*api.py`,
    `*selectors.py` of both apps, and the template tags."""
    found = [
        path
        for app in ("profiles", "runs")
        for path in (ROOT / app).glob("*.py")
        if path.stem.endswith(PAGE_NAME) and not path.stem.endswith("_schema")
    ]
    return sorted(found + list((ROOT / "profiles" / "templatetags").glob("*.py")))


def called_names(path: Path) -> set[str]:
    """The names of every function called in `path` (`f()`, `x.f()`, `a.b.f()`)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Attribute):
                names.add(func.attr)
            elif isinstance(func, ast.Name):
                names.add(func.id)
    return names


def page_problems() -> list[str]:
    wrong = []
    for path in page_files():
        name = path.relative_to(ROOT)
        for target in sorted(imports_of(path)):
            module = next((m for m in WORKER_MODULES | CLASSIFIER_MODULES if
                           target == m or target.startswith(f"{m}.")), None)  # fmt: skip
            if module:
                wrong.append(f"{name} imports {target}")
        wrong += [
            f"{name} calls {call}()" for call in sorted(called_names(path) & CLASSIFYING_CALLS)
        ]
    return wrong


def test_pages_and_the_api_only_read_what_the_analysis_stored():
    assert page_problems() == []


def test_the_page_guard_sees_pages_of_both_apps_and_what_would_break_it(tmp_path):
    names = {p.stem for p in page_files()}
    assert {"views", "api", "selectors", "group_selectors", "group_views", "compare_views"} <= names
    assert "api_schema" not in names and "flamedeck" in names  # a template tag module
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from profiles import pipeline, pyspy\n"
        "def page(capture):\n"
        "    tree = pipeline.read_flamegraph(capture)\n"
        "    return pyspy.analyze(tree), wait_split(tree, [])\n"
    )
    assert {"analyze", "wait_split", "read_flamegraph"} <= called_names(probe)
    assert "profiles.pipeline" in imports_of(probe, package="profiles")


def test_enqueue_finds_every_task_it_sends_by_name_in_a_web_process():
    """Not only in a worker: a web process registers the tasks when Django starts."""
    import subprocess
    import sys

    code = (
        "import django; django.setup()\n"
        "from profiles import enqueue\n"
        "names = (enqueue.RUN_CAPTURE, enqueue.RUN_HOST_CAPTURES, enqueue.ANALYZE_CAPTURE,\n"
        "         enqueue.JUDGE_CAPTURE)\n"
        "for name in names:\n"
        "    assert enqueue._task(name).name == name\n"
    )
    env = {"DJANGO_SETTINGS_MODULE": "config.settings_test", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
