"""One MAC of the PE array, and the word that flows through a MAC line.

A Q row is split over s = `split` adjacent MACs of a line, a group (s = 1: a
MAC of its own). Every group owns `rows_per_mac` (r) rows of the Q block:
group c of line i holds row ``t*p*q/s + i*q/s + c`` in its slot t
(`attenio.plan.Plan.row_of`), and MAC g of the group (its `position`) holds
columns g, g + s, g + 2s, ... of that row: element g of every chunk the word
carries. A MAC keeps, in PE-local storage,

* Q: r x d/s elements (a `Memory` with a synchronous read port),
* O: r x d/s accumulators of `o_shape` (`Memory` slices of the accumulator's bits,
  read one cycle ahead of the read-modify-write),
* B = `banks` banks of r exact scores (bank j mod B holds the scores against K_j,
  so the scores of K_(j+1) .. K_(j+B-1) can be computed while the softmax of K_j
  reads bank j mod B; int8's in registers its lane selects from, a float group's in
  a block RAM its lane reads a cycle ahead, `ScoreBanks`), and B banks of r (up, e)
  pairs written by the softmax lane
  ((alpha, P) = (e, 1) if up else (1, e)), a `Memory` read combinationally at
  the word's (bank, slot) (`pick_layout`): on an FPGA a LUT RAM, not B r registers
  and their B r-to-1 multiplexers beside the multiplier.

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
  One multiplier serves both alpha * O and P * V (the format's ``update``); in a
  float MAC it also makes q * k, and one fp32 adder makes the scores' and O's sums
  (`FloatArith.mac_operands`).

With s > 1 each MAC's score is a partial sum over its d/s columns. The partial
sums meet in an adder chain along the group, which the systolic skew makes
free of waiting: MAC g finishes its partial one cycle after MAC g - 1, so one
cycle after that it adds the running sum of MACs 0 .. g - 1 (a register in MAC
g - 1) and passes the sum on; the last MAC of the group writes the row's score
into its bank. One adder per cycle, the same latency for every s > 1
(`MAC.score_latency`), and no wire longer than one MAC (a tree would take
log2 s stages and reach across s MACs).

The floating-point formats (`FloatArith`) keep the same storage and word, with
scores and O in fp32 (Q, O and the scores in block RAMs: a LUT RAM cell or a register
file takes LUT sites, which a float design runs out of first), and accumulate a score in an fp32 adder whose result
comes back `accumulate_latency` (L) cycles later. A MAC holds a word that is a K chunk
or a V chunk, never both, so one fp32 multiplier and one fp32 adder serve both: q * k
and the score's sum for a K chunk, the O update's product and sum for a V chunk, each
in the same cycles after its word (`FloatArith.mac_operands`), one operation a cycle
and no arbiter. So a K row is replayed chunk
by chunk (`score_period`: chunk c goes to slots 0 .. r-1 in P >= r cycles, P - r
of them idle), and the adder's loop holds k P sums (`score_sums`: L of them in
the adder, k P - L in a delay line), so that each slot's sum comes back exactly
when the slot's chunk c + k arrives. Without `interleave` k = 1 and P = max(r, L):
one sum a slot, idle whenever r < L. With it, each slot keeps k = ceil(L / P)
sub-sums, chunk c in sub-sum c mod k, and P is the smallest from r up for which
every sub-sum has a chunk (k <= d/s) and the fold below keeps up: P = r, no idle
cycle, wherever d/s allows. The adder's other input is -0 for a sub-sum's first
chunk (the row's first k chunks; -0 + x is x for every x), so each sub-sum starts
from its first product; the sub-sums are done in the row's last k chunks, in the
order sub-sum 0 .. k-1 (chunk d/s - k + i ends sub-sum i). A chunk counter per
MAC (`_chunk`) tells these chunks apart.

With s > 1 a MAC adds its partial sum to the running sum of the MACs before it
when that arrives on the chain (`chain_layout`, one addition of L cycles per MAC):
the chain's latency grows by L per MAC, and the lanes start that much later
(`MAC.score_latency`). The running sum reaches MAC g a fixed (g - 1) L + 1 cycles
after MAC g made its own partial (`chain_gap`): MAC 1 takes its own from a register,
a MAC further on keeps its r partial sums of each bank (and sub-sum) in a block RAM,
long written when it reads them. With k > 1
the chain carries the k sub-sums of each slot (k r sums a row, in order), a MAC
from 2 on keeps its own in a block RAM of B k r until the chain's arrive, and only the
group's last MAC (every MAC at s = 1) folds them, in one fp32 adder of its own:
S = ((v_0 + v_1) + v_2) + ..., v_i the chain's sum of sub-sum i (`_fold`). That
costs k - 1 rounds of 1 + L cycles of latency less the (k - 2) P cycles the sub-sums
arrive apart, and an adder per group, unless the chain's adder in the group's last
MAC is free whenever the fold needs it (`fold_shares_chain`: the fold's rounds fall
between a row's chain additions and the next row's; so at the small preset), when
the fold takes it in those cycles, with the same latency.
`attenio.sim.golden_fp` adds in this order.
"""

from amaranth.hdl import Cat, Const, Module, Mux, Shape, Signal, Value, signed
from amaranth.lib import data, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from attenio import validate

from .formats import FloatArith, check_arith
from .formats.dsp import (PartialProducts, Stages, dsp_lut_width, force, lut_built, mul_widths,
                          sum_pairs)
from .formats.fp import FP32
from .softmax import pa_layout, score_at_layout

__all__ = ["word_layout", "chain_layout", "pick_layout", "pick_addr",
           "score_period", "fold_shares_chain", "chain_gap", "score_read_gap", "read_ahead",
           "ScoreBanks", "MAC"]


