"""`AttentionCore`: the PE array, the softmax lanes, the KV buffer and the normalizer of one Q block.

This is the compute core of the AttenIO schedule (docs/microarchitecture.md):
it holds a Q block in the MACs, takes K and V rows one at a time, and streams
out the block's normalized int8 O. Everything it computes is bit for bit the
golden model's (`attenio.sim.golden`, the twins of `attenio.hdl.formats`).

Interface (for the controller)
==============================

``start``   in, stream {rows_valid, n_keys}: begin a block of ``rows_valid``
            (1 .. r*p*q) query rows against ``n_keys`` (1 .. max_seq_len) K/V
            rows. ``c`` (the softmax constant, `Int8Arith.c_shape`, raw
            fixed-point) is sampled with it. Accepted when the feed of the
            previous block is complete, so the next block can be announced
            while the previous one computes and drains. A command with a value
            out of range is dropped and raises ``error``.
``feed``    in, stream {kind: Kind.Q/K/V, value: signed(8)}, one element per
            transfer, in this order for each block:

            * Q: ``rows_valid * d`` elements, row-major (the DMA order). Rows
              past ``rows_valid`` keep stale Q and are never output.
            * K/V rows of d elements in the array's order
              ``K0, K1, V0, K2, V1, ..., K(N-1), V(N-2), V(N-1)``
              (for N = 1: ``K0, V0``).

            Why this order: the array computes the scores of K_{j+1} before it
            updates O with V_j (so the softmax of row j overlaps the next
            scores); fed in this order the KV buffer needs only two rows (one
            replaying, one filling). Fed K_j, V_j it would need a third row to
            hold V_j while K_{j+1} arrives, or the array would wait. For the DMA
            the order is only a different address sequence. ``kind`` is checked
            against the expected sequence; a mismatch raises ``error`` (the
            element is still used).
``o_out``   out, stream {data: signed(8), last}: the block's O, row-major, the
            valid rows only (``rows_valid * d`` bytes), ``last`` on the final one.
            Back-pressure is honored (the normalizer only issues against credits
            of its output FIFO).
``busy``    a block is being fed, computed or drained (or output is pending).
``pe_active``  strobe: an element entered the array for S or U (not Q load).
``exp_active`` strobe: some softmax lane has a row in flight (from its issue to
            its write-back: r*q/L + 5 cycles per lane pass).
``row_wait``   the array is idle because the next row has not fully arrived in the
            KV buffer (the top's `mem_stall` counter counts it when no lane is busy).
``error``   sticky: a feed kind mismatch or a bad start command.

Inside
======

* **KV buffer**: two rows of d int8 (one `Memory`), filled from ``feed`` one
  element per cycle while the other is replayed into the array: a Q row once
  (to its MAC), a K or V row r times (pass t serves slot t), so a row costs r*d
  array cycles. A row may start replaying in the very cycle its last element
  arrives, so with r = 1 and an unbroken feed the array sees no bubble.
* **Array entry**: one registered word per cycle fans out to MAC 0 of the p
  lines (`attenio.hdl.pe_array`); words move one MAC per cycle along a line.
* **Alternation, scores one row ahead**: S_j writes score bank j mod 2; the
  lanes (`attenio.hdl.softmax`) then compute m, l, P and alpha of row j into
  (P, alpha) bank j mod 2 while the array runs U_(j-1) and S_(j+1).
* **The single interlock**: U_j (the replay of V_j) starts only when every lane
  has written bank j mod 2 (the lanes' ``ready`` flags; cleared as U_j starts).
  U_j's first element enters at the earliest L_sm + 1 cycles after S_j's last,
  with L_sm = q + r*q/L + 13 (``sm_latency``: q MAC stages to the line's end,
  1 for the score's product register (`MAC.score_latency`), one row per cycle
  per lane, 11 lane stages to the bus (`lane_bus_stage`), 1 cycle for the
  replay to react). A lane starts a pass at most every max(r*q/L, S + 1)
  cycles, S = 13 (`lane_stages`).
  In the steady state the lanes are covered by U_(j-1) and S_(j+1), 2*r*d
  cycles, so the array stalls only when L_sm > 2*r*d, by (L_sm - 2*r*d)/2 per
  K/V row; U_0 (covered by S_1 only) and U_(N-1) (by U_(N-2) only) wait
  L_sm - r*d when positive: that is the "a few cycles per block". The contract
  in docs/microarchitecture.md states the condition L_sm > r*d, which holds for
  those two rows only; the cycle model (`attenio.sim.cyclemodel`) already
  treats it this way, with its lane_latency = L_sm - q - r*q/L + 1 and
  line_skew = q - 1.
  Besides the interlock, the array waits only for the feed (no K/V row in the
  buffer) and, for S_0 of a block, for the previous block's drain to have read
  its O and l (which the next block's Q load normally hides).
* **Drain / normalizer**: after the last MAC has written U_(N-1), each valid
  row's l is read from its lane and its O from its MAC through the line and
  array multiplexers, one element per cycle; y, e = reciprocal(l) (recomputed
  per element, it is fully pipelined), out = finalize(O, y, e), through a small
  FIFO to ``o_out``. The first byte is offered q + MAC.update_latency +
  drain_latency + 3 cycles (q + 29 by default) after the last U element entered the array, then one
  byte per cycle. It overlaps the next block's Q load; the next block's S_0
  waits until the drain has issued its last element (SM_0 would overwrite l,
  U_0 the O accumulators): a full Q load of the next block plus its K_0 row
  (a*d + d cycles) covers a drain of at most a*d + q + 1 when d > q.

Per K/V row the array is busy 2*r*d cycles (r*d for S_j, r*d for U_j); a block
costs N*2*r*d + rows_valid*d (Q load) + a few cycles of fill and drain latency.
"""

