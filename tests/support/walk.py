"""A test client that tells whether the code behind its last request read the query string.

The URL walks (tests/test_error_corpus.py, tests/test_redaction_walk.py) send every
route many query strings. A page whose code never reads its query string answers
each of them as it answered the first: it cannot tell them apart. Every way Django,
DRF and the apps read a query (`request.GET`, `query_params`, `get_full_path()`,
`build_absolute_uri()`) reads the WSGI environ's QUERY_STRING, so that read is what
is recorded. Of the 116 paths the redaction walk visits, 49 read it (every DRF
endpoint does, for `?format=`); the walks send the other 67 one query string each.
"""

from __future__ import annotations

from django.test import Client


class _Environ(dict):
    """A request's WSGI environ that records a read of QUERY_STRING."""

    query_read = False

    def __getitem__(self, key):
        if key == "QUERY_STRING":
            self.query_read = True
        return super().__getitem__(key)

    def get(self, key, default=None):
        if key == "QUERY_STRING":
            self.query_read = True
        return super().get(key, default)


class WalkClient(Client):
    """`Client` whose `query_read` says whether the last request's code read its query."""

    _last: _Environ | None = None

    def _base_environ(self, **request):
        self._last = _Environ(super()._base_environ(**request))
        return self._last

    @property
    def query_read(self) -> bool:
        return self._last is None or self._last.query_read
