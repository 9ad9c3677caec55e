"""Shared fixtures: a seeded RNG whose seed is printed, so any failure can be replayed.

Each test's default seed is derived from its node id, so runs repeat exactly;
ATTENIO_SEED=N replays or varies them.
"""

import os
import zlib

import numpy as np
import pytest


@pytest.fixture
def seed(request):
    # crc32, not hash(): str hashes change from process to process, so a failure
    # would not come back on the next run without the printed seed
    value = int(os.environ.get("ATTENIO_SEED", "0")) or zlib.crc32(request.node.nodeid.encode())
    print(f"seed = {value} (replay with ATTENIO_SEED={value})")
    return value


@pytest.fixture
def rng(seed):
    return np.random.default_rng(seed)
