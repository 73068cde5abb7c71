"""tests/profiles/pyspy mirrors the engine: each module `profiles/pyspy/<sub>/<name>.py` has
`tests/profiles/pyspy/<sub>/test_<name>.py` (top-level modules theirs beside this file);
`__init__.py` files need none. Extra `test_<name>_<more>.py` files may sit beside them."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
ENGINE = ROOT / "profiles" / "pyspy"
TESTS = ROOT / "tests" / "profiles" / "pyspy"


def untested_modules(engine: Path, tests: Path) -> list[str]:
    """The engine's modules (paths relative to `engine`) without their mirrored test module."""
    missing = []
    for module in sorted(engine.rglob("*.py")):
        relative = module.relative_to(engine)
        if module.name == "__init__.py":
            continue
        if not (tests / relative.parent / f"test_{module.stem}.py").is_file():
            missing.append(relative.as_posix())
    return missing


def test_every_engine_module_has_its_mirrored_test_module():
    assert ENGINE.is_dir() and TESTS.is_dir()
    missing = untested_modules(ENGINE, TESTS)
    assert missing == [], f"engine modules without their test_<name>.py: {', '.join(missing)}"


def test_the_check_names_a_module_without_its_test_and_accepts_it_once_written(tmp_path):
    engine, tests = tmp_path / "pyspy", tmp_path / "tests"
    for path in ("__init__.py", "cli.py", "core/__init__.py", "core/profile.py", "core/types.py"):
        (engine / path).parent.mkdir(parents=True, exist_ok=True)
        (engine / path).write_text("")
    (tests / "core").mkdir(parents=True)
    (tests / "test_cli.py").write_text("")
    (tests / "core" / "test_profile_extra.py").write_text("")  # an extra: not the mirror
    (tests / "test_types.py").write_text("")  # the right name in the wrong folder
    assert untested_modules(engine, tests) == ["core/profile.py", "core/types.py"]
    (tests / "core" / "test_profile.py").write_text("")
    (tests / "core" / "test_types.py").write_text("")
    assert untested_modules(engine, tests) == []
