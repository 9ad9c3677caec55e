"""The AXI4 master DMA: bus-width transfers between memory and streams.

A command is a byte address and a byte length, both multiples of the bus width
(one *beat*). `BurstSplitter` (hdl/bursts.py) cuts a command into INCR bursts of
at most `max_burst_beats` beats (256 at most, AXI4's limit) that never cross a
4 KB boundary; `DMAReader` turns bursts into AR requests and streams the R data out in
order; `DMAWriter` turns bursts into AW requests followed by W beats taken from a
data stream, and reports each command's completion once all of its B responses
are in. `DMA` puts both on one AXI4 port and adds the byte counters and the
sticky error status a controller reads.

An error response never hangs the streams, and the sticky status records which
channel failed. A read burst answered with SLVERR or DECERR still delivers its beats
(with whatever data the slave returned). A write burst answered so stops the writing:
no new burst goes out on AW until the status is cleared, while the bursts already
accepted get all their W beats (AXI4 requires them) and the remaining commands' data
are still taken from the stream and dropped, each command still completing, marked
failed.

All transactions use ID 0, so AXI returns read data in order and no reorder
buffer is needed.
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, Const, Module, Mux, Signal, unsigned
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from attenio import validate

from .axi import AXI4ReadSignature, AXI4Signature, AXI4WriteSignature, AXIBurst
from .bursts import (BurstSplitter, burst_layout, check_bus, command_layout, resolve_max_burst,
                     split_bursts)

__all__ = ["split_bursts", "command_layout", "burst_layout", "read_data_layout",
           "write_data_layout", "write_done_layout", "error_layout",
           "BurstSplitter", "DMAReader", "DMAWriter", "DMA"]


def read_data_layout(data_width):
    """A beat of read data; `last` marks the final beat of a command."""
    return data.StructLayout({"data": unsigned(data_width), "last": unsigned(1)})


def write_data_layout(data_width):
    """A beat of write data (the writer counts beats itself; no `last` is needed)."""
    return data.StructLayout({"data": unsigned(data_width)})


def write_done_layout():
    """A write command completed; `error` if any of its bursts got SLVERR/DECERR."""
    return data.StructLayout({"error": unsigned(1)})


def error_layout():
    """Sticky error status: which channel saw an error response, or a malformed command."""
    return data.StructLayout({"read": unsigned(1), "write": unsigned(1), "command": unsigned(1)})


class _BurstMaster(wiring.Component):
    """What `DMAReader` and `DMAWriter` share: their bus parameters, the burst splitter in
    front of `cmd`, and the address channel (AR or AW) that issues its bursts."""

    def _keep_parameters(self, *, addr_width, data_width, id_width, max_outstanding,
                   max_burst_beats):
        """Check and keep the parameters both halves have; returns max_burst_beats."""
        owner = type(self).__name__
        check_bus(owner, addr_width, data_width)
        validate.integer(owner, "max_outstanding", max_outstanding, lo=1, hi=256)
        self._addr_width = addr_width
        self._data_width = data_width
        self._id_width = id_width
        self._max_outstanding = max_outstanding
        self._max_burst_beats = resolve_max_burst(owner, data_width, max_burst_beats)
        return self._max_burst_beats

    def _members(self, axi_signature, **streams):
        """`cmd`, then `streams`, the AXI channels and the status outputs."""
        aw, dw = self._addr_width, self._data_width
        return {
            "cmd": In(stream.Signature(command_layout(aw))),
            **streams,
            "axi": Out(axi_signature(addr_width=aw, data_width=dw, id_width=self._id_width)),
            "error": Out(1),
            "malformed": Out(1),
            "busy": Out(1),
        }

    addr_width = property(lambda self: self._addr_width)
    data_width = property(lambda self: self._data_width)
    id_width = property(lambda self: self._id_width)
    max_outstanding = property(lambda self: self._max_outstanding)
    max_burst_beats = property(lambda self: self._max_burst_beats)
    fifo_depth = property(lambda self: self._fifo_depth)

    def _splitter(self, m):
        """The burst splitter, fed by `cmd`; its `malformed` is ours."""
        m.submodules.split = split = BurstSplitter(
            addr_width=self._addr_width, data_width=self._data_width,
            max_burst_beats=self._max_burst_beats)
        wiring.connect(m, wiring.flipped(self.cmd), split.cmd)
        m.d.comb += self.malformed.eq(split.malformed)
        return split

    def _issue(self, m, channel, burst, go):
        """Send `burst` on the address channel `channel` ("ar" or "aw") while `go` allows it
        (AxID 0, INCR, full-width beats); returns the channel's handshake."""
        axi = self.axi
        ax = lambda name: getattr(axi, channel + name)
        fire = Signal(name=f"{channel}_fire")
        m.d.comb += [
            ax("valid").eq(burst.valid & go),
            ax("id").eq(0),
            ax("addr").eq(burst.payload.addr),
            ax("len").eq(burst.payload.len),
            ax("size").eq((self._data_width // 8).bit_length() - 1),
            ax("burst").eq(AXIBurst.INCR),
            ax("cache").eq(0b0011),          # normal, non-cacheable, bufferable
            burst.ready.eq(ax("ready") & go),
            fire.eq(ax("valid") & ax("ready")),
        ]
        return fire


class DMAReader(_BurstMaster):
    """Read commands into a stream of bus-width beats, in command order.

    Up to `max_outstanding` AR bursts are in flight. Read data land in a FIFO of
    `fifo_depth` beats; a burst is requested only when the FIFO has room for all
    of its beats counting those already requested, so every beat the slave offers
    finds room, RREADY is a constant 1 (the FIFO's level is not in the R handshake)
    and back-pressure on `data` throttles the AR requests instead of dropping data.

    Ports
    -----
    cmd : In(stream of command_layout)      transfers to read
    data : Out(stream of read_data_layout)  the beats, `last` on each command's final beat
    axi : Out(AXI4ReadSignature)            AR and R channels
    error : Out(1)                          pulses on a beat with RRESP SLVERR/DECERR
    malformed : Out(1)                      pulses when a malformed command is dropped
    busy : Out(1)                           a command, burst or beat is still under way
    """

    #: cycles from a beat on R to its offer on `data` (`SyncFIFOBuffered`: the FIFO,
    #: then its output register)
    response_latency = 2
    #: cycles from a beat taken off `data` to the room it frees counting for a new
    #: burst (the handshake, then the free-entry count, are registers)
    room_latency = 2
    #: FIFO entries beyond the `fifo_depth` the reservation counts (see `elaborate`)
    _spare = 1

    def __init__(self, *, addr_width=32, data_width=64, id_width=1, max_outstanding=4,
                 max_burst_beats=None, fifo_depth=None):
        mbb = self._keep_parameters(addr_width=addr_width, data_width=data_width,
                                    id_width=id_width, max_outstanding=max_outstanding,
                                    max_burst_beats=max_burst_beats)
        if fifo_depth is None:
            fifo_depth = 2 * mbb
        self._fifo_depth = validate.integer("DMAReader", "fifo_depth (at least max_burst_beats)",
                                            fifo_depth, lo=mbb)
        #: the FIFO has room for a beat (not a port: what the proofs hold RREADY's 1 to)
        self.beat_room = Signal(name="beat_room")
        super().__init__(self._members(
            AXI4ReadSignature, data=Out(stream.Signature(read_data_layout(data_width)))))

    def elaborate(self, platform):
        m = Module()
        axi = self.axi
        split = self._splitter(m)
        # One entry more than the reservation counts: `SyncFIFOBuffered` holds its beats in
        # an inner queue of depth - 1 and its output register, and a beat can arrive in the
        # cycle the register is empty and has not yet taken the queue's head (at
        # fifo_depth = 2 the queue is one entry, full with a burst's first beat as the
        # second arrives). With depth + 1 the queue alone holds every reserved beat, so a
        # beat always has room and RREADY needs no FIFO level.
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=self._data_width + 1,
                                                    depth=self._fifo_depth + self._spare)
        # One entry per burst in flight: does the burst end its command?
        m.submodules.ends = ends = SyncFIFO(width=1, depth=self._max_outstanding)

        # FIFO entries neither requested nor holding a beat. Kept as a register, so that
        # ARVALID is one comparison away from registers.
        free = Signal(range(self._fifo_depth + 1), init=self._fifo_depth)
        inflight = Signal(range(self._max_outstanding + 1))
        burst = split.burst
        beats = burst.payload.len + 1
        # Both only loosen while a burst waits, so ARVALID never drops before ARREADY.
        room = burst.payload.len < free                  # beats <= free
        slot = (inflight < self._max_outstanding) & ends.w_rdy

        ar_fire = self._issue(m, "ar", burst, room & slot)
        r_fire = Signal()
        pop = Signal()
        m.d.comb += [
            ends.w_en.eq(ar_fire),
            ends.w_data.eq(burst.payload.last),

            axi.rready.eq(1),                # the reservation above keeps room for it
            self.beat_room.eq(fifo.w_rdy),
            r_fire.eq(axi.rvalid),
            fifo.w_en.eq(r_fire),
            fifo.w_data.eq(Cat(axi.rdata, axi.rlast & ends.r_data)),
            ends.r_en.eq(r_fire & axi.rlast),
            self.error.eq(r_fire & axi.rresp[1]),

            self.data.valid.eq(fifo.r_rdy),
            self.data.payload.eq(fifo.r_data),
            fifo.r_en.eq(self.data.ready),
            pop.eq(fifo.r_rdy & self.data.ready),

            self.busy.eq(split.busy | (inflight != 0) | fifo.r_rdy),
        ]
        # Both outcomes computed from registers beside the comparison, so after its carry
        # chain only the handshake and this selection lie before `free` (the update's
        # subtraction after the comparison was a second chain: 10.98 ns, the fp16 2x2's
        # worst path on a seed). The consumer's pop is registered first: its ready comes
        # from the consumer's logic across the chip (the unpacker's index); the room it
        # frees counts a cycle later (`room_latency`), which only delays a burst
        popped = Signal(name="free_popped")
        m.d.sync += popped.eq(pop)
        taken = Signal.like(free, name="free_taken")
        kept = Signal.like(free, name="free_kept")
        m.d.comb += [taken.eq(free - beats + popped), kept.eq(free + popped)]
        m.d.sync += [
            free.eq(Mux(ar_fire, taken, kept)),
            inflight.eq(inflight + ar_fire - (r_fire & axi.rlast)),
        ]
        return m


class DMAWriter(_BurstMaster):
    """Write a stream of bus-width beats to memory, one command at a time in order.

    Each burst's AW request goes out first; its W beats follow from `data` with
    WLAST on the burst's final beat. A FIFO of `fifo_depth` beats sits between
    `data` and W, so WVALID comes from a register and short stalls on either side
    do not stall the other. Up to `max_outstanding` bursts may wait for
    their B response. When the last B of a command is in, `done` carries one
    entry whose `error` says whether any of the command's bursts failed.

    A B answered SLVERR or DECERR *stops* the writer until `error_clear`: no new AW
    is offered (one already offered stays up until taken, as AXI4 requires, and is
    written in full), and the bursts accepted on AW get all their W beats and their
    B. Once none is left, the remaining bursts are dropped in order: their beats are
    taken from the FIFO one a cycle and discarded, so `data` keeps flowing, and the
    last burst of each command gives the command's `done`, its `error` set. Nothing
    is written after the error but what AW had accepted.

    Ports
    -----
    cmd : In(stream of command_layout)        transfers to write
    data : In(stream of write_data_layout)    the beats, length/bytes-per-beat per command
    done : Out(stream of write_done_layout)   one entry per completed command
    error_clear : In(1)                       ends the stop after an error response (pulse
                                              it while not `busy`, between runs)
    axi : Out(AXI4WriteSignature)             AW, W and B channels
    error : Out(1)                            pulses on a B with SLVERR/DECERR
    malformed : Out(1)                        pulses when a malformed command is dropped
                                              (it gets no `done`; its data, if sent, would
                                              be taken by the next command)
    busy : Out(1)                             a command, burst, beat or response is still
                                              under way
    """

    #: cycles from a beat accepted on `data` to its W handshake with an always-ready
    #: slave (the write FIFO and its output register)
    data_latency = 2
    #: cycles from a B handshake to its completion on `done` (a register)
    response_latency = 1

    def __init__(self, *, addr_width=32, data_width=64, id_width=1, max_outstanding=4,
                 max_burst_beats=None, fifo_depth=16):
        self._keep_parameters(addr_width=addr_width, data_width=data_width, id_width=id_width,
                              max_outstanding=max_outstanding, max_burst_beats=max_burst_beats)
        self._fifo_depth = validate.integer("DMAWriter", "fifo_depth", fifo_depth,
                                            lo=2, hi=1 << 16)
        super().__init__(self._members(
            AXI4WriteSignature, data=In(stream.Signature(write_data_layout(data_width))),
            done=Out(stream.Signature(write_done_layout())), error_clear=In(1)))

    def _stop(self, m, failed_b):
        """The stop after an error response: set the cycle after `failed_b`, cleared by
        `error_clear` (a failed B in the same cycle wins)."""
        stopped = Signal()
        with m.If(failed_b):
            m.d.sync += stopped.eq(1)
        with m.Elif(self.error_clear):
            m.d.sync += stopped.eq(0)
        return stopped

    def elaborate(self, platform):
        m = Module()
        axi = self.axi
        split = self._splitter(m)
        m.submodules.fifo = fifo = SyncFIFOBuffered(width=self._data_width,
                                                    depth=self._fifo_depth)
        m.d.comb += [fifo.w_data.eq(self.data.payload.data), fifo.w_en.eq(self.data.valid),
                     self.data.ready.eq(fifo.w_rdy)]
        # Per burst in flight: its AxLEN for the W side, its end-of-command flag for B.
        m.submodules.wlens = wlens = SyncFIFO(width=8, depth=self._max_outstanding)
        m.submodules.ends = ends = SyncFIFO(width=1, depth=self._max_outstanding)

        inflight = Signal(range(self._max_outstanding + 1))
        burst = split.burst
        slot = (inflight < self._max_outstanding) & wlens.w_rdy & ends.w_rdy

        # After an error response no AW is raised; one already up stays (`held`).
        b_fire = Signal()
        b_error = axi.bresp[1]
        stopped = self._stop(m, b_fire & b_error)
        held = Signal()                     # AWVALID was up last cycle and not taken
        # the burst as AW sees it: its own `ready`, since a dropped burst is taken too
        to_aw = SimpleNamespace(valid=burst.valid, ready=Signal(name="aw_takes"),
                                payload=burst.payload)
        aw_fire = self._issue(m, "aw", to_aw, slot & (~stopped | held))
        m.d.sync += held.eq(axi.awvalid & ~axi.awready)
        m.d.comb += [
            wlens.w_en.eq(aw_fire),
            wlens.w_data.eq(burst.payload.len),
            ends.w_en.eq(aw_fire),
            ends.w_data.eq(burst.payload.last),
        ]

        # W: beats of the oldest burst whose AW has gone out.
        beat = Signal(8)
        w_fire = Signal()
        discard = Signal()                  # a dropped burst's beat leaves the FIFO
        # `wlens.r_rdy` as a flip-flop of its own, set from the level the FIFO will have, so
        # no comparison of wlens's level comes before the data FIFO's read enable and level
        has_len = Signal()
        m.d.sync += has_len.eq(wlens.w_en | (wlens.r_level > 1)
                               | ((wlens.r_level == 1) & ~wlens.r_en))
        m.d.comb += [
            axi.wvalid.eq(fifo.r_rdy & has_len),
            axi.wdata.eq(fifo.r_data),
            axi.wstrb.eq(Const(-1, len(axi.wstrb))),
            axi.wlast.eq(beat == wlens.r_data),
            fifo.r_en.eq((axi.wready & has_len) | discard),
            w_fire.eq(axi.wvalid & axi.wready),
            wlens.r_en.eq(w_fire & axi.wlast),
        ]
        with m.If(w_fire):
            m.d.sync += beat.eq(Mux(axi.wlast, 0, beat + 1))

        # Stopped, with nothing accepted on AW left: drop the bursts one after another.
        left = Signal(range(self._max_burst_beats + 1))    # beats of the dropped burst
        ends_command = Signal()             # the dropped burst is its command's last
        owed = Signal()                     # a dropped command's `done`, not yet out
        drop = Signal()
        m.d.comb += [
            drop.eq(stopped & ~held & (inflight == 0) & ~wlens.r_rdy & (left == 0) & ~owed),
            burst.ready.eq(to_aw.ready | drop),
            discard.eq((left != 0) & fifo.r_rdy),
        ]
        with m.If(drop & burst.valid):
            m.d.sync += [left.eq(burst.payload.len + 1), ends_command.eq(burst.payload.last)]
        with m.If(discard):
            m.d.sync += left.eq(left - 1)
            with m.If((left == 1) & ends_command):
                m.d.sync += owed.eq(1)

        # B: fold the responses of a command; the last one emits `done`.
        failed = Signal()                   # an earlier burst of this command failed
        m.d.comb += [
            axi.bready.eq(ends.r_rdy & (~ends.r_data | ~self.done.valid | self.done.ready)),
            b_fire.eq(axi.bvalid & axi.bready),
            ends.r_en.eq(b_fire),
            self.error.eq(b_fire & b_error),
        ]
        with m.If(self.done.ready):
            m.d.sync += self.done.valid.eq(0)
        with m.If(b_fire):
            with m.If(ends.r_data):
                m.d.sync += [self.done.valid.eq(1),
                             self.done.payload.error.eq(failed | b_error),
                             failed.eq(0)]
            with m.Else():
                m.d.sync += failed.eq(failed | b_error)
        # No B comes while a command is dropped: its `done` has the register to itself.
        with m.If(owed & (~self.done.valid | self.done.ready)):
            m.d.sync += [self.done.valid.eq(1), self.done.payload.error.eq(1), failed.eq(0),
                         owed.eq(0)]

        m.d.comb += self.busy.eq(split.busy | (inflight != 0) | fifo.r_rdy | (left != 0) | owed)
        m.d.sync += inflight.eq(inflight + aw_fire - b_fire)
        return m


class DMA(wiring.Component):
    """An AXI4 master with a read and a write side, byte counters and an error status.

    Parameters
    ----------
    addr_width, data_width, id_width : int
        The AXI4 port (`data_width` 32 to 512 bits).
    max_reads : int
        AR bursts in flight at once.
    max_writes : int
        AW bursts awaiting their B response at once.
    max_burst_beats : int or None
        Longest burst; by default AXI's limit for the width (256 beats, 4 KB).
    read_fifo_depth : int or None
        Beats of read buffering (default two maximal bursts); bounds the reads in flight.
    write_fifo_depth : int
        Beats of write buffering between `wr_data` and W.
    counter_width : int
        Width of the byte counters (64 for the CSR block).

    Ports
    -----
    m_axi : Out(AXI4Signature)
    rd_cmd, rd_data : the reader's command and data streams (see `DMAReader`)
    wr_cmd, wr_data, wr_done : the writer's streams (see `DMAWriter`)
    error : Out(error_layout)     sticky: `read` (RRESP), `write` (BRESP), `command` (malformed)
    error_clear : In(1)           clears `error`, and the writer's stop after a write error
    bytes_read, bytes_written : Out(counter_width)   bytes moved on R and W since reset or
    counters_clear : In(1)        ... the last pulse here
    busy : Out(1)
    """

    def __init__(self, *, addr_width=32, data_width=64, id_width=1, max_reads=4, max_writes=4,
                 max_burst_beats=None, read_fifo_depth=None, write_fifo_depth=16,
                 counter_width=64):
        check_bus("DMA", addr_width, data_width)
        validate.integer("DMA", "max_reads", max_reads, lo=1, hi=256)
        validate.integer("DMA", "max_writes", max_writes, lo=1, hi=256)
        validate.integer("DMA", "counter_width", counter_width, lo=16, hi=128)
        mbb = resolve_max_burst("DMA", data_width, max_burst_beats)
        if read_fifo_depth is None:
            read_fifo_depth = 2 * mbb
        validate.integer("DMA", "read_fifo_depth (at least max_burst_beats)", read_fifo_depth,
                         lo=mbb)
        validate.integer("DMA", "write_fifo_depth", write_fifo_depth, lo=2, hi=1 << 16)
        # The halves are built in `elaborate` (an unused one would warn); their
        # parameters are all checked above.
        self._params = dict(addr_width=addr_width, data_width=data_width, id_width=id_width,
                            max_burst_beats=mbb)
        self._max_reads, self._max_writes = max_reads, max_writes
        self._read_fifo_depth, self._write_fifo_depth = read_fifo_depth, write_fifo_depth
        self._counter_width = counter_width
        super().__init__({
            "m_axi": Out(AXI4Signature(addr_width=addr_width, data_width=data_width,
                                       id_width=id_width)),
            "rd_cmd": In(stream.Signature(command_layout(addr_width))),
            "rd_data": Out(stream.Signature(read_data_layout(data_width))),
            "wr_cmd": In(stream.Signature(command_layout(addr_width))),
            "wr_data": In(stream.Signature(write_data_layout(data_width))),
            "wr_done": Out(stream.Signature(write_done_layout())),
            "error": Out(error_layout()),
            "error_clear": In(1),
            "bytes_read": Out(counter_width),
            "bytes_written": Out(counter_width),
            "counters_clear": In(1),
            "busy": Out(1),
        })

    addr_width = property(lambda self: self._params["addr_width"])
    data_width = property(lambda self: self._params["data_width"])
    id_width = property(lambda self: self._params["id_width"])
    max_burst_beats = property(lambda self: self._params["max_burst_beats"])
    max_reads = property(lambda self: self._max_reads)
    max_writes = property(lambda self: self._max_writes)
    read_fifo_depth = property(lambda self: self._read_fifo_depth)
    write_fifo_depth = property(lambda self: self._write_fifo_depth)
    counter_width = property(lambda self: self._counter_width)

    def elaborate(self, platform):
        m = Module()
        m.submodules.reader = reader = DMAReader(
            **self._params, max_outstanding=self._max_reads, fifo_depth=self._read_fifo_depth)
        m.submodules.writer = writer = DMAWriter(
            **self._params, max_outstanding=self._max_writes, fifo_depth=self._write_fifo_depth)
        wiring.connect(m, wiring.flipped(self.rd_cmd), reader.cmd)
        wiring.connect(m, wiring.flipped(self.rd_data), reader.data)
        wiring.connect(m, wiring.flipped(self.wr_cmd), writer.cmd)
        wiring.connect(m, wiring.flipped(self.wr_data), writer.data)
        wiring.connect(m, wiring.flipped(self.wr_done), writer.done)
        m.d.comb += writer.error_clear.eq(self.error_clear)

        # The read and write halves share the port member by member (same AXI names).
        for side in (reader.axi, writer.axi):
            for name, member in side.signature.members.items():
                ours, theirs = getattr(self.m_axi, name), getattr(side, name)
                if member.flow == Out:
                    m.d.comb += ours.eq(theirs)
                else:
                    m.d.comb += theirs.eq(ours)

        bytes_per_beat = self.data_width // 8
        axi = self.m_axi
        with m.If(self.counters_clear):
            m.d.sync += [self.bytes_read.eq(0), self.bytes_written.eq(0)]
        with m.Else():
            with m.If(axi.rvalid & axi.rready):
                m.d.sync += self.bytes_read.eq(self.bytes_read + bytes_per_beat)
            with m.If(axi.wvalid & axi.wready):
                m.d.sync += self.bytes_written.eq(self.bytes_written + bytes_per_beat)

        with m.If(self.error_clear):
            m.d.sync += self.error.eq(0)
        with m.Else():
            with m.If(reader.error):
                m.d.sync += self.error.read.eq(1)
            with m.If(writer.error):
                m.d.sync += self.error.write.eq(1)
            with m.If(reader.malformed | writer.malformed):
                m.d.sync += self.error.command.eq(1)

        m.d.comb += self.busy.eq(reader.busy | writer.busy)
        return m
