"""The accelerator on a board: block-RAM memory, a UART host link, and the ULX3S top.

    UART rx/tx <-> UARTBridge --AXI4-Lite--> attenio_top.s_axil
                             \\--host port--> AXIRam <--AXI4-- attenio_top.m_axi

`BoardCore` is everything but the pins, so the same design runs on the board
(`ULX3SBoard`, clocked by an ECP5 PLL from the ULX3S's 25 MHz oscillator) and
in simulation (emitted as `attenio_board`, driven by a simulated UART peer).

The host protocol (bytes on the UART, numbers little-endian; see
`attenio.sim.host`, which speaks it):

    'W' addr:u16 data:u32      write a CSR          -> status byte
    'R' addr:u16               read a CSR           -> data:u32, status byte
    'M' addr:u32 n:u16 bytes   write n memory bytes -> status byte (after the last)
    'm' addr:u32 n:u16         read n memory bytes  -> n bytes
    '?'                        ping                 -> status byte

status: 'K' (OK), 'E' (the AXI4-Lite access answered an error), '?' (unknown command).
"""

from amaranth.hdl import (Cat, ClockDomain, ClockSignal, Const, DomainRenamer, Elaboratable,
                          Module, Signal)
from amaranth.lib import io, stream, wiring
from amaranth.lib.cdc import ResetSynchronizer
from amaranth.lib.wiring import In, Out

from attenio import validate

from .axi_ram import AXIRam, HostPortSignature
from .ecp5_pll import ECP5PLL, PLLSettings
from .axi import AXI4LiteSignature
from .top import ADDR_WIDTH, AttenIOTop
from .uart import UART, check_divisor

__all__ = ["UARTBridge", "BoardCore", "ULX3SBoard", "board_memory_bytes", "CMD", "STATUS",
           "BOARD_TOP", "OSC_HZ"]

BOARD_TOP = "attenio_board"
#: The ULX3S's oscillator (pin G2), the PLL's input.
OSC_HZ = 25_000_000
CMD = {"csr_write": ord("W"), "csr_read": ord("R"), "mem_write": ord("M"), "mem_read": ord("m"),
       "ping": ord("?")}
STATUS = {"ok": ord("K"), "error": ord("E"), "unknown": ord("?")}
_HEADER_BYTES = {"csr_write": 6, "csr_read": 2, "mem_write": 6, "mem_read": 6, "ping": 0}


