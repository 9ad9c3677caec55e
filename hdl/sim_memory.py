"""A simulation model of off-chip memory: an AXI4 slave inside the simulated design.

cocotbext-axi's AxiRam is the reference for protocol tests (random latency,
back-pressure on every channel), but it costs a few Python coroutines per
simulated cycle, so long end-to-end runs (N in the thousands, millions of
cycles) use this model instead: the whole memory system runs in the simulator
and Python only loads the memory and reads it back through the backdoor (the
`storage` array of the `mem` instance's `ram`, one word per beat, little-endian).

Timing: every read burst waits `read_latency` cycles from its AR handshake, and
two more for the model's own registers (`first_beat_latency`), before its first
beat; reads then stream one beat per cycle (the port's bandwidth is
one beat per cycle per direction), bursts back to back, and up to `max_reads`
bursts may wait at once. Writes take one beat per cycle, bursts back to back
(up to `max_writes` AW requests queue), and answer on B one cycle after WLAST. Responses
are OKAY; IDs are echoed. Not synthesizable as a real memory controller and not
meant to be: it models a link, not DRAM.
"""

from types import SimpleNamespace

from amaranth.hdl import Cat, ClockSignal, Module, Mux, Signal, unsigned
from amaranth.lib import data, wiring
from amaranth.lib.fifo import SyncFIFO, SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from attenio import validate

from . import hierarchy
from .axi import AXI4LiteSignature, AXI4Signature

__all__ = ["SimAXIMemory", "SimSystem", "STORAGE_MODULE", "STORAGE_VERILOG"]

#: the module of the memory model's word array in emitted Verilog (`SimAXIMemory._storage`)
STORAGE_MODULE = "attenio_sim_storage"
#: its Verilog: `storage` as Amaranth declares a memory (no initial contents), a read a
#: cycle after its address while `ren` (old data on a write to the same word), byte writes
STORAGE_VERILOG = f"""
module {STORAGE_MODULE} #(parameter WIDTH = 64, parameter DEPTH = 1, parameter ABITS = 1) (
  input clk,
  input [ABITS-1:0] raddr,
  input ren,
  output reg [WIDTH-1:0] rdata,
  input [ABITS-1:0] waddr,
  input [WIDTH/8-1:0] wen,
  input [WIDTH-1:0] wdata
);
  reg [WIDTH-1:0] storage [DEPTH-1:0];
  integer i;
  initial rdata = {{WIDTH{{1'b0}}}};
  always @(posedge clk) begin
    if (ren)
      rdata <= storage[raddr];
    for (i = 0; i < WIDTH / 8; i = i + 1)
      if (wen[i])
        storage[waddr][8 * i +: 8] <= wdata[8 * i +: 8];
  end
endmodule
"""


