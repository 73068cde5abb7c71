"""Engine sentences rendered by templates: `backticked` parts become <code>, the text
(frame names are untrusted) escaped first, never raw backticks on the page."""

from django.template import Context, Template


def render(text: str) -> str:
    return Template("{% load flamedeck %}{{ text|code_spans }}").render(Context({"text": text}))


def test_a_backticked_frame_with_module_in_it_renders_as_escaped_code():
    html = render("rank-2 stands in `<module> (train.py:3)` (idle) while <b>others</b> wait")
    assert html == (
        "rank-2 stands in <code>&lt;module&gt; (train.py:3)</code> (idle) while "
        "&lt;b&gt;others&lt;/b&gt; wait"
    )
    assert "`" not in html and "<module>" not in html


def test_an_unpaired_backtick_stays_text_and_nothing_else_is_code():
    assert render("a `b` c `d") == "a <code>b</code> c `d"
    assert render("no code here & none") == "no code here &amp; none"
    assert render(None) == ""


def test_markup_inside_the_backticks_is_escaped_too():
    html = render("in `<img src=x onerror=alert(1)>`")
    assert html == "in <code>&lt;img src=x onerror=alert(1)&gt;</code>"
