"""Proof of the width converters (`BeatUnpacker`, `BeatPacker`) by k-induction: `o` keeps
the stream rules (valid up and the payload put until ready, nothing offered the cycle
after a reset) under any consumer and any reset, while `i`'s producer keeps them."""

import pytest
from amaranth.hdl import Cover, Elaboratable, Module, ResetSignal, signed

from attenio.hdl.widthconv import BeatPacker, BeatUnpacker

from .sby import formal, inputs_of, prove
from .streams import Skipping, keeps_stream_rules, obeys_stream_rules, past

pytestmark = formal

#: a 32-bit beat of two chunks of two int8 elements: the chunk index steps, wraps and
#: ends a beat within a few cycles
PARAMS = dict(data_width=32, width=2, element=signed(8))
DEPTH = 2           # k: a converter's state is one beat register, its index and `full`
REACH = 6           # cycles of the cover run and of the broken copies' bounded runs: a
                    # beat (or its chunks) taken and the offer held for a cycle


class OverwritingPacker(BeatPacker):
    """A broken packer: it takes chunks while its beat waits, writing into the beat."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        m.d.comb += self.i.ready.eq(1)
        return m


class ConvertersSpec(Elaboratable):
    """Both converters, side by side (one job)."""

    def __init__(self, unpacker, packer):
        self.unpacker, self.packer = unpacker, packer

    def elaborate(self, platform):
        m = Module()
        m.submodules.unpacker = self.unpacker
        m.submodules.packer = self.packer
        for name, dut in (("unpacker", self.unpacker), ("packer", self.packer)):
            obeys_stream_rules(m, dut.i, name=f"{name}_i")
            keeps_stream_rules(m, dut.o, name=f"{name}_o")
            # reachable: `o` still waiting in the cycle after a stall
            o = dut.o
            stalled = past(m, o.valid & ~o.ready & ~ResetSignal(), name=f"{name}_stalled")
            m.d.comb += Cover(stalled & o.valid & ~o.ready & ~ResetSignal())
        return m


def check(unpacker, packer, name, mode, depth=DEPTH):
    return prove(ConvertersSpec(unpacker, packer), name,
                 inputs=inputs_of(unpacker) + inputs_of(packer), mode=mode, depth=depth)


def test_the_width_converters_keep_the_stream_rules_in_every_reachable_state():
    result = check(BeatUnpacker(**PARAMS), BeatPacker(**PARAMS), "widthconv", "prove")
    assert result.passed, result.explain()
    result = check(BeatUnpacker(**PARAMS), BeatPacker(**PARAMS), "widthconv_cover", "cover",
                   REACH)
    assert result.passed, result.explain()


BROKEN = {
    # moves on to the next chunk whether or not `o` took this one
    "skipping_unpacker": lambda: (Skipping(BeatUnpacker(**PARAMS), "o"), BeatPacker(**PARAMS)),
    "overwriting_packer": lambda: (BeatUnpacker(**PARAMS), OverwritingPacker(**PARAMS)),
}


@pytest.mark.slow
@pytest.mark.parametrize("broken", list(BROKEN))
def test_a_converter_that_changes_its_offer_while_stalled_fails_the_proof(broken):
    result = check(*BROKEN[broken](), f"widthconv_{broken}", "bmc", REACH)
    assert result.status == "FAIL" and result.failed, result.explain()
