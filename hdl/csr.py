"""The AXI4-Lite control and status register block, built from `attenio.regmap`.

The register map is data: this block instantiates one storage register per RW
register, a start pulse per W1 register, and read multiplexing for RO and CONST
registers; the C header and the Markdown table come from the same description,
so they cannot disagree with the hardware.

Reading the low word of a 64-bit register latches its high word, which the next
read of the high word returns, so a counter that carries between the two reads
is still read coherently. Accesses to unmapped offsets answer SLVERR. A write loads
its register in the cycle after its AW and W handshake, as BVALID rises. A read
answers on the third cycle counting its AR handshake's as the first, with read-only values from the cycle before (see
`elaborate`: registers break the long routes from the counters to the bus, and the
read multiplexer in two).

`READ_BANK` words share the first level of the read multiplexer.

A window of the map (`attenio.regmap.Window`: a table such as SCALE_C_TABLE, whole read
banks of its own) is a memory here, written and read by the bus at the same pace as a
register, and read by the hardware through a port of its own (``x_addr``, ``x_data`` a
cycle later).
"""

from amaranth.hdl import Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from attenio.regmap import Access

from .axi import AXI4LiteSignature
from .formats.dsp import or_all

__all__ = ["CSRBlock", "READ_BANK"]

OKAY, SLVERR = 0b00, 0b10

#: words per bank of the read multiplexer's first level (an 8:1 mux: two LUT4 and the
#: slice's PFUMX / L6MUX on ECP5)
READ_BANK = 8


