"""A pull reader over JSON text that arrives in pieces, for documents too big to load whole.

The caller walks the structure (`members`, `items`) and decodes small values with
the standard decoder (`value`); long arrays of small items can be read with a regex
straight off the buffer (`match`). Only the unread rest of the current window is
held, so a 30 MB speedscope file never exists as one string or one object tree.
Errors read like the json module's: `Expecting value: line 1 column 9 (char 8)`.
A value decoded whole (`value`) longer than MAX_JSON_VALUE_CHARS is an error too:
the window never grows past about twice that.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

from ..limits import MAX_JSON_VALUE_CHARS

_WS = re.compile(r"[ \t\n\r]*")


class JsonError(ValueError):
    """Invalid or truncated JSON, with the position in the whole document."""


class SharedInts(dict[str, int]):
    """parse_int for json: one int object per distinct number, not one per occurrence."""

    def __missing__(self, text: str) -> int:
        value = self[text] = int(text)
        return value


class JsonStream:
    def __init__(self, pieces: Iterator[str]) -> None:
        self._pieces = pieces
        self._decoder = json.JSONDecoder(parse_int=SharedInts().__getitem__)
        self.buf, self.pos, self.eof = "", 0, False
        self._base = self._lines = self._line_start = 0  # of buf[0] in the document

    def more(self) -> bool:
        """Drop what has been read and append at least as much as is left (False at the end)."""
        if self.eof:
            return False
        dropped = self.buf[: self.pos]
        newlines = dropped.count("\n")
        if newlines:
            self._lines += newlines
            self._line_start = self._base + dropped.rindex("\n") + 1
        self._base += self.pos
        rest = [self.buf[self.pos :]]
        wanted = len(rest[0])
        for piece in self._pieces:
            rest.append(piece)
            wanted -= len(piece)
            if wanted <= 0:
                break
        else:
            self.eof = True
        self.buf, self.pos = "".join(rest), 0
        return True

    def peek(self) -> str:
        """The next character that is not whitespace ("" at the end), not consumed."""
        while True:
            self.pos = _WS.match(self.buf, self.pos).end()  # type: ignore[union-attr]
            if self.pos < len(self.buf) or not self.more():
                return self.buf[self.pos : self.pos + 1]

    def take(self, char: str, expecting: str) -> None:
        if self.peek() != char:
            raise self.error(expecting)
        self.pos += 1

    def value(self) -> Any:
        """Decode the whole value that starts here (with the standard decoder)."""
        self.peek()
        while True:
            try:
                obj, end = self._decoder.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as exc:
                self._check_length(len(self.buf))
                if self.more():
                    continue
                raise self.error(exc.msg, exc.pos) from None
            if len(self.buf) - end < 3 and self.more():
                continue  # a number may go on in the next piece: `3` + `.5`, `3E` + `+2`
            self._check_length(end)
            self.pos = end
            return obj

    def _check_length(self, end: int) -> None:
        if end - self.pos > MAX_JSON_VALUE_CHARS:
            raise self.error(f"A value longer than {MAX_JSON_VALUE_CHARS} characters")

    def match(self, pattern: re.Pattern[str]) -> re.Match[str] | None:
        """`pattern` at the read position, consumed when it matches; None otherwise.

        A match that ends at the end of the buffer might go on: it is retried once
        the buffer holds more. A pattern must end in a character that ends a token.
        """
        found = pattern.match(self.buf, self.pos)
        if found is None and len(self.buf) - self.pos < 4096 and self.more():
            found = pattern.match(self.buf, self.pos)
        if found is not None:
            self.pos = found.end()
        return found

    def members(self) -> Iterator[str]:
        """Keys of the object that starts here; the caller reads each value."""
        self.take("{", "Expecting value")
        if self.peek() == "}":
            self.pos += 1
            return
        while True:
            if self.peek() != '"':
                raise self.error("Expecting property name enclosed in double quotes")
            key = self.value()
            self.take(":", "Expecting ':' delimiter")
            yield key
            if self.peek() == "}":
                self.pos += 1
                return
            self.take(",", "Expecting ',' delimiter")

    def items(self) -> Iterator[None]:
        """One step per item of the array that starts here; the caller reads each item."""
        self.take("[", "Expecting value")
        if self.peek() == "]":
            self.pos += 1
            return
        while True:
            yield None
            if self.peek() == "]":
                self.pos += 1
                return
            self.take(",", "Expecting ',' delimiter")

    def values(self) -> Iterator[Any]:
        """The items of the array that starts here, decoded a buffer's worth at a time.

        The items up to the array's end (or the buffer's last `},`) are decoded as one
        small array: a cut inside a string or a nested value is invalid JSON there, and
        such a stretch (or a broken one) is read item by item, which names any error.
        """
        self.take("[", "Expecting value")
        if self.peek() == "]":
            self.pos += 1
            return
        wait = 0
        while True:
            batch, ended = (None, False) if wait else self._batch()
            if batch is None:
                wait = wait - 1 if wait else 64
                batch, ended = self._one()
            yield from batch
            if ended:
                return

    def _batch(self) -> tuple[list[Any] | None, bool]:
        buf, pos = self.buf, self.pos
        close = buf.find("]", pos)
        # Items are objects (speedscope frames): a comma after a "}" most likely ends one.
        after_object = buf.rfind("},", pos, len(buf) if close < 0 else close)
        for cut, ended in ((close, True), (after_object + 1 if after_object >= 0 else -1, False)):
            if cut > pos:
                try:
                    items = self._decoder.decode(f"[{buf[pos:cut]}]")
                except json.JSONDecodeError:
                    continue
                self.pos = cut + 1
                return items, ended
        return None, False

    def _one(self) -> tuple[list[Any], bool]:
        item = self.value()
        char = self.peek()
        if char not in ("]", ","):
            raise self.error("Expecting ',' delimiter")
        self.pos += 1
        return [item], char == "]"

    def end(self) -> None:
        """Nothing but whitespace may follow the document."""
        if self.peek():
            raise self.error("Extra data")

    def error(self, msg: str, pos: int | None = None) -> JsonError:
        pos = self.pos if pos is None else pos
        newlines = self.buf.count("\n", 0, pos)
        line_start = self.buf.rfind("\n", 0, pos) + 1 + self._base if newlines else self._line_start
        at = self._base + pos
        return JsonError(
            f"{msg}: line {self._lines + newlines + 1} column {at - line_start + 1} (char {at})"
        )


def text_pieces(text: str, size: int) -> Iterator[str]:
    """Already-decoded text in pieces, so one reader serves files and strings."""
    return (text[i : i + size] for i in range(0, len(text), size))
