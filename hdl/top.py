"""`attenio_top`: the whole accelerator, sized by a Plan.

    s_axil (AXI4-Lite) -> CSRBlock -> Controller -> ReadSequencer  -> DMA reader -> BeatUnpacker -+
                                               \\-> WriteSequencer -> DMA writer <- BeatPacker <-+  |
                                                                                      AttentionCore <-+
    m_axi (AXI4) <- DMA

The read sequencer tags every read command with its kind (Q, K or V); the tag
travels in a FIFO beside the data and is joined to the elements as they leave
the unpacker, so the core's feed carries kind and value together. `irq` is the
DONE bit, for hosts that prefer an interrupt to polling.
"""

from amaranth.hdl import Cat, Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from attenio.errors import ConfigError
from attenio.regmap import register_map

from .controller import Controller
from .core import AttentionCore
from .axi import AXI4LiteSignature, AXI4Signature
from .csr import CSRBlock
from .dma import DMA
from .sequencer import ReadSequencer, WriteSequencer
from .widthconv import BeatPacker, BeatUnpacker

__all__ = ["AttenIOTop", "ADDR_WIDTH", "check_plan"]

ADDR_WIDTH = 32


def check_plan(plan):
    """Raise ConfigError if the RTL cannot be generated for `plan`."""
    if plan.config.format.name != "int8":
        raise ConfigError(f"the RTL supports the int8 format only, not {plan.config.format.name!r} "
                          f"(use --format int8; other formats are analysis-only)")
    row_bytes = plan.workload.head_dim * plan.config.format.element_bytes
    b = plan.budget
    if b.exp_units % b.mac_lines or b.macs_per_line % (b.exp_units // b.mac_lines):
        raise ConfigError(f"the softmax lanes need exp_units ({b.exp_units}) to be a multiple of the "
                          f"MAC lines ({b.mac_lines}) and to divide each line's {b.macs_per_line} "
                          f"MACs evenly (e.g. --exp-units {b.mac_lines})")
    beat = plan.budget.axi_data_bits // 8
    if row_bytes % beat:
        raise ConfigError(f"a row of d = {plan.workload.head_dim} int8 elements ({row_bytes} bytes) "
                          f"must be a whole number of {plan.budget.axi_data_bits}-bit AXI beats; "
                          f"choose --axi-width <= {8 * row_bytes} or a larger d")


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
        d = plan.workload.head_dim
        width = plan.budget.axi_data_bits
        row_bytes = d * plan.config.format.element_bytes

        m.submodules.csr = csr = CSRBlock(self._regmap)
        m.submodules.ctrl = ctrl = Controller(addr_width=ADDR_WIDTH, max_seq_len=plan.workload.seq_len,
                                              beat_bytes=width // 8)
        # Every command is one row, so no burst is longer than a row; the read FIFO holds
        # the Plan's K/V staging depth (rows enough to cover the link's latency), which
        # bounds the reads in flight: that is the prefetch.
        row_beats = row_bytes // (width // 8)
        m.submodules.dma = dma = DMA(addr_width=ADDR_WIDTH, data_width=width,
                                     max_burst_beats=min(row_beats, 4096 // (width // 8), 256),
                                     max_reads=max(4, plan.kv_depth),
                                     read_fifo_depth=plan.kv_depth * row_beats)
        m.submodules.rseq = rseq = ReadSequencer(addr_width=ADDR_WIDTH, block_rows=plan.a,
                                                 row_bytes=row_bytes)
        m.submodules.wseq = wseq = WriteSequencer(addr_width=ADDR_WIDTH, row_bytes=row_bytes)
        m.submodules.unpack = unpack = BeatUnpacker(data_width=width)
        m.submodules.pack = pack = BeatPacker(data_width=width)
        m.submodules.core = core = AttentionCore.from_plan(plan)

        wiring.connect(m, wiring.flipped(self.s_axil), csr.s_axil)
        wiring.connect(m, wiring.flipped(self.m_axi), dma.m_axi)

        # CSRs <-> controller
        m.d.comb += [
            ctrl.start.eq(csr.ctrl),
            ctrl.run.seq_len.eq(csr.seq_len),
            ctrl.run.heads.eq(csr.heads),
            csr.status.eq(Cat(ctrl.busy, ctrl.done)),
            csr.error.eq(ctrl.error),
            csr.cycles.eq(ctrl.cycles), csr.pe_busy.eq(ctrl.pe_busy),
            csr.exp_busy.eq(ctrl.exp_busy), csr.mem_stall.eq(ctrl.mem_stall),
            csr.bytes_read.eq(dma.bytes_read), csr.bytes_written.eq(dma.bytes_written),
            self.irq.eq(ctrl.done),
        ]
        for t in ("q", "k", "v", "o"):
            run_t = getattr(ctrl.run, t)
            m.d.comb += [run_t.base.eq(getattr(csr, f"{t}_base")),
                         run_t.head_stride.eq(getattr(csr, f"{t}_head_stride")),
                         run_t.row_stride.eq(getattr(csr, f"{t}_row_stride"))]

        # controller <-> sequencers and DMA
        m.d.comb += [
            rseq.start.eq(ctrl.seq_start), rseq.run.eq(ctrl.seq_run),
            wseq.start.eq(ctrl.seq_start), wseq.run.eq(ctrl.seq_run),
            dma.error_clear.eq(ctrl.dma_clear), dma.counters_clear.eq(ctrl.dma_clear),
            ctrl.finished.eq(wseq.finished),
            ctrl.readers_busy.eq(rseq.busy),
            ctrl.core_busy.eq(core.busy),
            ctrl.dma_error.eq(dma.error),
            ctrl.pe_active.eq(core.pe_active),
            ctrl.exp_active.eq(core.exp_active),
            ctrl.starved.eq(core.row_wait),
        ]
        wiring.connect(m, rseq.cmd, dma.rd_cmd)
        wiring.connect(m, wseq.cmd, dma.wr_cmd)
        wiring.connect(m, dma.wr_done, wseq.done)

        # read data -> elements, joined with their kind -> core
        wiring.connect(m, dma.rd_data, unpack.i)
        take = core.feed.valid & core.feed.ready
        m.d.comb += [
            core.feed.valid.eq(unpack.o.valid & rseq.kind.valid),
            core.feed.payload.kind.eq(rseq.kind.payload),
            core.feed.payload.value.eq(unpack.o.payload.value),
            unpack.o.ready.eq(core.feed.ready & rseq.kind.valid),
            rseq.kind.ready.eq(take & unpack.o.payload.last),
        ]
        m.d.comb += [
            core.start.valid.eq(rseq.block.valid),
            core.start.payload.rows_valid.eq(rseq.block.payload.rows_valid),
            core.start.payload.n_keys.eq(rseq.block.payload.n_keys),
            rseq.block.ready.eq(core.start.ready),
            core.c.eq(csr.scale_c),
        ]

        # core output -> beats -> DMA writer
        m.d.comb += [
            pack.i.valid.eq(core.o_out.valid),
            pack.i.payload.eq(core.o_out.payload.data),
            core.o_out.ready.eq(pack.i.ready),
        ]
        wiring.connect(m, pack.o, dma.wr_data)
        return m
