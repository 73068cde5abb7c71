"""The redaction every output passes through (profiles.pyspy.formats.redaction), on py-spy's
own formats: command lines with `;`, `"` and newlines, dumps with `--locals`, and any
JSON-ready value (stats, trees, API bodies, host checks)."""

from profiles.pyspy import parse_dump
from profiles.pyspy.formats import redaction

HIDDEN = redaction.HIDDEN


def test_folded_redaction_cuts_command_lines_with_semicolons_and_newlines_as_the_parser():
    raw = (
        'process 7:"sh -c a;b";thread (1): main;f (a.py:1) 3\n'
        "process 8:\"python -c 'x\n"
        "y'\";thread (2): w;g (b.py:2) 4\n"
        "thread (3): solo;h (c.py:3) 5\n"
        'process 9:"never closed\n'
    )
    chunks = [raw.encode()[i : i + 5] for i in range(0, len(raw.encode()), 5)]
    out = b"".join(redaction.folded_text(chunks)).decode()
    hidden = f'"{HIDDEN}"'
    assert out.splitlines() == [
        f"process 7:{hidden};thread (1): main;f (a.py:1) 3",
        f"process 8:{hidden};thread (2): w;g (b.py:2) 4",
        "thread (3): solo;h (c.py:3) 5",
    ]


def test_dump_redaction_hides_the_command_and_every_local_value():
    text = (
        "Process 42: python train.py --token=abc\n"
        "Python v3.12.1 (/usr/bin/python3.12)\n\n"
        'Thread 42 (active): "MainThread"\n'
        "    step (train.py:20)\n"
        "        Arguments:\n"
        "            token: 'abc'\n"
        "        Locals:\n"
        "            odd line without a colon abc\n"
    )
    out = b"".join(redaction.dump_text([text.encode()])).decode()
    assert "abc" not in out
    assert f"Process 42: {HIDDEN}" in out and "    step (train.py:20)\n" in out
    assert f"            token: {HIDDEN}\n" in out and "        Locals:\n" in out


# py-spy 0.4.3's dump of `python -c SCRIPT` (as written here of a real process).
MULTI_LINE_DUMP = (
    "Process 17696: /usr/bin/python3 -c \n"
    "import time\n"
    'SECRET="tok-abc"\n'
    "def hold(s):\n"
    "    time.sleep(100)\n"
    "Thread 7 is not a header\n"
    "hold(SECRET)\n"
    "\n"
    "Python v3.11.7 (/usr/bin/python3.11)\n"
    "\n"
    'Thread 17696 (idle): "MainThread"\n'
    "    hold (<string>:5)\n"
    "    <module> (<string>:6)\n"
)


def test_dump_redaction_hides_every_line_of_a_multi_line_command():
    out = b"".join(redaction.dump_text([MULTI_LINE_DUMP.encode()])).decode()
    assert "tok-abc" not in out and "time.sleep(100)" not in out
    assert out.splitlines() == [
        f"Process 17696: {HIDDEN}",
        "Python v3.11.7 (/usr/bin/python3.11)",
        "",
        'Thread 17696 (idle): "MainThread"',
        "    hold (<string>:5)",
        "    <module> (<string>:6)",
    ]


def test_a_dump_without_its_python_line_is_hidden_up_to_the_first_thread():
    text = 'Process 9: python -c \nx = "tok-abc"\nThread 9 (idle): "MainThread"\n    f (a.py:1)\n'
    out = b"".join(redaction.dump_text([text.encode()])).decode()
    assert "tok-abc" not in out and "    f (a.py:1)" in out


def test_the_dump_parser_never_reads_a_command_line_as_frames():
    (thread,) = parse_dump(MULTI_LINE_DUMP)
    assert [f["name"] for f in thread["frames"]] == ["hold", "<module>"]


def test_hide_reaches_every_string_key_and_list_of_a_value_and_copies_it():
    frame = 'process 5:"python -c \nTOKEN = \\"tok-abc\\"; x;y"'
    value = {
        "top_total": [{"frame": frame, "samples": 3}],
        "title": f"{frame} takes 40% (under it: hold)",
        frame: 1,
        "locals": [{"name": "secret", "value": "'tok-abc'", "arg": True}],
        "processes": [{"pid": 5, "command": "python -c tok-abc"}],
        "plain": "thread (1): main",
        "nested": ({"n": [[frame]]},),
    }
    hidden = redaction.hide(value)
    assert "tok-abc" not in repr(hidden)
    assert hidden["top_total"][0] == {"frame": f'process 5:"{HIDDEN}"', "samples": 3}
    assert hidden["title"] == f'process 5:"{HIDDEN}" takes 40% (under it: hold)'
    assert hidden["plain"] == "thread (1): main" and hidden["processes"][0]["pid"] == 5
    assert "tok-abc" in repr(value)  # the stored value is left whole


def test_a_process_frame_that_never_closes_is_hidden_to_the_end_of_its_text():
    assert redaction.hide_text('a;process 5:"python -c tok-abc') == f'a;process 5:"{HIDDEN}"'


def test_hide_walks_a_tree_deeper_than_the_recursion_limit():
    root = node = {"name": "root", "value": 1, "children": []}
    for _ in range(5000):
        child = {"name": 'process 1:"tok-abc"', "value": 1, "children": []}
        node["children"].append(child)
        node = child
    hidden = redaction.hide(root)
    assert "tok-abc" not in str(hidden["children"][0]["children"][0]["name"])
