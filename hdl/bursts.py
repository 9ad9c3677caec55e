"""Cutting DMA commands into AXI4 INCR bursts.

A command is a byte address and a byte length, both multiples of the bus width
(one *beat*). `BurstSplitter` cuts it into bursts of at most `max_burst_beats`
beats that never cross a 4 KB boundary; `split_bursts` is its Python twin.
The layouts and parameter checks here are shared by the DMA reader and writer.
"""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from attenio import validate

from .axi import AXI_4KB, AXI_MAX_BURST_BEATS

__all__ = ["command_layout", "burst_layout", "split_bursts", "BurstSplitter", "check_bus",
           "resolve_max_burst"]


def command_layout(addr_width):
    """A transfer: `length` bytes from byte address `addr`."""
    return data.StructLayout({"addr": unsigned(addr_width), "length": unsigned(addr_width)})


def burst_layout(addr_width):
    """One INCR burst: AxADDR, AxLEN (beats - 1) and whether it ends its command."""
    return data.StructLayout({"addr": unsigned(addr_width), "len": unsigned(8),
                              "last": unsigned(1)})


def check_bus(owner, addr_width, data_width):
    """The bus a command travels on: byte addresses of 12 to 64 bits (at least one 4 KB
    page), and one of the data widths the DMA is built for."""
    validate.integer(owner, "addr_width", addr_width, lo=12, hi=64)
    validate.one_of(owner, "data_width", data_width, validate.AXI_DATA_WIDTHS)


