"""The embedded broker: kombu's filesystem transport, with every file written atomically.

kombu's own transport creates a message file and then writes into it; a consumer
that lists the folder in between claims an empty or half-written file, fails to
decode it and stops its worker with "Unrecoverable error: JSONDecodeError" (kombu
#1551: several consumers on one folder, as `make run` has). Its exchange tables are
truncated and rewritten in place the same way. Here:
- a message is written under a hidden temporary name no consumer reads, then renamed
  into the queue (a rename within one filesystem is atomic: whole or absent);
- a consumer claims a message by renaming it out of the queue (exactly one wins),
  then reads it; a file that still cannot be decoded (left by an older transport) is
  set aside as `*.bad` with a warning, never a crash;
- an exchange table is rewritten to a temporary file and renamed over the old one,
  under a lock file, so readers see the old table or the new one.
Production brokers (Redis, RabbitMQ) are unaffected: this is `make run`'s default.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import uuid
from contextlib import contextmanager
from queue import Empty
from time import monotonic

from kombu.transport import filesystem, virtual
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

log = logging.getLogger(__name__)


def write_atomically(path: str, data: bytes) -> None:
    """`data` at `path`, appearing whole: written beside it, then renamed over it."""
    folder, name = os.path.split(path)
    temp = os.path.join(folder, f".{name}.{uuid.uuid4().hex}.tmp")
    try:
        with open(temp, "wb") as fh:
            fh.write(data)
        os.replace(temp, path)
    except BaseException:
        if os.path.exists(temp):
            os.unlink(temp)
        raise


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        name = f"{int(round(monotonic() * 1000))}_{uuid.uuid4()}.{queue}.msg"
        path = os.path.join(self.data_folder_out, name)
        try:
            write_atomically(path, str_to_bytes(dumps(payload)))
        except OSError as exc:
            raise filesystem.ChannelError(f"Cannot add file {path!r} to directory") from exc

    def _get(self, queue):
        wanted = f"{queue}.msg"
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.partition(".")[2] != wanted:
                continue  # another queue's, or a temporary file being written
            claimed = os.path.join(self.data_folder_in, f".{name}.{uuid.uuid4().hex}.claimed")
            try:
                os.rename(os.path.join(self.data_folder_in, name), claimed)
            except FileNotFoundError:
                continue  # another consumer took it
            payload = self._read_claimed(claimed, name)
            if payload is not None:
                return payload
        raise Empty()

    def _read_claimed(self, claimed: str, name: str):
        with open(claimed, "rb") as fh:
            data = fh.read()
        try:
            payload = loads(bytes_to_str(data))
        except (ValueError, UnicodeDecodeError):
            os.replace(claimed, os.path.join(self.data_folder_in, f".{name}.bad"))
            log.warning("broker message %s is not JSON; set aside as .%s.bad", name, name)
            return None
        if self.store_processed:
            os.replace(claimed, os.path.join(self.processed_folder, name))
        else:
            os.unlink(claimed)
        return payload

    @contextmanager
    def _table_lock(self):
        self.control_folder.mkdir(exist_ok=True)
        with open(self.control_folder / ".exchanges.lock", "a") as lock:
            fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock.fileno(), fcntl.LOCK_UN)

    def get_table(self, exchange):
        path = self._exchange_file(exchange)
        try:
            table = json.loads(path.read_text())
        except FileNotFoundError:
            return []
        except OSError as exc:
            raise filesystem.ChannelError(f"Cannot open {path}") from exc
        return [filesystem.exchange_queue_t(*row) for row in table]

    def _edit_table(self, exchange, edit) -> None:
        path = self._exchange_file(exchange)
        with self._table_lock():
            queues = self.get_table(exchange)
            changed = edit(queues)
            if changed:
                write_atomically(str(path), str_to_bytes(dumps(queues)))

    def _queue_bind(self, exchange, routing_key, pattern, queue):
        row = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")

        def add(queues: list) -> bool:
            if row in queues:
                return False
            queues.insert(0, row)
            return True

        self._edit_table(exchange, add)

    def _delete(self, queue, exchange, routing_key, pattern, *args, **kwargs):
        # The virtual channel's own bookkeeping, then the table without the binding.
        virtual.Channel._delete(self, queue, exchange, routing_key, pattern, *args, **kwargs)
        row = filesystem.exchange_queue_t(routing_key or "", pattern or "", queue or "")

        def remove(queues: list) -> bool:
            if row not in queues:
                return False
            queues.remove(row)
            return True

        self._edit_table(exchange, remove)


class Transport(filesystem.Transport):
    Channel = Channel
