"""Bounded proof of `DMAWriter`, the AXI4 write master, under any slave that keeps AXI4's
rules, with ZipCPU's faxi_master.v as the reference for what a master must keep:

- AW and W held until ready with their payloads stable, `done` keeping the stream rules;
- every AW an INCR burst of full-width beats, ID 0, within `max_burst_beats` (so within
  AXI's 256) and within its 4 KB page;
- W beats only for a burst whose AW was taken, WLAST on exactly the AWLEN + 1-th beat of
  each burst (so as many beats as each AW promised), all byte strobes set;
- no more bursts awaiting B than `max_outstanding`, so every B response is accounted for;
- `error` pulses exactly on a B answered SLVERR or DECERR, and each command's `done`
  arrives the cycle after the B that completes its last beat, its `error` set exactly
  when a B of the command's bursts failed;
- after a failed B the writer stops: no AW is raised (one already up when the error
  came stays until taken, as AXI4 requires), so no W beat goes out beyond the bursts
  AW had accepted; the commands left complete without a B, each `done` with `error`
  set and only once the command's data have been taken from `data`.

The slave is free within AXI4's rules for one ID, tracked as faxi_master does: BVALID
only while a burst whose AW was taken and whose W beats are all in awaits its response,
B held until BREADY. Commands are well formed (the splitter's own proof covers the
malformed ones).

`error_clear` (the end of the stop, pulsed between runs) is held low: the proof covers
one run. The cover run shows the AW already up when the error came taken after it, and
a later command's `done`, failed, with no AW since the error.
"""

from types import SimpleNamespace

import pytest
from amaranth.asserts import AnyConst
from amaranth.hdl import Assert, Assume, Cat, Const, Cover, Elaboratable, Module, Mux, \
    ResetSignal, Signal

from attenio.hdl.axi import AXI_4KB, AXIBurst
from attenio.hdl.dma import DMAWriter

from .sby import formal, inputs_of, line_of, prove
from .streams import keeps_stream_rules, obeys_stream_rules, past

pytestmark = formal

PARAMS = dict(addr_width=12, data_width=32, max_outstanding=2, max_burst_beats=3, fifo_depth=2)
DEPTH = 9           # two commands taken, their bursts written and answered, with stalls
DEEP = 14           # the slow run's depth
COVER_DEPTH = DEPTH + 1     # an error, then a later command dropped and done


class ShortPromise(DMAWriter):
    """A broken writer: an AW of more than one beat promises one beat fewer than its W
    side sends."""

    def _issue(self, m, channel, burst, go):
        length = burst.payload.len
        payload = SimpleNamespace(addr=burst.payload.addr, len=Mux(length == 0, 0, length - 1))
        shorter = SimpleNamespace(valid=burst.valid, ready=burst.ready, payload=payload)
        return super()._issue(m, channel, shorter, go)


class Unbounded(DMAWriter):
    """A broken writer: it issues bursts whether or not a slot awaits their B."""

    def _issue(self, m, channel, burst, go):
        return super()._issue(m, channel, burst, 1)


class NeverStops(DMAWriter):
    """A broken writer: it goes on writing after an error response."""

    def _stop(self, m, failed_b):
        return Const(0)