def _max_legal_burst(data_width):
    return min(AXI_MAX_BURST_BEATS, AXI_4KB // (data_width // 8))


def resolve_max_burst(owner, data_width, max_burst_beats):
    """`max_burst_beats`, checked against AXI's limit for the width, or that limit if None."""
    limit = _max_legal_burst(data_width)
    if max_burst_beats is None:
        return limit
    return validate.integer(owner, f"max_burst_beats (for a {data_width}-bit bus)",
                            max_burst_beats, lo=1, hi=limit)


def split_bursts(addr, length, *, data_width, max_burst_beats=None):
    """The bursts `BurstSplitter` makes of one command, as (byte address, beats) pairs.

    The Python twin of the hardware, for benches and tests; like the hardware it
    returns no burst for a malformed command (zero length or not beat-aligned).
    """
    bpb = data_width // 8
    mbb = _max_legal_burst(data_width) if max_burst_beats is None else max_burst_beats
    if length <= 0 or addr % bpb or length % bpb:
        return []
    bursts, left = [], length // bpb
    while left:
        n = min(left, mbb, (AXI_4KB - addr % AXI_4KB) // bpb)
        bursts.append((addr, n))
        addr += n * bpb
        left -= n
    return bursts


class BurstSplitter(wiring.Component):
    """Cut commands into AXI4 INCR bursts, one burst per cycle.

    Each burst has min(beats left, `max_burst_beats`, beats to the next 4 KB
    boundary) beats, so bursts are as long as AXI allows and never cross 4 KB.

    Three register stages keep every path short enough for 100 MHz on an FPGA:
    an input stage that takes a command and works out its distance to the page
    boundary, the splitting state, and an output register with a skid entry.
    `cmd.ready` and the splitting state depend only on registers, never on
    `burst.ready` through arithmetic, and each state update is one adder or one
    comparison deep (see `elaborate`). Back-to-back commands of one burst each
    still leave at one burst per cycle; a command's first burst appears three
    cycles after the command is taken.

    A command whose address or length is not a multiple of the bus width, or whose
    length is zero, is consumed without producing a burst and pulses `malformed`
    in the cycle it is taken.

    Parameters
    ----------
    addr_width : int
        Byte address width (12 to 64; lengths use the same width).
    data_width : int
        Bus width in bits: 32, 64, 128, 256 or 512.
    max_burst_beats : int or None
        Longest burst; by default the AXI limit, min(256, 4096 / bytes per beat).
    """

    #: cycles from a command accepted to its first burst offered: the three stages
    latency = 3

    def __init__(self, *, addr_width, data_width, max_burst_beats=None):
        check_bus("BurstSplitter", addr_width, data_width)
        self._addr_width = addr_width
        self._data_width = data_width
        self._max_burst_beats = resolve_max_burst("BurstSplitter", data_width, max_burst_beats)
        super().__init__({
            "cmd": In(stream.Signature(command_layout(addr_width))),
            "burst": Out(stream.Signature(burst_layout(addr_width))),
            "malformed": Out(1),
            "busy": Out(1),
        })

    @property
    def addr_width(self):
        return self._addr_width

    @property
    def data_width(self):
        return self._data_width

    @property
    def max_burst_beats(self):
        return self._max_burst_beats

    def elaborate(self, platform):
        m = Module()
        shift = (self._data_width // 8).bit_length() - 1     # log2(bytes per beat)
        page = AXI_4KB >> shift                               # beats in one 4 KB page
        mbb = self._max_burst_beats                           # <= page by construction
        beats_shape = unsigned(self._addr_width - shift + 1)
        to_page_shape = range(page + mbb + 1)

        # Stage 1: a well-formed command and its distance to the page boundary.
        p_valid = Signal()
        p_addr = Signal(self._addr_width)
        p_beats = Signal(beats_shape)
        p_to_page = Signal(to_page_shape)          # beats from p_addr to the boundary
        p_to_page_mbb = Signal(to_page_shape)      # the same plus max_burst_beats
        p_short = Signal()                         # p_to_page <= max_burst_beats

        # Stage 2: the command being split. `cap` is the longest burst the next one
        # may be (min(to_page, mbb)); `last` says the next burst ends the command.
        busy = Signal()
        addr = Signal(self._addr_width)
        left = Signal(beats_shape)
        to_page = Signal(to_page_shape)
        to_page_mbb = Signal(to_page_shape)
        short = Signal()
        last = Signal()

        # Stage 3: the burst register and one skid entry, so that stage 2 advances on
        # a registered condition (the skid entry is empty), not on `burst.ready`.
        skid_valid = Signal()
        skid = Signal(burst_layout(self._addr_width))

        cmd = self.cmd.payload
        cmd_beats = cmd.length[shift:]
        offset = cmd.addr[shift:12]                            # beats into the page
        misaligned = (cmd.addr[:shift] != 0) | (cmd.length[:shift] != 0)

        advance = Signal()        # stage 2 emits a burst
        load = Signal()           # stage 2 takes the command in stage 1
        m.d.comb += [
            advance.eq(busy & ~skid_valid),
            load.eq(p_valid & (~busy | (advance & last))),
            self.cmd.ready.eq(~p_valid | load),
            self.busy.eq(p_valid | busy | skid_valid | self.burst.valid),
        ]

        # Stage 1 takes every accepted command; only `p_valid` depends on the
        # well-formedness check, so that check (a wide OR on the command FIFO's
        # unregistered read) feeds one register's input, not the enable of all.
        malformed = Signal()
        m.d.comb += malformed.eq(misaligned | (cmd_beats == 0))
        with m.If(load):
            m.d.sync += p_valid.eq(0)
        with m.If(self.cmd.valid & self.cmd.ready):
            m.d.comb += self.malformed.eq(malformed)
            m.d.sync += [p_valid.eq(~malformed), p_addr.eq(cmd.addr), p_beats.eq(cmd_beats),
                         p_to_page.eq(page - offset), p_to_page_mbb.eq(page + mbb - offset),
                         p_short.eq(offset >= page - mbb)]

        # The burst stage 2 emits: all of what is left, or a cap's worth.
        cap = Mux(short, to_page, mbb)
        n = Mux(last, left, cap)
        out = Signal.like(skid)
        m.d.comb += [out.addr.eq(addr), out.len.eq(n - 1), out.last.eq(last)]

        # The next state in closed form, so that each register is one adder or one
        # comparison away from registers. If the burst is not the last it is `cap`
        # long. A short one (to_page <= mbb) reaches the boundary: a fresh page
        # follows, and the command ends with the next burst iff
        # left - to_page <= mbb. Otherwise it is mbb long, to_page drops by mbb, the
        # following cap is min(to_page - mbb, mbb), and the command ends with the
        # next burst iff left - mbb <= that cap.
        with m.If(advance):
            m.d.sync += addr.eq(addr + (n << shift))
            with m.If(last):
                m.d.sync += busy.eq(0)
            with m.Else():
                m.d.sync += left.eq(left - cap)
                with m.If(short):
                    m.d.sync += [to_page.eq(page), to_page_mbb.eq(page + mbb),
                                 short.eq(int(page <= mbb)), last.eq(left <= to_page_mbb)]
                with m.Else():
                    m.d.sync += [to_page.eq(to_page - mbb), to_page_mbb.eq(to_page),
                                 short.eq(to_page <= 2 * mbb),
                                 last.eq(Mux(to_page <= 2 * mbb, left <= to_page,
                                             left <= 2 * mbb))]
        with m.If(load):
            m.d.sync += [busy.eq(1), addr.eq(p_addr), left.eq(p_beats),
                         to_page.eq(p_to_page), to_page_mbb.eq(p_to_page_mbb),
                         short.eq(p_short),
                         last.eq(p_beats <= Mux(p_short, p_to_page, mbb))]

        # Stage 3: a burst goes to the output register when it is free, else to the
        # skid entry (which then holds stage 2 until the output drains it).
        with m.If(~self.burst.valid | self.burst.ready):
            m.d.sync += [self.burst.valid.eq(skid_valid | advance),
                         self.burst.payload.eq(Mux(skid_valid, skid, out)),
                         skid_valid.eq(0)]
        with m.Elif(advance):
            m.d.sync += [skid_valid.eq(1), skid.eq(out)]
        return m
