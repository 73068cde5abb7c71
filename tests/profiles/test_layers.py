"""The house's directions, checked on the source with `ast` (imports inside functions
count too), so a new upward import or a circle fails here, not at some import time:

- packages: each capability package of profiles (and runs.pages, the run and host
  pages) imports only the packages below it (PACKAGES);
- no import circles between modules of config, profiles and runs;
- the capture path: views/API -> services -> tasks -> enqueue -> pipeline -> analysis
  -> runs.remote; services and tasks both send through enqueue, which finds tasks by
  name and imports neither;
- runs never imports profiles (except runs.pages), the engine neither app;
- pages only read what the analysis stored."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Top to bottom; a module may import only modules of layers below its own.
LAYERS = [
    ["profiles.api.views", "profiles.web.views", "profiles.jobs.views", "profiles.beat"],
    ["profiles.jobs.services"],
    ["profiles.captures.services"],
    ["profiles.captures.tasks", "profiles.jobs.tasks"],
    ["profiles.captures.enqueue"],
    ["profiles.jobs.pipeline"],
    ["profiles.captures.pipeline"],
    ["profiles.captures.analysis"],
    ["profiles.captures.lifecycle"],
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
    probe.write_text("from ..models import Capture\ndef f():\n    from . import tasks\n")
    found = imports_of(probe, package="profiles.captures")
    assert found == {"profiles.models", "profiles.captures.tasks"}
    pipeline = imports_of(ROOT / "profiles" / "captures" / "pipeline.py")
    assert {"profiles.captures.lifecycle", "runs.remote", "profiles.pyspy"} <= pipeline
    services = imports_of(ROOT / "profiles" / "captures" / "services.py")
    assert "profiles.captures.enqueue" in services and "profiles.captures.tasks" not in services
    tasks = imports_of(ROOT / "profiles" / "captures" / "tasks.py")
    assert "profiles.captures.enqueue" in tasks


def test_every_layer_names_a_module_that_exists():
    assert all(_module_file(name) for name in PATH_MODULES)


# --- packages ------------------------------------------------------------------------
# Top to bottom: a package imports only packages below it. The modules at the top of
# profiles (apps, admin, urls, beat, defaults, the template tags and the management
# commands) are entry points above every package; config is the project's plumbing
# (settings, parameters, the API's error shapes) that every package may use, and that
# imports the packages only from its URL lists, checks and commands.
PACKAGES = [
    "runs.pages",  # the run and host pages: a run's captures, launches, trends
    "profiles.web",  # the capture pages
    "profiles.compare",  # before and after, trends, sparklines
    "profiles.api",  # the JSON API of captures and groups, and its OpenAPI description
    "profiles.watches",  # regression watches and their notifications
    "profiles.jobs",  # whole-job captures and dumps, the job report
    "profiles.captures",  # one capture's life, its tasks and the reads of its pages
    "profiles.storage",  # where a capture's files live
    "profiles.models",  # the models (the watches' models register here) and signals
    "runs",  # hosts, runs, processes, the remote seam
    "profiles.pyspy",  # the engine: the standard library only
]
# What profiles.models itself imports: the storage its file fields use, the comment
# renderer it calls on save, and the watches' models it registers (which mask their
# notification URLs with notify). Each imports nothing of profiles but the engine and
# the models (test below), so the models stay the floor.
MODEL_FLOOR = {
    "profiles.signals",
    "profiles.storage.artifacts",
    "profiles.captures.comments",
    "profiles.watches.models",
    "profiles.watches.notify",
}


def _modules() -> dict[str, Path]:
    """Every module of config, profiles and runs (migrations aside) by dotted name."""
    found = {}
    for app in ("config", "profiles", "runs"):
        for path in (ROOT / app).rglob("*.py"):
            if "migrations" in path.parts:
                continue
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of the three apps it imports (a name imported from a
    module counts as that module)."""
    modules = _modules()
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        targets = set()
        for target in imports_of(path, package):
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                targets.add(target)
        graph[name] = targets
    return graph


def package_of(module: str) -> str | None:
    if module in MODEL_FLOOR or module in ("profiles.models", "profiles.signals"):
        return "profiles.models"
    for package in PACKAGES:
        if module == package or module.startswith(f"{package}."):
            return package
    return None


