"""`KVBuffer`: two rows of Q, K or V, filled from the feed while the other is replayed.

Rows move in chunks of s elements (s = `split`, the MACs a Q row is split over:
chunk c holds elements c*s .. c*s + s - 1, one for each MAC of a row's group),
one chunk per cycle both in and out, so a row is d/s cycles on either side.

The core's feed brings, for each Q block, its valid Q rows and then the K/V
rows in the array's order (`kv_order`): with B score banks (`banks`) the scores run
B - 1 K rows ahead of the updates, ``K0 .. K(B-2)``, then ``K(j), V(j-B+1)`` for
j = B-1 .. N-1, then the last B - 1 V rows (fewer if the block has fewer keys); with
B = 2 that is ``K0, K1, V0, K2, V1, ..., K(N-1), V(N-2), V(N-1)``. So the softmax of
row j overlaps the scores of the next B - 1 K rows. Fed in this order, two rows of
buffer are enough (one replaying, one filling): the replay takes the rows in the
order they come; fed K_j, V_j, a third row would have to hold V_j while K_(j+1)
arrives, or the array would wait.

The buffer learns each block from a command on `start` ({rows_valid, n_keys};
the softmax constant `c` is sampled with it), checks every element's kind
against the order above (a mismatch raises the sticky `error`, the element is
still used), and announces each complete row on the `row` stream with what the
array needs to know of it (`row_layout`). A row's half of the buffer stays
reserved until the replay pulses `release` after its last read; the halves are
used alternately, so `row` and `release` both follow the same order. A taken row's
half stays `full` until its release, and `row.valid` is that flag: so the replay takes
a row only while it holds none, or in the cycle it releases the one it holds.

A row is offered on `row` `row_latency` after its last element arrives, from the
stored tag and the half's `full` flag: registers, since the replay's launch
fans out from `row.valid`. A half is refilled `refill_latency` after its
`release`: the feed's `ready` is a register of its own, loaded with the next
cycle's `filling` and the next fill half's `full`, since the feed slice, the replay
and the row counters that its handshake enables are spread over the chip (a LUT of
`fill_half` and `full` there would put two long routes before the handshake).
"""

from amaranth.hdl import Module, Mux, Signal, signed
from amaranth.lib import data, enum, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from attenio import validate
from attenio.regmap import MAX_HEAD_GROUP

__all__ = ["Kind", "kv_order", "feed_layout", "start_layout", "mask_layout", "row_layout",
           "KVBuffer"]


class Kind(enum.Enum, shape=2):
    """What a feed element is."""
    Q = 0
    K = 1
    V = 2


def kv_order(n_keys, *, banks=2):
    """The K/V rows of a block of `n_keys` keys in the array's order, as (kind, j): the
    first min(B - 1, n) K rows, then K_j beside V_(j-B+1), then the V rows left (B =
    `banks`). The feed's order (`KVBuffer`), the DMA's (`attenio.hdl.sequencer`)."""
    lead = min(banks - 1, n_keys)
    order = [(Kind.K, j) for j in range(lead)]
    for j in range(lead, n_keys):
        order += [(Kind.K, j), (Kind.V, j - lead)]
    return order + [(Kind.V, j) for j in range(n_keys - lead, n_keys)]


def next_bank(bank, banks):
    """The bank after `bank` (a `range(banks)` value), j + 1 mod B: a flip of one bit for
    two banks, else an increment that wraps at B (for a power of two, on its own)."""
    if banks == 2:
        return ~bank
    if banks & (banks - 1) == 0:
        return (bank + 1)[:len(bank)]
    return Mux(bank == banks - 1, 0, bank + 1)


def feed_layout(split=1, element=signed(8)):
    """One chunk of a Q, K or V row: `split` elements of shape `element`, `value[0]` first."""
    return data.StructLayout({"kind": Kind, "value": data.ArrayLayout(element, split)})


def start_layout(*, rows, max_seq_len):
    """A Q block: `rows_valid` (1 .. rows) query rows against `n_keys` (1 .. max_seq_len);
    `causal`: its row i (of rows_valid) is row i div `step` of one of `step` query heads
    and sees only the keys up to diag + i div step, where `gdiag` = step * diag (the
    sequencer keeps it running, so nobody multiplies); see `mask_layout`."""
    return data.StructLayout({"rows_valid": range(rows + 1), "n_keys": range(max_seq_len + 1),
                              "causal": 1, **_mask_fields(max_seq_len)})