class WriterSpec(Elaboratable):
    def __init__(self, dut, *, depth):
        self.dut = dut
        self.depth = depth      # the proof's depth: no count wraps within it

    def elaborate(self, platform):
        m = Module()
        m.submodules.dut = dut = self.dut
        axi = dut.axi
        slots = dut.max_outstanding
        beat_bytes = dut.data_width // 8
        m.d.comb += Assume(~ResetSignal() & ~dut.error_clear)
        obeys_stream_rules(m, dut.cmd, name="cmd")
        obeys_stream_rules(m, dut.data, name="data")
        keeps_stream_rules(m, dut.done, name="done")
        keeps_stream_rules(m, None, name="aw", valid=axi.awvalid, ready=axi.awready,
                           payload=Cat(axi.awid, axi.awaddr, axi.awlen, axi.awsize,
                                       axi.awburst, axi.awcache))
        keeps_stream_rules(m, None, name="w", valid=axi.wvalid, ready=axi.wready,
                           payload=Cat(axi.wdata, axi.wstrb, axi.wlast))
        obeys_stream_rules(m, None, name="b", valid=axi.bvalid, ready=axi.bready,
                           payload=Cat(axi.bid, axi.bresp))
        with m.If(dut.cmd.valid):
            length = dut.cmd.payload.length
            m.d.comb += Assume((length != 0) & (length[:2] == 0)
                               & (dut.cmd.payload.addr[:2] == 0))

        aw_take = axi.awvalid & axi.awready
        w_take = axi.wvalid & axi.wready
        b_take = axi.bvalid & axi.bready

        # Every AW: an INCR burst of full-width beats, ID 0, within the cap and its page.
        with m.If(axi.awvalid):
            end = Signal(range(2 * AXI_4KB), name="aw_page_end")
            m.d.comb += end.eq(axi.awaddr[:12] + (axi.awlen + 1) * beat_bytes)
            m.d.comb += [
                Assert(axi.awlen < dut.max_burst_beats, "AW within max_burst_beats"),
                Assert(end <= AXI_4KB, "AW within its 4 KB page"),
                Assert(axi.awaddr[:2] == 0, "AW beat-aligned"),
                Assert((axi.awsize == 2) & (axi.awburst == AXIBurst.INCR) & (axi.awid == 0),
                       "AW: INCR, full-width beats, ID 0"),
            ]

        # The bursts whose AW was taken and whose B is not in, oldest first: their AWLEN.
        # `w_head` is the oldest whose W beats are not all in, `b_head` the oldest whose B
        # is not; `beat` counts into w_head's burst.
        lens = [Signal(8, name=f"len{k}") for k in range(slots)]
        tail, w_head, b_head = (Signal(range(slots), name=n) for n in ("tail", "w_head", "b_head"))
        awaiting_w = Signal(range(slots + 2))       # AW taken, W beats not all in
        awaiting_b = Signal(range(slots + 2))       # W beats all in, B not
        beat = Signal(8)
        w_done = w_take & axi.wlast
        m.d.sync += [awaiting_w.eq(awaiting_w + aw_take - w_done),
                     awaiting_b.eq(awaiting_b + w_done - b_take)]
        with m.If(aw_take):
            m.d.sync += tail.eq(_next(tail, slots))
            for k, entry in enumerate(lens):
                with m.If(tail == k):
                    m.d.sync += entry.eq(axi.awlen)
        with m.If(w_take):
            m.d.sync += beat.eq(Mux(axi.wlast, 0, beat + 1))
        with m.If(w_done):
            m.d.sync += w_head.eq(_next(w_head, slots))
        with m.If(b_take):
            m.d.sync += b_head.eq(_next(b_head, slots))
        w_len, b_len = _entry(m, lens, w_head, "w_len"), _entry(m, lens, b_head, "b_len")

        m.d.comb += Assert(awaiting_w + awaiting_b <= slots,
                           "no more bursts awaiting B than max_outstanding")
        with m.If(axi.wvalid):
            m.d.comb += [
                Assert(awaiting_w != 0, "W only for a burst whose AW was taken"),
                Assert(axi.wlast == (beat == w_len), "WLAST on exactly the AWLEN + 1-th beat"),
                Assert(axi.wstrb.all(), "every byte strobed"),
            ]
        # the slave's obligations: B only for a burst complete on AW and W, ID 0
        with m.If(awaiting_b == 0):
            m.d.comb += Assume(~axi.bvalid)
        m.d.comb += Assume(axi.bid == 0)

        # Errors: `error` pulses exactly on a failed B.
        failed = axi.bresp[1]
        m.d.comb += Assert(dut.error == (b_take & failed), "error exactly on SLVERR/DECERR")

        # Completions. A new `done` entry is one not offered and left waiting last cycle;
        # it must follow a B, and its `error` is the OR of the failed B's since the last
        # entry. The n-th entry (any n) must come exactly when the B's in cover as many
        # beats as the first n + 1 commands have.
        new_done = dut.done.valid & ~past(m, dut.done.valid & ~dut.done.ready, name="done_held")
        b_before = past(m, b_take, name="b_before")
        errors = Signal()                           # failed B's since the last entry
        errors_then = Signal()                      # ... up to the last B
        with m.If(b_take):
            m.d.sync += errors_then.eq(Mux(new_done, 0, errors) | failed)
        with m.If(new_done):
            m.d.sync += errors.eq(b_take & failed)
        with m.Elif(b_take):
            m.d.sync += errors.eq(errors | failed)
        # After a failed B: no AW raised, only the one already up may still be taken.
        stopped = Signal()
        with m.If(b_take & failed):
            m.d.sync += stopped.eq(1)
        aw_held = past(m, axi.awvalid & ~axi.awready, name="aw_held")
        with m.If(stopped & axi.awvalid):
            m.d.comb += Assert(aw_held, "no AW raised after an error response")
        # A `done` the cycle after a B completes the command by its B's; any other one
        # is a command dropped after an error, failed.
        with m.If(new_done & b_before):
            m.d.comb += Assert(dut.done.payload.error == errors_then,
                               "done.error exactly when a B of its command failed")
        with m.If(new_done & ~b_before):
            m.d.comb += [Assert(stopped, "done without a B only after an error response"),
                         Assert(dut.done.payload.error, "a dropped command's done failed")]

        n = AnyConst(range(self.depth))
        count = Signal(range(self.depth + 2))
        commands_beats, b_beats, data_beats = Signal(16), Signal(16), Signal(16)
        n_end = Signal(16)                          # the beats of commands 0 to n
        commands = Signal(range(self.depth + 2))
        with m.If(dut.cmd.valid & dut.cmd.ready):
            beats = dut.cmd.payload.length >> 2
            m.d.sync += [commands.eq(commands + 1),
                         commands_beats.eq(commands_beats + beats)]
            with m.If(commands == n):
                m.d.sync += n_end.eq(commands_beats + beats)
        with m.If(b_take):
            m.d.sync += b_beats.eq(b_beats + b_len + 1)
        with m.If(dut.data.valid & dut.data.ready):
            m.d.sync += data_beats.eq(data_beats + 1)
        with m.If(new_done):
            m.d.sync += count.eq(count + 1)
            with m.If(count == n):
                m.d.comb += Assert(commands > n, "no done for a command not taken")
                with m.If(b_before):
                    m.d.comb += Assert(b_beats == n_end,
                                       "the n-th done when its command's last B is in")
                with m.Else():
                    m.d.comb += Assert((b_beats < n_end) & (data_beats >= n_end),
                                       "a dropped n-th done once its command's data are in")

        # reachable: both slots awaiting while W stalls; a failed command's done after an
        # earlier one's; the AW already up taken after a failed B; a later command's
        # done, failed, with no AW since the error
        aw_since, dones_since = Signal(), Signal()
        with m.If(stopped & aw_take):
            m.d.sync += aw_since.eq(1)
        with m.If(stopped & new_done):
            m.d.sync += dones_since.eq(1)
        m.d.comb += [
            Cover((awaiting_w + awaiting_b == slots) & axi.wvalid & ~axi.wready),
            Cover(new_done & dut.done.payload.error & (count == 1) & (n == 1)),
            Cover(aw_take & stopped),
            Cover(new_done & ~b_before & dut.done.payload.error & dones_since & ~aw_since),
        ]
        return m


