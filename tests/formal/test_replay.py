"""Proof of `RowReplay`'s block command by k-induction: `drain` is taken in the cycle it is
offered, so it keeps the stream rules (nothing offered the cycle after a reset), in the
core, where its consumer is the normalizer and its rows come from the K/V buffer.

`drain` is an interlocked command, not a stream under any consumer: its valid is a
register pulse from the launch of a block's last V row, and its payload is loaded every
cycle from the row offered. The replay holds a block's K_0 (its S_0) until the
normalizer is idle (`drain.ready`), and the normalizer leaves idle only by taking a
block; so the proof assumes of the consumer that its `ready`, once up, falls only after
it takes a command, and of the rows (the buffer's `kv_order`, a K_0 first in every
block) that each carries one kind and that a block's last V row follows its K_0 taken
since the last such row. Under those, a command is never offered to a busy normalizer.

The rows here are two words long (d / s = 2 chunks, r = 1): with rows of a single word
(r = 1 and s = d), a block's K_0 can launch in the very cycle its predecessor's command
is offered, when `drain.ready` does not yet show the normalizer busy; the slow test
below keeps that counterexample (see docs/verification.md).
"""

import pytest
from amaranth.hdl import Assert, Assume, Cover, Elaboratable, Module, ResetSignal, Signal, signed

from attenio.hdl.kv_buffer import row_layout
from attenio.hdl.replay import RowReplay

from .sby import formal, inputs_of, prove
from .streams import Skipping, keeps_stream_rules, obeys_stream_rules, past

pytestmark = formal

#: one MAC of one slot, Q blocks of one row, rows of two chunks: every kind of row in two
#: cycles, so blocks follow each other within the depth
PARAMS = dict(mac_lines=1, macs_per_line=1, rows_per_mac=1, block_rows=1, head_dim=2,
              split=1)
DEPTH = 2           # k: `drain.valid` is one register beside the launch of its row
REACH = 12          # cycles of the cover run (two blocks' commands) and the broken runs


def replay(**params):
    params = {**PARAMS, **params}
    layout = row_layout(rows=params["block_rows"], mac_lines=params["mac_lines"],
                        macs_per_line=params["macs_per_line"],
                        rows_per_mac=params["rows_per_mac"], head_dim=params["head_dim"],
                        c_shape=2, max_seq_len=2, split=params["split"])
    return RowReplay(row_layout=layout, c_shape=2, element=signed(3), **params)


class ReplaySpec(Elaboratable):
    def __init__(self, dut):
        self.dut = dut

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        row, drain = dut.row, dut.drain
        obeys_stream_rules(m, row, name="row")
        # the normalizer: idle (`ready`) until it takes a block
        took = past(m, drain.valid & drain.ready, name="took")
        was_ready = past(m, drain.ready, name="was_ready")
        with m.If(was_ready & ~took):
            m.d.comb += Assume(drain.ready)
        # the buffer's rows: one kind each; a block's last V row after its K_0
        tag = row.payload
        open_block = Signal()           # a K_0 taken, and no last V row since
        taken = row.valid & row.ready
        with m.If(taken & tag.is_s & tag.first):
            m.d.sync += open_block.eq(1)
        with m.If(taken & tag.is_u & tag.last):
            m.d.sync += open_block.eq(0)
        with m.If(row.valid):
            m.d.comb += Assume(tag.is_q + tag.is_s + tag.is_u == 1)
            with m.If(tag.is_u & tag.last):
                m.d.comb += Assume(open_block)

        keeps_stream_rules(m, drain, name="drain")
        m.d.comb += [
            Assert(~drain.valid | drain.ready, "drain: taken as it is offered"),
            # what makes it so, and closes the induction: an open block's K_0 launched
            # into an idle normalizer, and no command has gone to it since
            Assert(~open_block | (drain.ready & ~drain.valid),
                   "drain: the normalizer idle while a block is open"),
        ]
        # reachable: a second block's command, after its K_0 waited on a busy normalizer
        commands, waited = Signal(range(3)), Signal()
        with m.If(drain.valid & (commands != 2)):
            m.d.sync += commands.eq(commands + 1)
        with m.If(row.valid & tag.is_s & tag.first & ~drain.ready & ~ResetSignal()):
            m.d.sync += waited.eq(1)
        m.d.comb += Cover((commands == 2) & waited)
        return m


def check(dut, name, mode, depth=DEPTH):
    return prove(ReplaySpec(dut), name, inputs=inputs_of(dut), mode=mode, depth=depth)


def test_the_replays_block_command_is_taken_as_it_is_offered_in_every_reachable_state():
    result = check(replay(), "replay", "prove")
    assert result.passed, result.explain()
    result = check(replay(), "replay_cover", "cover", REACH)
    assert result.passed, result.explain()


@pytest.mark.slow
def test_a_replay_that_ignores_the_normalizers_idle_fails_the_proof():
    result = check(Skipping(replay(), "drain"), "replay_skipping", "bmc", REACH)
    assert result.status == "FAIL" and result.failed, result.explain()


@pytest.mark.slow
def test_the_block_command_with_rows_of_one_word():
    """Rows of one word: a block's K_0 could launch beside its predecessor's command, before
    the normalizer shows busy; the replay now waits out a command offered that cycle."""
    result = check(replay(head_dim=1), "replay_one_word", "bmc", REACH)
    assert result.passed, result.explain()