class CSRBlock(wiring.Component):
    """AXI4-Lite slave exposing `regmap`.

    Ports, by register name (lower case): an RW register `x` drives ``x`` (its
    current value); an RO register `x` reads ``x`` (driven by the hardware); a W1
    register `x` pulses ``x`` for one cycle when written with bit 0 set. A window `x`:
    ``x_addr`` in (an entry's index), ``x_data`` out (that entry, a cycle later).
    """

    def __init__(self, regmap):
        self._regmap = regmap
        members = {"s_axil": In(AXI4LiteSignature(addr_width=regmap.addr_width))}
        for r in regmap:
            name = r.name.lower()
            if r.access is Access.RW:
                members[name] = Out(r.width, init=r.value)
            elif r.access is Access.RO:
                members[name] = In(r.width)
            elif r.access is Access.W1:
                members[name] = Out(1)
        for w in regmap.windows:
            words = range(w.offset // 4, w.offset // 4 + w.entries)
            if w.offset // 4 % READ_BANK or w.entries % READ_BANK or any(
                    r.offset // 4 + i in words for r in regmap for i in range(r.words)):
                raise ValueError(f"CSRBlock: window {w.name} must fill whole read banks of "
                                 f"{READ_BANK} words of its own")
            name = w.name.lower()
            members[f"{name}_addr"] = In(range(w.entries))
            members[f"{name}_data"] = Out(32)
        super().__init__(members)

    @property
    def regmap(self):
        return self._regmap

    def elaborate(self, platform):
        m = Module()
        bus = self.s_axil

        # -- writes: take AW and W together, write the next cycle, answer on B then ------
        # The bus's write and its address's decode are registered before any register
        # loads: a one-hot select per writable word (kept, so each stays beside its
        # register), and the data and strobes (every cycle: the selects say when they
        # count). Decoded in the cycle the registers load, one path would run from the
        # handshake through the decode and a route to every register's enable. B answers
        # as the registers take the write.
        w_pend = Signal()                        # a write taken, loading this cycle
        take_write = bus.awvalid & bus.wvalid & ~bus.bvalid & ~w_pend
        m.d.comb += [bus.awready.eq(take_write), bus.wready.eq(take_write)]
        w_data = Signal.like(bus.wdata, name="w_data")
        w_strb = Signal.like(bus.wstrb, name="w_strb")
        w_ok = Signal(name="w_ok")               # a writable word: OKAY
        # each writable word: whether AWADDR names it, and its select
        w_hit = {(r.name, word): bus.awaddr[2:] == r.offset // 4 + word
                 for r in self._regmap if r.access in (Access.RW, Access.W1)
                 for word in range(r.words)}
        w_sel = {key: Signal(name=f"w_{key[0].lower()}_sel{key[1]}", attrs={"keep": 1})
                 for key in w_hit}

        def win_hit(w):
            return bus.awaddr[2 + w.index_bits:] == w.offset >> (2 + w.index_bits)

        m.d.sync += [w_pend.eq(take_write), w_data.eq(bus.wdata), w_strb.eq(bus.wstrb),
                     w_ok.eq(or_all(w_hit.values())
                             | or_all(win_hit(w) for w in self._regmap.windows))]
        m.d.sync += [w_sel[key].eq(take_write & hit) for key, hit in w_hit.items()]
        for r in self._regmap:
            if r.access is Access.W1:
                m.d.sync += getattr(self, r.name.lower()).eq(0)
        with m.If(bus.bvalid & bus.bready):
            m.d.sync += bus.bvalid.eq(0)
        with m.If(w_pend):
            m.d.sync += [bus.bvalid.eq(1), bus.bresp.eq(Mux(w_ok, OKAY, SLVERR))]
        for (name, word), sel in w_sel.items():
            with m.If(sel):
                self._write(m, self._regmap[name], word, w_data, w_strb)

        # a window: one memory, its two read ports the bus's and the hardware's; its write
        # registered as the registers' are
        win_ports = []
        for w in self._regmap.windows:
            m.submodules[w.name.lower()] = mem = Memory(shape=unsigned(32), depth=w.entries,
                                                         init=[])
            wr, rd_hw, rd_bus = mem.write_port(granularity=8), mem.read_port(), mem.read_port()
            name = w.name.lower()
            win_sel = Signal(name=f"w_{name}_sel", attrs={"keep": 1})
            w_index = Signal(w.index_bits, name=f"w_{name}_index")
            m.d.sync += [win_sel.eq(take_write & win_hit(w)),
                         w_index.eq(bus.awaddr[2:2 + w.index_bits])]
            m.d.comb += [rd_hw.addr.eq(getattr(self, f"{name}_addr")),
                         getattr(self, f"{name}_data").eq(rd_hw.data),
                         wr.addr.eq(w_index), wr.data.eq(w_data),
                         wr.en.eq(Mux(win_sel, w_strb, 0))]
            win_ports.append((w, rd_bus))

        # -- reads: three cycles from AR to R ---------------------------------------
        # The read-only inputs (counters, status) come from all over the chip, so each is
        # first copied into a register here (a cycle old when read; both words of a
        # 64-bit counter from the same cycle), and the address is registered before it
        # selects: no path runs from a distant counter or from ARADDR through the
        # read multiplexer in one cycle. The multiplexer itself is two levels with a
        # register between: each bank of READ_BANK words selects by a one-hot decode of
        # the word's low bits into its register (with whether the word is mapped), then
        # the bank's high bits choose a bank. In one level the small preset's 43 words are
        # four LUTs deep, spread over the snapshots' placement: one cycle is not enough.
        self._snap = {r.name: Signal(r.width, name=f"{r.name.lower()}_snap")
                      for r in self._regmap if r.access is Access.RO}
        m.d.sync += [self._snap[r.name].eq(getattr(self, r.name.lower()))
                     for r in self._regmap if r.access is Access.RO]
        shadows = {r.name: Signal(32, name=f"{r.name.lower()}_hi_latch")
                   for r in self._regmap if r.width == 64}
        banks = {}                               # bank -> [(word's index in it, r, word)]
        for r in self._regmap:
            for word in range(r.words):
                index = r.offset // 4 + word
                banks.setdefault(index // READ_BANK, []).append((index % READ_BANK, r, word))
        low_bits = (READ_BANK - 1).bit_length()
        rd_pend = Signal()                       # the address is registered
        rd_banked = Signal()                     # the banks have selected
        rd_word = Signal(len(bus.araddr) - 2)
        # each bank selects by a one-hot register of its own (a flip-flop per mapped word,
        # kept), decoded from ARADDR as it is taken: one register would drive every bank's
        # multiplexers across the snapshots' placement, and a binary select is decoded
        # again beside each bit's multiplexer, a LUT and a long route before it
        rd_sel = {b: {low: Signal(name=f"rd_bank{b}_sel{low}", attrs={"keep": 1})
                      for low, _, _ in entries} for b, entries in banks.items()}
        bank_data = {b: Signal(32, name=f"rd_bank{b}_data") for b in banks}
        bank_ok = {b: Signal(name=f"rd_bank{b}_ok") for b in banks}
        m.d.comb += bus.arready.eq(~rd_pend & ~rd_banked & ~bus.rvalid)
        with m.If(bus.rvalid & bus.rready):
            m.d.sync += bus.rvalid.eq(0)
        with m.If(bus.arvalid & bus.arready):
            m.d.sync += [rd_pend.eq(1), rd_word.eq(bus.araddr[2:])]
            m.d.sync += [sel.eq(bus.araddr[2:2 + low_bits] == low)
                         for sels in rd_sel.values() for low, sel in sels.items()]
        # a window's entry is read from its memory as the AR is taken and registered with
        # the banks' words, and answered as a bank of its own (`_bank_pattern`)
        win_words = []
        for w, rd in win_ports:
            word = Signal(32, name=f"rd_{w.name.lower()}_data")
            m.d.comb += rd.addr.eq(bus.araddr[2:2 + w.index_bits])
            with m.If(rd_pend):
                m.d.sync += word.eq(rd.data)
            win_words.append((w, word))
        # the second level selects a bank by a one-hot register too (kept, one per bank and
        # one per window), decoded from the registered address beside the banks' selection:
        # a binary bank index decoded beside rdata's multiplexers was four LUTs and a long
        # route (10.53 ns, int8's worst path on a seed, and the fp16 2x2's on another)
        bank_index = rd_word[low_bits:]
        bank_on = {b: Signal(name=f"rd_bank{b}_on", attrs={"keep": 1}) for b in banks}
        win_on = [Signal(name=f"rd_{w.name.lower()}_on", attrs={"keep": 1})
                  for w, _ in win_ports]
        with m.If(rd_pend):
            m.d.sync += [rd_pend.eq(0), rd_banked.eq(1),
                         *[on.eq(bank_index == b) for b, on in bank_on.items()],
                         *[on.eq(bank_index.matches(self._bank_pattern(w, len(bank_index))))
                           for on, (w, _) in zip(win_on, win_ports)]]
            for b, entries in banks.items():    # an AND-OR: at most one select is high
                sel = rd_sel[b]
                m.d.sync += [bank_data[b].eq(or_all(Mux(sel[low], self._read(r, word, shadows), 0)
                                                    for low, r, word in entries)),
                             bank_ok[b].eq(or_all(sel.values()))]
            with m.Switch(rd_word):                # reading a low word latches its high word
                for r in self._regmap:
                    if r.width == 64:
                        with m.Case(r.offset // 4):
                            m.d.sync += shadows[r.name].eq(self._value(r)[32:64])
        with m.If(rd_banked):                   # an AND-OR: at most one bank is on
            ons = [(bank_on[b], bank_data[b], bank_ok[b]) for b in banks]
            ons += [(on, word, 1) for on, (_, word) in zip(win_on, win_words)]
            m.d.sync += [rd_banked.eq(0), bus.rvalid.eq(1),
                         bus.rdata.eq(or_all(Mux(on, data, 0) for on, data, _ in ons)),
                         bus.rresp.eq(Mux(or_all(on & ok for on, _, ok in ons), OKAY, SLVERR))]
        return m

    @staticmethod
    def _bank_pattern(w, bits):
        """The read banks of window `w`, as a `Case` pattern of a `bits`-bit bank index."""
        span = (w.entries // READ_BANK).bit_length() - 1      # banks: a power of two
        high = (w.offset // 4 // READ_BANK) >> span
        return format(high, f"0{bits - span}b") + "-" * span

    def _value(self, r):
        if r.access is Access.CONST:
            return r.value
        if r.access is Access.W1:
            return 0
        if r.access is Access.RO:
            return self._snap[r.name]
        return getattr(self, r.name.lower())

    def _read(self, r, word, shadows):
        if r.access is Access.W1:
            return 0
        if r.access is Access.CONST:
            return (r.value >> (32 * word)) & 0xFFFF_FFFF
        if r.width == 64 and word == 1:
            return shadows[r.name]
        return self._value(r)[32 * word:32 * word + 32]

    def _write(self, m, r, word, data, strb):
        """Word `word` of RW or W1 register `r` takes `data`'s bytes strobed in `strb`."""
        if r.access is Access.W1:
            m.d.sync += getattr(self, r.name.lower()).eq(data[0] & strb[0])
            return
        reg = getattr(self, r.name.lower())
        for byte in range(4):
            lo = 32 * word + 8 * byte
            if lo < r.width:
                with m.If(strb[byte]):
                    m.d.sync += reg[lo:lo + 8].eq(data[8 * byte:8 * byte + 8])
