"""The PE array: `mac_lines` (p) lines of `macs_per_line` (q) MACs, and the words that flow through it.

Every MAC owns `rows_per_mac` (r) rows of the Q block: MAC c of line i holds
row ``t*p*q + i*q + c`` in its slot t (`attenio.plan.Plan.row_of`). It keeps,
in PE-local storage,

* Q: r x d int8 (a `Memory` with a synchronous read port),
* O: r x d accumulators of `o_shape` (a `Memory`, read one cycle ahead of the
  read-modify-write),
* two banks of r exact scores (bank j mod 2 holds the scores against K_j, so
  the scores of K_{j+1} can be computed while the softmax of K_j reads bank
  j mod 2), and two banks of r (up, e) pairs written by the softmax lane ((alpha, P) =
  (e, 1) if up else (1, e)).

The array is fed by one `word` per cycle (see `word_layout`): it enters MAC 0 of
every line and moves one MAC per cycle along the line (systolic forwarding), so
no K/V net spans more than one MAC and the only array-wide net is the entry
register's fan-out to the p lines. A word carries its own control, so MAC c acts
on it c cycles after MAC 0 and nothing in the array ever stalls:

* ``is_q``: a Q element for MAC (``line``, ``mac``), stored at ``addr``;
* ``is_s``: a K element; the MAC accumulates q[addr] * value into its score
  (restarted at ``kfirst``) and, at ``klast``, writes the score of ``slot`` to
  bank ``bank``;
* ``is_u``: a V element; O[addr] = rescale(alpha, O[addr]) + P * value with the
  (P, alpha) of (``bank``, ``slot``); ``first`` (the block's V_0) reads O as 0,
  so O needs no clearing between blocks. ``last`` marks the block's final V row.
  The update is pipelined (`MAC.update_latency`, 3 cycles: operands, products,
  sum); one multiplier serves both alpha * O and P * V (`Int8Arith.update`).

Besides forwarding, a line gives its lanes (`attenio.hdl.softmax.SoftmaxLane`)
a start pulse when the last slot's score has been written by its last MAC, and
it multiplexes the O accumulators and the lanes' running sums l for the drain
(the normalizer in `attenio.hdl.core`).
"""

from amaranth.hdl import Array, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from .formats import Int8Arith
from .softmax import SoftmaxLane, pa_layout, start_layout

__all__ = ["word_layout", "check_dims", "MAC", "MacLine", "PEArray"]


def check_dims(owner, **dims):
    """Raise ValueError naming the first parameter that is not a positive integer."""
    for name, value in dims.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{owner}: {name} must be a positive integer, not {value!r}")


def word_layout(*, mac_lines, macs_per_line, rows_per_mac, head_dim):
    """The word that moves along a MAC line, one MAC per cycle."""
    return data.StructLayout({
        "valid": 1,
        "is_q": 1, "is_s": 1, "is_u": 1,
        "line": range(mac_lines),               # Q: the target MAC
        "mac": range(macs_per_line),
        "addr": range(rows_per_mac * head_dim),  # slot * d + k in the MAC's Q and O storage
        "slot": range(rows_per_mac),
        "kfirst": 1, "klast": 1,                # k == 0, k == d - 1
        "bank": 1,                              # j mod 2 of the K or V row
        "first": 1,                             # the row is K_0 or V_0 of the block
        "last": 1,                              # the row is V_(N-1) of the block
        "value": signed(8),
    })


def _check_arith(owner, arith):
    if not isinstance(arith, Int8Arith):
        raise TypeError(f"{owner}: arith must be an Int8Arith, not {arith!r}")


