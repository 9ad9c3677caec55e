"""One MAC of the PE array, and the word that flows through a MAC line.

A Q row is split over s = `split` adjacent MACs of a line, a group (s = 1: a
MAC of its own). Every group owns `rows_per_mac` (r) rows of the Q block:
group c of line i holds row ``t*p*q/s + i*q/s + c`` in its slot t
(`attenio.plan.Plan.row_of`), and MAC g of the group (its `position`) holds
columns g, g + s, g + 2s, ... of that row: element g of every chunk the word
carries. A MAC keeps, in PE-local storage,

* Q: r x d/s int8 (a `Memory` with a synchronous read port),
* O: r x d/s accumulators of `o_shape` (a `Memory`, read one cycle ahead of the
  read-modify-write),
* two banks of r exact scores (bank j mod 2 holds the scores against K_j, so
  the scores of K_{j+1} can be computed while the softmax of K_j reads bank
  j mod 2), and two banks of r (up, e) pairs written by the softmax lane
  ((alpha, P) = (e, 1) if up else (1, e)).

A MAC acts on the `word` it holds this cycle and passes it on one cycle later
(systolic forwarding along the line). A word carries its own control, so MAC c
acts on it c cycles after MAC 0 and nothing in the array ever stalls:

* ``is_q``: a Q chunk for group (``line``, ``mac``), stored at ``addr``;
* ``is_s``: a K chunk; the MAC accumulates q[addr] * value into its score
  (restarted at ``kfirst``) and, at ``klast``, writes the score of ``slot`` to
  bank ``bank``;
* ``is_u``: a V chunk; O[addr] = rescale(alpha, O[addr]) + P * value with the
  (P, alpha) of (``bank``, ``slot``); ``first`` (the block's V_0) reads O as 0,
  so O needs no clearing between blocks. ``last`` marks the block's final V row.
  One multiplier serves both alpha * O and P * V (`Int8Arith.update`).

With s > 1 each MAC's score is a partial sum over its d/s columns. The partial
sums meet in an adder chain along the group, which the systolic skew makes
free of waiting: MAC g finishes its partial one cycle after MAC g - 1, so one
cycle after that it adds the running sum of MACs 0 .. g - 1 (a register in MAC
g - 1) and passes the sum on; the last MAC of the group writes the row's score
into its bank. One adder per cycle, one cycle of latency more than s = 1 for
any s (`MAC.score_latency`), and no wire longer than one MAC (a tree would take
log2 s stages and reach across s MACs).
"""

from amaranth.hdl import Array, Module, Mux, Signal, signed
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from attenio import validate

from .formats import Int8Arith
from .softmax import pa_layout

__all__ = ["word_layout", "check_arith", "MAC"]


