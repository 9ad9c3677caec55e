"""`RowReplay`: the rows of the KV buffer into the PE array, one word per cycle.

A word carries one chunk of s elements (one for each MAC of a row's group). A
Q row is replayed once, to its group; a K or V row r times (pass t serves slot
t of every group), so a row costs r*d/s array cycles. With a `score_period` P
(the float formats, `attenio.hdl.mac.score_period`) a K row goes chunk by chunk
instead: chunk c to slots 0 .. r-1, then P - r idle cycles, so it costs P*d/s.
The replay takes the next row off the buffer's `row` stream when the current one
issues its last word (or when idle) and the schedule allows it:

* a V row (U_j) waits until every softmax lane has written bank j mod B (B =
  `banks`; the array's `ready`, cleared by `consume` as U_j starts): the single
  interlock of the schedule, so U_j follows S_j by at least the lane latency. The
  buffer brings K_(j+B), which overwrites bank j, only after V_j
  (`attenio.hdl.kv_buffer.kv_order`), so
  its scores are written after U_j has launched, by when the lanes have read them;
* K_0 of a block (its S_0) waits until the normalizer is idle, since the new
  block's softmax and updates would overwrite the previous block's l and O;
* the last V row of a block arms the normalizer with the block's valid rows.

The softmax constant of a block and its causal mask reach the lanes through two
registers from the row being replayed, loaded in the cycle after its S_0 launch (so
the launch decision does not also drive their enables, and the lanes read them far
away from it); they hold the block's values from the cycle S_0's first word enters
the array (`RowReplay.issue_latency` after the launch), before any of its scores exists.

A float format's elements enter the array widened to fp32 (the format's `widen`, between
the buffer's read and the entry register): once here, where every MAC would otherwise
widen its Q and its K and V words itself (two converters a MAC).
"""

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from attenio import validate

from .counter import DownCounter
from .mac import pick_addr, pick_layout, word_layout

__all__ = ["drain_layout", "RowReplay"]


def drain_layout(*, rows):
    """A finished block for the normalizer: how many of its rows are valid."""
    return data.StructLayout({"rows_valid": range(rows + 1)})


