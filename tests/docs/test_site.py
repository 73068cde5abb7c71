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


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    """The site built once from the repository's sources (a build is a process of its
    own, about a CPU-second)."""
    out = tmp_path_factory.mktemp("docs")
    result = build(ROOT, out)
    assert result.returncode == 0, result.stderr
    return out / "site"


def test_the_site_builds_in_strict_mode(site):
    assert (site / "api" / "index.html").exists()


# Planted together in one copy of the sources: strict mode reports every warning before
# it fails, so one build shows that each is named (four builds did the same work).
BROKEN = [
    ("[gone](no-such-page.md)", "no-such-page.md"),
    ("[gone](api.md#no-such-section)", "does not contain an anchor '#no-such-section'"),
    ("[gone](#no-such-section-here)", "no-such-section-here"),
]


def test_broken_links_and_a_page_left_out_of_the_navigation_fail_the_build_naming_each(
    tmp_path,
):
    root = tmp_path / "src"
    shutil.copytree(ROOT / "docs", root / "docs")
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    page = root / "docs" / "compare.md"
    page.write_text(page.read_text() + "".join(f"\n{broken}\n" for broken, _ in BROKEN))
    (root / "docs" / "orphan.md").write_text("# Orphan\n")
    result = build(root, tmp_path)
    assert result.returncode != 0
    for broken, said in BROKEN:
        named = [line for line in result.stderr.splitlines() if said in line]
        assert named and all("compare.md" in line for line in named), (broken, result.stderr)
    assert "orphan.md" in result.stderr, result.stderr


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


# The newest figure of each measurement, one row each; earlier ones live in git.
FIGURES_MAX_BYTES = 20 * 1024


def test_the_figures_page_keeps_current_figures_not_a_log():
    assert len((ROOT / "docs" / "figures.md").read_bytes()) <= FIGURES_MAX_BYTES


def test_make_docs_builds_strict_and_never_quiet():
    """`--quiet` hides the warnings `--strict` counts: the build would pass anything."""
    recipe = subprocess.run(
        ["make", "-n", "docs"], cwd=ROOT, capture_output=True, text=True, timeout=60
    ).stdout
    build_line = next(line for line in recipe.splitlines() if "mkdocs build" in line)
    assert "--strict" in build_line and not re.search(r"\s(-q|--quiet)\b", build_line)


def test_the_built_site_loads_nothing_from_another_origin(site):
    html = (site / "index.html").read_text()
    assert not re.findall(r'<(?:script|link)[^>]+(?:src|href)="(?:https?:)?//', html)
