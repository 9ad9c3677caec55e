"""One MAC of the PE array, and the word that flows through a MAC line.

Every MAC owns `rows_per_mac` (r) rows of the Q block: MAC c of line i holds
row ``t*p*q + i*q + c`` in its slot t (`attenio.plan.Plan.row_of`). It keeps,
in PE-local storage,

* Q: r x d int8 (a `Memory` with a synchronous read port),
* O: r x d accumulators of `o_shape` (a `Memory`, read one cycle ahead of the
  read-modify-write),
* two banks of r exact scores (bank j mod 2 holds the scores against K_j, so
  the scores of K_{j+1} can be computed while the softmax of K_j reads bank
  j mod 2), and two banks of r (up, e) pairs written by the softmax lane
  ((alpha, P) = (e, 1) if up else (1, e)).

A MAC acts on the `word` it holds this cycle and passes it on one cycle later
(systolic forwarding along the line). A word carries its own control, so MAC c
acts on it c cycles after MAC 0 and nothing in the array ever stalls:

* ``is_q``: a Q element for MAC (``line``, ``mac``), stored at ``addr``;
* ``is_s``: a K element; the MAC accumulates q[addr] * value into its score
  (restarted at ``kfirst``) and, at ``klast``, writes the score of ``slot`` to
  bank ``bank``;
* ``is_u``: a V element; O[addr] = rescale(alpha, O[addr]) + P * value with the
  (P, alpha) of (``bank``, ``slot``); ``first`` (the block's V_0) reads O as 0,
  so O needs no clearing between blocks. ``last`` marks the block's final V row.
  One multiplier serves both alpha * O and P * V (`Int8Arith.update`).
"""

from amaranth.hdl import Array, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from attenio import validate

from .formats import Int8Arith
from .softmax import pa_layout

__all__ = ["word_layout", "check_arith", "MAC"]


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


def check_arith(owner, arith):
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
        check_arith("MAC", arith)
        validate.positive("MAC", mac_lines=mac_lines, macs_per_line=macs_per_line,
                          rows_per_mac=rows_per_mac, head_dim=head_dim,
                          macs_per_lane=macs_per_lane)
        validate.index("MAC", "line", line, mac_lines)
        validate.index("MAC", "index", index, macs_per_line)
        validate.index("MAC", "lane_index", lane_index, macs_per_lane)
        self._arith = arith
        self._r, self._d = rows_per_mac, head_dim
        self._line, self._index, self._lane_index = line, index, lane_index
        word = word_layout(mac_lines=mac_lines, macs_per_line=macs_per_line,
                           rows_per_mac=rows_per_mac, head_dim=head_dim)
        super().__init__({
            "wi": In(word),
            "wo": Out(word),
            "score": Out(data.ArrayLayout(arith.score_shape, 2 * rows_per_mac)),
            "pa": In(pa_layout(arith=arith, macs_per_lane=macs_per_lane,
                               rows_per_mac=rows_per_mac)),
            "drain_addr": In(range(rows_per_mac * head_dim)),
            "o_rd": Out(arith.o_shape),
        })

    @staticmethod
    def update_latency(arith):
        """Cycles from a V word at this MAC to its O element written: the update
        pipeline of the format (`Int8Arith.update`)."""
        return arith.update_latency

    #: cycles from the last K word at this MAC to its score in the bank: the q*k
    #: product register (a DSP's output register, or LUTs) before the accumulator's
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

        # Scores: the product registered (`score_latency`), then one accumulator, restarted at
        # k = 0 and copied to its bank at k = d - 1.
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

        # Update, pipelined (`Int8Arith.update`): O is read one cycle ahead (or at the
        # drain's address when no V word comes), and the sum is written
        # `update_latency` cycles after the word.
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
