"""The one place that talks to the Celery broker: send a task message, count the
messages waiting in a queue. A broker that cannot be reached becomes one named
error, `QueueUnavailable`, with a one-line reason (never a 500)."""

from typing import Any

from celery import current_app
from kombu.exceptions import OperationalError

# kombu's "cannot connect / connection lost" errors, whichever transport is in use.
BROKER_ERRORS = (OperationalError, ConnectionError, OSError, TimeoutError)


class QueueUnavailable(Exception):
    """The broker did not take or answer a message; `str()` is the one-line reason."""


def _where() -> str:
    try:
        conn = current_app.connection_for_write()
        # Scheme, host and port only: never a password from the URL.
        return f"{conn.transport_cls}://{conn.hostname or ''}:{conn.port or ''}"
    except Exception:  # noqa: BLE001 — only for the message
        return "the configured broker"


def _unavailable(exc: BaseException) -> QueueUnavailable:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return QueueUnavailable(
        f"queue unavailable: the broker at {_where()} cannot be reached ({text}); "
        "check that Redis runs and REDIS_URL points at it"
    )


def send(task: Any, *, args: list, **options: Any) -> None:
    """`task.apply_async(args=args, **options)`, or QueueUnavailable."""
    try:
        task.apply_async(args=args, **options)
    except BROKER_ERRORS as exc:
        raise _unavailable(exc) from exc


def waiting(queue: str) -> int:
    """How many messages wait in `queue` (0 when it does not exist), or QueueUnavailable."""
    try:
        with current_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1)
            try:
                return conn.default_channel.queue_declare(queue=queue, passive=True)[1]
            except conn.channel_errors:
                return 0
    except BROKER_ERRORS as exc:
        raise _unavailable(exc) from exc
