"""Proofs of `StreamSlice`: the stream rules, equivalence with a two-entry model FIFO, and
the ordering contract (two values taken one after the other leave one after the other),
as Amaranth proves its own FIFOs (its tests/test_lib_fifo.py)."""

import pytest
from amaranth.asserts import AnyConst, Initial
from amaranth.hdl import Assert, Assume, Cover, Elaboratable, Module, ResetSignal, Signal
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from attenio.hdl.stream_slice import StreamSlice

from .sby import formal, inputs_of, prove
from .streams import keeps_stream_rules, obeys_stream_rules

pytestmark = formal

WIDTH = 4                   # payload bits: enough to tell values apart, few for the solver
ENTRIES = StreamSlice.lead + 1  # the slice holds one element in flight and one waiting
RULES_DEPTH = 20            # cycles of the bounded proofs
ORDER_DEPTH = 12


class DroppingSlice(wiring.Component):
    """A broken slice: it says ready while full, so a beat offered then is lost."""

    def __init__(self, shape):
        self._shape = shape
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = StreamSlice(self._shape)
        wiring.connect(m, wiring.flipped(self.o), inner.o)
        m.d.comb += [inner.i.payload.eq(self.i.payload), inner.i.valid.eq(self.i.valid),
                     self.i.ready.eq(1)]
        return m


class WobblingSlice(wiring.Component):
    """A broken slice: its payload flips a bit in every second cycle it waits."""

    def __init__(self, shape):
        self._shape = shape
        super().__init__({"i": In(stream.Signature(shape)), "o": Out(stream.Signature(shape))})

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = StreamSlice(self._shape)
        wiring.connect(m, wiring.flipped(self.i), inner.i)
        toggle = Signal()
        m.d.sync += toggle.eq(inner.o.valid & ~self.o.ready & ~toggle)
        m.d.comb += [self.o.valid.eq(inner.o.valid), inner.o.ready.eq(self.o.ready),
                     self.o.payload.eq(inner.o.payload ^ toggle)]
        return m


class ModelFIFO(Elaboratable):
    """A FIFO of `depth` registers, emptied by reset: what the slice must be."""

    def __init__(self, width, depth):
        self.w_data, self.w_en, self.r_en = Signal(width), Signal(), Signal()
        self.w_rdy, self.r_rdy, self.r_data = Signal(), Signal(), Signal(width)
        self.level = Signal(range(depth + 1))
        self._depth = depth
        self._entries = [Signal(width, name=f"entry{k}") for k in range(depth)]

    def elaborate(self, platform):
        m = Module()
        write = self.w_en & self.w_rdy
        read = self.r_en & self.r_rdy
        m.d.comb += [self.w_rdy.eq(self.level < self._depth), self.r_rdy.eq(self.level > 0),
                     self.r_data.eq(self._entries[0])]
        m.d.sync += self.level.eq(self.level + write - read)
        # entries[0] is the head; a read shifts, a write lands after what stays
        for k, entry in enumerate(self._entries):
            after = self._entries[k + 1] if k + 1 < self._depth else entry
            kept = self.level - read
            with m.If(write & (kept == k)):
                m.d.sync += entry.eq(self.w_data)
            with m.Elif(read):
                m.d.sync += entry.eq(after)
        return m


class SliceRules(Elaboratable):
    """The slice keeps the stream rules on `o` and is the model FIFO, cycle for cycle:
    the same `i.ready`, `o.valid`, and `o.payload` while valid. Reset is free: the
    model empties on it, so an element offered in reset never comes out."""

    def __init__(self, dut):
        self.dut = dut

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        m.submodules.model = model = ModelFIFO(WIDTH, ENTRIES)
        obeys_stream_rules(m, dut.i, name="i")
        keeps_stream_rules(m, dut.o, name="o")
        m.d.comb += [model.w_data.eq(dut.i.payload), model.w_en.eq(dut.i.valid),
                     model.r_en.eq(dut.o.ready)]
        m.d.comb += [Assert(dut.i.ready == model.w_rdy, "i.ready is the model's"),
                     Assert(dut.o.valid == model.r_rdy, "o.valid is the model's")]
        with m.If(dut.o.valid):
            m.d.comb += Assert(dut.o.payload == model.r_data, "o.payload is the model's head")
        m.d.comb += [Cover(model.level == ENTRIES), Cover((model.level == ENTRIES) & dut.o.ready
                                                        & dut.i.valid)]
        return m


