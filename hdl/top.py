"""`attenio_top`: the whole accelerator, sized by a Plan.

    s_axil (AXI4-Lite) -> CSRBlock -> Controller -> ReadSequencer -cmd-> DMA reader -> BeatUnpacker
                                                   |  |      \\-kind-> TagJoin <-elements-+
                                                   |  |                  \\-> StreamSlice -+
                                                   |  +-block------> AttentionCore <-feed-+
                                                   +-> WriteSequencer -> DMA writer <- BeatPacker <-o_out-+
    m_axi (AXI4) <- DMA

The read sequencer tags every read command with its kind (Q, K or V); the tag
travels in a FIFO beside the data and is joined to the elements as they leave
the unpacker (`TagJoin`), so the core's feed carries kind and value together; a register
slice then ends the feed's handshake on either side (`StreamSlice`). `irq` is the DONE
bit, for hosts that prefer an interrupt to polling.
"""

from dataclasses import dataclass

from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from attenio import validate
from attenio.errors import ConfigError
from attenio.regmap import register_map

from .axi import AXI_4KB, AXI_MAX_BURST_BEATS, AXI4LiteSignature, AXI4Signature
from .bursts import BurstSplitter
from .controller import Controller
from .core import AttentionCore, Kind
from .csr import CSRBlock
from .dma import DMA, DMAReader, DMAWriter
from .formats import check_o_accumulator
from .kv_buffer import KVBuffer
from .normalizer import Normalizer
from .replay import RowReplay
from .sequencer import ReadSequencer, WriteSequencer
from .stream_slice import StreamSlice
from .tag_join import TagJoin
from .widthconv import BeatPacker, BeatUnpacker, element_layout

__all__ = ["AttenIOTop", "TopTiming", "ADDR_WIDTH", "check_plan"]

ADDR_WIDTH = 32


@dataclass(frozen=True)
class TopTiming:
    """The latencies of the path around the core, from the blocks on it, in cycles on the
    cycle model's clock (cycle 0: the controller's LAUNCH; a row's time: its first word
    at the array; see `attenio.model.cyclemodel.RtlParams` for each term's use).

    The model issues a read `read_offset` cycles after its AR handshake, so that the
    link's arrival time (the cycle after the last beat, plus that offset) is on the
    array's clock: a beat on R reaches the KV buffer through the reader's FIFO and
    the unpacker, and its row reaches the array through the replay's issue.
    """

    read_offset: int
    read_start: int
    feed_start: int
    write_tail: int
    room_issue: int
    beat_leave: int
    block_command: int
    block_fill: int
    feed_lead: int
    table_turn: int
    desc_turn: int

    @classmethod
    def of(cls, plan, arith):
        """The timing of `plan`'s top level around a core of format `arith`."""
        issue = RowReplay.issue_latency(arith)
        beat_to_element = DMAReader.response_latency + BeatUnpacker.latency + StreamSlice.latency
        offset = beat_to_element + issue - 1
        to_ar = StreamSlice.latency + BurstSplitter.latency    # a command taken to its AR
        return cls(
            read_offset=offset,
            # the sequencer's first command, through its slice and the burst splitter to AR
            read_start=ReadSequencer.command_latency + to_ar + offset,
            # the sequencer's first block, taken by the KV buffer
            feed_start=ReadSequencer.block_latency + KVBuffer.start_latency,
            write_tail=(Normalizer.output_latency + BeatPacker.latency + DMAWriter.data_latency
                        + DMAWriter.response_latency + WriteSequencer.finish_latency
                        + Controller.done_latency),
            room_issue=DMAReader.room_latency + offset,
            beat_leave=BeatUnpacker.latency + StreamSlice.latency + issue,
            feed_lead=StreamSlice.lead,
            # the sequencer moves from a block's command to its first read command
            block_command=(ReadSequencer.command_latency - ReadSequencer.block_latency
                           + to_ar + offset),
            block_fill=KVBuffer.start_latency,
            # paged: a table beat's R handshake to the AR of the K row it gives the page
            # of (the read FIFO, the table beats' FIFO, the page loader, the command out)
            table_turn=(DMAReader.response_latency + ReadSequencer.table_latency + to_ar),
            # a batch: a run's end to the next run's LAUNCH, but for the descriptor's read
            # in memory (its latency and beats, the model's): FETCH, the command out, its
            # beats to the controller, CHECK and DECIDE, the setup
            desc_turn=(Controller.fetch_cycles + ReadSequencer.desc_command_latency + to_ar
                       + DMAReader.response_latency + ReadSequencer.desc_latency
                       + Controller.check_cycles - 1
                       + Controller.setup_cycles_of(block_rows=plan.a,
                                                    max_seq_len=plan.workload.max_keys)),
        )


