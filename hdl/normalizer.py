"""`Normalizer`: a finished Q block's O, divided by l, out in the storage format, a chunk a cycle.

Armed by the replay when a block's last V row starts (`block`), it waits until
that row's last word has left the last MAC and its O update is written
(`MAC.update_latency` later), then drains the block's valid rows in row order
(row ``t*p*q/s + i*q/s + c``: group c of line i, slot t), one chunk of s
elements every s/F cycles: the array's read port (`attenio.hdl.pe_array.drain_signature`)
gives the chunk of the row's O (element g from the group's MAC g) and its
lane's l; the reciprocal of l (`Int8Arith.reciprocal`, recomputed per read
since it is fully pipelined) and F of the format's ``finalize`` give the elements,
F a cycle (`finalizers`: s for int8, whose finalize is small; s/2 for a float
format, whose finalize (a conversion to fp32, an fp32 product, a rounding to the
storage format) is some 1,200 LUTs: the chunk is read s/F times, F of its elements
taken each time), which go through a small FIFO to `o_out`, `last` on the block's
final chunk. A float
format's drain also reads the row's m: a row whose max ends NaN or +inf, or whose l
is 0, outputs the canonical NaN in every element (`attenio.sim.golden_fp`).

The drain issues only against credits of the output FIFO, so back-pressure on
`o_out` never loses a chunk in the pipeline. While armed or draining it is not
`idle`, which holds the next block's S_0 (its softmax and updates would
overwrite l and O before they are read).
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal
from amaranth.lib import data, fifo, stream, wiring
from amaranth.lib.wiring import In, Out

from attenio import validate

from .formats import FloatArith, check_arith
from .formats.dsp import Stages
from .formats.fp import FP32
from .mac import MAC, word_layout
from .pe_array import PEArray, drain_signature
from .replay import drain_layout
from .widthconv import element_layout

__all__ = ["Normalizer"]


class Normalizer(wiring.Component):
    """The drain of an array of `mac_lines` x `macs_per_line` MACs in groups of `split` with
    `rows_per_mac` rows, Q blocks of up to `block_rows` rows of `head_dim` elements,
    `lanes` softmax lanes per line, format `arith`, `banks` score and (P, alpha) banks in
    the array (the `tail` word's layout).

    Ports: `block` the armed block (`ready` = idle); `tail` the word leaving the
    array's last MAC; `array` the read port into the array; `o_out` the chunks;
    `busy` armed, draining, or a chunk still in the pipeline or the FIFO.
    """

    #: cycles from a chunk written into the output FIFO to its offer on `o_out`
    #: (`amaranth.lib.fifo.SyncFIFOBuffered`: the FIFO, then its output register)
    output_latency = 2

    #: the output FIFO holds `latency` + this many chunks, so that an always-ready consumer
    #: takes one chunk every cycle: a chunk's credit comes back `output_latency` cycles
    #: after its write, through the handshake's register (`taken`) and the credit
    #: counter's, and one chunk more is margin
    CREDIT_SLACK = output_latency + 3

    def __init__(self, *, arith, mac_lines, macs_per_line, rows_per_mac, block_rows, head_dim,
                 lanes, split=1, banks=2):
        check_arith("Normalizer", arith)
        validate.positive("Normalizer", mac_lines=mac_lines, macs_per_line=macs_per_line,
                          rows_per_mac=rows_per_mac, block_rows=block_rows, head_dim=head_dim,
                          lanes=lanes)
        validate.split("Normalizer", split, head_dim=head_dim, macs_per_line=macs_per_line,
                       lanes=lanes)
        validate.integer("Normalizer", "banks", banks, lo=2)
        self._arith = arith
        self._p, self._q, self._r, self._d, self._lanes = (mac_lines, macs_per_line, rows_per_mac,
                                                          head_dim, lanes)
        self._rows, self._s = block_rows, split
        rows = block_rows
        super().__init__({
            "block": In(stream.Signature(drain_layout(rows=rows))),
            "tail": In(word_layout(mac_lines=mac_lines, macs_per_line=macs_per_line,
                                   rows_per_mac=rows_per_mac, head_dim=head_dim, split=split,
                                   element=arith.word_shape, banks=banks)),
            "array": Out(drain_signature(arith=arith, mac_lines=mac_lines,
                                         macs_per_line=macs_per_line, rows_per_mac=rows_per_mac,
                                         head_dim=head_dim, lanes=lanes, split=split)),
            "o_out": Out(stream.Signature(element_layout(split, arith.out_shape))),
            "busy": Out(1),
        })

    @staticmethod
    def finalizers(arith, split):
        """F, the elements finalized a cycle: `split` for int8, half of it (at least 1)
        for a float format. The drain then takes d/F cycles a row, not d/s
        (`CoreTiming.drain_row`), which the next block's S_0 may wait for (`drain_wait`):
        0.4-0.8 % of the fp16 presets' cycles, for half the finalize units (the fp16
        4x4's normalizer 6,101 -> 3,937 LUT)."""
        return max(1, split // 2) if isinstance(arith, FloatArith) else split

    @staticmethod
    def latency(arith):
        """Cycles from a drain issue to its chunk written into the output FIFO: the
        address registers, the array's read, the reciprocal (O waits beside it),
        finalize, and the output register."""
        return 1 + PEArray.drain_read_latency + arith.reciprocal_latency + arith.finalize_latency + 1

    @staticmethod
    def row_cycles(arith, split, head_dim):
        """Cycles the drain takes per row: d/s chunks, each read s/F times."""
        return head_dim // Normalizer.finalizers(arith, split)

    @staticmethod
    def trigger_latency(arith):
        """Cycles from the block's last V word at the last MAC to the first drain issue:
        the O update written, then the start registered."""
        return MAC.update_latency(arith) + 1

    def elaborate(self, platform):
        m = Module()
        arith, split = self._arith, self._s
        mac_lines, rows_per_mac, lanes = self._p, self._r, self._lanes
        chunks = self._d // split                # per row
        groups_per_lane = self._q // lanes // split
        rows = self._rows
        armed = Signal()                         # the block's last V row has started
        draining = Signal()
        rows_valid = Signal(range(rows + 1))
        m.d.comb += self.block.ready.eq(~armed & ~draining)
        with m.If(self.block.valid & self.block.ready):
            m.d.sync += [armed.eq(1), rows_valid.eq(self.block.payload.rows_valid)]

        # The last V word at the last MAC; its O is written MAC.update_latency cycles later.
        tail = self.tail
        trigger = (tail.valid & tail.is_u & tail.last & tail.klast
                   & (tail.slot == rows_per_mac - 1))
        for k in range(MAC.update_latency(arith)):
            later = Signal(name=f"trigger_{k}")
            m.d.sync += later.eq(trigger)
            trigger = later

        # Row order: the group within its lane, the lane, the line, then the slot.
        elem = Signal(range(chunks))
        mac_in_lane = Signal(range(groups_per_lane))
        lane = Signal(range(lanes))
        line = Signal(range(mac_lines))
        o_base = Signal(range(rows_per_mac * chunks))        # the slot's O in a MAC
        l_base = Signal(range(rows_per_mac * groups_per_lane))   # the slot's l in a lane
        row = Signal(range(rows + 1))
        latency = self.latency(arith)
        depth = latency + self.CREDIT_SLACK
        credits = Signal(range(depth + 1), init=depth)
        out_layout = element_layout(split, arith.out_shape)
        m.submodules.out_fifo = out_fifo = fifo.SyncFIFOBuffered(width=out_layout.size,
                                                                 depth=depth)
        # Each chunk is read `phases` times (ph = 0 .. phases - 1), F of its elements taken
        # at each: the first read takes the chunk's credit, the last one writes the chunk.
        finalizers = self.finalizers(arith, split)
        phases = split // finalizers
        ph = Signal(range(phases), name="phase")
        ph_last = ph == phases - 1
        issue = draining & ((credits != 0) | (ph != 0))
        # the consumer's handshake returns its credit a cycle later, from a register: the
        # consumer (the beat packer, on the DMA writer's FIFO) may sit across the chip
        taken = Signal()
        m.d.sync += [taken.eq(self.o_out.valid & self.o_out.ready),
                     credits.eq(credits - (issue & (ph == 0)) + taken)]

        with m.If(trigger):
            m.d.sync += [armed.eq(0), draining.eq(1), elem.eq(0), mac_in_lane.eq(0),
                         lane.eq(0), line.eq(0), o_base.eq(0), l_base.eq(0), row.eq(0)]
        array = self.array
        m.d.sync += [array.addr.eq(o_base + elem), array.u.eq(l_base + mac_in_lane),
                     array.mac.eq(lane * groups_per_lane + mac_in_lane), array.lane.eq(lane),
                     array.line.eq(line)]
        is_last = (row == rows_valid - 1) & (elem == chunks - 1) & ph_last
        if phases > 1:
            with m.If(issue):
                m.d.sync += ph.eq(Mux(ph_last, 0, ph + 1))
        with m.If(issue & ph_last):
            m.d.sync += elem.eq(Mux(elem == chunks - 1, 0, elem + 1))
            with m.If(elem == chunks - 1):
                m.d.sync += row.eq(row + 1)
                with m.If(is_last):
                    m.d.sync += draining.eq(0)
                with m.If(mac_in_lane == groups_per_lane - 1):
                    m.d.sync += mac_in_lane.eq(0)
                    with m.If(lane == lanes - 1):
                        m.d.sync += lane.eq(0)
                        with m.If(line == mac_lines - 1):
                            m.d.sync += [line.eq(0), o_base.eq(o_base + chunks),
                                         l_base.eq(l_base + groups_per_lane)]
                        with m.Else():
                            m.d.sync += line.eq(line + 1)
                    with m.Else():
                        m.d.sync += lane.eq(lane + 1)
                with m.Else():
                    m.d.sync += mac_in_lane.eq(mac_in_lane + 1)

        # (the chunk's write, last, phase) of each issue, alongside the pipeline to the FIFO
        flag = data.StructLayout({"write": 1, "last": 1, "ph": range(phases)})
        flags = [Signal(flag, name=f"flags_{k}") for k in range(latency)]
        m.d.sync += flags[0].eq(Cat(issue & ph_last, is_last, ph))
        m.d.sync += [flags[k].eq(flags[k - 1]) for k in range(1, len(flags))]
        y, e = arith.reciprocal(m, array.l)
        # the read's F elements of this phase, into a register (`array.o` comes from the
        # array's read register), for the O delay below one cycle shorter
        o, wait = array.o, arith.reciprocal_latency
        if phases > 1:
            picked = Signal(data.ArrayLayout(arith.o_shape, finalizers), name="o_phase")
            at = flags[PEArray.drain_read_latency].ph          # the read now on `array.o`
            m.d.sync += [picked[j].eq(Array(o[p * finalizers + j] for p in range(phases))[at])
                         for j in range(finalizers)]
            o, wait = picked, wait - 1
        # O waits for its row's 1/l: in a block RAM for a float format (wide, long)
        if isinstance(arith, FloatArith):
            o = data.View(o.shape(), Stages(m).delay(o.as_value(), wait, "o", ram=True))
        else:
            for k in range(wait):
                later = Signal.like(o, name=f"o_{k}")
                m.d.sync += later.eq(o)
                o = later
        out = Signal(data.ArrayLayout(arith.out_shape, split))
        values = [arith.finalize(m, o[j], y, e) for j in range(finalizers)]
        if isinstance(arith, FloatArith):
            # the row's max (fp32) ends NaN or +inf, or its l is 0
            row_max, man, exp = array.m, FP32.man_bits, FP32.exp_bits
            special = row_max[man:man + exp] == FP32.exp_all_ones
            positive = ~row_max[man + exp]
            nan_row = special & ((row_max[:man] != 0) | positive) | (array.l == 0)
            nan_row = Stages(m).delay(nan_row, arith.reciprocal_latency + arith.finalize_latency,
                                      "nan_row")
            values = [Mux(nan_row, arith.out.nan, x) for x in values]
        # phase p's values into the chunk's elements p F .. p F + F - 1
        for p in range(phases):
            with m.If(flags[-2].ph == p):
                m.d.sync += [out[p * finalizers + j].eq(x) for j, x in enumerate(values)]
        m.d.comb += [out_fifo.w_data.eq(Cat(out, flags[-1].last)),
                     out_fifo.w_en.eq(flags[-1].write),
                     self.o_out.valid.eq(out_fifo.r_rdy), self.o_out.payload.eq(out_fifo.r_data),
                     out_fifo.r_en.eq(self.o_out.ready)]
        # a chunk's last read is the last of its reads to leave the pipeline; the FIFO's
        # level counts a chunk in the cycle between its write and its offer, which `r_rdy`
        # does not show (with the consumer's read of the chunk before). `busy` is an OR of
        # registers: the pipeline's writes beyond its first stage are its first L - 1
        # stages' of the cycle before, and the FIFO's next level is known a cycle ahead
        # (the controller's enables start from `busy`: a 48-input OR and a level
        # comparison before them do not fit a cycle with the route)
        later_writes, queued = Signal(), Signal()
        level_next = (out_fifo.level + (out_fifo.w_en & out_fifo.w_rdy)
                      - (out_fifo.r_en & out_fifo.r_rdy))
        m.d.sync += [later_writes.eq(Cat(*(f.write for f in flags[:-1])).any()),
                     queued.eq(level_next != 0)]
        m.d.comb += self.busy.eq(armed | draining | flags[0].write | later_writes | queued)
        return m
