"""Emptying the test database between transactional tests with DELETE, not TRUNCATE.

A test that runs against committed data (a live server, a Celery worker, another
process) is followed by Django's `flush`, which on PostgreSQL is one TRUNCATE of all 35
tables. TRUNCATE makes every table and index a new file and commits them to disk: about
0.3 s a test on this machine, and most of a trivial transactional test's cost, where
DELETE of the few rows a test made takes milliseconds (docs/development.md, "Why the
suite takes the time it does"). The meaning is the same: every table empty, sequences
left as they are (TRUNCATE without RESTART IDENTITY keeps them too). Foreign keys are
created DEFERRABLE INITIALLY DEFERRED, and flush runs in one transaction, so the order
of the deletes does not matter. A flush that resets sequences or cascades keeps
Django's own statement.

Loaded by tests/conftest.py (`pytest_plugins`).
"""

from django.db.backends.postgresql.operations import DatabaseOperations

_truncate = DatabaseOperations.sql_flush


def _delete(self, style, tables, *, reset_sequences=False, allow_cascade=False):
    if reset_sequences or allow_cascade:
        return _truncate(
            self, style, tables, reset_sequences=reset_sequences, allow_cascade=allow_cascade
        )
    return [
        f"{style.SQL_KEYWORD('DELETE FROM')} {style.SQL_FIELD(self.quote_name(table))};"
        for table in tables
    ]


DatabaseOperations.sql_flush = _delete