class UARTBridge(wiring.Component):
    """Byte streams from/to a UART -> AXI4-Lite master (CSRs) and memory host port."""

    def __init__(self, *, csr_addr_width, mem_addr_width=ADDR_WIDTH):
        validate.integer("UARTBridge", "csr_addr_width", csr_addr_width, lo=3, hi=16)
        super().__init__({
            "rx": In(stream.Signature(8)), "tx": Out(stream.Signature(8)),
            "csr": Out(AXI4LiteSignature(addr_width=csr_addr_width)),
            "mem": Out(HostPortSignature(addr_width=mem_addr_width)),
        })

    def elaborate(self, platform):
        m = Module()
        rx, tx, csr, mem = self.rx, self.tx, self.csr, self.mem
        cmd = Signal(8)
        hdr = Signal(48)                 # header bytes in arrival order
        count = Signal(3)
        need = Signal(3)
        addr16 = hdr[0:16]
        data32 = hdr[16:48]
        mem_addr = Signal(32)
        left = Signal(16)
        obuf = Signal(40)                # reply bytes, sent from the low end
        ocount = Signal(3)
        aw_done = Signal()
        w_done = Signal()

        m.d.comb += [csr.awaddr.eq(addr16), csr.araddr.eq(addr16), csr.wdata.eq(data32),
                     csr.wstrb.eq(0xF), mem.addr.eq(mem_addr), mem.wdata.eq(rx.payload)]

        def reply(m, value, n):
            m.d.sync += [obuf.eq(value), ocount.eq(n)]
            m.next = "SEND"

        with m.FSM():
            with m.State("CMD"):
                m.d.comb += rx.ready.eq(1)
                with m.If(rx.valid):
                    m.d.sync += [cmd.eq(rx.payload), count.eq(0)]
                    m.next = "DECODE"
            # the command byte decoded from its register: from the UART's receive register,
            # the decode and the reply buffer's enable took a 13.7 ns path at 75 MHz
            with m.State("DECODE"):
                with m.Switch(cmd):
                    for name, code in CMD.items():
                        with m.Case(code):
                            if _HEADER_BYTES[name]:
                                m.d.sync += need.eq(_HEADER_BYTES[name])
                                m.next = "HEADER"
                            else:
                                reply(m, STATUS["ok"], 1)
                    with m.Default():
                        reply(m, STATUS["unknown"], 1)
            with m.State("HEADER"):
                m.d.comb += rx.ready.eq(1)
                with m.If(rx.valid):
                    m.d.sync += [hdr.word_select(count, 8).eq(rx.payload), count.eq(count + 1)]
                    with m.If(count + 1 == need):
                        m.next = "DISPATCH"
            with m.State("DISPATCH"):
                m.d.sync += [mem_addr.eq(hdr[0:32]), left.eq(hdr[32:48]),
                             aw_done.eq(0), w_done.eq(0)]
                with m.Switch(cmd):
                    with m.Case(CMD["csr_write"]):
                        m.next = "CSR_W"
                    with m.Case(CMD["csr_read"]):
                        m.next = "CSR_AR"
                    with m.Case(CMD["mem_write"]):
                        m.next = "MEM_W"
                    with m.Default():
                        m.next = "MEM_R"
            with m.State("CSR_W"):
                m.d.comb += [csr.awvalid.eq(~aw_done), csr.wvalid.eq(~w_done)]
                with m.If(csr.awvalid & csr.awready):
                    m.d.sync += aw_done.eq(1)
                with m.If(csr.wvalid & csr.wready):
                    m.d.sync += w_done.eq(1)
                with m.If((aw_done | csr.awready) & (w_done | csr.wready)):
                    m.next = "CSR_B"
            with m.State("CSR_B"):
                m.d.comb += csr.bready.eq(1)
                with m.If(csr.bvalid):
                    reply(m, STATUS["ok"], 1)
                    with m.If(csr.bresp != 0):
                        m.d.sync += obuf.eq(STATUS["error"])
            with m.State("CSR_AR"):
                m.d.comb += csr.arvalid.eq(1)
                with m.If(csr.arready):
                    m.next = "CSR_R"
            with m.State("CSR_R"):
                m.d.comb += csr.rready.eq(1)
                with m.If(csr.rvalid):
                    status = Signal(8)
                    m.d.comb += status.eq(STATUS["ok"])
                    with m.If(csr.rresp != 0):
                        m.d.comb += status.eq(STATUS["error"])
                    reply(m, Cat(csr.rdata, status), 5)
            with m.State("MEM_W"):
                with m.If(left == 0):
                    reply(m, STATUS["ok"], 1)
                with m.Else():
                    m.d.comb += [mem.req.eq(rx.valid), mem.we.eq(1), rx.ready.eq(mem.ack)]
                    with m.If(rx.valid & mem.ack):
                        m.d.sync += [mem_addr.eq(mem_addr + 1), left.eq(left - 1)]
            with m.State("MEM_R"):
                with m.If(left == 0):
                    m.next = "CMD"
                with m.Else():
                    m.d.comb += [mem.req.eq(1), mem.we.eq(0)]
                    with m.If(mem.ack):
                        m.d.sync += [obuf.eq(mem.rdata), mem_addr.eq(mem_addr + 1),
                                     left.eq(left - 1)]
                        m.next = "MEM_R_SEND"
            with m.State("MEM_R_SEND"):
                m.d.comb += [tx.valid.eq(1), tx.payload.eq(obuf[:8])]
                with m.If(tx.ready):
                    m.next = "MEM_R"
            with m.State("SEND"):
                m.d.comb += [tx.valid.eq(1), tx.payload.eq(obuf[:8])]
                with m.If(tx.ready):
                    m.d.sync += [obuf.eq(obuf >> 8), ocount.eq(ocount - 1)]
                    with m.If(ocount == 1):
                        m.next = "CMD"
        return m


def board_memory_bytes(plan):
    """Block RAM for Q, K, V and O of the Plan's largest run (all heads), a power of two."""
    w = plan.workload
    fmt = plan.config.format
    need = w.heads * w.max_keys * w.head_dim * (3 * fmt.element_bytes + fmt.out_bytes)
    return 1 << max(need - 1, 1).bit_length()