class RowReplay(wiring.Component):
    """The replay for `row_layout` rows of `head_dim` elements into an array of
    `mac_lines` x `macs_per_line` MACs with `rows_per_mac` rows each, Q blocks of up
    to `block_rows` rows, elements of shape `element` (in the words, widened by `arith`'s
    `widen` to its `word_shape` if an `arith` is given), K rows slot by slot
    (`score_period` None) or chunk by chunk in `score_period` cycles each, `banks`
    score and (P, alpha) banks (the rows' `bank` fields, `row_layout`'s with as many).

    Ports: `row` in and `release` out (the buffer's, see `attenio.hdl.kv_buffer`);
    `rd_addr` / `rd_data` the buffer's read port; `word` the array's entry word;
    `lanes_ready` / `consume` the array's interlock flags and their clears;
    `drain` the normalizer's block command (its `ready`: the normalizer is idle);
    `c` the softmax constant and `mask` the causal mask (`attenio.hdl.kv_buffer.mask_layout`)
    for the lanes; `pick_next` the next entry word's (bank, slot) address (while the word
    is valid) and whether it is a V word, which each line registers for its MAC 0
    (`attenio.hdl.mac.pick_layout`);
    `pe_active` a word for S or U entered
    the array; `starved` idle with no row to replay; `busy`.
    """

    def __init__(self, *, row_layout, mac_lines, macs_per_line, rows_per_mac, block_rows,
                 head_dim, c_shape, split=1, element=signed(8), score_period=None, banks=2,
                 arith=None):
        validate.positive("RowReplay", mac_lines=mac_lines, macs_per_line=macs_per_line,
                          rows_per_mac=rows_per_mac, block_rows=block_rows, head_dim=head_dim)
        validate.integer("RowReplay", "banks", banks, lo=2)
        validate.split("RowReplay", split, head_dim=head_dim, macs_per_line=macs_per_line)
        if score_period is not None:
            validate.integer("RowReplay", "score_period", score_period, lo=rows_per_mac)
        self._r, self._d = rows_per_mac, head_dim // split     # d: chunks per row
        self._period, self._banks = score_period, banks
        self._arith = arith
        word_element = element if arith is None else arith.word_shape
        super().__init__({
            "row": In(stream.Signature(row_layout)),
            "release": Out(1),
            "rd_addr": Out(range(2 * self._d)),
            "rd_data": In(data.ArrayLayout(element, split)),
            "word": Out(word_layout(mac_lines=mac_lines, macs_per_line=macs_per_line,
                                    rows_per_mac=rows_per_mac, head_dim=head_dim, split=split,
                                    element=word_element, banks=banks)),
            "lanes_ready": In(banks),
            "consume": Out(banks),
            "drain": Out(stream.Signature(drain_layout(rows=block_rows))),
            "c": Out(c_shape),
            "mask": Out(row_layout["mask"].shape),
            "pick_next": Out(pick_layout(rows_per_mac=rows_per_mac, banks=banks)),
            "pe_active": Out(1),
            "starved": Out(1),
            "busy": Out(1),
        })

    @staticmethod
    def issue_latency(arith=None):
        """Cycles from a row's launch (taken off `row`) to its first word at the array's
        entry: the issue counters start, the word register (beside the buffer's synchronous
        read of the same address), both in a register, then `arith`'s `widen` (None or
        int8: none; its last register is the entry register)."""
        return 3 + RowReplay._widen_latency(arith)

    @staticmethod
    def _widen_latency(arith):
        return 0 if arith is None else arith.widen_latency

    @property
    def banks(self):
        return self._banks

    def elaborate(self, platform):
        m = Module()
        r, d, P = self._r, self._d, self._period     # d: chunks per row, d/s
        banks = self._banks
        row = self.row
        cur = Signal.like(row.payload, name="replaying")   # the row being issued
        active = Signal()                        # a pass is issuing
        addr = Signal(range(r * d))              # MAC storage address of the word
        elem = Signal(range(d))                  # the chunk of the row
        slot = Signal(range(P or r))             # t, the pass (or the slot of the chunk)
        chunk_major = cur.is_s                   # with a score period: chunk by chunk
        nxt = row.payload
        # The words left of the row, whose end is a register (`DownCounter`): the last word
        # frees the replay for the next row and releases the row's half of the buffer,
        # which the feed refills from the next cycle on (`KVBuffer.refill_latency`).
        k_words = P * d if P else r * d
        m.submodules.words_left = left = DownCounter(max(d, k_words, r * d).bit_length())
        m.d.comb += [left.init.eq(Mux(nxt.is_q, d, Mux(nxt.is_s, k_words, r * d))),
                     left.step.eq(active)]
        last_word = active & left.last
        # a block's K_0 waits for an idle normalizer: not one whose command the previous
        # block offers this very cycle (one-word rows can meet it there)
        schedule_ok = Mux(nxt.is_u, self.lanes_ready.bit_select(nxt.bank, 1),
                          Mux(nxt.is_s & nxt.first, self.drain.ready & ~self.drain.valid, 1))
        free = ~active | last_word               # the replay may take the next row
        launch = free & row.valid & schedule_ok
        m.d.comb += [row.ready.eq(launch), self.release.eq(last_word), left.load.eq(launch)]

        word = Signal.like(self.word, name="entry")   # the entry word, but for its value
        m.d.comb += self.rd_addr.eq(cur.half * d + elem)
        if P and P > r:                          # the idle cycles of a chunk
            m.d.sync += word.valid.eq(active & ~(chunk_major & (slot >= r)))
        else:
            m.d.sync += word.valid.eq(active)

        def next_element():                      # of this pass, or the next pass
            m.d.sync += [addr.eq(addr + 1), elem.eq(Mux(elem == d - 1, 0, elem + 1))]
            with m.If(elem == d - 1):
                m.d.sync += slot.eq(slot + 1)

        with m.If(active):
            m.d.sync += [
                word.is_q.eq(cur.is_q), word.is_s.eq(cur.is_s), word.is_u.eq(cur.is_u),
                word.line.eq(cur.line), word.mac.eq(cur.mac), word.addr.eq(addr),
                word.slot.eq(slot), word.kfirst.eq(elem == 0), word.klast.eq(elem == d - 1),
                word.bank.eq(cur.bank), word.first.eq(cur.first), word.last.eq(cur.last),
            ]
            if P:
                with m.If(chunk_major):         # the next slot of this chunk, or the next chunk
                    with m.If(slot == P - 1):
                        m.d.sync += [slot.eq(0), elem.eq(elem + 1), addr.eq(elem + 1)]
                    with m.Else():
                        m.d.sync += [slot.eq(slot + 1), addr.eq(addr + d)]
                with m.Else():
                    next_element()
            else:
                next_element()

        # A free replay loads the next row and restarts the counters that the issue above
        # advances, launched or not: they matter only while `active`, which only a launch
        # sets. So the row's valid and the schedule drive a few flags (`active`, the
        # consume pulses, the block's c and mask), not every bit of the row.
        with m.If(free):
            m.d.sync += [cur.eq(nxt), addr.eq(Mux(nxt.is_q, nxt.qbase, 0)), elem.eq(0),
                         slot.eq(0)]
        c_launched = Signal.like(self.c)          # the c of the block whose S_0 launched
        mask_launched = Signal.like(self.mask)
        launched = Signal()                       # `cur` was launched in the last cycle
        m.d.sync += [self.c.eq(c_launched), self.mask.eq(mask_launched), launched.eq(launch)]
        with m.If(launched & cur.is_s & cur.first):
            m.d.sync += [c_launched.eq(cur.c), mask_launched.eq(cur.mask)]
        with m.If(launch):
            m.d.sync += active.eq(1)
        with m.Elif(last_word):
            m.d.sync += active.eq(0)
        # U_j's consume and the last V row's drain command leave from registers, a cycle
        # after the launch: the lanes' `ready[j mod B]` is next looked at for U_(j+B), 2B
        # launches later (four at least), by when the clear has long reached the array's
        # registered AND, and the normalizer's for the next block's S_0, after its Q rows.
        one_hot = (Mux(nxt.bank, 0b10, 0b01) if banks == 2
                   else Cat(nxt.bank == b for b in range(banks)))
        m.d.sync += [self.consume.eq(Mux(launch & nxt.is_u, one_hot, 0)),
                     self.drain.valid.eq(launch & nxt.is_u & nxt.last),
                     self.drain.payload.rows_valid.eq(nxt.rows_valid)]
        # The entry register: the word with the buffer's read, which leaves a block RAM
        # late in its cycle, so it is registered beside the RAM before it travels to every
        # line or into the widening, whose last register is then the entry register (the
        # word's fields wait beside it); the (bank, slot) the entry takes at the next edge
        # go to each line's copy.
        read = Signal.like(self.rd_data, name="read")
        m.d.sync += read.eq(self.rd_data)
        widen = self._widen_latency(self._arith)
        value = read if self._arith is None else Cat(*(self._arith.widen(m, read[i])
                                                       for i in range(len(read))))
        fields = [word]
        for k in range(1 + widen):
            later = Signal.like(word, name="entry_out" if k == widen else f"entry_w{k}")
            m.d.sync += later.eq(fields[-1])
            fields.append(later)
        entry, before = fields[-1], fields[-2]
        m.d.comb += [self.word.eq(entry), self.word.value.eq(value),
                     self.pick_next.addr.eq(pick_addr(before.bank, before.slot, rows_per_mac=r,
                                                      banks=banks)),
                     self.pick_next.u.eq(before.valid & before.is_u)]
        m.d.comb += [self.starved.eq(~active & ~row.valid),
                     self.pe_active.eq(entry.valid & (entry.is_s | entry.is_u)),
                     self.busy.eq(active | Cat(f.valid for f in fields).any())]
        return m
