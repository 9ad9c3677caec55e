"""Proof of `DownCounter` by k-induction: `last` is `count == 1` in every reachable state,
whatever the loads and steps (stepping past 0 included), and with ``init_last=True``
whenever the user drives `init_last` as ``init == 1``."""

import pytest
from amaranth.hdl import Assert, Assume, Cover, Elaboratable, Module

from attenio.hdl.counter import DownCounter

from .sby import formal, inputs_of, prove

pytestmark = formal

WIDTH = 8
DEPTH = 2           # k: `last` is one register beside `count`


class CounterSpec(Elaboratable):
    def __init__(self, dut, *, init_last=None):
        self.dut = dut
        self.init_last = init_last      # what the user drives init_last with, if it has one

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        if self.init_last is not None:
            m.d.comb += Assume(dut.init_last == self.init_last(dut.init))
        m.d.comb += Assert(dut.last == (dut.count == 1), "last is count == 1")
        m.d.comb += Cover(dut.last & dut.step & ~dut.load)
        return m


def check(spec, name, mode):
    return prove(spec, name, inputs=inputs_of(spec.dut), mode=mode, depth=DEPTH)


@pytest.mark.parametrize("init_last", [False, pytest.param(True, marks=pytest.mark.slow)],
                         ids=["own_compare", "init_last"])
def test_the_counters_last_is_count_equal_to_one_in_every_reachable_state(init_last):
    driven = (lambda init: init == 1) if init_last else None
    name = f"counter_{'init_last' if init_last else 'own'}"
    result = check(CounterSpec(DownCounter(WIDTH, init_last=init_last), init_last=driven),
                   name, "prove")
    assert result.passed, result.explain()
    result = check(CounterSpec(DownCounter(WIDTH, init_last=init_last), init_last=driven),
                   name + "_cover", "cover")
    assert result.passed, result.explain()


def test_a_counter_given_a_wrong_init_last_fails_the_proof():
    spec = CounterSpec(DownCounter(WIDTH, init_last=True), init_last=lambda init: init == 2)
    result = check(spec, "counter_wrong_init_last", "prove")
    assert result.status == "FAIL" and result.failed, result.explain()