def word_layout(*, mac_lines, macs_per_line, rows_per_mac, head_dim, split=1,
                element=signed(8), banks=2):
    """The word that moves along a MAC line, one MAC per cycle: a chunk of `split`
    elements of shape `element` and what to do with it; `banks` score and (P, alpha)
    banks."""
    return data.StructLayout({
        "valid": 1,
        "is_q": 1, "is_s": 1, "is_u": 1,
        "line": range(mac_lines),               # Q: the target group
        "mac": range(macs_per_line // split),
        "addr": range(rows_per_mac * head_dim // split),  # slot * d/s + c in Q and O storage
        "slot": range(rows_per_mac),
        "kfirst": 1, "klast": 1,                # c == 0, c == d/s - 1
        "bank": range(banks),                   # the bank of the K or V row
        "first": 1,                             # the row is K_0 or V_0 of the block
        "last": 1,                              # the row is V_(N-1) of the block
        "value": data.ArrayLayout(element, split),
    })


def chain_layout(*, arith, rows_per_mac, banks=2, sums=1, value=True):
    """A partial score on the group's adder chain; int8 uses only `value` (its chain
    runs in lockstep with the words), a float format also which score it is, and with
    `sums` > 1 sub-sums a slot (`score_sums`) which sub-sum. Without `value`: which
    score the chain will carry a cycle later (a float MAC's `ahead_out`)."""
    sub = {"sub": range(sums)} if sums > 1 else {}
    return data.StructLayout({"valid": 1, "bank": range(banks), "slot": range(rows_per_mac),
                              **sub, **({"value": arith.score_shape} if value else {})})


def pick_layout(*, rows_per_mac, banks=2):
    """What a MAC reads at the word at its input, from a register of its own: the word's
    (bank, slot) as the address of its (up, e) pair (`addr`, `pick_addr`), and whether it
    is a V word (`u`: valid and is_u), which selects O's read address. The entry word is
    one register for every line, so a selection made from it would be one LUT shared by
    the lines' MAC 0 (Yosys merges them), placed between the lines, far from each line's
    O memory."""
    return data.StructLayout({"addr": _pick_bits(rows_per_mac, banks), "u": 1})


def _pick_bits(rows_per_mac, banks):
    return _slot_bits(rows_per_mac) + _bank_bits(banks)


def pick_addr(bank, slot, *, rows_per_mac, banks=2):
    """`pick_layout`'s address of (bank, slot): the slot's bits, then the bank's."""
    return Cat(Value.cast(slot)[:_slot_bits(rows_per_mac)],
               Value.cast(bank)[:_bank_bits(banks)])


def _slot_bits(rows_per_mac):
    return (rows_per_mac - 1).bit_length()


def _bank_bits(banks):
    return (banks - 1).bit_length()


def score_period(arith, rows_per_mac, *, head_dim=None, split=1, interleave=True):
    """Cycles between two chunks of a K row at a MAC: r slot by slot for int8 (a row's
    words are replayed slot-major; None: slot-major); chunk by chunk for a float
    format, in the fewest cycles P >= r whose k = `score_sums` sub-sums close the fp32
    accumulator's L-cycle loop (k P >= L) and keep the chain and the fold in time (see
    the module docstring): max(r, L) without `interleave`. `head_dim` and `split` give
    the chunks of a row at a MAC, d/s (needed with `interleave`)."""
    return _score_loop(arith, rows_per_mac, head_dim, split, interleave)[0]


def score_sums(arith, rows_per_mac, *, head_dim=None, split=1, interleave=True):
    """k: the sums a MAC keeps for each slot of a K row, chunk c in sub-sum c mod k
    (`score_period`'s; 1 for int8 and without `interleave`)."""
    return _score_loop(arith, rows_per_mac, head_dim, split, interleave)[1]


#: cycles of one fold addition: the operands' register, then the fp32 adder
def _fold_round(arith):
    return 1 + arith.accumulate_latency


def _score_loop(arith, r, head_dim, split, interleave):
    """(P, k) of `score_period` and `score_sums`: the smallest P >= r with k = ceil(L/P)
    sub-sums such that every sub-sum has a chunk (k <= d/s, which also keeps the chain's
    adder, k r sums a row, within a row's P d/s cycles) and the fold of row n is done
    with its adder before row n + 1's starts, however soon that row follows
    (P d/s >= (k - 2) F + r, F a fold addition's cycles); P = L, k = 1 always is."""
    if not isinstance(arith, FloatArith):
        return None, 1
    acc = arith.accumulate_latency
    if not interleave or r >= acc:
        return max(r, acc), 1
    if head_dim is None:
        raise TypeError("score_period: interleave needs head_dim")
    chunks, fold = head_dim // split, _fold_round(arith)
    for period in range(r, acc):
        k = -(-acc // period)
        if k <= chunks and period * chunks >= (k - 2) * fold + r:
            return period, k
    return acc, 1


def fold_shares_chain(arith, rows_per_mac, *, head_dim, split, interleave=True):
    """Whether a group's last MAC folds its k sub-sums on its chain's adder instead of an
    adder of its own (s > 1, k > 1): wherever the fold's additions never meet the
    chain's. In cycles after the chain brings a row's sub-sum 0 of slot 0, the chain's
    additions take [i P, i P + r) for sub-sum i < k, the fold's round j (1 .. k-1) takes
    [P + j F, P + j F + r) (F = 1 + L, `_fold_round`), and the next row's chain comes
    P d/s cycles after this one's at the soonest, however late after it: so no round may
    meet a sub-sum's window, and the last must end within P d/s. An fp32 adder is about
    750 LUT; at the small preset (r 6, s 4, d/s 4, k 2, P 6, L 9) the rounds take
    [16, 22) against [0, 12) and 24."""
    if not isinstance(arith, FloatArith) or split == 1:
        return False
    period, k = _score_loop(arith, rows_per_mac, head_dim, split, interleave)
    if k == 1:
        return False
    r, fold = rows_per_mac, _fold_round(arith)
    chain = [(i * period, i * period + r) for i in range(k)]
    rounds = [(period + j * fold, period + j * fold + r) for j in range(1, k)]
    return (rounds[-1][1] <= period * (head_dim // split)
            and not any(a < d and c < b for a, b in rounds for c, d in chain))


def chain_gap(arith, position):
    """Cycles from a chain MAC's write of its partial sum of a (bank, sub-sum, slot) to the
    running sum of the MACs before it for that (bank, sub-sum, slot) in its `cin` (the
    register of `chain_in`), at `position` g >= 1 of its group: (g - 1) L + 1, L the fp32
    adder's `accumulate_latency`, the same for every score and row. The MACs of a group
    make their partials from the same words, each a cycle after the one before it (the
    words' skew), so MAC g writes its own g cycles after MAC 0 makes its; MAC 0 puts its on
    the chain a cycle later (`chain_out`, a register), MAC 1 takes it into `cin` the cycle
    after, and each MAC from there adds L cycles (its adder) and one (the next `cin`): the
    sum reaches MAC g's `cin` 2 + (g - 1)(L + 1) cycles after MAC 0 made its partial."""
    if position < 1:
        raise ValueError(f"chain_gap: position must be >= 1 (a MAC the chain reaches), "
                         f"not {position}")
    return (position - 1) * arith.accumulate_latency + 1


def score_read_gap(*, rows_per_mac, macs_per_line, macs_per_lane, split, group):
    """Cycles from the write of a score into a float group's `ScoreBanks` to the lane's
    read of it, at the fewest, for group `group` of a line of `macs_per_line` (q) MACs in
    groups of `split` (s; G = q/s groups a line), `macs_per_lane` to a lane (n of the
    groups), `rows_per_mac` (r) slots: r - 1 + (group mod n) + s (G - 1 - group). The
    words of a K row's last chunk go slot by slot, one a cycle
    (`attenio.hdl.replay.RowReplay`), a MAC a cycle along the line, and a group writes slot
    t's score `MAC.score_latency` cycles after the slot's word is at its last MAC. The line
    starts its lanes that many cycles after the slot r - 1 word is at the line's last MAC
    (`attenio.hdl.pe_array.MacLine`), and a lane reads row (t, group mod n) t n + (group
    mod n) cycles after its start at the soonest (it loads the read address from the
    start's `start_next`, then reads a row a cycle: `attenio.hdl.softmax.SoftmaxLane`), so
    the read of slot t comes (r - 1 - t) + s (G - 1 - group) + t n + (group mod n) cycles
    after the write, or later where the lane starts late; fewest at t = 0. It is 0, a read
    in the write's cycle, only for the line's last group at r = 1 and one group a lane."""
    groups, per_lane = macs_per_line // split, macs_per_lane // split
    return rows_per_mac - 1 + group % per_lane + split * (groups - 1 - group)


def read_ahead(m, memory, wr, addr, *, forward=True, name):
    """`memory` (a block RAM) read at `addr` this cycle: returns its word at `addr` in the
    next cycle, with `wr`'s write of this cycle if `forward` (what a read port
    transparent for `wr` gives). The port is synchronous and not transparent, and the
    write of the cycle comes from a register of its own (`name`_fwd), selected by a
    register of the address match: Yosys merges the register that takes a transparent
    port's data into the block (it builds the transparency from the address register),
    so that register's logic would start from the block's 5.6 ns clock-to-output; a
    port that is already synchronous keeps the register after it. Without `forward` the
    caller's schedule never reads a word in the cycle it is written (the word then holds
    every write of the cycles before the read's)."""
    if not forward:
        return _read_port(m, memory, addr)
    return Mux(*_read_ahead_parts(m, memory, wr, addr, name=name))


def _read_port(m, memory, addr):
    rd = memory.read_port(domain="sync")
    m.d.comb += rd.addr.eq(addr)
    return rd.data


def _read_ahead_parts(m, memory, wr, addr, *, name):
    """`read_ahead`'s word in its pieces, (hit, write, read): the word is `write` where
    `hit`, else `read` (the block's output). For a caller that registers them apart,
    so that nothing but a route lies between the block and a register."""
    data = _read_port(m, memory, addr)
    hit = Signal(name=f"{name}_hit")
    fwd = Signal.like(data, name=f"{name}_fwd")
    m.d.sync += [hit.eq(wr.en.any() & (wr.addr == addr)), fwd.eq(wr.data)]
    return hit, fwd, data


class ScoreBanks(wiring.Component):
    """A float group's `banks` (B) banks of r scores, in a block RAM: written by the
    group's last MAC (`wr`, its (bank, slot) and value at `en`), read by the group's lane
    at `rd_at` (`attenio.hdl.softmax.score_at_layout`), the score on `rd` a cycle later,
    with a write of the same cycle if `forward` (`read_ahead`): what B r registers read a
    cycle later would show. A MAC forwards only where its lane can read a score in the
    cycle it is written (`score_read_gap` 0); the forwarding is a register of the score
    and a multiplexer in front of the lane's. `memory` is the RAM (`index` its row of a
    (bank, slot)), for test benches."""

    def __init__(self, *, arith, rows_per_mac, banks=2, forward=True):
        if not isinstance(forward, bool):
            raise TypeError(f"ScoreBanks: forward must be a bool, not {forward!r}")
        self._r, self._banks, self._forward = rows_per_mac, banks, forward
        at = score_at_layout(rows_per_mac=rows_per_mac, banks=banks)
        # addressed as the (up, e) pairs are (`pick_addr`): slot bits, then bank bits
        self.memory = Memory(shape=arith.score_shape,
                             depth=2 ** _pick_bits(rows_per_mac, banks),
                             init=[], attrs={"ram_style": "block"})
        super().__init__({
            "wr": In(data.StructLayout({"en": 1, "bank": range(banks), "slot": range(rows_per_mac),
                                        "value": arith.score_shape})),
            "rd_at": In(at),
            "rd": Out(arith.score_shape),
        })

    @property
    def forward(self):
        """Whether a write is forwarded to a read of the same cycle."""
        return self._forward

    def index(self, bank, slot):
        """The memory's row of (bank, slot)."""
        return bank << _slot_bits(self._r) | slot

    def _addr(self, at):
        return pick_addr(at.bank, at.slot, rows_per_mac=self._r, banks=self._banks)

    def elaborate(self, platform):
        m = Module()
        m.submodules.memory = self.memory
        wr = self.memory.write_port()
        m.d.comb += [wr.addr.eq(self._addr(self.wr)), wr.data.eq(self.wr.value),
                     wr.en.eq(self.wr.en),
                     self.rd.eq(read_ahead(m, self.memory, wr, self._addr(self.rd_at),
                                           forward=self._forward, name="score"))]
        return m


class MAC(wiring.Component):
    """One MAC with its share of r rows of Q and O (see the module docstring).

    `index`: its place in its line; with `split` = s it is MAC ``index mod s`` (its
    `position`) of group ``index div s`` (Q words are addressed to the group).
    `lane_index`: its group's index among the groups of its softmax lane (the
    (P, alpha) bus address).
    Ports: `line_id` the index of its line (an input, so that every line is the same
    module), `wi` the word from the previous MAC (or the line entry), `wo` the word one
    cycle later, `pick_in` the (bank, slot) address of `wi` and whether it is a V word (the
    previous MAC's `pick_out`, a copy of its `wo`'s; for MAC 0 the line's, registered beside
    it), `score` the `banks` banks of r scores (bank * r + slot; written by the group's last
    MAC only; a float MAC has `score_at` / `score_rd` instead, the lane's read of its
    group's `ScoreBanks`), `chain_in` / `chain_out` the adder chain of the partial
    scores (s > 1), `pa` the lane's write bus (registered here, `pa_layout`), `drain_addr` /
    `o_rd` the drain read port of O (data `MAC.drain_read_latency` cycles after the address,
    from registers; used only while no V word is present).
    """

    def __init__(self, *, arith, mac_lines, macs_per_line, rows_per_mac, head_dim,
                 macs_per_lane, index, lane_index, split=1, banks=2, interleave=True):
        check_arith("MAC", arith)
        validate.positive("MAC", mac_lines=mac_lines, macs_per_line=macs_per_line,
                          rows_per_mac=rows_per_mac, head_dim=head_dim,
                          macs_per_lane=macs_per_lane)
        validate.integer("MAC", "banks", banks, lo=2)
        validate.split("MAC", split, head_dim=head_dim, macs_per_line=macs_per_line)
        validate.index("MAC", "index", index, macs_per_line)
        validate.index("MAC", "lane_index", lane_index, macs_per_lane // split)
        self._arith = arith
        self._r, self._d, self._s = rows_per_mac, head_dim // split, split
        self._q, self._index, self._lane_index = macs_per_line, index, lane_index
        self._banks = banks
        loop = dict(head_dim=head_dim, split=split, interleave=interleave)
        self._period = score_period(arith, rows_per_mac, **loop)
        self._sums = score_sums(arith, rows_per_mac, **loop)
        self._fold_shares = fold_shares_chain(arith, rows_per_mac, **loop)
        word = word_layout(mac_lines=mac_lines, macs_per_line=macs_per_line,
                           rows_per_mac=rows_per_mac, head_dim=head_dim, split=split,
                           element=arith.word_shape, banks=banks)
        chain = chain_layout(arith=arith, rows_per_mac=rows_per_mac, banks=banks,
                             sums=self._sums)
        pick = pick_layout(rows_per_mac=rows_per_mac, banks=banks)
        if isinstance(arith, FloatArith):
            ahead = chain_layout(arith=arith, rows_per_mac=rows_per_mac, banks=banks,
                                 sums=self._sums, value=False)
            scores = {"score_at": In(score_at_layout(rows_per_mac=rows_per_mac, banks=banks)),
                      "score_rd": Out(arith.score_shape),
                      "ahead_in": In(ahead), "ahead_out": Out(ahead)}
        else:
            scores = {"score": Out(data.ArrayLayout(arith.score_shape, banks * rows_per_mac))}
        # a float group's last MAC keeps its scores in a block RAM (`ScoreBanks`), which
        # forwards a write to a read of the same cycle only where the lane makes one
        self._score_banks = None
        if isinstance(arith, FloatArith) and index % split == split - 1:
            gap = score_read_gap(rows_per_mac=rows_per_mac, macs_per_line=macs_per_line,
                                 macs_per_lane=macs_per_lane, split=split, group=index // split)
            self._score_banks = ScoreBanks(arith=arith, rows_per_mac=rows_per_mac, banks=banks,
                                           forward=gap < 1)
        super().__init__({
            "line_id": In(range(mac_lines)),
            "wi": In(word),
            "wo": Out(word),
            **scores,
            "chain_in": In(chain),
            "chain_out": Out(chain),
            "pa": In(pa_layout(arith=arith, macs_per_lane=macs_per_lane // split,
                               rows_per_mac=rows_per_mac, banks=banks)),
            "pick_in": In(pick),
            "pick_out": Out(pick),
            "drain_addr": In(range(rows_per_mac * self._d)),
            "o_rd": Out(arith.o_shape),
        })

    @staticmethod
    def float_product_latency(arith):
        """Cycles from a K word at a float MAC to its q * k at the adder: the operands'
        register, then the multiplier the O update shares (`FloatArith.mac_operands`)."""
        return 1 + arith.mac_operands_latency

    @staticmethod
    def update_latency(arith):
        """Cycles from a V word at this MAC to its O element written: the operands'
        register, then the update pipeline of the format (its ``update``)."""
        return 1 + arith.update_latency

    #: cycles from a K word at an int8 MAC to its q * k: the operand registers, then
    #: `_qk`'s levels (`QK_LATENCY`; in a DSP its product register, the relay and a delay)
    int8_product_latency = 4

    @staticmethod
    def score_latency(arith, split, *, rows_per_mac=None, head_dim=None, interleave=True):
        """Cycles from the last K word at a group's last MAC to the row's score in its
        bank. int8: q * k (`int8_product_latency`), then the accumulator (combinational
        into the next register), and with s > 1 the partial sum's register before the
        adder chain. Float: the product and the accumulator's pipelines, and with s > 1
        one addition per MAC of the chain and the chain's registers, all but one of which
        the words' skew hides (see the module docstring); with k = `score_sums` > 1 (from
        `rows_per_mac`, `head_dim` and `interleave`) the fold of the k sub-sums, which
        ends (k - 1) F - (k - 2) P cycles after the last one (F = 1 + L a fold addition,
        P = `score_period`). Then the score's own register before the banks
        (`_write_score`)."""
        if isinstance(arith, FloatArith):
            product = MAC.float_product_latency(arith)
            accumulate = arith.accumulate_latency
            if split == 1:
                score = 1 + product + accumulate
            else:
                score = 1 + product + accumulate * split + 1
            if not interleave:
                return score
            period, k = _score_loop(arith, rows_per_mac, head_dim, split, interleave)
            if k == 1:
                return score
            return score + (k - 1) * _fold_round(arith) - (k - 2) * period
        return 1 + MAC.int8_product_latency + (0 if split == 1 else 1)

    @property
    def index(self):
        return self._index

    @property
    def score_banks(self):
        """A float group's last MAC: its `ScoreBanks` (else None)."""
        return self._score_banks

    @property
    def period(self):
        """`score_period`: cycles of a chunk of a K row (None for int8)."""
        return self._period

    @property
    def sums(self):
        """`score_sums`: k, the sums of a slot."""
        return self._sums

    @property
    def banks(self):
        """Score and (P, alpha) banks: the K rows whose scores it holds at once."""
        return self._banks

    @property
    def position(self):
        """Its index in its group: the element of each chunk it takes."""
        return self._index % self._s

    @property
    def group(self):
        return self._index // self._s

    def elaborate(self, platform):
        m = Module()
        arith, r, d = self._arith, self._r, self._d      # d: columns per MAC, d/s
        wi = self.wi
        # The word this MAC works on this cycle. MAC c of every line holds the same word:
        # `keep` has synthesis keep a copy per line (`attenio.gen.synth.prepare_script`)
        # rather than one register driving the MAC c of every line across the chip.
        w = Signal.like(self.wi, name="w", attrs={"keep": 1})
        m.d.sync += w.eq(wi)
        m.d.comb += self.wo.eq(w)
        # A second copy of the word's (bank, slot), kept, as the next MAC's (up, e) read
        # address alone: `w`'s bits also serve this MAC, and the address drives the
        # next MAC's pair memory.
        if self._index < self._q - 1:
            pick_r = Signal.like(self.pick_out, name="pick", attrs={"keep": 1})
            m.d.sync += [pick_r.addr.eq(pick_addr(wi.bank, wi.slot, rows_per_mac=r,
                                                  banks=self._banks)),
                         pick_r.u.eq(wi.valid & wi.is_u)]
            m.d.comb += self.pick_out.eq(pick_r)

        # A float MAC's Q is a block RAM (`ram_style`): a LUT RAM cell takes about seven
        # LUT sites once placed. (int8's, read into its kept operand registers, stays as
        # it was.)
        float_mac = isinstance(arith, FloatArith)
        m.submodules.q_mem = q_mem = Memory(shape=arith.word_shape, depth=r * d, init=[],
                                            attrs={"ram_style": "block"} if float_mac
                                            else None)
        q_wr = q_mem.write_port()
        value = w.value[self.position]             # this MAC's element of the chunk

        # Q load: the word addressed to this MAC's group writes its slot's element.
        m.d.comb += [
            q_wr.addr.eq(w.addr), q_wr.data.eq(value),
            q_wr.en.eq(w.valid & w.is_q & (w.line == self.line_id) & (w.mac == self.group)),
        ]
        # int8's Q is read combinationally at an address in a register of this MAC: the
        # same as a synchronous read of the address a cycle ahead, but the address register
        # is this MAC's own (kept), where a read port's would be merged by synthesis between
        # the lines' MAC 0, which all take the one entry word. A float MAC's is a block RAM
        # read a cycle ahead (`read_ahead`) into `q_u`, a register, in fp32 as it came
        # (widened at the array's entry, `RowReplay`).
        # Only a K row's first word reads Q in the cycle a Q word writes it (the block's
        # last Q word, then its first K word): at address 0, which a Q row's last word
        # writes only with one chunk a row, so only then is the write forwarded.
        if float_mac:
            q_data = read_ahead(m, q_mem, q_wr, wi.addr, forward=d == 1, name="q")
        else:
            q_rd = q_mem.read_port(domain="comb")
            m.d.comb += q_rd.addr.eq(w.addr)
            self._int8_scores(m, w, q_rd.data, value, dsp_lut_width(platform))

        # The (up, e) pairs, written by the lane over its line-local bus (to the whole
        # group), each MAC's in a memory of its own. The bus arrives unregistered and is
        # registered here, kept per MAC, so its wire from the lane is all of its cycle and
        # the memory's write port takes registers: a pair is readable two cycles after
        # the bus carried it, as B r registers loaded from the bus register would be.
        pair = data.StructLayout({"up": 1, "e": arith.factor_shape})
        m.submodules.pairs = pairs = Memory(shape=pair, depth=2 ** len(self.pick_in.addr),
                                            init=[])
        pair_wr = pairs.write_port()
        pair_rd = pairs.read_port(domain="comb")
        pa = self.pa
        pa_pair = Signal(pair, name="pa_pair", attrs={"keep": 1})
        pa_addr = Signal.like(self.pick_in.addr, name="pa_addr", attrs={"keep": 1})
        pa_we = Signal(name="pa_we", attrs={"keep": 1})
        m.d.sync += [pa_pair.up.eq(pa.up), pa_pair.e.eq(pa.e),
                     pa_addr.eq(pick_addr(pa.bank, pa.slot, rows_per_mac=r,
                                          banks=self._banks)),
                     pa_we.eq(pa.valid & (pa.mac == self._lane_index))]
        m.d.comb += [pair_wr.addr.eq(pa_addr), pair_wr.data.eq(pa_pair), pair_wr.en.eq(pa_we)]

        # Update, pipelined: O is read one cycle ahead (or at the drain's address when no
        # V word comes), registered with the word's (up, e) and element, and the format's
        # `update` takes them from there; the sum is written `update_latency` cycles
        # after the word.
        latency = self.update_latency(arith)
        addr = [Signal.like(w.addr, name=f"addr_{k}") for k in range(latency)]
        en = [Signal(name=f"en_{k}") for k in range(latency)]
        m.d.sync += [addr[0].eq(w.addr), en[0].eq(w.valid & w.is_u)]
        m.d.sync += [addr[k].eq(addr[k - 1]) for k in range(1, len(addr))]
        m.d.sync += [en[k].eq(en[k - 1]) for k in range(1, len(en))]
        # The word's (up, e), read a cycle ahead at `wi`'s (bank, slot) (as O is read, the
        # address from a register) so that the update's multiplier takes them from
        # registers. It reads the memory alone: the lane's `ready` rises the cycle after
        # the last pair is written (`SoftmaxLane.ready_stage`), so no V word meets its
        # pair still in the bus register.
        up_w = Signal(name="up_w")
        e_w = Signal(arith.factor_shape, name="e_w")
        m.d.comb += pair_rd.addr.eq(self.pick_in.addr)
        m.d.sync += [up_w.eq(pair_rd.data.up), e_w.eq(pair_rd.data.e)]
        # The operands' register: O's read leaves a LUT RAM late in its cycle, and the RAM,
        # its two selections and the multiplier's input register are too far apart for one.
        up_u, e_u = Signal(name="up_u"), Signal.like(e_w, name="e_u")
        o_u = Signal(arith.o_shape, name="o_u")
        # kept: K's operand register (`_int8_scores`) takes the same word, and merged into
        # it the update's DSP would read V from beside the LUT-built q*k, a long route
        v_u = Signal.like(value, name="v_u", attrs={"keep": 1})
        o_new = Signal(arith.o_shape, name="o_new")
        o_rd, o_parts = self._o_memory(m, Mux(self.pick_in.u, wi.addr, self.drain_addr),
                                       addr[-1], o_new, en[-1])
        m.d.sync += [up_u.eq(up_w), e_u.eq(e_w), v_u.eq(value)]
        drained = Signal(arith.o_shape, name="o_drained")
        if o_parts is None:
            m.d.sync += [o_u.eq(force(o_rd, w.first, 0)), drained.eq(o_rd)]
        else:
            # O's block RAM answers 5.8 ns into the cycle, placed where the block column
            # is: o_u takes its word as read, and the write it missed and the first
            # word's zero are applied after it, a LUT before the register of the
            # multiplier's operands (`FloatArith.staged_mac_operands`)
            hit, fwd, read = o_parts
            o_read, o_hit = Signal.like(o_u, name="o_read"), Signal(name="o_hit_u")
            o_fwd, o_first = Signal.like(o_u, name="o_fwd_u"), Signal(name="o_first_u")
            m.d.sync += [o_read.eq(read), o_hit.eq(hit), o_fwd.eq(fwd), o_first.eq(w.first)]
            m.d.comb += o_u.eq(force(Mux(o_hit, o_fwd, o_read), o_first, 0))
            # the drain's word is the block's read as registered (`drain_write_lag`):
            # no write needs forwarding, and a selection here would be one the update
            # shares, which ABC may place by the line's drain register, far from the
            # update's operands
            m.d.comb += drained.eq(o_read)
        if isinstance(arith, FloatArith):
            # q * k on the update's multiplier, its sum on the update's adder
            score_u = Signal(name="score_u")
            q_u = Signal.like(q_data, name="q_u")
            m.d.sync += [score_u.eq(w.is_s), q_u.eq(q_data)]
            prod, addend = arith.mac_operands(m, up_u, e_u, o_u, v_u, score=score_u, q=q_u)
            update = en[arith.mac_operands_latency]
            m.d.comb += o_new.eq(self._float_scores(m, w, update, prod, addend))
        else:
            m.d.comb += o_new.eq(arith.update(m, up_u, e_u, o_u, v_u))
        m.d.comb += self.o_rd.eq(drained)
        return m

    #: cycles from `drain_addr` to its O on `o_rd`: the memory's read, a register
    drain_read_latency = 2

    @staticmethod
    def drain_write_lag(arith):
        """Cycles after a write of O that a drain read of its word answers it: 0 for a
        LUT RAM (int8: the read of the registered address sees the cycle before's
        write), 1 for a float MAC's block RAM (its read as registered, no write
        forwarded). The schedule never needs it: the drain reads a block's O from two
        cycles after its last write, and a later block writes a word only after the
        drain has read it."""
        return 1 if isinstance(arith, FloatArith) else 0

    #: the widest slice of O that shares one read-address register
    O_SLICE_BITS = 12

    def _o_memory(self, m, rd_addr_next, wr_addr, wr_data, wr_en):
        """O, read combinationally at `rd_addr_next` registered: (its value, None), or
        for a block RAM (value, `_read_ahead_parts`). O is a LUT RAM
        as wide as an accumulator, and one address register fanning out to all of its
        slices and their depth multiplexers would take a route across the chip, so O is
        built in slices of at most `O_SLICE_BITS`, each a memory with its own address
        register (kept), which placement puts beside it. A float MAC's O is one block RAM
        read synchronously at `rd_addr_next` (its address register is the block's own),
        transparent for the write of the same cycle, as the combinational read of the
        registered address would give it: LUT sites are what a float design runs out of,
        and its O reaches `o_u`, a register, before any logic."""
        shape = Shape.cast(self._arith.o_shape)
        depth = self._r * self._d
        if isinstance(self._arith, FloatArith):
            m.submodules.o_mem = mem = Memory(shape=shape, depth=depth, init=[],
                                              attrs={"ram_style": "block"})
            wr = mem.write_port()
            m.d.comb += [wr.addr.eq(wr_addr), wr.data.eq(wr_data), wr.en.eq(wr_en)]
            parts = _read_ahead_parts(m, mem, wr, rd_addr_next, name="o")
            value = Mux(*parts)
            return (value.as_signed() if shape.signed else value), parts
        pieces = -(-shape.width // self.O_SLICE_BITS)
        width = -(-shape.width // pieces)
        data_out = []
        for k, lo in enumerate(range(0, shape.width, width)):
            bits = min(width, shape.width - lo)
            mem = Memory(shape=bits, depth=depth, init=[])
            m.submodules[f"o_mem{k}"] = mem
            wr, rd = mem.write_port(), mem.read_port(domain="comb")
            rd_addr = Signal.like(wr_addr, name=f"o_rd_addr{k}", attrs={"keep": 1})
            m.d.sync += rd_addr.eq(rd_addr_next)
            m.d.comb += [rd.addr.eq(rd_addr), wr.addr.eq(wr_addr),
                         wr.data.eq(Value.cast(wr_data)[lo:lo + bits]), wr.en.eq(wr_en)]
            data_out.append(rd.data)
        value = Cat(*data_out)
        return (value.as_signed() if shape.signed else value), None

    def _write_score(self, m, en, bank, slot, value):
        """The row's score into its bank a cycle after `en`: the score, its (bank, slot) and
        `en` registered beside the adder that makes it, since each of its bits then goes
        to the `banks` r bank registers, which sit by the lane that reads them (a float
        group's: to its `ScoreBanks`)."""
        r_en, r_bank = Signal(name="score_en"), Signal.like(bank, name="score_bank")
        r_slot, r_value = Signal.like(slot, name="score_slot"), Signal.like(value, name="score_in")
        m.d.sync += [r_en.eq(en), r_bank.eq(bank), r_slot.eq(slot), r_value.eq(value)]
        if self._score_banks is None:
            self._write_regs(m, self.score, r_en, r_bank, r_slot, r_value)
            return
        m.submodules.scores = banks = self._score_banks
        m.d.comb += [banks.wr.en.eq(r_en), banks.wr.bank.eq(r_bank), banks.wr.slot.eq(r_slot),
                     banks.wr.value.eq(r_value), banks.rd_at.eq(self.score_at),
                     self.score_rd.eq(banks.rd)]

    def _write_regs(self, m, regs, en, bank, slot, value):
        """regs[bank * r + slot] = value where `en`."""
        r = self._r
        with m.If(en):
            for b in range(self._banks):
                for t in range(r):
                    with m.If((bank == b) & (slot == t)):
                        m.d.sync += regs[b * r + t].eq(value)

    @staticmethod
    def _qk_halves(lut_width, q, k):
        """Whether q * k is `_qk`'s adder tree in LUTs rather than a MULT18X18D: where q
        times each half of k would be `lut_built` on the widths Yosys multiplies
        (`attenio.hdl.formats.dsp.mul_widths`), the rule the LUT-built halves this tree
        replaced were held to, so `--lut-mul-width` moves q*k to a DSP where it did."""
        h = len(k) // 2
        return lut_width is None or all(
            lut_built(lut_width, *mul_widths(q.as_signed(), half))
            for half in (k[:h].as_unsigned(), k[h:].as_signed()))

    #: cycles from q*k's operand registers to the product (`_qk`): a level for each
    #: halving of k's 8 rows
    QK_LATENCY = 3

    @staticmethod
    def _qk(m, q, k, q_copies=()):
        """q * k of signed elements q and k (k of 8 bits), `QK_LATENCY` cycles later, built
        from LUTs (ECP5 under a LUT width `_qk_halves` accepts, or any other target): the
        rows q * k[i] * 2**i (the top one negative) added in pairs, then the pairs' sums in
        pairs, each level registered. The first level's operands are ANDs, so a cycle is
        one LUT and one carry chain at most, where a Booth array before its carry chain was
        3 to 5 LUT levels in congested routing. `q_copies`: copies of q's register, kept,
        among which the first level's adders are shared out (default q alone)."""
        rows = len(k)
        if rows != 8:
            raise ValueError(f"q*k: k must have 8 bits (QK_LATENCY), not {rows}")
        qs = [q, *q_copies]
        parts = []
        for j in range(rows // 2):
            qj = qs[j * len(qs) // (rows // 2)].as_signed()
            lo, hi = Mux(k[2 * j], qj, 0), Mux(k[2 * j + 1], qj, 0) << 1
            pair = Signal(signed(len(q) + 3), name=f"qk_pair{j}")
            m.d.sync += pair.eq(lo - hi if 2 * j + 1 == rows - 1 else lo + hi)
            parts.append((2 * j, pair))
        level = 1
        while len(parts) > 1:
            parts, sums = sum_pairs(parts, f"qk_sum{level}_")
            m.d.sync += sums
            level += 1
        assert level == MAC.QK_LATENCY
        (_, qk), = parts
        return qk[:len(q) + rows].as_signed()

    def _int8_scores(self, m, w, q, value, lut_width):
        """Exact integer scores: one accumulator, restarted at k = 0 and copied to its bank
        at k = d/s - 1 (`score_latency`); with s > 1 the chain in lockstep."""
        arith, s = self._arith, self._s
        st = Stages(m)
        # The operands registered, then the product (`_qk`): `int8_product_latency` in all.
        # Kept: K's operand register holds the bits of the next MAC's word register, and
        # merged into it the product would read its operand from the next MAC. Built from
        # LUTs, Q's register has a copy for half of the first level's adders (one register
        # for all is a path longer than a cycle, most of it routing). In a DSP (an ECP5 LUT
        # width below q*k's halves) the product is a MULT18X18D whose input and output
        # registers are the operand and product stages, then fabric registers (its relay,
        # and a delay to the same latency).
        if self._qk_halves(lut_width, q, value):
            q_op = st.delay(q, 1, "q_op", keep=True)
            k_op = st.delay(value, 1, "k_op", keep=True)
            q_copy = st.delay(q, 1, "q_op1", keep=True)
            prod = self._qk(m, q_op, k_op, [q_copy])
        else:
            products = PartialProducts(q.as_signed(), value.as_signed(), name="qk",
                                       registered=True, lut_pieces=False)
            dsp = Stages(m)
            for step in (products.operands, products, products.relay):
                dsp.stage(step)
            (_, prod), = products.parts
            prod = dsp.delay(prod, self.int8_product_latency - dsp.count, "qk_relay")
        ctrl = [st.delay(x, self.int8_product_latency, n)
                for x, n in ((w.valid & w.is_s, "k_en"), (w.kfirst, "k_first"),
                             (w.klast, "k_last"), (w.bank, "k_bank"), (w.slot, "k_slot"))]
        s_en, s_first, s_last = Signal(name="s_en"), Signal(name="s_first"), Signal(name="s_last")
        s_bank, s_slot = Signal.like(w.bank, name="s_bank"), Signal.like(w.slot, name="s_slot")
        m.d.comb += Cat(s_en, s_first, s_last, s_bank, s_slot).eq(Cat(*ctrl))
        acc = Signal(arith.score_shape)
        acc_next = Signal(arith.score_shape, name="acc_next")
        m.d.comb += acc_next.eq(Mux(s_first, 0, acc) + prod)
        with m.If(s_en):
            m.d.sync += acc.eq(acc_next)

        if s == 1:
            self._write_score(m, s_en & s_last, s_bank, s_slot, acc_next)
        else:
            # The adder chain (see the module docstring): the partial sum registered, then
            # added to the sum of the MACs before this one in the group.
            part = Signal(arith.score_shape, name="part")
            p_en = Signal(name="part_en")
            p_bank, p_slot = Signal.like(s_bank, name="part_bank"), Signal.like(s_slot,
                                                                                  name="part_slot")
            m.d.sync += [p_en.eq(s_en & s_last), p_bank.eq(s_bank), p_slot.eq(s_slot)]
            with m.If(s_en & s_last):
                m.d.sync += part.eq(acc_next)
            total = Signal(arith.score_shape, name="chain_sum")
            m.d.comb += total.eq(part if self.position == 0 else part + self.chain_in.value)
            if self.position == s - 1:
                self._write_score(m, p_en, p_bank, p_slot, total)
            else:
                with m.If(p_en):
                    m.d.sync += self.chain_out.value.eq(total)

    def _float_scores(self, m, w, update, prod, addend):
        """fp32 scores, chunk-major (see the module docstring): the product, then the
        accumulator whose sum comes back k P cycles after it left (k = `score_sums`
        sub-sums a slot, P = `score_period`); with s > 1 the partial sums wait in their
        bank for the chain; with k > 1 the group's last MAC folds the k sums.
        The product and the accumulator are O's update's (`FloatArith.mac_operands`):
        `prod` is q * k for a K word, the update's product for a V word, whose sum
        (`update` set) adds `addend`. Returns the adder's sum."""
        arith, r, s, k = self._arith, self._r, self._s, self._sums
        product_latency = self.float_product_latency(arith)
        accumulate_latency = arith.accumulate_latency
        st = Stages(m)
        ctrl = Signal(data.StructLayout({"en": 1, "first": 1, "last": 1,
                                         "bank": range(self._banks), "slot": range(r)}),
                      name="s_ctrl")
        m.d.comb += ctrl.eq(Cat(w.valid & w.is_s, w.kfirst, w.klast, w.bank, w.slot))
        # the control beside the product, then beside the sum
        ctrl_q = data.View(ctrl.shape(), st.delay(ctrl, product_latency - 1, "s_ctrl_q"))
        ctrl_p = data.View(ctrl.shape(), st.delay(ctrl_q.as_value(), 1, "s_ctrl_p"))
        loop = Signal(arith.score_shape, name="acc_loop")     # the slot's sum, back from the adder
        start = Const(FP32.neg_zero, FP32.width)              # -0 + x is x: a slot's first sum
        # a sub-sum's first chunk (the row's first k chunks), decided a cycle ahead and
        # registered, a copy for the significand's bits and one for the rest: the chunk
        # count's comparison and its fan-out to the selection, before the adder's first
        # stage, made a longest path
        first_q = ctrl_q.first if k == 1 else self._chunk(m, ctrl_q, "chunk_q") < k
        first = [Signal(name=f"acc_first_{part}", attrs={"keep": 1}) for part in ("sig", "exp")]
        m.d.sync += [copy.eq(first_q) for copy in first]
        M = FP32.man_bits
        operand = Cat(Mux(first[0], start[:M], loop[:M]), Mux(first[1], start[M:], loop[M:]))
        acc = arith.accumulate(m, Mux(update, addend, operand), prod)
        m.d.comb += loop.eq(st.delay(acc, k * self._period - accumulate_latency, "acc_back"))
        done = data.View(ctrl.shape(), st.delay(ctrl_p, accumulate_latency, "s_ctrl_a"))
        if k == 1:
            part_en, sub = done.en & done.last, None
        else:
            # a sub-sum's last chunk: the row's last k chunks, sub-sum 0 .. k-1 in that order
            chunk = self._chunk(m, done, "chunk_a")
            part_en = done.en & (chunk >= self._d - k)
            sub = Signal(range(k), name="s_sub")
            m.d.comb += sub.eq(chunk - (self._d - k))

        if s == 1:
            self._score_out(m, part_en, sub, done.bank, done.slot, acc)
            return acc
        if self.position == 0:                             # the chain starts here
            m.d.sync += [self.chain_out.valid.eq(part_en), self.chain_out.bank.eq(done.bank),
                         self.chain_out.slot.eq(done.slot), self.chain_out.value.eq(acc)]
            m.d.comb += [self.ahead_out.valid.eq(part_en), self.ahead_out.bank.eq(done.bank),
                         self.ahead_out.slot.eq(done.slot)]
            if k > 1:
                m.d.sync += self.chain_out.sub.eq(sub)
                m.d.comb += self.ahead_out.sub.eq(sub)
            return acc
        cin = Signal.like(self.chain_in, name="chain_in_r")
        m.d.sync += cin.eq(self.chain_in)
        mine = self._part_sums(m, part_en, done.bank, sub, done.slot, acc)
        shared = None
        if self.position == s - 1 and self._fold_shares:
            # the group's last MAC folds on this adder (`fold_shares_chain`): the fold's
            # operands, registered in `_fold`, in the cycles the chain brings none
            fold_in = Signal(data.StructLayout({"valid": 1, "a": arith.score_shape,
                                                "b": arith.score_shape}), name="fold_in")
            total = arith.accumulate(m, Mux(fold_in.valid, fold_in.a, mine),
                                     Mux(fold_in.valid, fold_in.b, cin.value))
            shared = (fold_in, total)
        else:
            total = arith.accumulate(m, mine, cin.value)
        ctrl_c = Cat(*(cin[name] for name in self.ahead_out.shape().members))
        ahead = data.View(self.ahead_out.shape(),
                          st.delay(ctrl_c, accumulate_latency - 1, "chain_ahead"))
        out = data.View(cin.shape(),
                        Cat(st.delay(ahead.as_value(), 1, "chain_ctrl"), total))
        if self.position == s - 1:
            self._score_out(m, out.valid, out.sub if k > 1 else None, out.bank, out.slot, total,
                            shared)
        else:
            m.d.comb += [self.chain_out.valid.eq(out.valid), self.chain_out.bank.eq(out.bank),
                         self.chain_out.slot.eq(out.slot), self.chain_out.value.eq(total),
                         self.ahead_out.eq(ahead)]
            if k > 1:
                m.d.comb += self.chain_out.sub.eq(out.sub)
        return acc

    def _part_sums(self, m, en, bank, sub, slot, value):
        """A chain MAC's partial sum of the score in its `cin`, in the cycle `cin` holds
        it: the `value` its adder made at `en` for that (bank, sub-sum, slot), `chain_gap`
        cycles before. MAC 1's is the adder's sum of the cycle before, a register. A MAC
        further on keeps its B k r partials in a block RAM, written at `en`, read at the
        (bank, sub, slot) the chain will bring (`ahead_in`) two cycles before `cin` holds
        it, into a register: the chain's adder then takes both operands from registers,
        not from the block's 5.6 ns clock-to-output, and the read holds every write of the
        cycles before it (a write in its cycle is forwarded, `read_ahead`, should L ever be
        1). A LUT RAM cell takes about seven LUT sites once placed."""
        arith, k = self._arith, self._sums
        gap = chain_gap(arith, self.position)
        if gap == 1:
            mine = Signal(arith.score_shape, name="part_mine")
            m.d.sync += mine.eq(value)
            return mine
        ahead = self.ahead_in
        addr = self._part_addr(bank, sub, slot)
        m.submodules.parts = parts = Memory(shape=arith.score_shape, depth=2 ** len(addr),
                                            init=[], attrs={"ram_style": "block"})
        part_wr = parts.write_port()
        m.d.comb += [part_wr.addr.eq(addr), part_wr.data.eq(value), part_wr.en.eq(en)]
        part_rd = read_ahead(m, parts, part_wr,
                             self._part_addr(ahead.bank, ahead.sub if k > 1 else None,
                                             ahead.slot), forward=gap == 2, name="part")
        read = Signal(arith.score_shape, name="part_rd")
        m.d.sync += read.eq(part_rd)
        return read

    def _chunk(self, m, ctrl, name):
        """The chunk of a K row that `ctrl` (a word's control, valid at `en`) belongs to:
        0 at the row's first chunk, one more after each chunk's last slot."""
        count = Signal(range(self._d), name=name)
        cur = Signal(range(self._d), name=f"{name}_cur")
        m.d.comb += cur.eq(Mux(ctrl.first, 0, count))
        with m.If(ctrl.en & (ctrl.slot == self._r - 1)):
            m.d.sync += count.eq(cur + 1)
        return cur

    def _part_addr(self, bank, sub, slot):
        """The address of a (bank, sub-sum, slot) partial sum: `_sub_addr`, then the
        bank's bits."""
        return Cat(self._sub_addr(sub, slot), Value.cast(bank)[:_bank_bits(self._banks)])

    def _sub_addr(self, sub, slot):
        """The address of a (sub-sum, slot) sum: the slot's bits, then the sub-sum's."""
        if sub is None:                          # k = 1: one sum a slot
            return Value.cast(slot)[:_slot_bits(self._r)]
        return Cat(Value.cast(slot)[:_slot_bits(self._r)], Value.cast(sub)[:_slot_bits(self._sums)])

    def _score_out(self, m, en, sub, bank, slot, value, shared=None):
        """A slot's sum at `en` to its bank: written (k = 1), or sub-sum `sub` of k to
        the fold (`_fold`, on the chain's adder with `shared`)."""
        if self._sums == 1:
            self._write_score(m, en, bank, slot, value)
        else:
            self._fold(m, en, sub, bank, slot, value, shared)

    def _fold(self, m, en, sub, bank, slot, value, shared=None):
        """The score of a slot from its k sub-sums, which come at `en` in the order 0 ..
        k-1, P cycles apart (for every slot of a row before the next sub-sum's): S =
        ((v_0 + v_1) + v_2) + ... in one fp32 adder. v_1 meets v_0, kept in a LUT RAM of
        (sub-sum, slot); each sum leaves the adder F = 1 + L cycles later and meets the next
        sub-sum, kept there too; the last sum is written to its bank. The adder takes one
        addition a cycle and no two meet (`score_period` chooses P so that a row's fold
        is done before the next row's begins), so the fold never stalls a row. The adder
        is its own, or with `shared` = (the adder's operands, its sum) the chain's, in the
        cycles `fold_shares_chain` leaves free."""
        arith, k, r = self._arith, self._sums, self._r
        st = Stages(m)
        addr = self._sub_addr(sub, slot)
        m.submodules.fold_mem = mem = Memory(shape=arith.score_shape, depth=2 ** len(addr),
                                             init=[])
        wr, rd = mem.write_port(), mem.read_port(domain="comb")
        m.d.comb += [wr.addr.eq(addr), wr.data.eq(value), wr.en.eq(en)]
        op_layout = data.StructLayout({"valid": 1, "sub": range(k), "bank": range(self._banks),
                                       "slot": range(r)})
        # the addition in the adder's last stage, and the sum it makes (F cycles after
        # its operands were chosen)
        back = Signal(op_layout, name="fold_back")
        summed = Signal(arith.score_shape, name="fold_sum")
        fresh = en & (sub == 1)                 # v_1: the first addition, v_0 + v_1
        more = back.valid & (back.sub != k - 1)
        op = Signal(op_layout, name="fold_op")
        a = Signal(arith.score_shape, name="fold_a")
        b = Signal(arith.score_shape, name="fold_b")
        m.d.comb += rd.addr.eq(Mux(fresh, self._sub_addr(Const(0, range(k)), slot),
                                   self._sub_addr(back.sub + 1, back.slot)))
        m.d.sync += [op.valid.eq(fresh | more),
                     op.sub.eq(Mux(fresh, 1, back.sub + 1)),
                     op.bank.eq(Mux(fresh, bank, back.bank)),
                     op.slot.eq(Mux(fresh, slot, back.slot)),
                     a.eq(Mux(fresh, rd.data, summed)),
                     b.eq(Mux(fresh, value, rd.data))]
        if shared is None:
            m.d.comb += summed.eq(arith.accumulate(m, a, b))
        else:                                   # the chain's adder (`fold_shares_chain`)
            fold_in, total = shared
            m.d.comb += [fold_in.valid.eq(op.valid), fold_in.a.eq(a), fold_in.b.eq(b),
                         summed.eq(total)]
        m.d.comb += back.eq(st.delay(op, arith.accumulate_latency, "fold_ctrl"))
        self._write_score(m, back.valid & (back.sub == k - 1), back.bank, back.slot, summed)