class SimAXIMemory(wiring.Component):
    """AXI4 slave over `depth` words of `data_width` bits (byte addresses from 0)."""

    def __init__(self, *, addr_width=32, data_width=64, id_width=1, depth, read_latency=20,
                 max_reads=8, max_writes=8):
        validate.positive("SimAXIMemory", depth=depth, max_reads=max_reads,
                          max_writes=max_writes)
        validate.non_negative("SimAXIMemory", read_latency=read_latency)
        self._aw, self._dw, self._iw = addr_width, data_width, id_width
        self._depth, self._latency, self._max_reads = depth, read_latency, max_reads
        self._max_writes = max_writes
        super().__init__({"s_axi": In(AXI4Signature(addr_width=addr_width, data_width=data_width,
                                                    id_width=id_width))})

    @property
    def depth(self):
        return self._depth

    @property
    def read_latency(self):
        return self._latency

    @staticmethod
    def first_beat_latency(read_latency):
        """Cycles from an AR handshake to the burst's first beat with `read_latency`: the
        latency (or the AR queue's two-cycle FIFO, if longer), the due check's register,
        the beat's."""
        return max(read_latency, 2) + 2

    #: cycles from a write burst's last data (WLAST) to its response (BVALID)
    write_response_latency = 1

    def _storage(self, m):
        """The word array `storage` and its read and write ports (read: `addr`, `en`, `data` a
        cycle later; write: `addr`, `data`, `en` a bit a byte). Emitted as Verilog, it is a
        module of its own (`STORAGE_VERILOG`): Amaranth writes a memory's initial contents
        into the Verilog one word at a time, about 2 KB of host memory a word while
        converting (a million words ran out of 8 GB), and the model is loaded through the
        backdoor anyway. Elsewhere (amaranth.sim) it is an Amaranth memory."""
        abits = max(1, (self._depth - 1).bit_length())
        rd = SimpleNamespace(addr=Signal(abits), en=Signal(), data=Signal(self._dw))
        wr = SimpleNamespace(addr=Signal(abits), en=Signal(self._dw // 8), data=Signal(self._dw))
        if hierarchy.collecting():
            m.submodules.ram = hierarchy.verilog_instance(
                STORAGE_MODULE, STORAGE_VERILOG, p_WIDTH=self._dw, p_DEPTH=self._depth,
                p_ABITS=abits, i_clk=ClockSignal("sync"), i_raddr=rd.addr, i_ren=rd.en,
                o_rdata=rd.data, i_waddr=wr.addr, i_wen=wr.en, i_wdata=wr.data)
            return rd, wr
        m.submodules.storage = storage = Memory(shape=self._dw, depth=self._depth, init=[])
        read, write = storage.read_port(), storage.write_port(granularity=8)
        m.d.comb += [read.addr.eq(rd.addr), read.en.eq(rd.en), rd.data.eq(read.data),
                     write.addr.eq(wr.addr), write.en.eq(wr.en), write.data.eq(wr.data)]
        return rd, wr

    def elaborate(self, platform):
        m = Module()
        bus = self.s_axi
        shift = (self._dw // 8).bit_length() - 1
        rd, wr = self._storage(m)

        now = Signal(32)
        m.d.sync += now.eq(now + 1)

        # -- reads: AR into a queue stamped with its due cycle, then one beat per cycle ----
        burst = data.StructLayout({"addr": unsigned(self._aw), "len": unsigned(8),
                                   "id": unsigned(self._iw), "due": unsigned(32)})
        m.submodules.ar_q = ar_q = SyncFIFOBuffered(width=burst.size, depth=self._max_reads)
        m.d.comb += [
            bus.arready.eq(ar_q.w_rdy),
            ar_q.w_en.eq(bus.arvalid),
        ]
        entry = Signal(burst)
        m.d.comb += [entry.addr.eq(bus.araddr), entry.len.eq(bus.arlen), entry.id.eq(bus.arid),
                     entry.due.eq(now + self._latency), ar_q.w_data.eq(entry.as_value())]
        head = burst(ar_q.r_data)

        busy = Signal()
        beat_addr = Signal(self._aw - shift)
        left = Signal(9)
        rid = Signal(self._iw)
        advance = ~bus.rvalid | bus.rready
        wait = Signal(32)                  # now - due, modulo 2**32: negative while waiting
        m.d.comb += wait.eq(now - head.due)
        due = ~wait[31]
        m.d.comb += [rd.addr.eq(beat_addr), rd.en.eq(advance), bus.rdata.eq(rd.data),
                     bus.rresp.eq(0)]
        with m.If(advance):
            m.d.sync += [bus.rvalid.eq(busy), bus.rlast.eq(busy & (left == 1)), bus.rid.eq(rid)]
            with m.If(busy):
                m.d.sync += [beat_addr.eq(beat_addr + 1), left.eq(left - 1)]
                with m.If(left == 1):
                    m.d.sync += busy.eq(0)
        # the next burst loads as the last beat of this one is read: no bubble between them
        with m.If(ar_q.r_rdy & due & (~busy | (advance & (left == 1)))):
            m.d.comb += ar_q.r_en.eq(1)
            m.d.sync += [busy.eq(1), beat_addr.eq(head.addr[shift:]), left.eq(head.len + 1),
                         rid.eq(head.id)]

        # -- writes: AW queued, the head burst's beats, then B (queued too) ----------------
        # A SyncFIFO shows an entry the cycle after it is written: W may follow its AW by
        # one cycle, and B comes one cycle after WLAST.
        aw = data.StructLayout({"addr": unsigned(self._aw - shift), "id": unsigned(self._iw)})
        m.submodules.aw_q = aw_q = SyncFIFO(width=aw.size, depth=self._max_writes)
        m.submodules.b_q = b_q = SyncFIFO(width=self._iw, depth=self._max_writes)
        w_head = aw(aw_q.r_data)
        w_beat = Signal(8)
        w_fire = bus.wvalid & bus.wready
        m.d.comb += [
            bus.awready.eq(aw_q.w_rdy),
            aw_q.w_en.eq(bus.awvalid),
            aw_q.w_data.eq(Cat(bus.awaddr[shift:], bus.awid)),
            bus.wready.eq(aw_q.r_rdy & b_q.w_rdy),
            wr.addr.eq(w_head.addr + w_beat),
            wr.data.eq(bus.wdata),
            wr.en.eq(Mux(w_fire, bus.wstrb, 0)),
            aw_q.r_en.eq(w_fire & bus.wlast),
            b_q.w_en.eq(w_fire & bus.wlast),
            b_q.w_data.eq(w_head.id),
            bus.bvalid.eq(b_q.r_rdy),
            bus.bid.eq(b_q.r_data),
            b_q.r_en.eq(bus.bready),
            bus.bresp.eq(0),
        ]
        with m.If(w_fire):
            m.d.sync += w_beat.eq(Mux(bus.wlast, 0, w_beat + 1))
        return m


class SimSystem(wiring.Component):
    """`attenio_top` with `SimAXIMemory` on its AXI4 port: only the CSR port and `irq` remain.

    The memory instance is `mem`, its word array `storage` in its `ram` (module
    `STORAGE_MODULE`; named apart from the array: with both `storage`, cocotb on Icarus
    took `storage.storage` for the instance, not the array), so a bench reaches its words
    as `dut.mem.ram.storage[i]` (`STORAGE` names that path for the benches and the fast
    path's C++ harness).
    """

    #: the instance path, from this component, of the memory model's word array
    STORAGE = ("mem", "ram", "storage")

    def __init__(self, plan, *, depth, read_latency=None):
        from .top import AttenIOTop

        self._top = AttenIOTop(plan)
        # The link takes every burst the DMA may have in flight (`Plan.kv_depth` rows of
        # one burst each at most), as the cycle model's memory does: the prefetch depth,
        # not the memory, bounds the reads.
        self._mem = SimAXIMemory(data_width=plan.budget.axi_data_bits, depth=depth,
                                 read_latency=plan.budget.latency_cycles if read_latency is None
                                 else read_latency, max_reads=max(8, plan.kv_depth))
        super().__init__({
            "s_axil": In(AXI4LiteSignature(addr_width=self._top.regmap.addr_width)),
            "irq": Out(1),
        })

    def elaborate(self, platform):
        m = Module()
        m.submodules.top = top = self._top
        m.submodules.mem = mem = self._mem
        wiring.connect(m, top.m_axi, mem.s_axi)
        wiring.connect(m, wiring.flipped(self.s_axil), top.s_axil)
        m.d.comb += self.irq.eq(top.irq)
        return m
