"""bench/ by kind (issue 50): at most 8 scripts at its top level, every file below it
indexed in bench/README.md with the figure it prints, and no page, test or script
naming a bench/ path that is not there (a script that moves breaks this, not a reader)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
README = BENCH / "README.md"
KINDS = ("engine", "app", "suite", "targets", "recorders", "support")
# A path under bench/ as pages, tests and scripts write it: `bench/app/bench_group.py`.
BENCH_PATH = re.compile(r"(?<![\w/.-])bench/((?:[a-z_]+/)*(?:[a-z_]+\.(?:py|sh|md)|standin_pyspy))")
# Where such paths are written (recorded captures aside: they keep the paths they ran at).
NAMING = ["Makefile", "README.md", "mkdocs.yml", "pyproject.toml", ".ci/*", "docs/*.md"]
NAMING += ["bench/**/*", "tests/**/*.py", "tests/data/**/*.md", "config/**/*.py"]
NAMING += ["runs/**/*.py", "profiles/**/*.py"]


def bench_files() -> list[Path]:
    return sorted(
        path
        for path in BENCH.rglob("*")
        if path.is_file() and path != README and "__pycache__" not in path.parts
    )


def test_the_top_level_of_bench_holds_at_most_8_scripts():
    top = [path.name for path in BENCH.iterdir() if path.is_file() and path != README]
    assert len(top) <= 8, top
    assert {path.name for path in BENCH.iterdir() if path.is_dir()} >= set(KINDS)


def test_the_index_names_every_file_below_bench_by_its_folder():
    index = README.read_text(encoding="utf-8")
    missing = [
        name
        for name in (path.relative_to(BENCH).as_posix() for path in bench_files())
        if f"`{name}`" not in index
    ]
    assert not missing, f"bench/README.md does not list {missing}"


def test_every_script_the_index_names_is_there():
    index = README.read_text(encoding="utf-8")
    named = re.findall(rf"`((?:{'|'.join(KINDS)})/[\w./]+)`", index)
    assert len(named) > 30
    assert [name for name in named if not (BENCH / name).is_file()] == []


def test_no_page_test_or_script_names_a_bench_path_that_is_gone():
    files = {path for pattern in NAMING for path in ROOT.glob(pattern) if path.is_file()}
    gone = []
    for path in sorted(files):
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for found in BENCH_PATH.finditer(text):
            if not (BENCH / found.group(1)).is_file():
                line = text.count("\n", 0, found.start()) + 1
                gone.append(f"{path.relative_to(ROOT)}:{line}: bench/{found.group(1)}")
    assert not gone, "\n".join(gone)
