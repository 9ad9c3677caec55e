"""`DownCounter` against a plain model: its registered `last` is `count == 1` on every cycle."""

import gc
import warnings

import numpy as np
import pytest
from amaranth.hdl import UnusedElaboratable

from amaranth_sim import run_clocked
from attenio.hdl.counter import DownCounter


@pytest.mark.parametrize("init_last", [False, True], ids=["own", "given"])
def test_last_is_count_equal_one_under_random_loads_and_steps(init_last, seed=20261203):
    """`init_last=True`: the bench drives the port with ``init == 1``, as a user must."""
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    dut = DownCounter(6, init_last=init_last)

    async def tb(ctx):
        count = 0       # the model; the reset value
        for _ in range(600):
            assert ctx.get(dut.count) == count
            assert ctx.get(dut.last) == (count == 1)
            load, step = bool(rng.random() < 0.15), bool(rng.random() < 0.7)
            init = int(rng.integers(0, 5)) if rng.random() < 0.5 else int(rng.integers(0, 64))
            ctx.set(dut.load, load)
            ctx.set(dut.step, step)
            ctx.set(dut.init, init)
            if init_last:
                ctx.set(dut.init_last, init == 1)
            await ctx.tick()
            if load:            # load wins over step
                count = init
            elif step:
                count = (count - 1) % 64

    run_clocked(dut, tb, period=1e-6)


def test_given_last_is_what_last_loads():
    """With `init_last`, the port decides `last` on a load, not a comparison of `init`."""
    dut = DownCounter(6, init_last=True)

    async def tb(ctx):
        ctx.set(dut.load, 1)
        ctx.set(dut.init, 5)
        ctx.set(dut.init_last, 1)
        await ctx.tick()
        assert ctx.get(dut.count) == 5 and ctx.get(dut.last) == 1
        ctx.set(dut.load, 0)
        ctx.set(dut.step, 1)
        await ctx.tick()
        assert ctx.get(dut.count) == 4 and ctx.get(dut.last) == 0

    run_clocked(dut, tb, period=1e-6)


def test_width_must_be_positive():
    # the half-built object is never elaborated; keep Amaranth's warning about it here
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UnusedElaboratable)
        with pytest.raises(ValueError, match="width") as info:
            DownCounter(0)
        del info
        gc.collect()