def check_plan(plan):
    """Raise ConfigError if the RTL cannot be generated for `plan`."""
    fmt = plan.config.format
    try:
        check_o_accumulator(fmt)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    b = plan.budget
    validate.lanes_per_line(exp_units=b.exp_units, mac_lines=b.mac_lines,
                            macs_per_line=b.macs_per_line, owner="budget", error=ConfigError)
    beat = plan.budget.axi_data_bits // 8
    # Q, K and V rows in the storage format, O rows in the format O is written in
    for what, eb in ((f"{fmt.name} elements", fmt.element_bytes),
                     (f"{fmt.name} O elements", fmt.out_bytes)):
        row_bytes = plan.workload.head_dim * eb
        if row_bytes % beat:
            raise ConfigError(f"a row of d = {plan.workload.head_dim} {what} ({row_bytes} bytes) "
                              f"must be a whole number of {plan.budget.axi_data_bits}-bit AXI "
                              f"beats; choose --axi-width <= {8 * row_bytes} or a larger d")
        if validate.split_breaks(plan.split, head_dim=plan.workload.head_dim,
                                element_bytes=eb, beat_bytes=beat) == "beat":
            raise ConfigError(f"a {plan.budget.axi_data_bits}-bit AXI beat must hold whole "
                              f"chunks of split = {plan.split} {what}; choose a smaller --split")


