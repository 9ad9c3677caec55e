"""One seeded random generator per test, its seed printed so a failure can be replayed."""

import logging
import random

import numpy as np

__all__ = ["SeededRandom", "seeded"]


class SeededRandom(random.Random):
    """`random.Random` that remembers its seed (`key`) and can derive a NumPy twin."""

    def __init__(self, key):
        super().__init__(key)
        self.key = key

    def numpy(self):
        """A NumPy generator seeded from the same key (this generator's stream is untouched)."""
        return np.random.default_rng(random.Random(self.key).getrandbits(64))


def seeded(bench, test, seed, *tags):
    """The generator of `test` in `bench`: seeded by `seed`, the test's name and `tags`
    (the parameters that set the bench apart), logged to cocotb and printed to stdout."""
    key = ":".join(str(part) for part in (seed, test, *tags))
    logging.getLogger("cocotb").info("%s %s: seed %r", bench, test, key)
    print(f"{bench} {test}: seed {key!r}", flush=True)
    return SeededRandom(key)