class MAC(wiring.Component):
    """One MAC with its r rows of Q and O (see the module docstring).

    `line`, `index`: its position (Q words are addressed to it); `lane_index`:
    its index among the MACs of its softmax lane (the (P, alpha) bus address).
    Ports: `wi` the word from the previous MAC (or the line entry), `wo` the
    word one cycle later, `score` the two banks of r scores (bank * r + slot),
    `pa` the lane's write bus, `drain_addr` / `o_rd` the drain read port of O
    (data one cycle after the address; used only while no V word is present).
    """

    def __init__(self, *, arith, mac_lines, macs_per_line, rows_per_mac, head_dim,
                 macs_per_lane, line, index, lane_index):
        _check_arith("MAC", arith)
        check_dims("MAC", mac_lines=mac_lines, macs_per_line=macs_per_line,
                   rows_per_mac=rows_per_mac, head_dim=head_dim, macs_per_lane=macs_per_lane)
        for name, value, hi in (("line", line, mac_lines), ("index", index, macs_per_line),
                                ("lane_index", lane_index, macs_per_lane)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < hi:
                raise ValueError(f"MAC: {name} must be an integer in [0, {hi}), not {value!r}")
        self._arith = arith
        self._r, self._d = rows_per_mac, head_dim
        self._line, self._index, self._lane_index = line, index, lane_index
        word = word_layout(mac_lines=mac_lines, macs_per_line=macs_per_line,
                           rows_per_mac=rows_per_mac, head_dim=head_dim)
        super().__init__({
            "wi": In(word),
            "wo": Out(word),
            "score": Out(data.ArrayLayout(arith.score_shape, 2 * rows_per_mac)),
            "pa": In(pa_layout(arith=arith, macs_per_lane=macs_per_lane, rows_per_mac=rows_per_mac)),
            "drain_addr": In(range(rows_per_mac * head_dim)),
            "o_rd": Out(arith.o_shape),
        })

    @staticmethod
    def update_latency(arith):
        """Cycles from a V word at this MAC to its O element written (`Int8Arith.update`:
        operands, products, sum)."""
        return arith.update_latency

    #: cycles from the last K word at this MAC to its score in the bank (the q*k product
    #: register, then the accumulator's)
    score_latency = 1

    @property
    def line(self):
        return self._line

    @property
    def index(self):
        return self._index

    def elaborate(self, platform):
        m = Module()
        A, r, d = self._arith, self._r, self._d
        wi = self.wi
        w = Signal.like(self.wi, name="w")          # the word this MAC works on this cycle
        m.d.sync += w.eq(wi)
        m.d.comb += self.wo.eq(w)

        m.submodules.q_mem = q_mem = Memory(shape=signed(8), depth=r * d, init=[])
        m.submodules.o_mem = o_mem = Memory(shape=A.o_shape, depth=r * d, init=[])
        q_wr = q_mem.write_port()
        q_rd = q_mem.read_port(transparent_for=(q_wr,))
        o_wr = o_mem.write_port()
        o_rd = o_mem.read_port(transparent_for=(o_wr,))

        # Q load: the word addressed to this MAC writes its slot's element.
        m.d.comb += [
            q_wr.addr.eq(w.addr), q_wr.data.eq(w.value),
            q_wr.en.eq(w.valid & w.is_q & (w.line == self._line) & (w.mac == self._index)),
            q_rd.addr.eq(wi.addr),                 # read one cycle ahead: data arrives with w
        ]

        # Scores: the product registered (the DSP, or LUTs with --lut-mul-width), then one
        # accumulator, restarted at k = 0 and copied to its bank at k = d - 1
        # (`MAC.score_latency` cycles after the word).
        prod = Signal(signed(16), name="qk")
        s_en, s_first, s_last = Signal(name="s_en"), Signal(name="s_first"), Signal(name="s_last")
        s_bank, s_slot = Signal.like(w.bank, name="s_bank"), Signal.like(w.slot, name="s_slot")
        m.d.sync += [prod.eq(q_rd.data * w.value), s_en.eq(w.valid & w.is_s),
                     s_first.eq(w.kfirst), s_last.eq(w.klast), s_bank.eq(w.bank), s_slot.eq(w.slot)]
        acc = Signal(A.score_shape)
        acc_next = Signal(A.score_shape, name="acc_next")
        m.d.comb += acc_next.eq(Mux(s_first, 0, acc) + prod)
        with m.If(s_en):
            m.d.sync += acc.eq(acc_next)
            with m.If(s_last):
                for b in range(2):
                    for t in range(r):
                        with m.If((s_bank == b) & (s_slot == t)):
                            m.d.sync += self.score[b * r + t].eq(acc_next)

        # (up, e) registers, written by the lane over its line-local bus.
        e_regs = [Signal(A.p_shape, name=f"e_{b}_{t}") for b in range(2) for t in range(r)]
        up_regs = [Signal(name=f"up_{b}_{t}") for b in range(2) for t in range(r)]
        pa = self.pa
        with m.If(pa.valid & (pa.mac == self._lane_index)):
            for b in range(2):
                for t in range(r):
                    with m.If((pa.bank == b) & (pa.slot == t)):
                        m.d.sync += [e_regs[b * r + t].eq(pa.e), up_regs[b * r + t].eq(pa.up)]

        # Update, pipelined (`Int8Arith.update`: operands selected and registered, products,
        # sum): O is read one cycle ahead (or at the drain's address when no V word comes),
        # and the sum is written `MAC.update_latency` cycles after the word.
        def pick(regs):             # regs[bank * r + slot], as muxes (no "*": see softmax.py)
            return Array([Array([regs[b * r + t] for t in range(r)]) for b in range(2)])[w.bank][w.slot]
        addr = [Signal.like(w.addr, name=f"addr_{k}") for k in range(A.update_latency)]
        en = [Signal(name=f"en_{k}") for k in range(A.update_latency)]
        m.d.sync += [addr[0].eq(w.addr), en[0].eq(w.valid & w.is_u)]
        m.d.sync += [addr[k].eq(addr[k - 1]) for k in range(1, len(addr))]
        m.d.sync += [en[k].eq(en[k - 1]) for k in range(1, len(en))]
        o_new = A.update(m, pick(up_regs), pick(e_regs),
                         Mux(w.first, 0, o_rd.data), w.value)
        m.d.comb += [
            o_rd.addr.eq(Mux(wi.valid & wi.is_u, wi.addr, self.drain_addr)),
            self.o_rd.eq(o_rd.data),
            o_wr.addr.eq(addr[-1]),
            o_wr.data.eq(o_new),
            o_wr.en.eq(en[-1]),
        ]
        return m


class MacLine(wiring.Component):
    """One line of q MACs and its L = `lanes` softmax lanes (q/L MACs each).

    Ports: `wi` the entry word; `tail` the word leaving the last MAC; `c` the
    softmax constant for the lanes; `ready`/`consume` the lanes' per-bank
    "(P, alpha) written" flags, ANDed, and their clear strobes; `exp_active`
    some lane issued a row this cycle. Drain: `drain_addr` (O address, all
    MACs), `drain_u` (l address, all lanes), `drain_mac` / `drain_lane` (which
    one to select) give `o_rd` and `l_rd` two cycles later.
    """

    def __init__(self, *, arith, mac_lines, macs_per_line, rows_per_mac, head_dim, lanes, line):
        _check_arith("MacLine", arith)
        check_dims("MacLine", mac_lines=mac_lines, macs_per_line=macs_per_line,
                   rows_per_mac=rows_per_mac, head_dim=head_dim, lanes=lanes)
        if macs_per_line % lanes:
            raise ValueError(f"MacLine: macs_per_line ({macs_per_line}) must be a multiple of "
                             f"the lanes per line ({lanes})")
        self._arith = arith
        self._p, self._q, self._r, self._d = mac_lines, macs_per_line, rows_per_mac, head_dim
        self._lanes, self._line = lanes, line
        ql = macs_per_line // lanes
        word = word_layout(mac_lines=mac_lines, macs_per_line=macs_per_line,
                           rows_per_mac=rows_per_mac, head_dim=head_dim)
        super().__init__({
            "wi": In(word),
            "tail": Out(word),
            "c": In(arith.c_shape),
            "ready": Out(2),
            "consume": In(2),
            "exp_active": Out(1),
            "drain_addr": In(range(rows_per_mac * head_dim)),
            "drain_u": In(range(rows_per_mac * ql)),
            "drain_mac": In(range(macs_per_line)),
            "drain_lane": In(range(lanes)),
            "o_rd": Out(arith.o_shape),
            "l_rd": Out(arith.l_shape),
        })

    def elaborate(self, platform):
        m = Module()
        A, q, r, L = self._arith, self._q, self._r, self._lanes
        ql = q // L
        macs = []
        for c in range(q):
            mac = MAC(arith=A, mac_lines=self._p, macs_per_line=q, rows_per_mac=r,
                      head_dim=self._d, macs_per_lane=ql, line=self._line, index=c,
                      lane_index=c % ql)
            m.submodules[f"mac{c}"] = mac
            m.d.comb += mac.wi.eq(self.wi if c == 0 else macs[-1].wo)
            m.d.comb += mac.drain_addr.eq(self.drain_addr)
            macs.append(mac)
        tail = macs[-1].wo
        m.d.comb += self.tail.eq(tail)

        # The last MAC writes the last slot's score `MAC.score_latency` cycles after its
        # word leaves it: the lanes may start then.
        start_d = [Signal(start_layout(), name=f"start_d{k}") for k in range(MAC.score_latency + 1)]
        m.d.comb += [
            start_d[0].valid.eq(tail.valid & tail.is_s & tail.klast & (tail.slot == r - 1)),
            start_d[0].bank.eq(tail.bank), start_d[0].first.eq(tail.first),
        ]
        m.d.sync += [start_d[k].eq(start_d[k - 1]) for k in range(1, len(start_d))]
        start = start_d[-1]
        lanes = []
        for g in range(L):
            lane = SoftmaxLane(arith=A, macs_per_lane=ql, rows_per_mac=r)
            m.submodules[f"lane{g}"] = lane
            mine = macs[g * ql:(g + 1) * ql]
            for k, mac in enumerate(mine):
                for i in range(2 * r):
                    m.d.comb += lane.scores[k * 2 * r + i].eq(mac.score[i])
                m.d.comb += mac.pa.eq(lane.pa)
            m.d.comb += [lane.start.eq(start), lane.c.eq(self.c), lane.consume.eq(self.consume),
                         lane.drain_u.eq(self.drain_u)]
            lanes.append(lane)
        for b in range(2):
            ready_b = 1
            for lane in lanes:
                ready_b = ready_b & lane.ready[b]
            m.d.comb += self.ready[b].eq(ready_b)
        active = 0
        for lane in lanes:
            active = active | lane.active
        m.d.comb += self.exp_active.eq(active)

        # Drain: memories answer one cycle after the address; select, then register.
        mac_sel = Signal.like(self.drain_mac)
        lane_sel = Signal.like(self.drain_lane)
        m.d.sync += [mac_sel.eq(self.drain_mac), lane_sel.eq(self.drain_lane)]
        m.d.sync += [self.o_rd.eq(Array([mac.o_rd for mac in macs])[mac_sel]),
                     self.l_rd.eq(Array([lane.l_rd for lane in lanes])[lane_sel])]
        return m


class PEArray(wiring.Component):
    """p MAC lines fed by one entry word (see `MacLine` for the ports, which are the
    same here except that `ready` is ANDed over the lines, `exp_active` ORed, `tail`
    is line 0's, and the drain adds `drain_line`, answered three cycles later)."""

    def __init__(self, *, arith, mac_lines, macs_per_line, rows_per_mac, head_dim, exp_units):
        _check_arith("PEArray", arith)
        check_dims("PEArray", mac_lines=mac_lines, macs_per_line=macs_per_line,
                   rows_per_mac=rows_per_mac, head_dim=head_dim, exp_units=exp_units)
        if exp_units % mac_lines:
            raise ValueError(f"PEArray: exp_units ({exp_units}) must be a multiple of "
                             f"mac_lines ({mac_lines})")
        lanes = exp_units // mac_lines
        if macs_per_line % lanes:
            raise ValueError(f"PEArray: macs_per_line ({macs_per_line}) must be a multiple of "
                             f"exp_units / mac_lines ({lanes})")
        self._arith = arith
        self._p, self._q, self._r, self._d, self._lanes = (mac_lines, macs_per_line, rows_per_mac,
                                                          head_dim, lanes)
        word = word_layout(mac_lines=mac_lines, macs_per_line=macs_per_line,
                           rows_per_mac=rows_per_mac, head_dim=head_dim)
        ql = macs_per_line // lanes
        super().__init__({
            "wi": In(word),
            "tail": Out(word),
            "c": In(arith.c_shape),
            "ready": Out(2),
            "consume": In(2),
            "exp_active": Out(1),
            "drain_addr": In(range(rows_per_mac * head_dim)),
            "drain_u": In(range(rows_per_mac * ql)),
            "drain_mac": In(range(macs_per_line)),
            "drain_lane": In(range(lanes)),
            "drain_line": In(range(mac_lines)),
            "o_rd": Out(arith.o_shape),
            "l_rd": Out(arith.l_shape),
        })

    @property
    def lanes_per_line(self):
        return self._lanes

    def elaborate(self, platform):
        m = Module()
        lines = []
        for i in range(self._p):
            line = MacLine(arith=self._arith, mac_lines=self._p, macs_per_line=self._q,
                           rows_per_mac=self._r, head_dim=self._d, lanes=self._lanes, line=i)
            m.submodules[f"line{i}"] = line
            m.d.comb += [line.wi.eq(self.wi), line.c.eq(self.c), line.consume.eq(self.consume),
                         line.drain_addr.eq(self.drain_addr), line.drain_u.eq(self.drain_u),
                         line.drain_mac.eq(self.drain_mac), line.drain_lane.eq(self.drain_lane)]
            lines.append(line)
        m.d.comb += self.tail.eq(lines[0].tail)
        for b in range(2):
            ready_b = 1
            for line in lines:
                ready_b = ready_b & line.ready[b]
            m.d.comb += self.ready[b].eq(ready_b)
        active = 0
        for line in lines:
            active = active | line.exp_active
        m.d.comb += self.exp_active.eq(active)
        # The line select follows the data: two cycles to the lines' registers, one more here.
        line_sel = [Signal.like(self.drain_line, name=f"drain_line_{k}") for k in range(2)]
        m.d.sync += [line_sel[0].eq(self.drain_line), line_sel[1].eq(line_sel[0])]
        m.d.sync += [self.o_rd.eq(Array([line.o_rd for line in lines])[line_sel[1]]),
                     self.l_rd.eq(Array([line.l_rd for line in lines])[line_sel[1]])]
        return m