from amaranth.hdl import Array, Cat, Module, Mux, Signal, signed
from amaranth.lib import data, enum, fifo, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out

from attenio.formats import Int8Format

from .formats import Int8Arith
from .pe_array import MAC, PEArray, check_dims, word_layout
from .softmax import lane_bus_stage

__all__ = ["Kind", "feed_layout", "start_layout", "out_layout", "AttentionCore"]


class Kind(enum.Enum, shape=2):
    """What a feed element is."""
    Q = 0
    K = 1
    V = 2


def feed_layout():
    return data.StructLayout({"kind": Kind, "value": signed(8)})


def start_layout(*, rows, max_seq_len):
    return data.StructLayout({"rows_valid": range(rows + 1), "n_keys": range(max_seq_len + 1)})


def out_layout():
    return data.StructLayout({"data": signed(8), "last": 1})


class AttentionCore(wiring.Component):
    """The compute core for `mac_lines` x `macs_per_line` MACs with `rows_per_mac` rows
    each (a Q block of up to r*p*q rows), head dimension `head_dim`, `exp_units` EXP
    lanes (a multiple of mac_lines, dividing q per line), hardware for up to
    `max_seq_len` keys, int8 format `fmt` (an `attenio.formats.Int8Format`).
    See the module docstring for the ports."""

    def __init__(self, *, mac_lines, macs_per_line, rows_per_mac, head_dim, exp_units,
                 max_seq_len, fmt=None):
        # A rejected core was never meant to be elaborated: no UnusedElaboratable warning.
        self._MustUse__silence = True
        check_dims("AttentionCore", mac_lines=mac_lines, macs_per_line=macs_per_line,
                   rows_per_mac=rows_per_mac, head_dim=head_dim, exp_units=exp_units,
                   max_seq_len=max_seq_len)
        if fmt is None:
            fmt = Int8Format()
        if not isinstance(fmt, Int8Format):
            raise ValueError(f"AttentionCore: the RTL is int8-only; fmt must be an Int8Format, "
                             f"not {fmt!r}")
        if exp_units % mac_lines:
            raise ValueError(f"AttentionCore: exp_units ({exp_units}) must be a multiple of "
                             f"mac_lines ({mac_lines})")
        if macs_per_line % (exp_units // mac_lines):
            raise ValueError(f"AttentionCore: macs_per_line ({macs_per_line}) must be a multiple "
                             f"of exp_units / mac_lines ({exp_units // mac_lines})")
        self._MustUse__silence = False
        self._arith = Int8Arith(fmt, max_seq_len=max_seq_len, head_dim=head_dim)
        self._p, self._q, self._r, self._d = mac_lines, macs_per_line, rows_per_mac, head_dim
        self._e, self._n = exp_units, max_seq_len
        super().__init__({
            "start": In(stream.Signature(start_layout(rows=self.rows, max_seq_len=max_seq_len))),
            "c": In(self._arith.c_shape),
            "feed": In(stream.Signature(feed_layout())),
            "o_out": Out(stream.Signature(out_layout())),
            "busy": Out(1),
            "pe_active": Out(1),
            "exp_active": Out(1),
            "row_wait": Out(1),
            "error": Out(1),
        })

    @classmethod
    def from_plan(cls, plan):
        """The core of a `attenio.plan.Plan` (its budget, rows per MAC and int8 format)."""
        b, w = plan.budget, plan.workload
        return cls(mac_lines=b.mac_lines, macs_per_line=b.macs_per_line,
                   rows_per_mac=plan.rows_per_mac, head_dim=w.head_dim, exp_units=b.exp_units,
                   max_seq_len=w.seq_len, fmt=plan.config.format)

    # -- read-only parameters -------------------------------------------------------------

    @property
    def arith(self):
        return self._arith

    @property
    def mac_lines(self):
        return self._p

    @property
    def macs_per_line(self):
        return self._q

    @property
    def rows_per_mac(self):
        return self._r

    @property
    def head_dim(self):
        return self._d

    @property
    def exp_units(self):
        return self._e

    @property
    def max_seq_len(self):
        return self._n

    @property
    def rows(self):
        """The largest Q block: r*p*q rows."""
        return self._r * self._p * self._q

    @property
    def macs_per_lane(self):
        return self._q // (self._e // self._p)

    @property
    def drain_latency(self):
        """Cycles from a drain issue to its byte in the output FIFO."""
        return 4 + self._arith.reciprocal_latency + self._arith.finalize_latency + 1

    @property
    def sm_latency(self):
        """L_sm: U_j's first element may enter the array L_sm + 1 cycles after S_j's last
        one at the earliest: q cycles along the line, the score's product register, r*q/L
        rows issued by each lane, the lane's stages up to its bus register
        (`lane_bus_stage`), and 2 cycles for the replay to see ``ready`` and issue."""
        return (self._q + MAC.score_latency + self._r * self.macs_per_lane
                + lane_bus_stage(self._arith) + 1)

    @property
    def interlock_slack(self):
        """2*r*d - L_sm: when negative, every U_j waits, by -slack/2 cycles per K/V row in
        the steady state (two rows' softmaxes overlap U_(j-1) and S_(j+1)). U_0 and U_(N-1)
        have only r*d of cover each, so they wait L_sm - r*d cycles when that is positive."""
        return 2 * self._r * self._d - self.sm_latency

    # -- hardware ---------------------------------------------------------------------------

    def _check_update_hazard(self):
        """U_j and U_(j+1) touch an O element at least max(r*d, L_sm + 1 - r*d) cycles
        apart (a K row between them, or the interlock after V(N-2)); the MAC writes it
        back `MAC.update_latency` cycles after reading it."""
        rd = self._r * self._d
        if max(rd, self.sm_latency + 1 - rd) <= MAC.update_latency(self._arith):
            raise ValueError(f"AttentionCore: an O element would be read before its update "
                             f"is written (r*d = {rd}, L_sm = {self.sm_latency})")

    def elaborate(self, platform):
        self._check_update_hazard()
        m = Module()
        A = self._arith
        p, q, r, d = self._p, self._q, self._r, self._d
        L = self._e // p
        ql = q // L
        word = word_layout(mac_lines=p, macs_per_line=q, rows_per_mac=r, head_dim=d)

        m.submodules.array = arr = PEArray(arith=A, mac_lines=p, macs_per_line=q, rows_per_mac=r,
                                           head_dim=d, exp_units=self._e)

        tag_layout = data.StructLayout({
            "is_q": 1, "is_s": 1, "is_u": 1, "line": range(p), "mac": range(q),
            "qbase": range(r * d), "bank": 1, "first": 1, "last": 1,
            "rows_valid": range(self.rows + 1), "c": A.c_shape,
        })

        # ================= fill side: start commands and the feed into the KV buffer ======
        m.submodules.kvbuf = kvbuf = Memory(shape=signed(8), depth=2 * d, init=[])
        buf_wr = kvbuf.write_port()
        buf_rd = kvbuf.read_port()

        fill_on = Signal()                       # a block's feed is in progress
        blk_rows = Signal(range(self.rows + 1))
        blk_c = Signal(A.c_shape)
        in_q = Signal()                          # receiving the Q rows
        fb = Signal()                            # bank being filled
        fk = Signal(range(d))                    # element of the row
        q_mac = Signal(range(q))
        q_line = Signal(range(p))
        q_base = Signal(range(r * d))            # slot * d of the Q row's MAC slot
        # The K/V order (K_0, K_1, V_0, K_2, V_1, ...) from down-counters and flags, so
        # the tag of the next row is a few LUTs from registers, not two carry chains.
        k_left = Signal(range(self._n + 1))      # K rows still to come
        v_left = Signal(range(self._n + 1))      # V rows still to come
        lead = Signal(range(3))                  # K rows received minus V rows received
        k_bank, v_bank = Signal(), Signal()      # the bank of the next K row, V row
        k_first, v_first = Signal(), Signal()    # the next K row, V row is the block's first
        q_left = Signal(range(self.rows + 1))    # Q rows still to come
        full = Signal(2)
        tags = Signal(data.ArrayLayout(tag_layout, 2))
        error = Signal()
        m.d.comb += self.error.eq(error)

        start = self.start
        m.d.comb += start.ready.eq(~fill_on)
        with m.If(start.valid & start.ready):
            sp = start.payload
            bad = ((sp.rows_valid == 0) | (sp.rows_valid > self.rows) |
                   (sp.n_keys == 0) | (sp.n_keys > self._n))
            with m.If(bad):
                m.d.sync += error.eq(1)
            with m.Else():
                m.d.sync += [fill_on.eq(1), in_q.eq(1), blk_rows.eq(sp.rows_valid),
                             blk_c.eq(self.c), fk.eq(0), q_left.eq(sp.rows_valid),
                             q_mac.eq(0), q_line.eq(0), q_base.eq(0),
                             k_left.eq(sp.n_keys), v_left.eq(sp.n_keys), lead.eq(0),
                             k_bank.eq(0), v_bank.eq(0), k_first.eq(1), v_first.eq(1)]

        want_k = ~in_q & (k_left != 0) & (lead != 2)
        cur = Signal(tag_layout)                 # the tag of the row being filled
        m.d.comb += [
            cur.is_q.eq(in_q), cur.is_s.eq(~in_q & want_k), cur.is_u.eq(~in_q & ~want_k),
            cur.line.eq(q_line), cur.mac.eq(q_mac), cur.qbase.eq(q_base),
            cur.bank.eq(Mux(want_k, k_bank, v_bank)),
            cur.first.eq(Mux(want_k, k_first, v_first)),
            cur.last.eq(~want_k & (v_left == 1)),
            cur.rows_valid.eq(blk_rows), cur.c.eq(blk_c),
        ]
        feed = self.feed
        fb_full = Mux(fb, full[1], full[0])
        m.d.comb += feed.ready.eq(fill_on & ~fb_full)
        take = feed.valid & feed.ready
        row_in = take & (fk == d - 1)            # the row completes this cycle
        m.d.comb += [buf_wr.addr.eq(fb * d + fk), buf_wr.data.eq(feed.payload.value),
                     buf_wr.en.eq(take)]
        with m.If(take):
            expect = Mux(in_q, Kind.Q.value, Mux(want_k, Kind.K.value, Kind.V.value))
            with m.If(feed.payload.kind.as_value() != expect):
                m.d.sync += error.eq(1)
            m.d.sync += fk.eq(Mux(fk == d - 1, 0, fk + 1))
        with m.If(row_in):
            m.d.sync += [tags[fb].eq(cur), fb.eq(~fb)]
            with m.If(in_q):
                m.d.sync += q_left.eq(q_left - 1)
                with m.If(q_left == 1):
                    m.d.sync += in_q.eq(0)
                with m.If(q_mac == q - 1):
                    m.d.sync += q_mac.eq(0)
                    with m.If(q_line == p - 1):
                        m.d.sync += [q_line.eq(0), q_base.eq(q_base + d)]
                    with m.Else():
                        m.d.sync += q_line.eq(q_line + 1)
                with m.Else():
                    m.d.sync += q_mac.eq(q_mac + 1)
            with m.Elif(want_k):
                m.d.sync += [k_left.eq(k_left - 1), lead.eq(lead + 1), k_bank.eq(~k_bank),
                             k_first.eq(0)]
            with m.Else():
                m.d.sync += [v_left.eq(v_left - 1), lead.eq(lead - 1), v_bank.eq(~v_bank),
                             v_first.eq(0)]
                with m.If(v_left == 1):
                    m.d.sync += fill_on.eq(0)

        # ================= replay side: the KV buffer into the array ========================
        rb = Signal()                            # bank being replayed
        act = Signal()                           # a pass is issuing
        ra = Signal(range(r * d))                # MAC storage address
        rk = Signal(range(d))
        rs = Signal(range(r))
        c_next = Signal(A.c_shape)               # the c of the block whose scores launched
        c_cur = Signal(A.c_shape)                # ... a cycle later, to every lane: a register
                                                 # between the launch logic and the long route
        drain_pend = Signal()                    # the block's last U has started
        drain_busy = Signal()
        drain_rows = Signal(range(self.rows + 1))
        m.d.sync += c_cur.eq(c_next)
        m.d.comb += arr.c.eq(c_cur)

        # A bank counts as full (with the tag being written) in the cycle its row completes.
        full_eff = [full[b] | (row_in & (fb == b)) for b in range(2)]
        tag_eff = [Mux(full[b], tags[b].as_value(), cur.as_value()) for b in range(2)]
        tg = Signal(tag_layout)                  # the tag of the pass being issued
        m.d.comb += tg.eq(tags[rb])
        last_word = act & Mux(tg.is_q, rk == d - 1, ra == r * d - 1)
        nb = Mux(last_word, ~rb, rb)             # the bank a new pass would come from
        nt = Signal(tag_layout)
        m.d.comb += nt.eq(Mux(nb, tag_eff[1], tag_eff[0]))
        n_full = Mux(nb, full_eff[1], full_eff[0])
        interlock_ok = Mux(nt.is_u, Mux(nt.bank, arr.ready[1], arr.ready[0]),
                           Mux(nt.is_s & nt.first, ~drain_pend & ~drain_busy, 1))
        launch = (~act | last_word) & n_full & interlock_ok
        consume = Signal(2)
        m.d.comb += arr.consume.eq(consume)

        ent = Signal(word)                       # the entry word (value from the buffer)
        m.d.comb += buf_rd.addr.eq(rb * d + rk)
        m.d.sync += ent.valid.eq(act)
        with m.If(act):
            m.d.sync += [
                ent.is_q.eq(tg.is_q), ent.is_s.eq(tg.is_s), ent.is_u.eq(tg.is_u),
                ent.line.eq(tg.line), ent.mac.eq(tg.mac), ent.addr.eq(ra), ent.slot.eq(rs),
                ent.kfirst.eq(rk == 0), ent.klast.eq(rk == d - 1), ent.bank.eq(tg.bank),
                ent.first.eq(tg.first), ent.last.eq(tg.last),
                ra.eq(ra + 1), rk.eq(Mux(rk == d - 1, 0, rk + 1)),
            ]
            with m.If(rk == d - 1):
                m.d.sync += rs.eq(rs + 1)
        with m.If(last_word):
            m.d.sync += rb.eq(~rb)
            with m.If(rb):
                m.d.sync += full[1].eq(0)
            with m.Else():
                m.d.sync += full[0].eq(0)
        with m.If(row_in):                      # after the clear: a different bank
            with m.If(fb):
                m.d.sync += full[1].eq(1)
            with m.Else():
                m.d.sync += full[0].eq(1)
        with m.If(launch):
            m.d.sync += [act.eq(1), ra.eq(Mux(nt.is_q, nt.qbase, 0)), rk.eq(0), rs.eq(0)]
            with m.If(nt.is_u):
                m.d.comb += consume.eq(Mux(nt.bank, 0b10, 0b01))
                with m.If(nt.last):
                    m.d.sync += [drain_pend.eq(1), drain_rows.eq(nt.rows_valid)]
            with m.If(nt.is_s & nt.first):
                m.d.sync += c_next.eq(nt.c)
        with m.Elif(last_word):
            m.d.sync += act.eq(0)

        entry = Signal(word)
        m.d.comb += [entry.eq(ent), entry.value.eq(buf_rd.data), arr.wi.eq(entry)]
        m.d.comb += self.row_wait.eq(~act & ~n_full & fill_on)
        m.d.comb += [self.pe_active.eq(ent.valid & (ent.is_s | ent.is_u)),
                     self.exp_active.eq(arr.exp_active)]

        # ================= drain: normalize O row by row ===================================
        tail = arr.tail
        # the last V word at the last MAC; its O is written MAC.update_latency cycles later
        trigger = tail.valid & tail.is_u & tail.last & tail.klast & (tail.slot == r - 1)
        for k in range(MAC.update_latency(A)):
            later = Signal(name=f"drain_trigger_{k}")
            m.d.sync += later.eq(trigger)
            trigger = later
        dk = Signal(range(d))
        d_mil = Signal(range(ql))
        d_lane = Signal(range(L))
        d_line = Signal(range(p))
        d_abase = Signal(range(r * d))           # slot * d
        d_ubase = Signal(range(r * ql))          # slot * q/L
        d_row = Signal(range(self.rows + 1))
        lat = self.drain_latency
        depth = lat + 4                          # credits: covers the round trip at full rate
        credits = Signal(range(depth + 1), init=depth)
        m.submodules.out_fifo = ofifo = fifo.SyncFIFOBuffered(width=9, depth=depth)
        issue = drain_busy & (credits != 0)
        o_take = self.o_out.valid & self.o_out.ready
        m.d.sync += credits.eq(credits - issue + o_take)

        with m.If(trigger):
            m.d.sync += [drain_pend.eq(0), drain_busy.eq(1), dk.eq(0), d_mil.eq(0),
                         d_lane.eq(0), d_line.eq(0), d_abase.eq(0), d_ubase.eq(0), d_row.eq(0)]
        m.d.sync += [arr.drain_addr.eq(d_abase + dk), arr.drain_u.eq(d_ubase + d_mil),
                     arr.drain_mac.eq(d_lane * ql + d_mil), arr.drain_lane.eq(d_lane),
                     arr.drain_line.eq(d_line)]
        is_last = (d_row == drain_rows - 1) & (dk == d - 1)
        with m.If(issue):
            m.d.sync += dk.eq(Mux(dk == d - 1, 0, dk + 1))
            with m.If(dk == d - 1):
                m.d.sync += d_row.eq(d_row + 1)
                with m.If(is_last):
                    m.d.sync += drain_busy.eq(0)
                with m.If(d_mil == ql - 1):
                    m.d.sync += d_mil.eq(0)
                    with m.If(d_lane == L - 1):
                        m.d.sync += d_lane.eq(0)
                        with m.If(d_line == p - 1):
                            m.d.sync += [d_line.eq(0), d_abase.eq(d_abase + d),
                                         d_ubase.eq(d_ubase + ql)]
                        with m.Else():
                            m.d.sync += d_line.eq(d_line + 1)
                    with m.Else():
                        m.d.sync += d_lane.eq(d_lane + 1)
                with m.Else():
                    m.d.sync += d_mil.eq(d_mil + 1)

        # valid/last along the pipeline: issue -> array inputs (1) -> o_rd, l_rd (+3)
        # -> reciprocal (+RL) -> finalize (+its latency) -> output register (+1) -> FIFO
        dv = [Signal(2, name=f"dv{k}") for k in range(lat)]
        m.d.sync += dv[0].eq(Cat(issue, is_last))
        m.d.sync += [dv[k].eq(dv[k - 1]) for k in range(1, lat)]
        y, e = A.reciprocal(m, arr.l_rd)
        o_d = arr.o_rd
        for k in range(A.reciprocal_latency):
            nxt = Signal(A.o_shape, name=f"drain_o{k}")
            m.d.sync += nxt.eq(o_d)
            o_d = nxt
        out = Signal(signed(8))
        m.d.sync += out.eq(A.finalize(m, o_d, y, e))
        m.d.comb += [ofifo.w_data.eq(Cat(out, dv[lat - 1][1])), ofifo.w_en.eq(dv[lat - 1][0]),
                     self.o_out.valid.eq(ofifo.r_rdy), self.o_out.payload.eq(ofifo.r_data),
                     ofifo.r_en.eq(self.o_out.ready)]

        m.d.comb += self.busy.eq(fill_on | full.any() | act | ent.valid | drain_pend |
                                 drain_busy | Cat(*dv).any() | ofifo.r_rdy)
        return m
