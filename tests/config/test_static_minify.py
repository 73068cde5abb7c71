"""The pages' scripts survive the minifier that serves them (django-compressor's rJSmin).

rJSmin does not parse template literals: a regular expression holding a backtick inside
a template literal's `${…}` (`${s.replace(/`/g, "")}`) threw it off, and from there on
every template string of the file lost its spaces ("No timeline:no rank …" on the
whole-job timeline, found in a screenshot)."""

import re
from pathlib import Path

import pytest
import rjsmin

JS = sorted((Path(__file__).resolve().parents[2] / "static" / "js").glob("*.js"))
# A regular expression literal (after `(`, `,`, `=` or `:`) that holds a backtick.
REGEX_WITH_BACKTICK = re.compile(r"[(,=:]\s*/(?![/*])[^/\n]*`[^/\n]*/[dgimsuy]*")


@pytest.mark.parametrize("path", JS, ids=[p.name for p in JS])
def test_no_regular_expression_holds_a_backtick(path):
    found = REGEX_WITH_BACKTICK.findall(path.read_text(encoding="utf-8"))
    assert not found, f"{path.name}: write the backtick as \\u0060 instead: {found}"


def test_the_whole_job_timelines_sentences_keep_their_spaces_once_minified():
    minified = rjsmin.jsmin((JS[0].parent / "group_timeline.js").read_text(encoding="utf-8"))
    for text in (": no timeline (", " s of its capture", " on the server's clock. Open it"):
        assert text in minified, f"the minifier changed {text!r}"