def package_back_edges(graph: dict[str, set[str]]) -> list[str]:
    wrong = []
    for module, targets in sorted(graph.items()):
        here = package_of(module)
        if here is None:
            continue
        for target in sorted(targets):
            there = package_of(target)
            if there is not None and PACKAGES.index(there) < PACKAGES.index(here):
                wrong.append(f"{module} ({here}) imports {target} ({there})")
    return wrong


def test_each_package_imports_only_packages_below_it():
    assert package_back_edges(import_graph()) == []


def test_the_models_floor_imports_nothing_of_profiles_but_the_engine():
    graph = import_graph()
    wrong = [
        f"{module} imports {target}"
        for module in sorted(MODEL_FLOOR)
        for target in sorted(graph[module])
        if target.startswith("profiles.")
        and package_of(target) != "profiles.pyspy"
        and target not in MODEL_FLOOR | {"profiles.models"}
    ]
    assert wrong == []


def test_the_package_check_sees_a_new_back_edge():
    graph = import_graph()
    graph["profiles.captures.pipeline"] = {*graph["profiles.captures.pipeline"],
                                           "profiles.watches.judging"}  # fmt: skip
    assert package_back_edges(graph) == [
        "profiles.captures.pipeline (profiles.captures) imports profiles.watches.judging "
        "(profiles.watches)"
    ]
    assert all(package_of(m) for m in graph if m.startswith("profiles.") and "." in m[9:]
               and m.split(".")[1] not in ("management", "templatetags"))  # fmt: skip


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_circles_not_even_through_imports_inside_functions():
    assert circles(import_graph()) == []


def test_the_circle_check_sees_a_circle_closed_inside_a_function():
    graph = import_graph()
    graph["profiles.storage.artifacts"] = {*graph["profiles.storage.artifacts"],
                                           "profiles.models"}  # fmt: skip
    assert ["profiles.models", "profiles.storage.artifacts"] in circles(graph)


# --- app to app ------------------------------------------------------------------------
# `profiles` (captures) imports `runs` (hosts, runs, the remote seam), never the reverse,
# not even through a `config` module, with one exception: runs.pages, the run and host
# pages, which show a run's captures and sit above every package (PACKAGES); nothing but
# config's URL list imports them. The commands that run the whole product are in config
# (serve, bootstrap, preflight). The engine, `profiles.pyspy`, is a standard-library
# package that imports nothing of either app.

ENGINE = "profiles.pyspy"


def _own(module: str) -> bool:
    return module.split(".")[0] in ("runs", "profiles", "config")


PAGES = "runs.pages"


def _app_files(app: str) -> list[Path]:
    return sorted(p for p in (ROOT / app).rglob("*.py") if "pages" not in p.parts)


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
            elif target.startswith(PAGES):
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


