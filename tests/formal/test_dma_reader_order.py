"""Bounded proof of `DMAReader`'s data order and `last` flags, under the slave of
`test_dma_reader` (any slave keeping AXI4's rules for one ID, which answers the bursts
in the order they were requested): the `n`-th beat out (any `n`) is the `n`-th beat
taken on R, with its data, and `last` exactly when it is its command's final beat, as
counted from the commands' lengths. So no beat is dropped, duplicated or reordered, and
`last` falls on every command's end and nowhere else, burst ends included.

Commands are well formed: a malformed one is dropped by the splitter (whose proof
covers it) and has no beats to follow.
"""

import pytest
from amaranth.asserts import AnyConst
from amaranth.hdl import Assert, Assume, Cat, Cover, Signal

from attenio.hdl.dma import DMAReader

from .sby import formal, inputs_of, prove
from .test_dma_reader import PARAMS, ReaderSpec

pytestmark = formal

DEPTH = 11          # a command of two bursts and the next command's first beats out
DEEP = 13           # the slow run's depth (its last step took 2 minutes; 14 had not ended after 5)


class LastPerBurst(DMAReader):
    """A broken reader: `last` on every burst's final beat, not only the command's."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        fifo = m.submodules.fifo
        m.d.comb += fifo.w_data.eq(Cat(self.axi.rdata, self.axi.rlast))
        return m


class ReaderOrderSpec(ReaderSpec):
    """`ReaderSpec`'s slave and rules, and the order of the beats and their `last`."""

    def __init__(self, dut, *, depth):
        super().__init__(dut)
        self.depth = depth      # the proof's depth: no count wraps within it

    def elaborate(self, platform):
        m = super().elaborate(platform)
        dut = self.dut
        axi, cmd, out = dut.axi, dut.cmd, dut.data
        beat_bytes = dut.data_width // 8
        with m.If(cmd.valid):
            m.d.comb += Assume((cmd.payload.length != 0)
                               & (cmd.payload.length % beat_bytes == 0)
                               & (cmd.payload.addr % beat_bytes == 0))

        n = AnyConst(range(self.depth))
        # beats the commands taken add up to; whether beat n ends its command
        commands_beats = Signal(16)
        n_ends = Signal()
        with m.If(cmd.valid & cmd.ready):
            beats = cmd.payload.length // beat_bytes
            m.d.sync += commands_beats.eq(commands_beats + beats)
            with m.If(commands_beats + beats == n + 1):
                m.d.sync += n_ends.eq(1)

        taken, given = Signal(range(self.depth + 2)), Signal(range(self.depth + 2))
        n_data = Signal(dut.data_width)
        n_rlast = Signal()                          # beat n ends its burst
        with m.If(axi.rvalid & axi.rready):
            m.d.sync += taken.eq(taken + 1)
            with m.If(taken == n):
                m.d.sync += [n_data.eq(axi.rdata), n_rlast.eq(axi.rlast)]
        m.d.comb += Assert(given <= taken, "nothing out that was not taken on R")
        with m.If(out.valid & out.ready):
            m.d.sync += given.eq(given + 1)
            with m.If(given == n):
                m.d.comb += [
                    Assert(taken > n, "the n-th beat out after the n-th taken"),
                    Assert(out.payload.data == n_data, "the n-th beat out is the n-th taken"),
                    Assert(out.payload.last == n_ends, "last exactly on a command's final beat"),
                    # reachable: a command's end after a burst's end; a burst's end that
                    # is not its command's
                    Cover(out.payload.last & (n == 3)),
                    Cover(n_rlast & ~out.payload.last),
                ]
        return m


def check(dut, name, mode, depth=DEPTH):
    return prove(ReaderOrderSpec(dut, depth=depth), name, inputs=inputs_of(dut), mode=mode,
                 depth=depth)


@pytest.mark.slow
def test_the_dma_reader_gives_the_beats_in_order_with_last_on_each_commands_end():
    result = check(DMAReader(**PARAMS), "dma_reader_order", "bmc")
    assert result.passed, result.explain()
    result = check(DMAReader(**PARAMS), "dma_reader_order_cover", "cover")
    assert result.passed, result.explain()


@pytest.mark.slow
def test_the_dma_reader_gives_the_beats_in_order_deeper():
    result = check(DMAReader(**PARAMS), "dma_reader_order_deep", "bmc", depth=DEEP)
    assert result.passed, result.explain()


@pytest.mark.slow
def test_a_reader_that_marks_every_bursts_end_last_fails_the_order_proof():
    result = check(LastPerBurst(**PARAMS), "dma_reader_order_last_per_burst", "bmc")
    assert result.status == "FAIL" and result.failed, result.explain()
