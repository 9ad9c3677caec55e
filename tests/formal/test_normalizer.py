"""Proof of the `Normalizer`'s output by k-induction: `o_out` keeps the stream rules (valid
up and the chunk put until ready, nothing offered the cycle after a reset) under any
consumer, any reset, any `tail` words and array reads, while the replay's block commands
keep the rules."""

import pytest
from amaranth.hdl import Cover, Elaboratable, Module, ResetSignal

from attenio.formats import format_by_name
from attenio.hdl.formats import arith_of
from attenio.hdl.normalizer import Normalizer

from .sby import formal, inputs_of, prove
from .streams import Skipping, keeps_stream_rules, obeys_stream_rules, past

pytestmark = formal

#: one MAC of rows of two int8 elements, blocks of one row: the drain's whole datapath
#: (the reciprocal, finalize) sits between an issue and its chunk in the output FIFO
ARITH = arith_of(format_by_name("int8"), max_seq_len=4, head_dim=2)
PARAMS = dict(arith=ARITH, mac_lines=1, macs_per_line=1, rows_per_mac=1, block_rows=1,
              head_dim=2, lanes=1)
DEPTH = 1           # k: `o_out` is the output register of the FIFO (SyncFIFOBuffered)
#: the cover run's depth: a block taken, its tail word and the trigger, a chunk through the
#: drain's pipeline and the FIFO, and held a cycle on `o_out` (the published latencies)
REACH = 1 + Normalizer.trigger_latency(ARITH) + Normalizer.latency(ARITH) \
    + Normalizer.output_latency + 2


class NormalizerSpec(Elaboratable):
    def __init__(self, dut):
        self.dut = dut

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        obeys_stream_rules(m, dut.block, name="block")
        keeps_stream_rules(m, dut.o_out, name="o_out")
        # reachable: a chunk still waiting on `o_out` in the cycle after a stall
        out = dut.o_out
        stalled = past(m, out.valid & ~out.ready & ~ResetSignal(), name="stalled")
        m.d.comb += Cover(stalled & out.valid & ~out.ready & ~ResetSignal())
        return m


def check(dut, name, mode, depth=DEPTH):
    return prove(NormalizerSpec(dut), name, inputs=inputs_of(dut), mode=mode, depth=depth)


def test_the_normalizer_keeps_the_stream_rules_on_its_output_in_every_reachable_state():
    result = check(Normalizer(**PARAMS), "normalizer", "prove")
    assert result.passed, result.explain()


@pytest.mark.slow
def test_the_normalizer_proof_reaches_a_stalled_chunk():
    result = check(Normalizer(**PARAMS), "normalizer_cover", "cover", REACH)
    assert result.passed, result.explain()


@pytest.mark.slow
def test_a_normalizer_that_pops_its_fifo_behind_a_stall_fails_the_proof():
    result = check(Skipping(Normalizer(**PARAMS), "o_out"), "normalizer_skipping", "bmc", REACH)
    assert result.status == "FAIL" and result.failed, result.explain()
