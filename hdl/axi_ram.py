"""An AXI4 slave backed by block RAM, with an optional byte-wide host port.

Reads and writes are served by independent engines, one beat per cycle each,
on the two ports of a simple dual-port memory (one synchronous read port, one
byte-enabled write port), which is what FPGA block RAM offers. INCR and FIXED
bursts and narrow transfers are served (WRAP is treated as INCR). The memory
holds `size_bytes` (a power of two, at most `MAX_BYTES` so it stays in block
RAM); a burst whose start address lies beyond it is answered DECERR (reads
return zeros, writes are dropped); addresses wrap within the memory otherwise.

The host port lets a second master (the board's UART bridge) read and write
single bytes. A host access waits until the engine of its direction is between
bursts, and holds off the next burst while it runs, so bursts stay atomic. Its
address, data and the decision to serve it are taken into registers a cycle before
they reach the memory, so the memory's address, a fan-out to every block RAM of it,
comes from registers through one multiplexer.
"""

from amaranth.hdl import Const, Module, Signal
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from attenio import validate

from .axi import AXI4Signature, AXIBurst, AXIResp

__all__ = ["AXIRam", "HostPortSignature", "MAX_BYTES"]

#: Largest memory offered: 256 KiB, about two thirds of the ECP5-85F's block RAM.
MAX_BYTES = 256 * 1024


class HostPortSignature(wiring.Signature):
    """Byte access from a host: hold `req` until `ack`; `rdata` is valid with `ack`."""

    def __init__(self, *, addr_width):
        self._addr_width = addr_width
        super().__init__({"req": Out(1), "we": Out(1), "addr": Out(addr_width), "wdata": Out(8),
                          "ack": In(1), "rdata": In(8)})

    @property
    def addr_width(self):
        return self._addr_width