def test_only_the_url_list_imports_the_run_and_host_pages():
    wrong = [
        f"{module} imports {target}"
        for module, targets in sorted(import_graph().items())
        for target in sorted(targets)
        if target.startswith(PAGES) and not module.startswith(PAGES) and module != "config.urls"
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
    # config.checks reads the state rules of profiles.captures.pipeline: a runs module that
    # imported it would close the circle; the engine (profiles.pyspy) is allowed.
    assert chains and all("config.checks -> profiles.captures.pipeline" in c for c in chains)
    assert not any(c.endswith("profiles.pyspy.formats.raw") for c in chains)


# --- pages only read ----------------------------------------------------------------
# What a page shows about a capture or a whole job was computed at analysis time and
# stored: modules that serve pages and the API (views, APIs, selectors, template tags)
# read stored stats, trees and reports, through the storage module (capture_files),
# never through the worker modules, and never classify samples themselves.

WORKER_MODULES = {
    "profiles.captures.analysis",
    "profiles.captures.pipeline",
    "profiles.jobs.pipeline",
    "profiles.jobs.report",
    "profiles.captures.tasks",
}
CLASSIFIER_MODULES = {
    f"profiles.pyspy.{name}"
    for name in (
        "count.analysis", "count.keyword_matching", "count.keywords", "count.functions",
        "count.activity", "count.thread_tables", "rules.states", "rules.state_rules",
        "rules.rule_table", "rules.user_code", "rules.framework", "rules.findings",
        "rules.step_threads", "job.report", "job.straggler", "job.stuck", "job.dump_verdict",
        "formats.reading", "formats.raw", "formats.speedscope", "formats.dump",
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
        for path in (ROOT / app).rglob("*.py")
        if path.stem.endswith(PAGE_NAME) and "pyspy" not in path.parts
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
        for target in sorted(imports_of(path) | engine_sources(path)):
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
    names = {str(p.relative_to(ROOT)) for p in page_files()}
    assert {
        "profiles/api/views.py", "profiles/web/views.py", "profiles/captures/selectors.py",
        "profiles/jobs/selectors.py", "profiles/jobs/views.py", "profiles/compare/views.py",
        "profiles/watches/api.py", "runs/pages/views.py", "runs/api.py",
    } <= names  # fmt: skip
    assert "profiles/api/schema.py" not in names
    assert "profiles/templatetags/flamedeck.py" in names  # a template tag module
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from profiles.captures import pipeline\nfrom profiles import pyspy\n"
        "def page(capture):\n"
        "    tree = pipeline.read_flamegraph(capture)\n"
        "    return pyspy.analyze(tree), wait_split(tree, [])\n"
    )
    assert {"analyze", "wait_split", "read_flamegraph"} <= called_names(probe)
    assert "profiles.captures.pipeline" in imports_of(probe, package="profiles.web")


def test_enqueue_finds_every_task_it_sends_by_name_in_a_web_process():
    """Not only in a worker: a web process registers the tasks when Django starts."""
    import subprocess
    import sys

    code = (
        "import django; django.setup()\n"
        "from profiles.captures import enqueue\n"
        "names = (enqueue.RUN_CAPTURE, enqueue.RUN_HOST_CAPTURES, enqueue.ANALYZE_CAPTURE,\n"
        "         enqueue.JUDGE_CAPTURE)\n"
        "for name in names:\n"
        "    assert enqueue._task(name).name == name\n"
    )
    env = {"DJANGO_SETTINGS_MODULE": "config.settings_test", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True)
    assert done.returncode == 0, done.stderr.decode()[-2000:]


# --- the engine's house -----------------------------------------------------------------
# profiles.pyspy is layered by capability (docs/engine.md): a module imports only its own
# subpackage and those below it. The leaves at the top of the package (errors, limits,
# version, thresholds) are the floor; the public face (the package itself, __main__ and
# the command lines) stands above everything. The Django side reaches the engine only
# through the face or a subpackage's __init__ (the seam), at most SEAM_LIMIT of them.
ENGINE_LAYERS = [
    ["errors", "limits", "version", "thresholds"],
    ["core"],
    ["stats"],
    ["formats"],
    ["rules"],
    ["count"],
    ["timed"],
    ["job"],
    ["compare"],
    ["", "__main__", "cli", "jobcli", "stackscli"],
]
SEAM_LIMIT = 8


def engine_layer(module: str) -> int | None:
    """The layer of an engine module (`profiles.pyspy.rules.states` -> 4)."""
    if module != ENGINE and not module.startswith(f"{ENGINE}."):
        return None
    head = module[len(ENGINE) + 1 :].split(".")[0]
    return next(i for i, layer in enumerate(ENGINE_LAYERS) if head in layer)


def engine_graph() -> dict[str, set[str]]:
    return {m: {t for t in ts if engine_layer(t) is not None}
            for m, ts in import_graph().items() if engine_layer(m) is not None}  # fmt: skip


def engine_back_edges(graph: dict[str, set[str]]) -> list[str]:
    return [
        f"{module} imports {target}"
        for module, targets in sorted(graph.items())
        for target in sorted(targets)
        if engine_layer(target) > engine_layer(module)
    ]


def test_every_engine_module_sits_in_a_layer_and_imports_none_above_it():
    graph = engine_graph()
    assert len(graph) > 60 and all(engine_layer(m) is not None for m in graph)
    assert engine_back_edges(graph) == []


def test_the_engine_check_sees_a_planted_back_edge():
    graph = engine_graph()
    graph["profiles.pyspy.stats.intervals"].add("profiles.pyspy.rules.states")
    graph["profiles.pyspy.formats.raw"].add("profiles.pyspy.cli")
    assert engine_back_edges(graph) == [
        "profiles.pyspy.formats.raw imports profiles.pyspy.cli",
        "profiles.pyspy.stats.intervals imports profiles.pyspy.rules.states",
    ]


def test_at_most_twelve_modules_stay_at_the_top_of_the_engine():
    top = sorted(p.stem for p in (ROOT / "profiles" / "pyspy").glob("*.py"))
    named = {
        name or "__init__" for layer in (ENGINE_LAYERS[0], ENGINE_LAYERS[-1]) for name in layer
    }
    assert len(top) <= 12 and set(top) == named, top


def seam_imports(paths: list[Path], package: str | None = None) -> dict[str, list[str]]:
    """What the Django side imports the engine from: the module each `from X import ...`
    or `import X` names (absolute), where X is the engine, by file."""
    found: dict[str, list[str]] = {}
    for path in paths:
        here = package or _package_of(path)
        label = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path.name
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join([*anchor, *([base] if base else [])])
                names = [base] if base != "profiles" else [
                    f"profiles.{a.name}" for a in node.names if a.name == "pyspy"]  # fmt: skip
            for name in names:
                if engine_layer(name) is not None:
                    found.setdefault(name, []).append(str(label))
    return found


def django_side() -> list[Path]:
    return sorted(
        path
        for app in ("config", "profiles", "runs")
        for path in (ROOT / app).rglob("*.py")
        if "migrations" not in path.parts and ENGINE.replace(".", "/") not in path.as_posix()
    )


def seam_problems(found: dict[str, list[str]]) -> list[str]:
    public = {ENGINE} | {f"{ENGINE}.{layer[0]}" for layer in ENGINE_LAYERS[1:-1]}
    wrong = [f"{', '.join(sorted(set(files)))} import {name}, past the seam"
             for name, files in sorted(found.items()) if name not in public]  # fmt: skip
    if len(found) > SEAM_LIMIT:
        wrong.append(f"{len(found)} engine modules imported: {sorted(found)}")
    return wrong


def test_the_django_side_imports_the_engine_only_through_its_seam():
    found = seam_imports(django_side())
    assert seam_problems(found) == []
    assert ENGINE in found and len(found) >= 5  # the check reads real imports


def test_the_seam_check_sees_a_deep_import_and_too_many_modules(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from profiles.pyspy.rules.states import classify\nimport profiles.pyspy.job\n"
        "def f():\n    from ..pyspy.count import analysis\n"
    )
    found = seam_imports([probe], package="profiles.web")
    assert found == {name: ["probe.py"] for name in
                     (f"{ENGINE}.rules.states", f"{ENGINE}.job", f"{ENGINE}.count")}  # fmt: skip
    assert seam_problems(found) == ["probe.py import profiles.pyspy.rules.states, past the seam"]
    many = {f"{ENGINE}.{layer[0]}": ["x.py"] for layer in ENGINE_LAYERS[1:-1]} | {ENGINE: ["x"]}
    assert len(many) == 9 and seam_problems(many)[-1].startswith("9 engine modules imported")


def engine_sources(path: Path) -> set[str]:
    """The engine modules that define the names `path` imports from an engine package
    (`from profiles.pyspy.compare import row_label` -> profiles.pyspy.compare.regression),
    so the page guard sees through the seam's re-exports."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if (
            isinstance(node, ast.ImportFrom)
            and node.module
            and engine_layer(node.module) is not None
        ):
            found.update(_defined_in(node.module, alias.name) for alias in node.names)
    return found


def _defined_in(module: str, name: str) -> str:
    """Where `module`'s name `name` comes from, following `from .x import name` chains."""
    file = _module_file(module)
    if file is not None and file.name == "__init__.py":
        for node in ast.parse(file.read_text()).body:
            if not isinstance(node, ast.ImportFrom):
                continue
            original = next((a.name for a in node.names if (a.asname or a.name) == name), None)
            if original is not None:
                base = node.module or ""
                if node.level:
                    parts = module.split(".")[: len(module.split(".")) - node.level + 1]
                    base = ".".join([*parts, *([base] if base else [])])
                if not node.module:  # `from . import types`: a module of the package
                    return f"{base}.{original}"
                return _defined_in(base, original)
    return f"{module}.{name}" if _module_file(f"{module}.{name}") else module


def test_the_page_guard_sees_through_the_engine_seam(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text(
        "from profiles.pyspy.rules import step_threads\nfrom profiles.pyspy import analyze\n"
        "from profiles.pyspy.compare import row_label\nfrom profiles.pyspy.core import types\n"
    )
    assert engine_sources(probe) == {
        "profiles.pyspy.rules.step_threads",
        "profiles.pyspy.count.analysis",
        "profiles.pyspy.compare.regression",
        "profiles.pyspy.core.types",
    }
    assert all(_module_file(m) for m in CLASSIFIER_MODULES)
