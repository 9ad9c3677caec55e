"""Proofs of `BurstSplitter`: each command is covered exactly by its bursts, in order, each
as long as AXI allows and no longer (within `max_burst_beats`, never across 4 KB), and
the burst stream keeps the stream rules.

One command is followed, the `n`-th well-formed one for an `n` the solver picks: the
bursts of command `n` are those after the `n`-th burst marked `last`, so bursts of
two commands cannot interleave or come out of order without breaking its checks.
"""

import pytest
from amaranth.asserts import AnyConst
from amaranth.hdl import Assert, Assume, Cover, Elaboratable, Module, Mux, ResetSignal, Signal
from amaranth.lib import wiring

from attenio.hdl import bursts
from attenio.hdl.axi import AXI_4KB
from attenio.hdl.bursts import BurstSplitter

from .sby import formal, inputs_of, prove
from .streams import keeps_stream_rules, obeys_stream_rules

pytestmark = formal

#: (data_width, max_burst_beats, addr_width) of the proofs: a 64-beat page cut in bursts
#: of 3, where pages and caps alternate within a few cycles, and the AXI defaults on a
#: 32-bit bus (256-beat bursts in a 1024-beat page)
SMALL = dict(data_width=512, max_burst_beats=3, addr_width=13)
DEFAULT = dict(data_width=32, max_burst_beats=None, addr_width=14)
DEPTH = 8                   # a command's first burst leaves 3 cycles after it is taken
DEEP = 11                   # the slow run's depth


class DroppingSplitter(wiring.Component):
    """A broken splitter: it swallows a one-beat burst that does not end its command."""

    def __init__(self, **params):
        self.inner = BurstSplitter(**params)
        super().__init__(self.inner.signature)

    @property
    def max_burst_beats(self):
        return self.inner.max_burst_beats

    @property
    def data_width(self):
        return self.inner.data_width

    def elaborate(self, platform):
        m = Module()
        m.submodules.inner = inner = self.inner
        wiring.connect(m, wiring.flipped(self.cmd), inner.cmd)
        out = inner.burst
        drop = ~out.payload.last & (out.payload.len == 0)
        m.d.comb += [self.burst.payload.eq(out.payload),
                     self.burst.valid.eq(out.valid & ~drop),
                     out.ready.eq(self.burst.ready | drop),
                     self.malformed.eq(inner.malformed), self.busy.eq(inner.busy)]
        return m


class SplitterSpec(Elaboratable):
    def __init__(self, dut, *, depth):
        self.dut = dut
        self.depth = depth      # the proof's depth: no count wraps within it

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        cmd, burst = dut.cmd, dut.burst
        bpb = dut.data_width // 8
        shift = bpb.bit_length() - 1
        mbb = dut.max_burst_beats
        page = AXI_4KB // bpb
        m.d.comb += Assume(~ResetSignal())
        obeys_stream_rules(m, cmd, name="cmd")
        keeps_stream_rules(m, burst, name="burst")

        # A command is malformed, pulses `malformed` and makes no burst, exactly when
        # its address or length is not a multiple of the bus width or its length is 0.
        took = cmd.valid & cmd.ready
        bad = (cmd.payload.addr[:shift] != 0) | (cmd.payload.length[:shift] != 0) | \
              (cmd.payload.length == 0)
        m.d.comb += Assert(dut.malformed == (took & bad), "malformed iff taken and bad")

        # Every burst: within max_burst_beats and its 4 KB page.
        gave = burst.valid & burst.ready
        beats = burst.payload.len + 1
        in_page = burst.payload.addr[shift:12]
        with m.If(burst.valid):
            m.d.comb += [Assert(beats <= mbb, "a burst within max_burst_beats"),
                         Assert(in_page + beats <= page, "a burst within its 4 KB page"),
                         Assert(burst.payload.addr[:shift] == 0, "a burst on a beat")]

        # The followed command: its bursts continue one another from its address and
        # each takes the most it may; the one marked last ends it exactly.
        n = AnyConst(range(self.depth))
        taken = Signal(range(self.depth + 1))       # well-formed commands taken
        ended = Signal(range(self.depth + 1))       # bursts marked last given
        cursor = Signal(len(cmd.payload.addr))      # the followed command's next address
        left = Signal(len(cmd.payload.length) + 1)  # and its beats not yet in a burst
        done = Signal()
        with m.If(took & ~bad):
            m.d.sync += taken.eq(taken + 1)
            with m.If(taken == n):
                m.d.sync += [cursor.eq(cmd.payload.addr), left.eq(cmd.payload.length >> shift)]
        with m.If(gave & burst.payload.last):
            m.d.sync += ended.eq(ended + 1)
        m.d.comb += Assert(ended <= taken, "no burst before its command")
        with m.If(burst.valid & (ended == n)):
            to_page = page - burst.payload.addr[shift:12]
            most = Mux(left < mbb, left, mbb)
            most = Mux(to_page < most, to_page, most)
            m.d.comb += [Assert(taken > n, "the followed command's bursts after it"),
                         Assert(burst.payload.addr == cursor, "each burst where the last ended"),
                         Assert(beats == most, "each burst the longest allowed"),
                         Assert(burst.payload.last == (beats == left), "last on the last burst")]
        with m.If(gave & (ended == n)):
            m.d.sync += [cursor.eq(cursor + (beats << shift)), left.eq(left - beats)]
            with m.If(burst.payload.last):
                m.d.sync += done.eq(1)
        # reachable: the followed command ends after a page boundary, behind another
        crossed = Signal()
        with m.If(gave & (ended == n) & (in_page + beats == page) & ~burst.payload.last):
            m.d.sync += crossed.eq(1)
        m.d.comb += Cover(done & crossed & (n == 1))
        return m


def check(dut, name, mode, depth=DEPTH):
    spec = SplitterSpec(dut, depth=depth)
    return prove(spec, name, inputs=inputs_of(dut), mode=mode, depth=depth)


def test_every_command_is_covered_exactly_by_its_bursts_in_order():
    result = check(BurstSplitter(**SMALL), "bursts_512", "bmc")
    assert result.passed, result.explain()
    result = check(BurstSplitter(**SMALL), "bursts_512_cover", "cover")
    assert result.passed, result.explain()


@pytest.mark.slow
def test_every_command_is_covered_exactly_at_the_axi_limits_and_deeper():
    result = check(BurstSplitter(**DEFAULT), "bursts_32", "bmc")
    assert result.passed, result.explain()
    result = check(BurstSplitter(**SMALL), "bursts_512_deep", "bmc", depth=DEEP)
    assert result.passed, result.explain()


def test_a_splitter_that_drops_a_burst_fails_the_proof():
    result = check(DroppingSplitter(**SMALL), "bursts_dropping", "bmc")
    assert result.status == "FAIL" and result.failed, result.explain()


def test_a_splitter_with_8_kb_pages_fails_the_proof(monkeypatch):
    # the same hardware built with the page constant doubled: bursts run across 4 KB
    monkeypatch.setattr(bursts, "AXI_4KB", 2 * AXI_4KB)
    result = check(BurstSplitter(**SMALL), "bursts_8kb_pages", "bmc")
    assert result.status == "FAIL" and result.failed, result.explain()
