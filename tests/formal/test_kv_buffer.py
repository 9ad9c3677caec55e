"""Bounded proof of `KVBuffer` as a FIFO of rows, at its ports: the `n`-th row offered on
`row` (any `n`) is the `n`-th row taken off `feed`, so rows are handed to the replay in
the order they were fed, none dropped or repeated; every chunk of it (any chunk `c`)
reads back on `rd_addr` / `rd_data` as it was fed, in the half its tag names, from the
cycle after the replay took it until the replay releases it (so the feed never writes
over a held row); its tag names the kind its chunks were fed with while no `error` is
raised; and `row` keeps the stream rules.

The replay is any that keeps its side of the contract: it releases only a row it took,
and takes a row only while it holds none or in the cycle it releases the one it holds
(the module's docstring; `row.valid` rises again for a held row if it took a second).
Blocks are any `start` commands, well formed or not (a bad one raises `error` and feeds
nothing).

Bounded: the buffer's state (its memory, `full` flags, head and fill halves) is local to
`elaborate`, so a spec cannot tie it to the rows fed, and k-induction starts from a
memory word that differs from the chunk fed (a state no run reaches).
"""

import pytest
from amaranth.asserts import AnyConst
from amaranth.hdl import Assert, Assume, Cover, Elaboratable, Module, ResetSignal, Signal, signed

from attenio.hdl.kv_buffer import Kind, KVBuffer

from .sby import formal, inputs_of, prove
from .streams import keeps_stream_rules, obeys_stream_rules, past

pytestmark = formal

#: one MAC, Q blocks of one row, two keys, rows of two chunks of 3-bit elements: every
#: kind of row (Q, K, V) within a few cycles
PARAMS = dict(mac_lines=1, macs_per_line=1, rows_per_mac=1, block_rows=1, head_dim=2,
              max_seq_len=2, c_shape=2, split=1, element=signed(3))
DEPTH = 12          # a block's Q, K and V rows fed, taken, read and released, with stalls
DEEP = 20           # the slow run's depth: a whole block of two keys fed, with stalls


class Overwriting(KVBuffer):
    """A broken buffer: the feed is ready whenever a block is filling, even into a half
    that holds a row the replay has not released."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.feed.ready.eq(self.filling)
        return m


class BufferSpec(Elaboratable):
    def __init__(self, dut, *, depth):
        self.dut = dut
        self.depth = depth      # the proof's depth: no count wraps within it

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        feed, row = dut.feed, dut.row
        chunks = dut.signature.members["rd_addr"].shape.stop // 2   # per row
        m.d.comb += Assume(~ResetSignal())
        obeys_stream_rules(m, dut.start, name="start")
        obeys_stream_rules(m, feed, name="feed")
        keeps_stream_rules(m, row, name="row")

        n = AnyConst(range(self.depth))
        c = AnyConst(range(chunks))
        # rows and chunks fed; chunk c of row n as fed
        fed = Signal(range(self.depth + 2))
        chunk = Signal(range(chunks))
        n_value, n_kind = Signal(len(dut.rd_data.as_value())), Signal.like(feed.payload.kind)
        with m.If(feed.valid & feed.ready):
            m.d.sync += chunk.eq(chunk + 1)
            with m.If(chunk == chunks - 1):
                m.d.sync += [chunk.eq(0), fed.eq(fed + 1)]
            with m.If((fed == n) & (chunk == c)):
                m.d.sync += [n_value.eq(feed.payload.value), n_kind.eq(feed.payload.kind)]

        # rows taken by the replay and released; row n held from the cycle after it is
        # taken to the cycle it is released
        taken, released = Signal(range(self.depth + 2)), Signal(range(self.depth + 2))
        held = Signal()
        half = Signal()
        m.d.comb += Assume(~dut.release | (released < taken))
        # the replay's contract (the module's docstring): it takes a row only while it
        # holds none, or in the cycle it releases the one it holds (`row.valid` is the
        # head half's `full` flag, up again after a take while the other half is held)
        with m.If(row.ready):
            m.d.comb += Assume((taken == released) | (dut.release & (taken == released + 1)))
        with m.If(dut.release):
            m.d.sync += released.eq(released + 1)
            with m.If(released == n):
                m.d.sync += held.eq(0)
        with m.If(row.valid & row.ready):
            m.d.sync += taken.eq(taken + 1)
            with m.If(taken == n):
                tag = row.payload
                m.d.sync += [held.eq(1), half.eq(tag.half)]
                m.d.comb += Assert(fed > n, "row n offered after it was fed")
                with m.If(~dut.error):
                    m.d.comb += Assert(
                        (tag.is_q == (n_kind == Kind.Q)) & (tag.is_s == (n_kind == Kind.K))
                        & (tag.is_u == (n_kind == Kind.V)), "row n's tag names its fed kind")
        m.d.comb += Assert(taken <= fed, "no row offered that was not fed")

        # a read of chunk c of row n's half while it is held (and not being released)
        # returns the chunk as fed
        releasing = dut.release & (released == n)
        reads_n = past(m, held & ~releasing & (dut.rd_addr == half * chunks + c), name="reads_n")
        with m.If(reads_n):
            m.d.comb += Assert(dut.rd_data.as_value() == n_value,
                               "row n's chunk reads back as it was fed until its release")
        # reachable: a V row read back while the next row waits in the other half
        m.d.comb += Cover(reads_n & (n_kind == Kind.V) & row.valid)
        return m


def check(dut, name, mode, depth=DEPTH):
    return prove(BufferSpec(dut, depth=depth), name, inputs=inputs_of(dut), mode=mode,
                 depth=depth)


def test_the_kv_buffer_hands_the_rows_to_the_replay_as_a_fifo():
    result = check(KVBuffer(**PARAMS), "kv_buffer", "bmc")
    assert result.passed, result.explain()
    result = check(KVBuffer(**PARAMS), "kv_buffer_cover", "cover")
    assert result.passed, result.explain()


@pytest.mark.slow
def test_the_kv_buffer_hands_the_rows_to_the_replay_as_a_fifo_deeper():
    result = check(KVBuffer(**PARAMS), "kv_buffer_deep", "bmc", depth=DEEP)
    assert result.passed, result.explain()


@pytest.mark.slow
def test_a_buffer_whose_feed_overwrites_a_held_row_fails_the_proof():
    result = check(Overwriting(**PARAMS), "kv_buffer_overwriting", "bmc")
    assert result.status == "FAIL" and result.failed, result.explain()