def word_layout(*, mac_lines, macs_per_line, rows_per_mac, head_dim, split=1):
    """The word that moves along a MAC line, one MAC per cycle: a chunk of `split`
    elements and what to do with it."""
    return data.StructLayout({
        "valid": 1,
        "is_q": 1, "is_s": 1, "is_u": 1,
        "line": range(mac_lines),               # Q: the target group
        "mac": range(macs_per_line // split),
        "addr": range(rows_per_mac * head_dim // split),  # slot * d/s + c in Q and O storage
        "slot": range(rows_per_mac),
        "kfirst": 1, "klast": 1,                # c == 0, c == d/s - 1
        "bank": 1,                              # j mod 2 of the K or V row
        "first": 1,                             # the row is K_0 or V_0 of the block
        "last": 1,                              # the row is V_(N-1) of the block
        "value": data.ArrayLayout(signed(8), split),
    })


def check_arith(owner, arith):
    if not isinstance(arith, Int8Arith):
        raise TypeError(f"{owner}: arith must be an Int8Arith, not {arith!r}")


class MAC(wiring.Component):
    """One MAC with its share of r rows of Q and O (see the module docstring).

    `index`: its place in its line; with `split` = s it is MAC ``index mod s`` (its
    `position`) of group ``index div s`` (Q words are addressed to the group).
    `lane_index`: its group's index among the groups of its softmax lane (the
    (P, alpha) bus address).
    Ports: `line_id` the index of its line (an input, so that every line is the same
    module), `wi` the word from the previous MAC (or the line entry), `wo` the
    word one cycle later, `score` the two banks of r scores (bank * r + slot; written
    by the group's last MAC only), `chain_in` /
    `chain_out` the adder chain of the partial scores (s > 1), `pa` the lane's
    write bus, `drain_addr` / `o_rd` the drain read port of O (data one cycle after
    the address; used only while no V word is present).
    """

    def __init__(self, *, arith, mac_lines, macs_per_line, rows_per_mac, head_dim,
                 macs_per_lane, index, lane_index, split=1):
        check_arith("MAC", arith)
        validate.positive("MAC", mac_lines=mac_lines, macs_per_line=macs_per_line,
                          rows_per_mac=rows_per_mac, head_dim=head_dim,
                          macs_per_lane=macs_per_lane)
        validate.split("MAC", split, head_dim=head_dim, macs_per_line=macs_per_line)
        validate.index("MAC", "index", index, macs_per_line)
        validate.index("MAC", "lane_index", lane_index, macs_per_lane // split)
        self._arith = arith
        self._r, self._d, self._s = rows_per_mac, head_dim // split, split
        self._index, self._lane_index = index, lane_index
        word = word_layout(mac_lines=mac_lines, macs_per_line=macs_per_line,
                           rows_per_mac=rows_per_mac, head_dim=head_dim, split=split)
        super().__init__({
            "line_id": In(range(mac_lines)),
            "wi": In(word),
            "wo": Out(word),
            "score": Out(data.ArrayLayout(arith.score_shape, 2 * rows_per_mac)),
            "chain_in": In(arith.score_shape),
            "chain_out": Out(arith.score_shape),
            "pa": In(pa_layout(arith=arith, macs_per_lane=macs_per_lane // split,
                               rows_per_mac=rows_per_mac)),
            "drain_addr": In(range(rows_per_mac * self._d)),
            "o_rd": Out(arith.o_shape),
        })

    @staticmethod
    def update_latency(arith):
        """Cycles from a V word at this MAC to its O element written: the update
        pipeline of the format (`Int8Arith.update`)."""
        return arith.update_latency

    @staticmethod
    def score_latency(split):
        """Cycles from the last K word at a group's last MAC to the row's score in its
        bank: the q*k product register (a DSP's output register, or LUTs) before the
        accumulator's, and with s > 1 the adder chain's stage."""
        return 1 if split == 1 else 2

    @property
    def index(self):
        return self._index

    @property
    def position(self):
        """Its index in its group: the element of each chunk it takes."""
        return self._index % self._s

    @property
    def group(self):
        return self._index // self._s

    def elaborate(self, platform):
        m = Module()
        A, r, d, s = self._arith, self._r, self._d, self._s      # d: columns per MAC, d/s
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

        value = w.value[self.position]             # this MAC's element of the chunk

        # Q load: the word addressed to this MAC's group writes its slot's element.
        m.d.comb += [
            q_wr.addr.eq(w.addr), q_wr.data.eq(value),
            q_wr.en.eq(w.valid & w.is_q & (w.line == self.line_id) & (w.mac == self.group)),
            q_rd.addr.eq(wi.addr),                 # read one cycle ahead: data arrives with w
        ]

        # Scores: the product registered (`score_latency`), then one accumulator, restarted at
        # k = 0 and copied to its bank at k = d - 1.
        prod = Signal(signed(16), name="qk")
        s_en, s_first, s_last = Signal(name="s_en"), Signal(name="s_first"), Signal(name="s_last")
        s_bank, s_slot = Signal.like(w.bank, name="s_bank"), Signal.like(w.slot, name="s_slot")
        m.d.sync += [prod.eq(q_rd.data * value), s_en.eq(w.valid & w.is_s),
                     s_first.eq(w.kfirst), s_last.eq(w.klast), s_bank.eq(w.bank), s_slot.eq(w.slot)]
        acc = Signal(A.score_shape)
        acc_next = Signal(A.score_shape, name="acc_next")
        m.d.comb += acc_next.eq(Mux(s_first, 0, acc) + prod)
        with m.If(s_en):
            m.d.sync += acc.eq(acc_next)

        def write_score(en, bank, slot, value):
            with m.If(en):
                for b in range(2):
                    for t in range(r):
                        with m.If((bank == b) & (slot == t)):
                            m.d.sync += self.score[b * r + t].eq(value)

        if s == 1:
            write_score(s_en & s_last, s_bank, s_slot, acc_next)
        else:
            # The adder chain (see the module docstring): the partial sum registered, then
            # added to the sum of the MACs before this one in the group.
            part = Signal(A.score_shape, name="part")
            p_en = Signal(name="part_en")
            p_bank, p_slot = Signal.like(s_bank, name="part_bank"), Signal.like(s_slot,
                                                                                  name="part_slot")
            m.d.sync += [p_en.eq(s_en & s_last), p_bank.eq(s_bank), p_slot.eq(s_slot)]
            with m.If(s_en & s_last):
                m.d.sync += part.eq(acc_next)
            total = Signal(A.score_shape, name="chain_sum")
            m.d.comb += total.eq(part if self.position == 0 else part + self.chain_in)
            if self.position == s - 1:
                write_score(p_en, p_bank, p_slot, total)
            else:
                with m.If(p_en):
                    m.d.sync += self.chain_out.eq(total)

        # (up, e) registers, written by the lane over its line-local bus (to the whole group).
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
                         Mux(w.first, 0, o_rd.data), value)
        m.d.comb += [
            o_rd.addr.eq(Mux(wi.valid & wi.is_u, wi.addr, self.drain_addr)),
            self.o_rd.eq(o_rd.data),
            o_wr.addr.eq(addr[-1]),
            o_wr.data.eq(o_new),
            o_wr.en.eq(en[-1]),
        ]
        return m
