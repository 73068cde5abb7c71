"""Migrations never import live code: a migration runs years after it was written, so
what it does must be written in it (a data migration copies the frozen logic it needs
and reaches models through `apps.get_model`), not borrowed from modules that change.

One reference is Django's own: `makemigrations` writes a field's callables (`upload_to`,
`storage`, `validators`, a callable `default`) as `import app.module` and a dotted
name in the field's options, since it cannot serialise code. Those stay, as Django's
docs ask, and `makemigrations --check` keeps them equal to the models'. Anything else
reaching the project's packages fails here, read from the source with `ast`.
"""

import ast
import importlib
import importlib.util
from pathlib import Path

from django.apps import apps
from django.db.migrations.loader import MigrationLoader

ROOT = Path(__file__).resolve().parents[1]
OWN_PACKAGES = frozenset(path.parent.name for path in ROOT.glob("*/__init__.py"))
FIELD_CALLABLE_OPTIONS = frozenset({"upload_to", "storage", "validators", "default"})
DYNAMIC_IMPORTS = frozenset({"import_module", "__import__"})
COMPUTED = "a module named at run time"


def _is_live(module: str) -> bool:
    """`from . import x` is the migrations package itself; `from .. import x` the app."""
    if module == COMPUTED:  # it may be any module
        return True
    if module.startswith("."):
        return module.startswith("..")
    parts = module.split(".")
    return parts[0] in OWN_PACKAGES and "migrations" not in parts


def _in_function(node: ast.AST, parents: dict) -> bool:
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            return True
    return False


def _in_field_option(node: ast.AST, parents: dict) -> bool:
    """Whether `node` sits in a field's serialised callable, at the module's level."""
    if _in_function(node, parents):
        return False
    while node in parents:
        node = parents[node]
        if isinstance(node, ast.keyword):
            return node.arg in FIELD_CALLABLE_OPTIONS
    return False


def _called_name(call: ast.Call) -> str:
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")


def _imported_modules(node: ast.AST) -> list[tuple[str, str | None]]:
    """(module, the name it binds when it may be Django's field reference)."""
    if isinstance(node, ast.Import):
        return [(a.name, None if a.asname else a.name.split(".")[0]) for a in node.names]
    if isinstance(node, ast.ImportFrom):
        return [("." * node.level + (node.module or ""), None)]
    if isinstance(node, ast.Call) and _called_name(node) in DYNAMIC_IMPORTS and node.args:
        name = node.args[0]
        computed = not (isinstance(name, ast.Constant) and isinstance(name.value, str))
        return [(COMPUTED if computed else name.value, None)]
    return []


def live_imports(source: str) -> list[str]:
    """Each place a migration's source reaches the project's own code, as `line: what`."""
    tree = ast.parse(source)
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found, bound = [], {}
    for node in ast.walk(tree):
        for module, name in _imported_modules(node):
            if not _is_live(module):
                continue
            if name and not _in_function(node, parents):
                bound.setdefault(name, node.lineno)
            else:
                found.append(f"{node.lineno}: {module}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in bound:
            if not _in_field_option(node, parents):
                found.append(f"{node.lineno}: {node.id} used outside a field's options")
    return found


def migration_files() -> list[Path]:
    files = []
    for app in apps.get_app_configs():
        module, _ = MigrationLoader.migrations_module(app.label)
        own = app.name.split(".")[0] in OWN_PACKAGES
        if own and module and importlib.util.find_spec(module):
            package = Path(importlib.import_module(module).__file__).parent
            files += sorted(package.glob("*.py"))
    return files


def test_every_app_of_the_project_has_its_migrations_read():
    assert {"profiles", "runs", "config"} <= OWN_PACKAGES
    read = {path.parent.parent.name for path in migration_files()}
    assert {"profiles", "runs"} <= read


def test_no_migration_imports_live_code():
    found = {
        str(path.relative_to(ROOT)): live
        for path in migration_files()
        if (live := live_imports(path.read_text(encoding="utf-8")))
    }
    assert not found, found


# What the check must refuse, each on its own, and what Django itself writes.
LIVE = {
    "an import inside a data migration's function": (
        "def render(apps, schema_editor):\n"
        "    from profiles.captures.comments import render_comment\n"
    ),
    "a name imported at the top": "from profiles.captures.comments import render_comment\n",
    "a module used in code": (
        "import profiles.captures.comments\n"
        "def render(apps, schema_editor):\n"
        "    return profiles.captures.comments.render_comment('x')\n"
    ),
    "a module under another name": "import runs.models as models\n",
    "the app above the migrations package": "from .. import models\n",
    "a dynamic import": "import importlib\nengine = importlib.import_module('profiles.pyspy')\n",
    "a dynamic import of a computed name": "engine = __import__('.'.join(['profiles', 'pyspy']))\n",
    "the settings": "from config import settings\n",
}
DJANGOS_OWN = (
    "import importlib\n"
    "import profiles.models\n"
    "import runs.models\n"
    "from django.db import migrations, models\n"
    "from . import helpers\n"
    "EARLIER = importlib.import_module('profiles.migrations.0003_engine_gpu_keywords')\n"
    "FIELDS = [\n"
    "    models.FileField(upload_to=profiles.models._capture_path),\n"
    "    models.CharField(validators=[runs.models.BuilderCheck('check_port')]),\n"
    "]\n"
    "def forwards(apps, schema_editor):\n"
    "    apps.get_model('profiles', 'Comment').objects.update(body_html='')\n"
)


def test_the_check_finds_each_way_of_reaching_live_code():
    missed = [what for what, source in LIVE.items() if not live_imports(source)]
    assert not missed, missed


def test_the_check_lets_through_djangos_field_references_and_other_migrations():
    assert live_imports(DJANGOS_OWN) == []