def _mask_fields(max_seq_len):
    return {"gdiag": range(MAX_HEAD_GROUP * max_seq_len + 1), "step": range(MAX_HEAD_GROUP + 1)}


def mask_layout(*, max_seq_len):
    """A block's causal mask, as the lanes apply it: with `causal`, row i of the block
    (0 .. rows_valid - 1) takes no part in the scores of keys j with i < step * (j - diag),
    where diag is the first block row's last key and `gdiag` = step * diag. A block
    holds the same rows of `step` query heads, row-major (row t of head h at
    i = t*step + h), so i < step * (j - diag) is t < j - diag; one head: step = 1."""
    return data.StructLayout({"causal": 1, **_mask_fields(max_seq_len)})


def row_layout(*, rows, mac_lines, macs_per_line, rows_per_mac, head_dim, c_shape,
               max_seq_len, split=1, banks=2):
    """A complete row in the buffer, as the replay needs it.

    `half`: where it is in the buffer. Its kind (`is_q`, `is_s` for a K row,
    `is_u` for a V row). A Q row: its target MAC group (`line`, `mac`: the group's
    index in its line) and `qbase`, the slot's first address in the group's Q storage. A K or V row: `bank`
    (j mod B, B = `banks`), `first` (K_0 or V_0 of the block), `last` (V_(N-1)). And the
    block's `rows_valid`, softmax constant `c` and causal `mask`.
    """
    return data.StructLayout({
        "half": 1,
        "is_q": 1, "is_s": 1, "is_u": 1,
        "line": range(mac_lines), "mac": range(macs_per_line // split),
        "qbase": range(rows_per_mac * head_dim // split),
        "bank": range(banks), "first": 1, "last": 1,
        "rows_valid": range(rows + 1), "c": c_shape, "mask": mask_layout(max_seq_len=max_seq_len),
    })


class KVBuffer(wiring.Component):
    """The two-row buffer for an array of `mac_lines` x `macs_per_line` MACs in groups of
    `split` (one Q row per group and slot), `rows_per_mac` slots, Q blocks of up to
    `block_rows` rows (at most r*p*q/s), rows of `head_dim` elements, up to
    `max_seq_len` keys, a softmax constant of `c_shape`, elements of shape `element`,
    `banks` score banks in the array (the K/V order, `kv_order`).

    Ports: `start`, `c`, `feed` in; `row` out and `release` in (see the module
    docstring); `rd_addr` / `rd_data` the replay's read port (a chunk, one cycle after
    the address ``half * d/s + c``); `filling` a block's feed is in progress; `busy`
    filling or holding a row; `error` sticky: a kind mismatch or a bad command.
    """

    def __init__(self, *, mac_lines, macs_per_line, rows_per_mac, block_rows, head_dim,
                 max_seq_len, c_shape, split=1, element=signed(8), banks=2):
        validate.positive("KVBuffer", mac_lines=mac_lines, macs_per_line=macs_per_line,
                          rows_per_mac=rows_per_mac, head_dim=head_dim, max_seq_len=max_seq_len)
        validate.split("KVBuffer", split, head_dim=head_dim, macs_per_line=macs_per_line)
        validate.integer("KVBuffer", "block_rows", block_rows, lo=1,
                         hi=rows_per_mac * mac_lines * macs_per_line // split)
        self._p, self._q, self._r, self._d = mac_lines, macs_per_line, rows_per_mac, head_dim
        validate.integer("KVBuffer", "banks", banks, lo=2)
        self._n, self._rows, self._s, self._banks = max_seq_len, block_rows, split, banks
        self._chunk = data.ArrayLayout(element, split)
        self._row_layout = row_layout(rows=block_rows, mac_lines=mac_lines,
                                      macs_per_line=macs_per_line,
                                      rows_per_mac=rows_per_mac, head_dim=head_dim,
                                      c_shape=c_shape, max_seq_len=max_seq_len,
                                      split=split, banks=banks)
        super().__init__({
            "start": In(stream.Signature(start_layout(rows=block_rows,
                                                      max_seq_len=max_seq_len))),
            "c": In(c_shape),
            "feed": In(stream.Signature(feed_layout(split, element))),
            "row": Out(stream.Signature(self._row_layout)),
            "release": In(1),
            "rd_addr": In(range(2 * head_dim // split)),
            "rd_data": Out(self._chunk),
            "filling": Out(1),
            "busy": Out(1),
            "error": Out(1),
        })

    #: cycles from a block accepted on `start` to `filling` (a register)
    start_latency = 1
    #: cycles from a row's last element taken off `feed` to the row offered on `row`
    row_latency = 1
    #: cycles from a half's `release` to the feed's next element taken into it
    refill_latency = 1

    @property
    def rows(self):
        """The largest Q block."""
        return self._rows

    @property
    def banks(self):
        return self._banks

    def elaborate(self, platform):
        m = Module()
        p, r, s, banks = self._p, self._r, self._s, self._banks
        g, d = self._q // s, self._d // s     # groups per line, chunks per row
        m.submodules.mem = mem = Memory(shape=self._chunk, depth=2 * d, init=[])
        wr = mem.write_port()
        rd = mem.read_port()
        m.d.comb += [rd.addr.eq(self.rd_addr), self.rd_data.eq(rd.data)]

        block_rows = Signal(range(self.rows + 1))
        block_c = Signal.like(self.c)
        block_mask = Signal(mask_layout(max_seq_len=self._n))
        in_q = Signal()                          # receiving the Q rows
        fill_half = Signal()                     # the half being filled
        elem = Signal(range(d))                  # chunk of the row being filled
        q_mac = Signal(range(g))                 # the MAC group the Q row goes to
        q_line = Signal(range(p))
        q_base = Signal(range(r * d))            # slot * d/s of that group's Q storage
        q_left = Signal(range(self.rows + 1))    # Q rows still to come
        # elem, q_mac and q_line at their last values (d/s - 1, g - 1, p - 1): flags set as
        # the counters move, so that a row's completion and the Q row's steps are a gate of
        # the feed's handshake and registers (the comparisons after the handshake's route
        # were 11.34 ns to q_base, the fp16 2x2's worst path on a seed)
        elem_last, mac_last, line_last = (Signal(name=f"{n}_last", init=count == 1)
                                          for n, count in (("elem", d), ("q_mac", g),
                                                           ("q_line", p)))
        # The K/V order from down-counters and flags, so the tag of the next row is a
        # few LUTs from registers, not two carry chains.
        k_left = Signal(range(self._n + 1))      # K rows still to come
        v_left = Signal(range(self._n + 1))      # V rows still to come
        # K rows received minus V rows received: K_j comes while lead < B (B - 1 rows
        # ahead, then the V row that frees the next K's bank)
        lead = Signal(range(banks + 1))
        # the bank (j mod B) of the next K row, V row
        k_bank, v_bank = Signal(range(banks)), Signal(range(banks))
        k_first, v_first = Signal(), Signal()    # the next K row, V row is the block's first
        full = Signal(2)                         # a half holds a row not yet released
        feed_ready = Signal()                    # filling & ~full[fill_half], registered
        # the next cycle's filling, fill half and full flags, from which feed_ready loads
        filling_next, fill_half_next, full_next = Signal(), Signal(), Signal(2)
        m.d.comb += [filling_next.eq(self.filling), full_next.eq(full)]   # unless set below
        tags = Signal(data.ArrayLayout(self._row_layout, 2))
        head = Signal()                          # the half the next `row` comes from
        oldest = Signal()                        # the half the next `release` frees
        filling = self.filling

        start = self.start
        m.d.comb += start.ready.eq(~filling)
        # The block's registers load on the handshake alone; the command's check decides
        # only `filling` and `error` (they matter only while filling), so it is not in the
        # enable of every block register.
        with m.If(start.valid & start.ready):
            cmd = start.payload
            bad = ((cmd.rows_valid == 0) | (cmd.rows_valid > self.rows) |
                   (cmd.n_keys == 0) | (cmd.n_keys > self._n) | (cmd.causal & (cmd.step == 0)))
            with m.If(bad):
                m.d.sync += self.error.eq(1)
            with m.Else():
                m.d.comb += filling_next.eq(1)
            m.d.sync += [elem_last.eq(d == 1), mac_last.eq(g == 1), line_last.eq(p == 1)]
            m.d.sync += [in_q.eq(1), block_rows.eq(cmd.rows_valid),
                         block_c.eq(self.c), elem.eq(0), q_left.eq(cmd.rows_valid),
                         block_mask.causal.eq(cmd.causal),
                         block_mask.gdiag.eq(cmd.gdiag), block_mask.step.eq(cmd.step),
                         q_mac.eq(0), q_line.eq(0), q_base.eq(0),
                         k_left.eq(cmd.n_keys), v_left.eq(cmd.n_keys), lead.eq(0),
                         k_bank.eq(0), v_bank.eq(0), k_first.eq(1), v_first.eq(1)]

        want_k = ~in_q & (k_left != 0) & (lead != banks)
        filled = Signal(self._row_layout)        # the tag of the row being filled
        m.d.comb += [
            filled.half.eq(fill_half),
            filled.is_q.eq(in_q), filled.is_s.eq(~in_q & want_k), filled.is_u.eq(~in_q & ~want_k),
            filled.line.eq(q_line), filled.mac.eq(q_mac), filled.qbase.eq(q_base),
            filled.bank.eq(Mux(want_k, k_bank, v_bank)),
            filled.first.eq(Mux(want_k, k_first, v_first)),
            filled.last.eq(~want_k & (v_left == 1)),
            filled.rows_valid.eq(block_rows), filled.c.eq(block_c), filled.mask.eq(block_mask),
        ]
        feed = self.feed
        m.d.comb += feed.ready.eq(feed_ready)
        take = feed.valid & feed.ready
        row_in = take & elem_last                # the row completes this cycle
        m.d.comb += fill_half_next.eq(fill_half ^ row_in)
        m.d.comb += [wr.addr.eq(fill_half * d + elem), wr.data.eq(feed.payload.value),
                     wr.en.eq(take)]
        with m.If(take):
            expect = Mux(in_q, Kind.Q.value, Mux(want_k, Kind.K.value, Kind.V.value))
            with m.If(feed.payload.kind.as_value() != expect):
                m.d.sync += self.error.eq(1)
            m.d.sync += [elem.eq(Mux(elem_last, 0, elem + 1)),
                         elem_last.eq((d == 1) | (elem == d - 2))]
        # A free half's tag follows the row being filled: `filled` changes only when a row
        # completes or a block starts, so the tag holds the row's at its last element
        # without the feed's handshake in the enable of its flip-flops.
        for h in range(2):
            with m.If(~full[h] & (fill_half == h)):
                m.d.sync += tags[h].eq(filled)
        with m.If(row_in):
            with m.If(in_q):
                m.d.sync += q_left.eq(q_left - 1)
                with m.If(q_left == 1):
                    m.d.sync += in_q.eq(0)
                with m.If(mac_last):
                    m.d.sync += [q_mac.eq(0), mac_last.eq(g == 1)]
                    with m.If(line_last):
                        m.d.sync += [q_line.eq(0), line_last.eq(p == 1), q_base.eq(q_base + d)]
                    with m.Else():
                        m.d.sync += [q_line.eq(q_line + 1), line_last.eq(q_line == p - 2)]
                with m.Else():
                    m.d.sync += [q_mac.eq(q_mac + 1), mac_last.eq(q_mac == g - 2)]
            with m.Elif(want_k):
                m.d.sync += [k_left.eq(k_left - 1), lead.eq(lead + 1),
                             k_bank.eq(next_bank(k_bank, banks)),
                             k_first.eq(0)]
            with m.Else():
                m.d.sync += [v_left.eq(v_left - 1), lead.eq(lead - 1),
                             v_bank.eq(next_bank(v_bank, banks)),
                             v_first.eq(0)]
                with m.If(v_left == 1):
                    m.d.comb += filling_next.eq(0)

        # The next row, stored
        m.d.comb += [self.row.valid.eq(full.bit_select(head, 1)),
                     self.row.payload.eq(tags[head].as_value())]
        with m.If(self.row.valid & self.row.ready):
            m.d.sync += head.eq(~head)
        with m.If(self.release):
            m.d.comb += full_next.bit_select(oldest, 1).eq(0)
            m.d.sync += oldest.eq(~oldest)
        with m.If(row_in):                      # a free half: never the one released
            m.d.comb += full_next.bit_select(fill_half, 1).eq(1)
        m.d.sync += [filling.eq(filling_next), fill_half.eq(fill_half_next),
                     full.eq(full_next),
                     feed_ready.eq(filling_next & ~full_next.bit_select(fill_half_next, 1))]

        m.d.comb += self.busy.eq(filling | full.any())
        return m