class SliceOrder(Elaboratable):
    """The ordering contract under any handshakes: the `n`-th and `n`+1-th elements taken
    (any `n`, any values) are the `n`-th and `n`+1-th given out, so none is dropped,
    duplicated or reordered. No reset: its loss of elements is `SliceRules`' subject."""

    def __init__(self, dut, *, depth):
        self.dut = dut
        self.depth = depth      # the proof's depth: no count wraps within it

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        m.d.comb += Assume(~ResetSignal())
        obeys_stream_rules(m, dut.i, name="i")
        n = AnyConst(range(self.depth))
        taken, given = Signal(range(self.depth + 2)), Signal(range(self.depth + 2))
        first, second = Signal(WIDTH), Signal(WIDTH)
        with m.If(dut.i.valid & dut.i.ready):
            m.d.sync += taken.eq(taken + 1)
            with m.If(taken == n):
                m.d.sync += first.eq(dut.i.payload)
            with m.If(taken == n + 1):
                m.d.sync += second.eq(dut.i.payload)
        with m.If(dut.o.valid & dut.o.ready):
            m.d.sync += given.eq(given + 1)
            with m.If(given == n):
                m.d.comb += Assert(dut.o.payload == first, "the n-th out is the n-th in")
            with m.If(given == n + 1):
                m.d.comb += Assert(dut.o.payload == second, "the n+1-th out is the n+1-th in")
                m.d.comb += Cover(n == 1)
        m.d.comb += Assert(given <= taken, "nothing out that was not taken")
        with m.If(Initial()):
            m.d.comb += Assume((taken == 0) & (given == 0))
        return m


def check(spec, name, mode, depth):
    return prove(spec, name, inputs=inputs_of(spec.dut), mode=mode, depth=depth)


def test_the_slice_keeps_the_stream_rules_and_is_a_two_entry_fifo():
    result = check(SliceRules(StreamSlice(WIDTH)), "slice_rules", "bmc", RULES_DEPTH)
    assert result.passed, result.explain()


def test_the_slice_keeps_the_two_value_order_under_any_handshakes():
    result = check(SliceOrder(StreamSlice(WIDTH), depth=ORDER_DEPTH), "slice_order", "bmc",
                   ORDER_DEPTH)
    assert result.passed, result.explain()


@pytest.mark.slow
def test_the_slice_keeps_the_two_value_order_deeper():
    depth = 2 * ORDER_DEPTH
    result = check(SliceOrder(StreamSlice(WIDTH), depth=depth), "slice_order_deep", "bmc", depth)
    assert result.passed, result.explain()


def test_the_slice_proofs_reach_a_full_slice_and_the_second_value():
    for spec, name, depth in [(SliceRules(StreamSlice(WIDTH)), "slice_rules_cover", RULES_DEPTH),
                              (SliceOrder(StreamSlice(WIDTH), depth=ORDER_DEPTH),
                               "slice_order_cover", ORDER_DEPTH)]:
        result = check(spec, name, "cover", depth)
        assert result.passed, result.explain()


def test_a_slice_that_drops_a_beat_fails_both_proofs():
    for spec, name, depth in [(SliceRules(DroppingSlice(WIDTH)), "slice_rules_dropping",
                               RULES_DEPTH),
                              (SliceOrder(DroppingSlice(WIDTH), depth=ORDER_DEPTH),
                               "slice_order_dropping", ORDER_DEPTH)]:
        result = check(spec, name, "bmc", depth)
        assert result.status == "FAIL" and result.failed, result.explain()
        assert result.trace is not None and result.trace.exists()


@pytest.mark.slow
def test_a_slice_whose_payload_wobbles_while_stalled_fails_the_rules():
    result = check(SliceRules(WobblingSlice(WIDTH)), "slice_rules_wobbling", "bmc", RULES_DEPTH)
    assert result.status == "FAIL" and result.failed, result.explain()
