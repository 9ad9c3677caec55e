"""Shared fixtures: a seeded RNG whose seed is printed, so any failure can be replayed.

Each test's default seed is derived from its node id, so runs repeat exactly;
ATTENIO_SEED=N replays or varies them.

And how `make test` spreads the files over its workers (`--dist loadgroup`): each file on
one worker, as `--dist loadfile` would, so a file's simulator builds are made once; files
marked `xdist_group(name)` share one worker, so builds shared across files (the e2e
designs, tests/e2e_common.py) are made once too.
"""

import os
import zlib

import numpy as np
import pytest


@pytest.fixture
def seed(request):
    # crc32, not hash(): str hashes change from process to process, so a failure
    # would not come back on the next run without the printed seed
    value = (int(os.environ.get("ATTENIO_SEED", "0"))
             or zlib.crc32(_plain_id(request.node.nodeid).encode()))
    print(f"seed = {value} (replay with ATTENIO_SEED={value})")
    return value


@pytest.fixture
def rng(seed):
    return np.random.default_rng(seed)


def _plain_id(nodeid):
    """`nodeid` without the "@group" xdist's loadgroup appends (xdist's own rule), so a
    test's seed is the same on one worker or many."""
    return nodeid.rsplit("@", 1)[0] if nodeid.rfind("@") > nodeid.rfind("]") else nodeid


@pytest.hookimpl(optionalhook=True)       # xdist's hook: unknown when xdist is not loaded
def pytest_xdist_make_scheduler(config, log):
    """With `--dist loadgroup`: a test marked `xdist_group` goes with its group, any other
    with its file (xdist's loadgroup would spread those one test at a time)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadGroupScheduling

    class FileOrGroupScheduling(LoadGroupScheduling):
        def _split_scope(self, nodeid):
            scope = super()._split_scope(nodeid)
            return nodeid.split("::", 1)[0] if scope == nodeid else scope

    return FileOrGroupScheduling(config, log)