def _next(index, size):
    """`index` + 1, modulo `size`."""
    return Mux(index == size - 1, 0, index + 1)


def _entry(m, entries, index, name):
    """The entry of `entries` at `index`."""
    value = Signal(8, name=name)
    for k, entry in enumerate(entries):
        with m.If(index == k):
            m.d.comb += value.eq(entry)
    return value


def check(dut, name, mode, depth=DEPTH):
    return prove(WriterSpec(dut, depth=depth), name, inputs=inputs_of(dut), mode=mode,
                 depth=depth)


def test_the_dma_writer_keeps_the_axi4_master_rules_under_any_slave():
    result = check(DMAWriter(**PARAMS), "dma_writer", "bmc")
    assert result.passed, result.explain()
    result = check(DMAWriter(**PARAMS), "dma_writer_cover", "cover", depth=COVER_DEPTH)
    assert result.passed, result.explain()


@pytest.mark.slow
def test_the_dma_writer_keeps_the_axi4_master_rules_deeper():
    result = check(DMAWriter(**PARAMS), "dma_writer_deep", "bmc", depth=DEEP)
    assert result.passed, result.explain()


def test_a_writer_whose_aw_promises_a_beat_too_few_fails_the_proof():
    result = check(ShortPromise(**PARAMS), "dma_writer_short_promise", "bmc")
    assert result.status == "FAIL" and result.failed, result.explain()


@pytest.mark.slow
def test_a_writer_that_issues_without_a_free_slot_fails_the_proof():
    result = check(Unbounded(**PARAMS), "dma_writer_unbounded", "bmc")
    assert result.status == "FAIL" and result.failed, result.explain()


def test_a_writer_that_goes_on_writing_after_an_error_response_fails_the_proof():
    result = check(NeverStops(**PARAMS), "dma_writer_never_stops", "bmc")
    assert result.status == "FAIL" and result.failed, result.explain()
    stop = line_of(__file__, "no AW raised after an error response")
    assert stop in result.failed, result.explain()
