"""Bounded proof of `DMAReader`, the AXI4 read master, under any slave that keeps AXI4's
rules: AR held until ready with its request stable, no more bursts in flight than
`max_outstanding`, RREADY (a constant 1) and room in the read FIFO whenever a beat is
offered (the FIFO's reservation holds, so the slave is never stalled and no beat is
lost), an error pulse on exactly the beats answered SLVERR or DECERR, and the `data`
stream keeping the stream rules. Proved at the default FIFO depth and at the smallest
(two beats), where a beat can arrive while the FIFO's output register is empty and has
not yet taken the inner queue's head.

The slave is free within AXI4's rules for one ID, tracked as ZipCPU's faxi_master.v
does: R beats only for bursts whose AR was taken, in order, RLAST on each burst's final
beat, R held until RREADY.
"""

import pytest
from amaranth.hdl import Assert, Assume, Cat, Cover, Elaboratable, Module, Mux, ResetSignal, Signal

from attenio.hdl.dma import DMAReader

from .sby import formal, inputs_of, line_of, prove
from .streams import keeps_stream_rules, obeys_stream_rules

pytestmark = formal

PARAMS = dict(addr_width=12, data_width=32, max_outstanding=2, max_burst_beats=3)
DEPTH = 12          # commands taken, their bursts requested and answered, with stalls
DEEP = 15           # the slow run's depth (20 took minutes)


#: the smallest FIFO, two beats: its inner queue is one entry, full with a burst's first
#: beat in the cycle the second arrives, while the output register takes the first
TIGHT = dict(PARAMS, max_burst_beats=2, fifo_depth=2)


class NoSpare(DMAReader):
    """A broken reader: its FIFO holds exactly the beats the reservation counts, so at two
    beats a burst's second finds the inner queue full while RREADY is up."""

    _spare = 0


class Unreserved(DMAReader):
    """A broken reader: it requests bursts whether or not the FIFO has room or a slot."""

    def _issue(self, m, channel, burst, go):
        return super()._issue(m, channel, burst, 1)


class ReaderSpec(Elaboratable):
    def __init__(self, dut):
        self.dut = dut

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        axi = dut.axi
        slots = dut.max_outstanding
        m.d.comb += Assume(~ResetSignal())
        obeys_stream_rules(m, dut.cmd, name="cmd")
        keeps_stream_rules(m, dut.data, name="data")
        keeps_stream_rules(m, None, name="ar", valid=axi.arvalid, ready=axi.arready,
                           payload=Cat(axi.arid, axi.araddr, axi.arlen, axi.arsize,
                                       axi.arburst, axi.arcache))
        obeys_stream_rules(m, None, name="r", valid=axi.rvalid, ready=axi.rready,
                           payload=Cat(axi.rid, axi.rdata, axi.rresp, axi.rlast))

        # The slave's obligations: the lengths of the bursts taken and not yet answered,
        # in order (one ID, so R answers them in order); `beat` counts into the oldest.
        ar_take = axi.arvalid & axi.arready
        r_take = axi.rvalid & axi.rready
        lens = [Signal(8, name=f"len{k}") for k in range(slots)]
        head = Signal(range(slots))
        tail = Signal(range(slots))
        pending = Signal(range(slots + 2))
        beat = Signal(8)
        done = r_take & axi.rlast
        m.d.sync += pending.eq(pending + ar_take - done)
        m.d.comb += Assert(pending <= slots, "no more bursts in flight than max_outstanding")
        with m.If(ar_take):
            m.d.sync += tail.eq(_next(tail, slots))
            for k, entry in enumerate(lens):
                with m.If(tail == k):
                    m.d.sync += entry.eq(axi.arlen)
        with m.If(r_take):
            m.d.sync += beat.eq(beat + 1)
        with m.If(done):
            m.d.sync += [beat.eq(0), head.eq(_next(head, slots))]
        head_len = Signal(8)
        for k, entry in enumerate(lens):
            with m.If(head == k):
                m.d.comb += head_len.eq(entry)
        with m.If(pending == 0):
            m.d.comb += Assume(~axi.rvalid)
        m.d.comb += Assume(axi.rid == 0)
        with m.If(axi.rvalid):
            m.d.comb += Assume(axi.rlast == (beat == head_len))

        # The master's: RREADY, and room in the FIFO, whenever a beat is offered (RREADY is
        # a constant 1: the room is the reservation's); errors exactly on bad beats.
        with m.If(axi.rvalid):
            m.d.comb += [Assert(axi.rready, "RREADY whenever a beat is offered"),
                         Assert(dut.beat_room, "the FIFO has room whenever a beat is offered")]
        m.d.comb += Assert(dut.error == (r_take & axi.rresp[1]),
                           "an error pulse exactly on a SLVERR or DECERR beat")
        # reachable: the FIFO's room all requested (every slot a full-length burst) while
        # `data` stalls, so the reservation is what keeps RREADY up; an error reported
        longest = dut.max_burst_beats - 1
        m.d.comb += [Cover((pending == slots) & (lens[0] == longest) & (lens[1] == longest)
                           & axi.rvalid & ~dut.data.ready),
                     Cover(dut.error & dut.data.valid)]
        return m


def _next(index, size):
    """`index` + 1, modulo `size`."""
    return Mux(index == size - 1, 0, index + 1)


def check(dut, name, mode, depth=DEPTH):
    return prove(ReaderSpec(dut), name, inputs=inputs_of(dut), mode=mode, depth=depth)


def test_the_dma_reader_keeps_the_axi4_master_rules_under_any_slave():
    result = check(DMAReader(**PARAMS), "dma_reader", "bmc")
    assert result.passed, result.explain()
    result = check(DMAReader(**PARAMS), "dma_reader_cover", "cover")
    assert result.passed, result.explain()


def test_the_dma_reader_keeps_the_axi4_master_rules_at_its_smallest_fifo():
    result = check(DMAReader(**TIGHT), "dma_reader_tight", "bmc")
    assert result.passed, result.explain()


def test_a_reader_whose_fifo_has_no_spare_entry_fails_the_proof_at_its_smallest_fifo():
    result = check(NoSpare(**TIGHT), "dma_reader_no_spare", "bmc")
    assert result.status == "FAIL" and result.failed, result.explain()
    room = line_of(__file__, "the FIFO has room whenever a beat is offered")
    assert room in result.failed, result.explain()


@pytest.mark.slow
def test_the_dma_reader_keeps_the_axi4_master_rules_deeper():
    result = check(DMAReader(**PARAMS), "dma_reader_deep", "bmc", depth=DEEP)
    assert result.passed, result.explain()


def test_a_reader_that_requests_without_room_fails_the_proof():
    result = check(Unreserved(**PARAMS), "dma_reader_unreserved", "bmc")
    assert result.status == "FAIL" and result.failed, result.explain()
