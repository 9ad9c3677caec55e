"""Proofs of `CSRBlock`, the AXI4-Lite slave, by k-induction: the slave's rules under any
master that keeps AXI4-Lite's (one response per request, held until ready with RDATA
stable, none after reset), the responses (OKAY for a mapped offset, SLVERR for an
unmapped one or a write to a read-only register), RW registers that take exactly the
strobed bytes written (in the cycle after the write's handshake, as B is offered), W1
registers that pulse once per write (then), CONST registers that read their value, and
a window's entry (any one) that holds exactly the strobed bytes written: the hardware's port gives it a cycle later, and a read of it on the bus
returns it unless the master wrote it while the read was under way (from its AR on).

The invariants that make the induction close are ZipCPU's (faxil_slave.v): the
outstanding counts, tied to BVALID and ARREADY, which this slave's one-at-a-time
handshakes make exact.
"""

import pytest
from amaranth.asserts import AnyConst
from amaranth.hdl import Assert, Assume, Cat, Cover, Elaboratable, Module, ResetSignal, Signal

from attenio import preset
from attenio.hdl import csr
from attenio.hdl.csr import CSRBlock
from attenio.plan import make_plan
from attenio.regmap import Access, Register, RegisterMap, Window, register_map

from .sby import formal, inputs_of, prove
from .streams import keeps_stream_rules, obeys_stream_rules, past

pytestmark = formal

OKAY, SLVERR = 0b00, 0b10

#: every kind of register, a 64-bit one, and words of two read banks with an unmapped
#: bank between (`csr.READ_BANK` words a bank)
REGMAP = RegisterMap(registers=(
    Register("ID", 0x00, Access.CONST, 32, "a constant", value=0x4154_5431),
    Register("START", 0x04, Access.W1, 32, "a start pulse"),
    Register("LEN", 0x08, Access.RW, 32, "a setting", value=5),
    Register("STATUS", 0x0C, Access.RO, 32, "a status"),
    Register("CYCLES", 0x10, Access.RO, 64, "a counter"),
    Register("BASE", 4 * 2 * csr.READ_BANK, Access.RW, 32, "a setting in the third bank"),
), windows=(Window("TABLE", 4 * 4 * csr.READ_BANK, csr.READ_BANK, "a table, a read bank"),))
DEPTH = 8           # k of the induction: longer than a read's three cycles
#: k for the small preset's map: still longer than a read's three cycles and a write's
#: two; its base case (a 256-entry window, some 40 registers) takes boolector about 10
#: minutes to reach 8 cycles, 1 to reach 5
PRESET_DEPTH = 5


