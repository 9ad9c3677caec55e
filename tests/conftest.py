"""Shared fixtures: a seeded RNG whose seed is printed, so any failure can be replayed."""

import os

import numpy as np
import pytest


@pytest.fixture
def seed(request):
    value = int(os.environ.get("ATTENIO_SEED", "0")) or (abs(hash(request.node.nodeid)) % 2**31)
    print(f"seed = {value} (replay with ATTENIO_SEED={value})")
    return value


@pytest.fixture
def rng(seed):
    return np.random.default_rng(seed)