class BoardCore(wiring.Component):
    """Accelerator + block-RAM AXI memory + UART bridge; pins `rx`, `tx`, `leds`.

    `divisor` is clock cycles per UART bit (clock / baud rate).
    """

    def __init__(self, plan, *, divisor, mem_bytes=None):
        check_divisor("BoardCore", divisor)
        self._plan = plan
        self._divisor = divisor
        self._mem_bytes = mem_bytes or board_memory_bytes(plan)
        self._top = AttenIOTop(plan)
        super().__init__({"rx": In(1, init=1), "tx": Out(1, init=1), "leds": Out(8)})

    @property
    def plan(self):
        return self._plan

    @property
    def mem_bytes(self):
        return self._mem_bytes

    @property
    def divisor(self):
        return self._divisor

    def elaborate(self, platform):
        m = Module()
        top = self._top
        m.submodules.accel = top
        width = self._plan.budget.axi_data_bits
        m.submodules.ram = ram = AXIRam(size_bytes=self._mem_bytes, addr_width=ADDR_WIDTH,
                                        data_width=width, id_width=top.m_axi.signature.id_width)
        # The UART and its bridge sit by the pins, far from the reset register the whole
        # design shares; they take their reset from a register of their own (released one
        # cycle later, long before a host can send a byte), so the route from that shared
        # register to the UART receiver's next-state logic is split in two.
        m.domains.host = host = ClockDomain("host", local=True)
        host_rst = Signal(init=1)
        m.d.sync += host_rst.eq(0)
        m.d.comb += [host.clk.eq(ClockSignal("sync")), host.rst.eq(host_rst)]
        m.submodules.uart = uart = DomainRenamer("host")(UART(divisor=self._divisor))
        m.submodules.bridge = bridge = DomainRenamer("host")(
            UARTBridge(csr_addr_width=top.s_axil.signature.addr_width))
        wiring.connect(m, top.m_axi, ram.axi)
        wiring.connect(m, bridge.csr, top.s_axil)
        wiring.connect(m, bridge.mem, ram.host)
        wiring.connect(m, uart.rx_data, bridge.rx)
        wiring.connect(m, bridge.tx, uart.tx_data)
        m.d.comb += [uart.rx.eq(self.rx), self.tx.eq(uart.tx)]
        # LEDs: irq (done), UART activity, and a heartbeat that shows the clock runs.
        beat = Signal(24)
        m.d.sync += beat.eq(beat + 1)
        m.d.comb += self.leds.eq(Cat(top.irq, ~self.rx, ~self.tx, Const(0, 4), beat[-1]))
        return m


class ULX3SBoard(Elaboratable):
    """Top for the Radiona ULX3S (ECP5): the FTDI UART, the eight LEDs, and the `sync`
    clock from an ECP5 PLL with the `PLLSettings` `pll` (`ecp5_pll(OSC_HZ, hz)`), fed by
    the 25 MHz oscillator. The UART's bit period follows the clock the PLL makes, and
    the design stays in reset until the PLL has locked (and a cycle more: the reset
    leaves its synchronizer through one register).
    """

    def __init__(self, plan, *, pll, baud=115200):
        if not isinstance(pll, PLLSettings) or pll.fin_hz != OSC_HZ:
            raise TypeError(f"ULX3SBoard: pll must be the PLLSettings of a {OSC_HZ} Hz input, "
                            f"not {pll!r}")
        validate.integer("ULX3SBoard", "baud", baud, lo=1)
        self._plan = plan
        self._baud = baud
        self._pll = pll
        self._divisor = check_divisor("ULX3SBoard", round(pll.fout_hz / baud))

    @property
    def plan(self):
        return self._plan

    @property
    def baud(self):
        return self._baud

    @property
    def pll(self):
        """The PLL's `PLLSettings`; `pll.fout_hz` is the clock the design runs at."""
        return self._pll

    @property
    def divisor(self):
        return self._divisor

    def elaborate(self, platform):
        m = Module()
        # Raw ports and explicit buffers (Amaranth 0.5); RTS and DTR stay unused. The
        # oscillator's port keeps its 25 MHz constraint (the platform adds it on request),
        # from which nextpnr derives the PLL's.
        clk25 = platform.request("clk25", 0, dir="-")
        m.submodules.clk25_buf = clk25_buf = io.Buffer("i", clk25)
        m.submodules.pll = pll = ECP5PLL(settings=self._pll)
        m.domains.sync = cd_sync = ClockDomain("sync")
        m.d.comb += [pll.clk_in.eq(clk25_buf.i), cd_sync.clk.eq(pll.clk_out)]
        # The synchronizer sits by the PLL, in a corner; the reset it releases reaches
        # every synchronous reset of the design (some 30,000 flip-flops, through a LUT
        # each). It does so from a register of its own (`sync_rst`, released a cycle
        # later), so the synchronizer's flip-flops each drive one load and the timed
        # path is the one register's fan-out, whose delay is its loads' wherever it is
        # placed (docs/synthesis.md, "The bitstream").
        m.domains.sync_rst = cd_rst = ClockDomain("sync_rst", local=True)
        m.d.comb += cd_rst.clk.eq(pll.clk_out)
        m.submodules.reset_sync = ResetSynchronizer(~pll.locked, domain="sync_rst")
        sync_rst = Signal(init=1)
        m.d.sync_rst += sync_rst.eq(0)
        m.d.comb += cd_sync.rst.eq(sync_rst)

        m.submodules.core = core = BoardCore(self._plan, divisor=self._divisor)
        uart = platform.request("uart", 0, dir={"rx": "-", "tx": "-", "rts": "-", "dtr": "-"})
        m.submodules.uart_rx = rx = io.Buffer("i", uart.rx)
        m.submodules.uart_tx = tx = io.Buffer("o", uart.tx)
        m.d.comb += [core.rx.eq(rx.i), tx.o.eq(core.tx)]
        for i in range(8):
            m.submodules[f"led{i}"] = led = io.Buffer("o", platform.request("led", i, dir="-"))
            m.d.comb += led.o.eq(core.leds[i])
        return m