def _word_is(addr, r, word=None):
    index = addr[2:]
    words = range(r.words) if word is None else [word]
    return sum((index == r.offset // 4 + w for w in words), start=0) != 0


def _in_window(addr, w):
    return addr[2 + w.index_bits:] == w.offset >> (2 + w.index_bits)


class StickyStart(CSRBlock):
    """A broken block: a W1 pulse, once up, stays up."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        with m.If(self.start):
            m.d.sync += self.start.eq(1)
        return m


class TwiceAnswering(CSRBlock):
    """A broken block: it answers every read twice."""

    def elaborate(self, platform):
        m = super().elaborate(platform)
        bus = self.s_axil
        again = Signal()
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += again.eq(~again)
            with m.If(~again):
                m.d.sync += bus.rvalid.eq(1)
        return m


class CSRSpec(Elaboratable):
    def __init__(self, dut):
        self.dut = dut

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        bus = dut.s_axil
        regs = list(dut.regmap)

        # The master keeps AXI4-Lite's rules, and offers nothing in reset.
        for ch, payload in [("aw", bus.awaddr), ("w", Cat(bus.wdata, bus.wstrb)),
                            ("ar", bus.araddr)]:
            valid, ready = getattr(bus, f"{ch}valid"), getattr(bus, f"{ch}ready")
            obeys_stream_rules(m, None, name=ch, valid=valid, ready=ready, payload=payload)
            with m.If(ResetSignal()):
                m.d.comb += Assume(~valid)

        # The slave's responses keep the rules: held until ready, RDATA and the
        # response stable, nothing in the cycle after reset.
        keeps_stream_rules(m, None, name="b", valid=bus.bvalid, ready=bus.bready,
                           payload=bus.bresp)
        keeps_stream_rules(m, None, name="r", valid=bus.rvalid, ready=bus.rready,
                           payload=Cat(bus.rdata, bus.rresp))

        # One response per request: AW and W are taken together; the outstanding
        # counts are BVALID for writes and not ARREADY for reads.
        aw_take = bus.awvalid & bus.awready
        w_take = bus.wvalid & bus.wready
        b_give = bus.bvalid & bus.bready
        ar_take = bus.arvalid & bus.arready
        r_give = bus.rvalid & bus.rready
        writes = Signal(2)
        reads = Signal(2)
        m.d.sync += [writes.eq(writes + aw_take - b_give), reads.eq(reads + ar_take - r_give)]
        # the write as the slave applies it: a cycle after its handshake (each word's
        # `applied` flag is registered apart, as a decode of the handshake's address)
        applied = past(m, aw_take, name="applied")
        w_data, w_strb = past(m, bus.wdata, name="w_data"), past(m, bus.wstrb, name="w_strb")

        def applied_at(word_is, name):
            return past(m, aw_take & word_is, name=f"{name}_applied")
        m.d.comb += [Assert(aw_take == w_take, "AW and W taken together"),
                     Assert(writes == bus.bvalid + applied,
                            "a write answered once, the cycle after it is taken"),
                     Assert(reads <= 1, "one read at a time"),
                     Assert(reads == ~bus.arready, "a read answered once, after it is taken")]
        with m.If(bus.rvalid):
            m.d.comb += Assert(reads == 1, "no read answer without a read")

        # The responses: OKAY for a mapped word (and for a write, a writable one).
        b_want = Signal(2)
        r_want = Signal(2)
        const = next(r for r in regs if r.access is Access.CONST)
        pulse = next(r for r in regs if r.access is Access.W1)
        r_const = Signal()        # the read is of a constant's first word
        r_zero = Signal()         # the read is of a W1 word, which reads 0
        writable = [r for r in regs if r.access in (Access.RW, Access.W1)]
        windows = dut.regmap.windows
        with m.If(aw_take):
            m.d.sync += b_want.eq(SLVERR)
            with m.If(sum((_word_is(bus.awaddr, r) for r in writable), start=0)
                      + sum((_in_window(bus.awaddr, w) for w in windows), start=0) != 0):
                m.d.sync += b_want.eq(OKAY)
        with m.If(ar_take):
            m.d.sync += [r_want.eq(SLVERR),
                         r_const.eq(_word_is(bus.araddr, const, 0)),
                         r_zero.eq(_word_is(bus.araddr, pulse))]
            with m.If(sum((_word_is(bus.araddr, r) for r in regs), start=0)
                      + sum((_in_window(bus.araddr, w) for w in windows), start=0) != 0):
                m.d.sync += r_want.eq(OKAY)
        with m.If(bus.bvalid):
            m.d.comb += Assert(bus.bresp == b_want, "BRESP: OKAY iff a writable word")
        with m.If(bus.rvalid):
            m.d.comb += Assert(bus.rresp == r_want, "RRESP: OKAY iff a mapped word")
            with m.If(r_const):
                m.d.comb += Assert(bus.rdata == const.value & 0xFFFF_FFFF,
                                   "a constant reads its value")
            with m.If(r_zero):
                m.d.comb += Assert(bus.rdata == 0, "a W1 register reads 0")

        # RW registers take exactly the bytes strobed; W1 registers pulse once, in the
        # cycle after a write of bit 0.
        for r in regs:
            port = getattr(dut, r.name.lower(), None)
            if r.access is Access.RW:
                model = Signal(r.width, init=r.value, name=f"{r.name.lower()}_model")
                with m.If(applied_at(_word_is(bus.awaddr, r, 0), r.name.lower())):
                    for byte in range(4):
                        with m.If(w_strb[byte]):
                            m.d.sync += model[8 * byte:8 * byte + 8].eq(
                                w_data[8 * byte:8 * byte + 8])
                m.d.comb += Assert(port == model, f"{r.name} holds what was written")
            elif r.access is Access.W1:
                wrote = past(m, applied_at(_word_is(bus.awaddr, r), r.name.lower())
                             & w_data[0] & w_strb[0],
                             name=f"{r.name.lower()}_written")
                m.d.comb += Assert(port == wrote, f"{r.name} pulses once per write")

        # A window's entry, any one (`pick`), against a model of it: not reset, as the
        # memory is not
        for w in windows:
            name = w.name.lower()
            pick = AnyConst(range(w.entries))
            word = w.offset // 4 + pick            # the byte address's low bits are ignored
            model = Signal(32, name=f"{name}_model", reset_less=True)
            written = applied_at(bus.awaddr[2:] == word, name)
            with m.If(written):
                for byte in range(4):
                    with m.If(w_strb[byte]):
                        m.d.sync += model[8 * byte:8 * byte + 8].eq(
                            w_data[8 * byte:8 * byte + 8])
            m.d.comb += getattr(dut, f"{name}_addr").eq(pick)
            was = past(m, model, name=f"{name}_model_past", reset_less=True)
            started = past(m, 1, name=f"{name}_started", reset_less=True)
            with m.If(started):
                m.d.comb += Assert(getattr(dut, f"{name}_data") == was,
                                   f"{w.name}'s port gives the entry a cycle later")
            r_pick, clobbered = Signal(name=f"r_{name}"), Signal(name=f"{name}_clobbered")
            # a write of the entry applied in the read's AR cycle or after it, before R,
            # may or may not be seen
            with m.If(ar_take):
                m.d.sync += [r_pick.eq(bus.araddr[2:] == word), clobbered.eq(written)]
            with m.If(written & (reads != 0)):
                m.d.sync += clobbered.eq(1)
            with m.If(bus.rvalid & r_pick & ~clobbered):
                m.d.comb += Assert(bus.rdata == model, f"{w.name}'s entry reads as written")
            m.d.comb += Cover(bus.rvalid & r_pick & ~clobbered & (bus.rdata != 0))

        m.d.comb += [Cover(bus.rvalid & (bus.rresp == SLVERR) & ~bus.rready),
                     Cover(bus.bvalid & (bus.bresp == OKAY) & getattr(dut, pulse.name.lower())),
                     Cover(bus.rvalid & r_const)]
        return m


def check(dut, name, mode, depth=DEPTH):
    return prove(CSRSpec(dut), name, inputs=inputs_of(dut), mode=mode, depth=depth)


def test_the_csr_block_keeps_the_axi4_lite_slave_rules_in_every_reachable_state():
    result = check(CSRBlock(REGMAP), "csr", "prove")
    assert result.passed, result.explain()
    result = check(CSRBlock(REGMAP), "csr_cover", "cover")
    assert result.passed, result.explain()


@pytest.mark.slow
def test_the_small_presets_csr_block_keeps_the_axi4_lite_slave_rules():
    dut = CSRBlock(register_map(make_plan(preset("small"))))
    result = check(dut, "csr_small_preset", "prove", depth=PRESET_DEPTH)
    assert result.passed, result.explain()


@pytest.mark.slow
def test_a_csr_block_that_answers_unmapped_offsets_okay_fails_the_proof(monkeypatch):
    monkeypatch.setattr(csr, "SLVERR", OKAY)
    result = check(CSRBlock(REGMAP), "csr_no_slverr", "prove")
    assert result.status == "FAIL" and result.failed, result.explain()


@pytest.mark.slow
def test_a_csr_block_whose_start_pulse_sticks_fails_the_proof():
    result = check(StickyStart(REGMAP), "csr_sticky_start", "prove")
    assert result.status == "FAIL" and result.failed, result.explain()


def test_a_csr_block_that_answers_a_read_twice_fails_the_proof():
    result = check(TwiceAnswering(REGMAP), "csr_twice", "prove")
    assert result.status == "FAIL" and result.failed, result.explain()
