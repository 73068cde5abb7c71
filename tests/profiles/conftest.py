"""Fixtures of the watch tests: a rank of a run, and a baseline capture of it."""

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
