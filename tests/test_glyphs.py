"""Every symbol the pages draw has a glyph in an installed font: ⓘ had none in the fonts
Chromium falls back to here (DejaVu, Liberation) and showed as a box in the banners."""

import shutil
import subprocess
from pathlib import Path

from tests.support.requirements import require

ROOT = Path(__file__).resolve().parent.parent
FC_LIST = shutil.which("fc-list") or "/usr/bin/fc-list"
PAGE_FILES = ("templates/**/*.html", "static/js/*.js", "static/css/*.css")


def symbols() -> set[str]:
    texts = (path.read_text() for pattern in PAGE_FILES for path in ROOT.glob(pattern))
    return {char for text in texts for char in text if ord(char) > 127}


def has_glyph(char: str) -> bool:
    query = [FC_LIST, f":charset={ord(char):x}", "family"]
    return bool(subprocess.run(query, capture_output=True, text=True, check=True).stdout.strip())


def test_every_symbol_the_pages_use_has_a_glyph_in_an_installed_font():
    require(FC_LIST, "fontconfig's fc-list", "apt-get install fontconfig (Chromium brings it)")
    found = symbols()
    assert "·" in found  # the scan reads the pages
    assert not [f"{c} U+{ord(c):04X}" for c in sorted(found) if not has_glyph(c)]