class AXIRam(wiring.Component):
    """AXI4 slave (`axi`) over `size_bytes` of block RAM, plus `host` (a `HostPortSignature`)."""

    def __new__(cls, **params):
        # Checked before the object exists: a refused RAM is no unused elaboratable.
        cls._signature(**params)
        return super().__new__(cls)

    @staticmethod
    def _signature(*, size_bytes, addr_width=32, data_width=64, id_width=1):
        validate.power_of_two("AXIRam", "size_bytes", size_bytes)
        if size_bytes > MAX_BYTES:
            raise ValueError(f"AXIRam: size_bytes {size_bytes} is above {MAX_BYTES} (block RAM)")
        sig = AXI4Signature(addr_width=addr_width, data_width=data_width, id_width=id_width)
        if size_bytes < sig.bytes_per_beat or size_bytes > 1 << addr_width:
            raise ValueError(f"AXIRam: size_bytes {size_bytes} must hold at least one "
                             f"{data_width}-bit word and fit {addr_width} address bits")
        return sig

    def __init__(self, *, size_bytes, addr_width=32, data_width=64, id_width=1):
        sig = self._signature(size_bytes=size_bytes, addr_width=addr_width,
                              data_width=data_width, id_width=id_width)
        self._size = size_bytes
        super().__init__({"axi": In(sig), "host": In(HostPortSignature(addr_width=addr_width))})

    @property
    def size_bytes(self):
        return self._size

    @property
    def depth(self):
        return self._size // self.axi.signature.bytes_per_beat

    def elaborate(self, platform):
        m = Module()
        axi, host = self.axi, self.host
        beat = axi.signature.bytes_per_beat
        width = axi.signature.data_width
        lane_bits = (beat - 1).bit_length()
        size_bits = (self._size - 1).bit_length()
        addr_width = axi.signature.addr_width

        m.submodules.mem = mem = Memory(shape=width, depth=self.depth, init=[])
        rd = mem.read_port()
        wr = mem.write_port(granularity=8)

        def word(addr):
            return addr[lane_bits:size_bits] if size_bits > lane_bits else Const(0)

        def out_of_range(addr):
            return addr[size_bits:] != 0 if addr_width > size_bits else Const(0)

        # ---- read engine ----
        r_addr = Signal(addr_width)
        r_size = Signal(3)
        r_fixed = Signal()
        r_left = Signal(9)           # beats still to read from the memory
        r_bad = Signal()
        r_valid = Signal()
        r_last = Signal()
        r_id = Signal.like(axi.rid)
        host_rd = Signal()           # host read issued last cycle
        host_lane = Signal(max(lane_bits, 1))
        r_idle = (r_left == 0) & ~r_valid
        host_read_req = host.req & ~host.we
        host_r_go = Signal()         # a host read taken: served from the registers below
        host_addr = Signal(addr_width)
        issue = (r_left != 0) & (~r_valid | axi.rready)
        m.d.comb += [
            axi.arready.eq(r_idle & ~host_read_req & ~host_r_go & ~host_rd),
            axi.rvalid.eq(r_valid), axi.rlast.eq(r_last), axi.rid.eq(r_id),
            axi.rdata.eq(Const(0, width)),
            axi.rresp.eq(AXIResp.OKAY),
        ]
        with m.If(r_bad):
            m.d.comb += axi.rresp.eq(AXIResp.DECERR)
        with m.Else():
            m.d.comb += axi.rdata.eq(rd.data)
        m.d.comb += [rd.en.eq(0), rd.addr.eq(word(r_addr))]
        with m.If(axi.arvalid & axi.arready):
            m.d.sync += [r_addr.eq(axi.araddr), r_size.eq(axi.arsize),
                         r_fixed.eq(axi.arburst == AXIBurst.FIXED), r_left.eq(axi.arlen + 1),
                         r_bad.eq(out_of_range(axi.araddr)), r_id.eq(axi.arid)]
        with m.Elif(issue):
            m.d.comb += rd.en.eq(1)
            m.d.sync += [r_left.eq(r_left - 1), r_valid.eq(1), r_last.eq(r_left == 1)]
            with m.If(~r_fixed):
                m.d.sync += r_addr.eq(r_addr + (Const(1, addr_width) << r_size))
        with m.Elif(r_valid & axi.rready):
            m.d.sync += r_valid.eq(0)

        # host reads: taken into registers when the read engine is idle (it stays idle:
        # `arready` is low from then on, whatever the host does), read from them a cycle
        # later, and answered two cycles after that from a register, so the block's
        # clock-to-output drives only that register, not the host's logic (the block
        # RAM's output -> the UART bridge's output buffer)
        host_ack = Signal()
        host_byte = Signal(8)
        m.d.sync += [host_r_go.eq(0), host_rd.eq(host_r_go), host_ack.eq(host_rd)]
        with m.If(host_read_req & r_idle & ~host_r_go & ~host_rd & ~host_ack):
            m.d.sync += [host_r_go.eq(1), host_addr.eq(host.addr)]
        with m.If(host_r_go):
            m.d.comb += [rd.en.eq(1), rd.addr.eq(word(host_addr))]
            m.d.sync += host_lane.eq(host_addr[:lane_bits] if lane_bits else 0)
        with m.If(host_rd):
            m.d.sync += host_byte.eq(rd.data.word_select(host_lane, 8) if lane_bits
                                     else rd.data[:8])
        m.d.comb += host.rdata.eq(host_byte)

        # ---- write engine ----
        w_addr = Signal(addr_width)
        w_size = Signal(3)
        w_fixed = Signal()
        w_bad = Signal()
        w_id = Signal.like(axi.bid)
        host_write_req = host.req & host.we
        host_w_go = Signal()         # a host write taken: written from the registers below
        host_w_addr = Signal(addr_width)
        host_w_data = Signal(8)
        m.d.sync += host_w_go.eq(0)
        with m.FSM(name="write"):
            with m.State("IDLE"):
                m.d.comb += axi.awready.eq(~host_write_req & ~host_w_go)
                with m.If(host_w_go):
                    # first, so the memory's write port depends on registers alone;
                    # acknowledged in the cycle of its write: the host's request drops after
                    lane = host_w_addr[:lane_bits] if lane_bits else 0
                    m.d.comb += [wr.addr.eq(word(host_w_addr)),
                                 wr.data.eq(host_w_data.replicate(beat)),
                                 wr.en.eq(Const(1, beat) << lane)]
                with m.Elif(axi.awvalid & ~host_write_req):
                    m.d.sync += [w_addr.eq(axi.awaddr), w_size.eq(axi.awsize),
                                 w_fixed.eq(axi.awburst == AXIBurst.FIXED),
                                 w_bad.eq(out_of_range(axi.awaddr)), w_id.eq(axi.awid)]
                    m.next = "DATA"
                with m.Elif(host_write_req):
                    m.d.sync += [host_w_go.eq(1), host_w_addr.eq(host.addr),
                                 host_w_data.eq(host.wdata)]
            with m.State("DATA"):
                m.d.comb += [axi.wready.eq(1), wr.addr.eq(word(w_addr)), wr.data.eq(axi.wdata)]
                with m.If(axi.wvalid):
                    with m.If(~w_bad):
                        m.d.comb += wr.en.eq(axi.wstrb)
                    with m.If(~w_fixed):
                        m.d.sync += w_addr.eq(w_addr + (Const(1, addr_width) << w_size))
                    with m.If(axi.wlast):
                        m.next = "RESP"
            with m.State("RESP"):
                m.d.comb += [axi.bvalid.eq(1), axi.bid.eq(w_id), axi.bresp.eq(AXIResp.OKAY)]
                with m.If(w_bad):
                    m.d.comb += axi.bresp.eq(AXIResp.DECERR)
                with m.If(axi.bready):
                    m.next = "IDLE"
        m.d.comb += host.ack.eq(host_ack | host_w_go)
        return m