class AttenIOTop(wiring.Component):
    def __init__(self, plan):
        check_plan(plan)
        self._plan = plan
        self._regmap = register_map(plan)
        super().__init__({
            "m_axi": Out(AXI4Signature(addr_width=ADDR_WIDTH, data_width=plan.budget.axi_data_bits)),
            "s_axil": In(AXI4LiteSignature(addr_width=self._regmap.addr_width)),
            "irq": Out(1),
        })

    @property
    def plan(self):
        return self._plan

    @property
    def regmap(self):
        return self._regmap

    def elaborate(self, platform):
        m = Module()
        plan = self._plan
        width = plan.budget.axi_data_bits
        beat_bytes = width // 8
        row_bytes = plan.workload.head_dim * plan.config.format.element_bytes
        o_row_bytes = plan.workload.head_dim * plan.config.format.out_bytes
        row_beats = row_bytes // beat_bytes

        m.submodules.csr = csr = CSRBlock(self._regmap)
        m.submodules.ctrl = ctrl = Controller(addr_width=ADDR_WIDTH,
                                              max_seq_len=plan.workload.max_keys,
                                              beat_bytes=beat_bytes, block_rows=plan.a,
                                              page_rows=plan.budget.page_rows)
        # Every command is one row, so no burst is longer than a row, and the read FIFO
        # holds the Plan's K/V staging depth (rows enough to cover the link's latency),
        # which bounds the reads in flight to that many rows: that is the prefetch.
        m.submodules.dma = dma = DMA(addr_width=ADDR_WIDTH, data_width=width,
                                     max_burst_beats=min(max(row_bytes, o_row_bytes) // beat_bytes,
                                                         AXI_4KB // beat_bytes,
                                                         AXI_MAX_BURST_BEATS),
                                     max_reads=plan.kv_depth,
                                     read_fifo_depth=plan.kv_depth * row_beats)
        m.submodules.rseq = rseq = ReadSequencer(addr_width=ADDR_WIDTH, block_rows=plan.a,
                                                 row_bytes=row_bytes,
                                                 max_seq_len=plan.workload.max_keys,
                                                 banks=plan.banks,
                                                 page_rows=plan.budget.page_rows,
                                                 data_width=width)
        m.submodules.wseq = wseq = WriteSequencer(addr_width=ADDR_WIDTH, row_bytes=o_row_bytes)
        # the core takes and gives chunks of `split` elements, one per cycle
        m.submodules.core = core = AttentionCore.from_plan(plan)
        element = core.arith.element_shape
        m.submodules.unpack = unpack = BeatUnpacker(data_width=width, width=plan.split,
                                                    element=element)
        m.submodules.join = join = TagJoin(tag_shape=Kind,
                                           element_layout=element_layout(plan.split, element))
        # the feed's handshake ends at a register slice on either side (see StreamSlice)
        m.submodules.feed_slice = feed_slice = StreamSlice(join.o.payload.shape())
        m.submodules.pack = pack = BeatPacker(data_width=width, width=plan.split,
                                              element=core.arith.out_shape)

        wiring.connect(m, wiring.flipped(self.s_axil), csr.s_axil)
        wiring.connect(m, wiring.flipped(self.m_axi), dma.m_axi)

        # CSRs <-> controller
        m.d.comb += [
            ctrl.start.eq(csr.ctrl),
            ctrl.run.seq_len.eq(csr.seq_len),
            ctrl.run.heads.eq(csr.heads),
            ctrl.run.causal.eq(csr.mode[0]),
            ctrl.run.grouped.eq(csr.mode[1]),
            ctrl.run.kv_len.eq(csr.kv_len),
            ctrl.run.group.eq(csr.head_group),
            ctrl.run.scale_c.eq(csr.scale_c), ctrl.run.head_scales.eq(csr.mode[2]),
            ctrl.block_first.eq(csr.q_block_first), ctrl.block_count.eq(csr.q_block_count),
            csr.status.eq(Cat(ctrl.busy, ctrl.done)),
            csr.error.eq(ctrl.error),
            csr.bytes_read.eq(dma.bytes_read), csr.bytes_written.eq(dma.bytes_written),
            self.irq.eq(ctrl.done),
        ]
        m.d.comb += [getattr(csr, name).eq(getattr(ctrl, name))
                     for name in ("cycles", "pe_busy", "exp_busy", "mem_stall")]
        for t in ("q", "k", "v", "o"):
            for field in ("base", "head_stride", "row_stride"):
                m.d.comb += getattr(getattr(ctrl.run, t), field).eq(getattr(csr, f"{t}_{field}"))
        paged = bool(plan.budget.page_rows)
        if paged:
            m.d.comb += [ctrl.run.table.eq(csr.kv_table), ctrl.run.table_len.eq(csr.kv_table_len),
                         ctrl.run.page_limit.eq(csr.page_limit),
                         ctrl.page_error.eq(rseq.page_error),
                         ctrl.desc_base.eq(csr.desc_base), ctrl.desc_count.eq(csr.desc_count),
                         csr.desc_index.eq(ctrl.desc_index),
                         rseq.desc_fetch.eq(ctrl.desc_fetch), rseq.desc_addr.eq(ctrl.desc_addr),
                         ctrl.desc.eq(rseq.desc), ctrl.desc_valid.eq(rseq.desc_valid)]

        # controller <-> sequencers, DMA and core
        m.d.comb += [
            rseq.start.eq(ctrl.seq_start), rseq.run.eq(ctrl.seq_run),
            wseq.start.eq(ctrl.seq_start_w),
            # a paged run is the contiguous one with the table's fields above it
            wseq.run.eq(ctrl.seq_run.as_value()[:wseq.run.shape().size]),
            dma.error_clear.eq(ctrl.dma_clear), dma.counters_clear.eq(ctrl.dma_clear),
            ctrl.finished.eq(wseq.finished),
            ctrl.readers_busy.eq(rseq.busy),
            ctrl.core_busy.eq(core.busy),
            ctrl.dma_error.eq(dma.error),
            ctrl.pe_active.eq(core.pe_active),
            ctrl.exp_active.eq(core.exp_active),
            ctrl.starved.eq(core.row_wait),
        ]

        # commands: sequencers -> DMA (through a register slice each: the sequencers'
        # counters step on the handshake, and the DMA's burst splitters are far away),
        # blocks -> core
        for name, seq, cmd in (("rd", rseq.cmd, dma.rd_cmd), ("wr", wseq.cmd, dma.wr_cmd)):
            m.submodules[f"{name}_cmd_slice"] = cmd_slice = StreamSlice(seq.payload.shape())
            wiring.connect(m, seq, cmd_slice.i)
            wiring.connect(m, cmd_slice.o, cmd)
        wiring.connect(m, dma.wr_done, wseq.done)
        wiring.connect(m, rseq.block, core.start)
        # each block's softmax constant, SCALE_C or its head's SCALE_C_TABLE entry
        m.d.comb += [core.c.eq(rseq.block_c), csr.scale_c_table_addr.eq(rseq.scale_addr),
                     rseq.scale_data.eq(csr.scale_c_table_data)]
        # data: beats -> elements, each with its row's kind -> core -> beats; paged, the
        # read sequencer keeps its table's beats and passes the rest on
        if paged:
            wiring.connect(m, dma.rd_data, rseq.data_in)
            wiring.connect(m, rseq.data_out, unpack.i)
        else:
            wiring.connect(m, dma.rd_data, unpack.i)
        wiring.connect(m, unpack.o, join.elements)
        wiring.connect(m, rseq.kind, join.tags)
        wiring.connect(m, join.o, feed_slice.i)
        wiring.connect(m, feed_slice.o, core.feed)
        wiring.connect(m, core.o_out, pack.i)
        wiring.connect(m, pack.o, dma.wr_data)
        return m
