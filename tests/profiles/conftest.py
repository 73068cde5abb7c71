"""Fixtures: a rank of a run and a baseline capture of it (the watch tests), and two
real sshd "hosts" on loopback (the whole-job tests)."""

import pytest

from tests import factories


@pytest.fixture
def rank():
    """Process rank-0 of a run."""
    return factories.process(factories.run(), "rank-0")


@pytest.fixture
def baseline(rank):
    """A done capture of `rank` 60 minutes ago: 5,000 samples, host sync 3.1%."""
    return factories.capture(rank, factories.state_stats(5000, host_sync=3.1), minutes_ago=60)


@pytest.fixture
def two_hosts(tmp_path):
    """Two real sshd "hosts" on loopback, node-a and node-b, and the ssh_config naming them."""
    from tests.support.requirements import require_sshd
    from tests.support.sshd import SSHServer

    require_sshd()
    servers = [SSHServer().start(), SSHServer().start()]
    config, known = tmp_path / "ssh_config", tmp_path / "known_hosts"
    known.write_text("".join(s.known_hosts.read_text() for s in servers))
    config.write_text(
        "".join(
            f"Host node-{name}\n  HostName 127.0.0.1\n  Port {s.port}\n  User root\n"
            f"  IdentityFile {s.client_key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {known}\n"
            "  StrictHostKeyChecking yes\n  LogLevel ERROR\n"
            for name, s in zip("ab", servers, strict=True)
        )
    )
    yield servers, config
    for server in servers:
        server.cleanup()
