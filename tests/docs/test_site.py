"""The documentation: the site builds in MkDocs' strict mode, and that mode really fails
on a broken link, a missing anchor and a page left out of the navigation; the README
stays a short front door whose links resolve; figures that change live on one page."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
README_MAX_BYTES = 12 * 1024


def build(root: Path, tmp_path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def copy(tmp_path) -> Path:
    """The site's sources in a scratch folder, to break on purpose."""
    root = tmp_path / "src"
    shutil.copytree(ROOT / "docs", root / "docs")
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    return root


def test_the_site_builds_in_strict_mode(tmp_path):
    result = build(ROOT, tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "site" / "api" / "index.html").exists()


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        ("[gone](no-such-page.md)", "no-such-page.md"),
        ("[gone](api.md#no-such-section)", "does not contain an anchor '#no-such-section'"),
        ("[gone](#no-such-section-here)", "no-such-section-here"),
    ],
)
def test_a_broken_link_fails_the_build_naming_it(copy, tmp_path, broken, said):
    page = copy / "docs" / "compare.md"
    page.write_text(page.read_text() + f"\n{broken}\n")
    result = build(copy, tmp_path)
    assert result.returncode != 0
    assert said in result.stderr and "compare.md" in result.stderr, result.stderr


def test_a_page_left_out_of_the_navigation_fails_the_build(copy, tmp_path):
    (copy / "docs" / "orphan.md").write_text("# Orphan\n")
    result = build(copy, tmp_path)
    assert result.returncode != 0 and "orphan.md" in result.stderr, result.stderr


def test_the_readme_is_short_and_every_link_in_it_resolves():
    text = README.read_text(encoding="utf-8")
    assert len(text.encode()) <= README_MAX_BYTES
    targets = re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text)
    local = [t for t in targets if "://" not in t]
    assert len(local) >= 15
    missing = [t for t in local if not (ROOT / t).exists()]
    assert not missing, missing


def test_the_readme_says_how_to_log_in():
    text = README.read_text(encoding="utf-8")
    assert "**admin**" in text and "var/initial-password" in text
    assert "make run" in text and "make test" in text


# Figures that change every session: test counts, suite times, benchmark results.
SESSION_FIGURES = re.compile(r"\b\d[\d,]* tests\b|\b\d+ min \d+ s\b|\b\d+(\.\d+)? s wall\b")


def test_figures_that_change_live_only_on_the_figures_page():
    pages = [README, *sorted((ROOT / "docs").glob("*.md"))]
    found = [
        f"{page.name}: {match.group(0)}"
        for page in pages
        if page.name != "figures.md"
        for match in SESSION_FIGURES.finditer(page.read_text(encoding="utf-8"))
    ]
    assert not found, found
    assert SESSION_FIGURES.search((ROOT / "docs" / "figures.md").read_text(encoding="utf-8"))


def test_make_docs_builds_strict_and_never_quiet():
    """`--quiet` hides the warnings `--strict` counts: the build would pass anything."""
    recipe = subprocess.run(
        ["make", "-n", "docs"], cwd=ROOT, capture_output=True, text=True, timeout=60
    ).stdout
    build_line = next(line for line in recipe.splitlines() if "mkdocs build" in line)
    assert "--strict" in build_line and not re.search(r"\s(-q|--quiet)\b", build_line)


def test_the_built_site_loads_nothing_from_another_origin(tmp_path):
    assert build(ROOT, tmp_path).returncode == 0
    html = (tmp_path / "site" / "index.html").read_text()
    assert not re.findall(r'<(?:script|link)[^>]+(?:src|href)="(?:https?:)?//', html)
