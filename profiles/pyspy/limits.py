"""What one analysis holds at most, so a crafted file costs bounded memory and time.

A stack line longer than MAX_LINE_CHARS, a frame longer than MAX_FRAME_CHARS or a
stack deeper than MAX_STACK_DEPTH frames counts as malformed (`skipped_lines`), and a
line is never held whole to find that out: readers take at most MAX_LINE_CHARS + 1
bytes of it and drop the rest as it streams. A JSON value (one speedscope sample, a
frame, an unknown member) longer than MAX_JSON_VALUE_CHARS refuses the file. A line
of py-spy's log longer than MAX_LOG_LINE_CHARS is not py-spy's and is ignored.

Real py-spy output is far inside these: the longest frame of the shared corpus is
about 450 characters and its deepest stack 222 frames.
"""

MAX_LINE_CHARS = 1 << 20
MAX_FRAME_CHARS = 16 * 1024
MAX_STACK_DEPTH = 8192
MAX_JSON_VALUE_CHARS = 16 << 20
MAX_LOG_LINE_CHARS = 4096
