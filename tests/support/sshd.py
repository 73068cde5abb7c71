"""A real OpenSSH sshd on 127.0.0.1 for tests of the remote seam.

It runs as the current user (root here) from a private temp dir: its own host key,
client key, authorized_keys, sshd_config, known_hosts and an ssh client config with
a Host alias, so no test touches ~/.ssh.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support import procs

SSHD = Path("/usr/sbin/sshd")
ALIAS = "flamedeck-test"

# The test server keeps OpenSSH's defaults but two, which made each connection cost six
# times the CPU it does now (`python bench/suite/bench_ssh.py`, docs/figures.md):
# - Key exchange: OpenSSH 9's default, sntrup761x25519, took 0.07 CPU-s of the client
#   a connection; curve25519 takes 0.01. The product's client is unchanged: it offers
#   what it always offers, and this server picks from these.
# - The session's shell: a bash that sshd starts without SHLVL (it becomes level 1)
#   reads ~/.bashrc, Debian builds it so, and this machine's root runs `pyenv init`
#   there: 0.13 CPU-s a connection. This server sets SHLVL=1, so the shell is level 2,
#   counts itself nested and reads none: a host whose user has no ~/.bashrc, as real
#   as one whose user has.
# A connection took 0.25 CPU-s (client and sshd) and 0.37 s before, 0.04 and 0.17 after.
# `tests/runs/` at -n 4, back to back twice: 84-85 busy CPU-s of the machine and 47.6 s
# before, 69-72 CPU-s and 40.6-41.9 s after.
KEX = "curve25519-sha256,curve25519-sha256@libssh.org"
LEAN = (f"KexAlgorithms {KEX}", "SetEnv SHLVL=1")  # the two lines, as sshd_config has them


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on right now."""
    return free_ports(1)[0]


def free_ports(count: int) -> list[int]:
    """`count` different TCP ports on 127.0.0.1 nobody listens on right now: the
    sockets are held open together while picked, so no port comes twice (free_port()
    called twice in a row may name the same one)."""
    sockets = [socket.socket() for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()


def _keygen(path: Path) -> None:
    path.unlink(missing_ok=True)
    Path(f"{path}.pub").unlink(missing_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "flamedeck-test", "-f", str(path)],
        check=True,
    )


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


class SSHServer:
    """Start, stop, restart a loopback sshd; regenerate its host key on demand."""

    def __init__(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix="flamedeck-sshd-"))
        self.port = free_port()
        self.host_key = self.dir / "host_ed25519"
        self.client_key = self.dir / "client_ed25519"
        self.known_hosts = self.dir / "known_hosts"
        self.config = self.dir / "ssh_config"
        self.pid_file = self.dir / "sshd.pid"
        self.log = self.dir / "sshd.log"
        self.process: subprocess.Popen | None = None
        _keygen(self.host_key)
        _keygen(self.client_key)
        (self.dir / "authorized_keys").write_text(Path(f"{self.client_key}.pub").read_text())
        self._write_sshd_config()
        self.write_known_hosts()
        self.write_client_config(self.config)

    def _write_sshd_config(self) -> None:
        (self.dir / "sshd_config").write_text(
            f"Port {self.port}\nListenAddress 127.0.0.1\nHostKey {self.host_key}\n"
            f"AuthorizedKeysFile {self.dir / 'authorized_keys'}\nPasswordAuthentication no\n"
            "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\n"
            f"StrictModes no\nUsePAM no\nPidFile {self.pid_file}\nLogLevel VERBOSE\n"
            + "".join(f"{line}\n" for line in LEAN)
        )

    def write_known_hosts(self, path: Path | None = None) -> Path:
        """Record the server's current host key in a known_hosts file."""
        key = Path(f"{self.host_key}.pub").read_text().split()
        path = path or self.known_hosts
        path.write_text(f"[127.0.0.1]:{self.port} {key[0]} {key[1]}\n")
        return path

    def write_client_config(
        self, path: Path, identity: Path | None = None, known_hosts: Path | None = None
    ) -> Path:
        """An ssh client config with Host alias ALIAS (and 127.0.0.1) for this server."""
        path.write_text(
            f"Host {ALIAS} 127.0.0.1\n  HostName 127.0.0.1\n  Port {self.port}\n  User root\n"
            f"  IdentityFile {identity or self.client_key}\n  IdentitiesOnly yes\n"
            f"  UserKnownHostsFile {known_hosts or self.known_hosts}\n"
            "  StrictHostKeyChecking yes\n  LogLevel ERROR\n"
        )
        return path

    def start(self) -> SSHServer:
        """Start sshd in the foreground (-D) as our child and wait until it listens.

        Owning the process means stop() never depends on the pid file, which a
        daemonising sshd writes only after it starts listening.
        """
        Path("/run/sshd").mkdir(parents=True, exist_ok=True)
        config = str(self.dir / "sshd_config")
        self.process = subprocess.Popen([str(SSHD), "-D", "-f", config, "-E", str(self.log)])
        deadline = time.monotonic() + 10
        while not _listening(self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"sshd did not listen on {self.port}: {self.log.read_text()}")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        """Stop the listening sshd (sessions already open finish on their own)."""
        if self.process is None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.process = None
        deadline = time.monotonic() + 10
        while _listening(self.port) and time.monotonic() < deadline:
            time.sleep(0.05)

    def crash(self) -> None:
        """The host goes down: SIGKILL the listener and every session it started, so
        established connections drop as they would when a machine dies."""
        if self.process is None:
            return
        for pid in [*procs.descendants(self.process.pid), self.process.pid]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.process.wait()
        self.process = None

    def restart(self) -> SSHServer:
        """Stop and start again on the same port."""
        self.stop()
        return self.start()

    def regenerate_host_key(self) -> None:
        """Give the server a new host key (known_hosts keeps the old one) and restart."""
        _keygen(self.host_key)
        self.restart()

    def cleanup(self) -> None:
        """Stop the server and remove its temp dir."""
        self.stop()
        shutil.rmtree(self.dir, ignore_errors=True)


def cluster_config(servers: list[SSHServer], directory: Path) -> Path:
    """One ssh client config with Host aliases node-0, node-1, ... for `servers`."""
    known = directory / "known_hosts"
    known.write_text("".join(s.known_hosts.read_text() for s in servers))
    config = directory / "ssh_config"
    config.write_text(
        "".join(
            f"Host node-{index}\n  HostName 127.0.0.1\n  Port {s.port}\n  User root\n"
            f"  IdentityFile {s.client_key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n"
            "  StrictHostKeyChecking yes\n  LogLevel ERROR\n"
            for index, s in enumerate(servers)
        )
    )
    return config
