"""`AttentionCore`: the PE array, the softmax lanes, the KV buffer and the normalizer of one Q block.

This is the compute core of the AttenIO schedule (docs/microarchitecture.md):
it holds a Q block in the MACs, takes K and V rows one at a time, and streams
out the block's normalized O in the format O is written in (int8, fp16 or bf16; bf16 for fp8).
Everything it computes is bit for bit the golden model's (`attenio.sim.golden`
and `attenio.sim.golden_fp`, the twins of `attenio.hdl.formats`).

    start, c, feed --> KVBuffer --row--> RowReplay --word--> PEArray (MACs, lanes)
                          ^   <--release--   |  |                 |tail    ^ drain
                          +---- rd_addr/data +  +--drain (block)--> Normalizer --> o_out

Interface (for the controller)
==============================

``start``   in, stream {rows_valid, n_keys, causal, gdiag, step}: begin a block of
            ``rows_valid`` (1 .. block_rows) query rows against ``n_keys``
            (1 .. max_seq_len) K/V rows; with ``causal`` its row i, row i div step of
            one of ``step`` query heads, sees keys 0 .. diag + i div step only, where
            ``gdiag`` = step * diag (the others are masked in the lanes: P = 0, m and l
            untouched; `attenio.hdl.kv_buffer.mask_layout`). ``c`` (the softmax
            constant, the format's ``c_shape``: raw fixed point for int8, fp32 bits for
            a float format) is sampled with it. Accepted when the feed of the previous
            block is complete, so the next block can be announced while the previous
            one computes and drains. A command with a value
            out of range is dropped and raises ``error``.
``feed``    in, stream {kind: Kind.Q/K/V, value: s x element}, one chunk of s
            elements per transfer (s = ``split``, the MACs a row is split over):
            per block the ``rows_valid * d`` Q elements row-major
            (rows past ``rows_valid`` keep stale Q and are never output), then
            the K/V rows in the array's order (`attenio.hdl.kv_buffer`).
``o_out``   out, stream {value: s x element, last}: the block's O, row-major,
            s elements a transfer, the valid rows only (``rows_valid * d`` elements),
            ``last`` on the final chunk.
``busy``    a block is being fed, computed or drained (or output is pending).
``pe_active``  strobe: an element entered the array for S or U (not Q load).
``exp_active`` strobe: some softmax lane has a row in flight.
``row_wait``   the array is idle because the next row has not fully arrived in the
            KV buffer (the top's `mem_stall` counter counts it when no lane is busy).
``error``   sticky: a feed kind mismatch or a bad start command.

The schedule
============

Everything below counts cycles of one chunk: with rows split over s MACs, read d
as d/s (a row is d/s chunks) and q as the line's MACs as before.

Per K/V row the array is busy 2*r*d cycles (r*d for S_j, r*d for U_j). With B
score and (P, alpha) banks (`banks`, the Plan's) the scores run B - 1 K rows ahead
of the updates (the K/V order, `attenio.hdl.kv_buffer.kv_order`): S_j writes score
bank j mod B; the lanes then compute m, l, P and alpha of row j into (P, alpha)
bank j mod B while the array runs S_(j+1) .. S_(j+B-1) and the U rows between
them; S_(j+B), which overwrites bank j, comes after U_j. With B = 2: U_(j-1) and
S_(j+1). U_j
waits for the lanes (the single interlock, `RowReplay`): its first word enters
the array at the earliest L_sm + 1 cycles after S_j's last, with L_sm =
`CoreTiming.sm_latency` = (q - 1) line skew + r*q/(L s) lane rows + `lane_latency`
(the score's latency, the lane's stages to the MACs' bus registers, the replay's
reaction). In the steady state the lanes are covered by U_(j-1) and S_(j+1),
2*r*d cycles, so the array stalls only when L_sm > 2*r*d; U_0 (covered by S_1
only) and U_(N-1) (by U_(N-2) only) wait L_sm - r*d when that is positive.
Besides the interlock, the array waits only for the feed and, for S_0 of a
block, for the previous block's drain, which the next block's Q load (a*d
cycles) normally hides. A block costs N*2*r*d + rows_valid*d (Q load) cycles
plus a few of fill and drain latency. A float format replays K rows chunk by
chunk with P cycles a chunk (`attenio.hdl.mac.score_period`: max(r, L_acc),
or about r with interleaved sub-sums), so read its S_j as P*d cycles;
`timing` publishes every latency the cycle model (`attenio.model.cyclemodel`)
needs.
"""

from dataclasses import dataclass

from amaranth.hdl import Module
from amaranth.lib import stream, wiring
from amaranth.lib.wiring import In, Out

from attenio import validate
from attenio.formats import Int8Format

from .formats import arith_of
from .kv_buffer import Kind, KVBuffer, feed_layout, row_layout, start_layout
from .mac import MAC, score_period
from .normalizer import Normalizer
from .pe_array import PEArray
from .replay import RowReplay
from .softmax import SoftmaxLane
from .widthconv import element_layout

__all__ = ["Kind", "feed_layout", "start_layout", "CoreTiming", "AttentionCore", "o_update_problem"]


@dataclass(frozen=True)
class CoreTiming:
    """The core's latencies, as its components build them (cycles).

    line_skew         a word at MAC 0 reaches the last MAC of its line this much later
    lane_rows         rows each lane reads per softmax pass: r*q/(L s)
    lane_latency      U_j may enter ``line_skew + lane_rows + lane_latency`` cycles
                      after the cycle following S_j's last word at the entry: the
                      score's product register (and the adder chain's stage when
                      s > 1), the lane's stages to its `ready` (the MACs' (up, e)
                      registers written), the array's register of all lanes' `ready`,
                      the replay's issue
    lane_busy_tail    a lane still has a row in flight this long after issuing its
                      last one (what `exp_active` shows)
    lane_start        the lanes' first row in flight, after the cycle at which S_j's
                      last word reaches the last MAC plus one (the line's start
                      register, the lane's run register)
    o_update_latency  the last V word at the last MAC to its O element written
    drain_start       the block's last V word at the last MAC to the drain's first issue
    normalizer_latency  a drain issue to its byte in the output FIFO
    drain_row         cycles the drain takes a row (`Normalizer.row_cycles`: d/F, F the
                      elements it finalizes a cycle; None without `head_dim`)
    row_issue         a row's launch to its first word at the array (the replay's issue):
                      also the cycle after the drain's last issue to the earliest entry
                      of the next block's first K word
    row_ready         a row's last element into the KV buffer to its earliest launch
    row_refill        the replay's release of a KV buffer half (its last word's issue) to
                      the half's first element of the next row
    score_period      cycles per chunk of a K row: r (slot by slot, int8) or
                      `attenio.hdl.mac.score_period` (chunk by chunk, the float formats'
                      accumulator loop: max(r, L_acc), or about r when interleaved);
                      a K row costs score_period*d/s cycles, a V row r*d/s
    feed_pad_rows     whether a partial Q block's rows past ``rows_valid`` come on the
                      feed (as zeros): they do not, the feed carries ``rows_valid * d`` Q
                      elements (the module docstring's ``feed``), so a Q load costs
                      ``rows_valid * d / s`` cycles
    """

    line_skew: int
    lane_rows: int
    lane_latency: int
    lane_busy_tail: int
    lane_start: int
    o_update_latency: int
    drain_start: int
    normalizer_latency: int
    drain_row: int | None
    row_issue: int
    row_ready: int
    row_refill: int
    score_period: int
    feed_pad_rows: bool

    @property
    def sm_latency(self):
        """L_sm: from the cycle after S_j's last word at the entry to U_j's earliest entry."""
        return self.line_skew + self.lane_rows + self.lane_latency

    @classmethod
    def of(cls, arith, *, macs_per_line, rows_per_mac, lanes, split=1, head_dim=None,
           interleave=True):
        """The timing of a core of format `arith` with `lanes` lanes per line of
        `macs_per_line` MACs in groups of `split`, `rows_per_mac` rows each, of head
        dimension `head_dim`, whose float MACs `interleave` their sums or not
        (`attenio.hdl.mac.score_sums`; `head_dim` is needed then). Nothing is
        elaborated."""
        issue = RowReplay.issue_latency(arith)
        loop = dict(head_dim=head_dim, interleave=interleave)
        score = MAC.score_latency(arith, split, rows_per_mac=rows_per_mac, **loop)
        return cls(
            line_skew=macs_per_line - 1,                 # one MAC a cycle along a line
            lane_rows=rows_per_mac * (macs_per_line // lanes // split),
            lane_latency=score + SoftmaxLane.ready_stage(arith) + PEArray.ready_latency + issue,
            lane_busy_tail=SoftmaxLane.stages(arith),
            lane_start=score + SoftmaxLane.start_latency,
            o_update_latency=MAC.update_latency(arith),
            drain_start=Normalizer.trigger_latency(arith),
            normalizer_latency=Normalizer.latency(arith),
            drain_row=(None if head_dim is None
                       else Normalizer.row_cycles(arith, split, head_dim)),
            row_issue=issue,
            row_ready=KVBuffer.row_latency,
            row_refill=KVBuffer.refill_latency,
            score_period=score_period(arith, rows_per_mac, split=split, **loop) or rows_per_mac,
            feed_pad_rows=False,
        )


def o_update_problem(timing, *, rows_per_mac, head_dim, split, banks):
    """Why U_j and U_(j+1) could read an O element before U_j's update of it is written
    (`timing` a `CoreTiming`), or None: they touch it at least max(r*d/s, L_sm + 1 - r*d/s)
    cycles apart with two banks (a K row between them, or the interlock after V(N-2)),
    r*d/s with more (the last B - 1 V rows of a block may follow each other), and the MAC
    writes it back `MAC.update_latency` cycles after reading it."""
    rd = rows_per_mac * head_dim // split
    gap = max(rd, timing.sm_latency + 1 - rd) if banks == 2 else rd
    if gap > timing.o_update_latency:
        return None
    return (f"an O element would be read before its update is written (r*d/s = {rd}, "
            f"L_sm = {timing.sm_latency}, {banks} banks; the update takes "
            f"{timing.o_update_latency} cycles)")


class AttentionCore(wiring.Component):
    """The compute core for `mac_lines` x `macs_per_line` MACs, a Q row split over `split`
    of them (a group; default 1), `rows_per_mac` rows per group, Q blocks of up to
    `block_rows` rows (default and at most r*p*q/s), head dimension `head_dim`, `exp_units` EXP lanes (E / p per line, dividing each line's
    MACs evenly: `validate.lanes_per_line`), hardware for up to `max_seq_len` keys,
    int8 format `fmt` (an `attenio.formats.Int8Format`). See the module docstring for
    the ports."""

    def __new__(cls, **params):
        # Checked before the object exists: a refused core is no unused elaboratable.
        cls._checked(**params)
        return super().__new__(cls)

    @staticmethod
    def _checked(*, mac_lines, macs_per_line, rows_per_mac, head_dim, exp_units, max_seq_len,
                 block_rows=None, fmt=None, split=1, banks=2):
        """(lanes per line, arith) of valid parameters; raises naming a bad one."""
        validate.positive("AttentionCore", rows_per_mac=rows_per_mac, head_dim=head_dim,
                          max_seq_len=max_seq_len)
        lanes = validate.lanes_per_line(exp_units=exp_units, mac_lines=mac_lines,
                                        macs_per_line=macs_per_line, owner="AttentionCore")
        validate.split("AttentionCore", split, head_dim=head_dim, macs_per_line=macs_per_line,
                       lanes=lanes)
        validate.integer("AttentionCore", "banks", banks, lo=2)
        if block_rows is not None:
            validate.integer("AttentionCore", "block_rows", block_rows, lo=1,
                             hi=rows_per_mac * mac_lines * macs_per_line // split)
        try:
            arith = arith_of(Int8Format() if fmt is None else fmt, max_seq_len=max_seq_len,
                             head_dim=head_dim)
        except TypeError:
            raise ValueError(f"AttentionCore: fmt must be an Int8Format or a FloatFormat, "
                             f"not {fmt!r}") from None
        timing = CoreTiming.of(arith, macs_per_line=macs_per_line, rows_per_mac=rows_per_mac,
                               lanes=lanes, split=split, head_dim=head_dim)
        problem = o_update_problem(timing, rows_per_mac=rows_per_mac, head_dim=head_dim,
                                   split=split, banks=banks)
        if problem:
            raise ValueError(f"AttentionCore: {problem}")
        return lanes, arith

    def __init__(self, *, mac_lines, macs_per_line, rows_per_mac, head_dim, exp_units,
                 max_seq_len, block_rows=None, fmt=None, split=1, banks=2):
        lanes, self._arith = self._checked(
            mac_lines=mac_lines, macs_per_line=macs_per_line, rows_per_mac=rows_per_mac,
            head_dim=head_dim, exp_units=exp_units, max_seq_len=max_seq_len,
            block_rows=block_rows, fmt=fmt, split=split, banks=banks)
        self._banks = banks
        self._p, self._q, self._r, self._d = mac_lines, macs_per_line, rows_per_mac, head_dim
        self._e, self._lanes, self._n, self._s = exp_units, lanes, max_seq_len, split
        groups = mac_lines * macs_per_line // split
        self._rows = rows_per_mac * groups if block_rows is None else block_rows
        super().__init__({
            "start": In(stream.Signature(start_layout(rows=self.rows, max_seq_len=max_seq_len))),
            "c": In(self._arith.c_shape),
            "feed": In(stream.Signature(feed_layout(split, self._arith.element_shape))),
            "o_out": Out(stream.Signature(element_layout(split, self._arith.out_shape))),
            "busy": Out(1),
            "pe_active": Out(1),
            "exp_active": Out(1),
            "row_wait": Out(1),
            "error": Out(1),
        })

    @classmethod
    def from_plan(cls, plan):
        """The core of a `attenio.plan.Plan` (its budget, mapping and int8 format)."""
        b, w = plan.budget, plan.workload
        return cls(mac_lines=b.mac_lines, macs_per_line=b.macs_per_line,
                   rows_per_mac=plan.rows_per_mac, block_rows=plan.a, head_dim=w.head_dim,
                   exp_units=b.exp_units, max_seq_len=w.max_keys, fmt=plan.config.format,
                   split=plan.split, banks=plan.banks)

    # -- read-only parameters -------------------------------------------------------------

    @property
    def arith(self):
        return self._arith

    @property
    def mac_lines(self):
        return self._p

    @property
    def banks(self):
        """Score and (P, alpha) banks, B: S runs B - 1 K rows ahead of U."""
        return self._banks

    @property
    def macs_per_line(self):
        return self._q

    @property
    def rows_per_mac(self):
        return self._r

    @property
    def split(self):
        """s, the MACs a Q row is split over."""
        return self._s

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
        """The largest Q block (`block_rows`)."""
        return self._rows

    @property
    def macs_per_lane(self):
        return self._q // self._lanes

    # -- timing ---------------------------------------------------------------------------

    @property
    def timing(self):
        """The latencies of the components this core builds (`CoreTiming`)."""
        return CoreTiming.of(self._arith, macs_per_line=self._q, rows_per_mac=self._r,
                             lanes=self._lanes, split=self._s, head_dim=self._d)

    @property
    def sm_latency(self):
        """L_sm: U_j's first word may enter the array L_sm + 1 cycles after S_j's last
        one at the earliest (see the module docstring)."""
        return self.timing.sm_latency

    @property
    def interlock_slack(self):
        """(B - 1)(P + r)*d/s - L_sm (B = `banks`, P = `CoreTiming.score_period`, r for
        int8): the cover of a row's softmax in the steady state is the B - 1 S and U rows
        between S_j and U_j. When negative, every U_j waits. With two banks that is by
        -slack/2 cycles per K/V row (two rows' softmaxes overlap U_(j-1) and S_(j+1)), and
        U_0 and U_(N-1) have at least r*d/s of cover each, so they wait at most
        L_sm - r*d/s cycles when that is positive."""
        cover = (self.timing.score_period + self._r) * self._d // self._s
        return (self._banks - 1) * cover - self.sm_latency

    # -- hardware ---------------------------------------------------------------------------

    def elaborate(self, platform):
        m = Module()
        p, q, r, d, s = self._p, self._q, self._r, self._d, self._s
        c_shape, element = self._arith.c_shape, self._arith.element_shape
        rows, banks = self._rows, self._banks
        m.submodules.kv_buffer = kv = KVBuffer(mac_lines=p, macs_per_line=q, rows_per_mac=r,
                                               block_rows=rows, head_dim=d, max_seq_len=self._n,
                                               c_shape=c_shape, split=s, element=element,
                                               banks=banks)
        m.submodules.replay = replay = RowReplay(
            row_layout=row_layout(rows=rows, mac_lines=p, macs_per_line=q, rows_per_mac=r,
                                  head_dim=d, c_shape=c_shape, max_seq_len=self._n, split=s,
                                  banks=banks),
            mac_lines=p, macs_per_line=q, rows_per_mac=r, block_rows=rows, head_dim=d,
            c_shape=c_shape, split=s, element=element, banks=banks,
            score_period=score_period(self._arith, r, head_dim=d, split=s), arith=self._arith)
        m.submodules.array = array = PEArray(arith=self._arith, mac_lines=p, macs_per_line=q,
                                             rows_per_mac=r, head_dim=d, exp_units=self._e,
                                             split=s, banks=banks)
        m.submodules.normalizer = norm = Normalizer(arith=self._arith, mac_lines=p,
                                                    macs_per_line=q, rows_per_mac=r,
                                                    block_rows=rows, head_dim=d, lanes=self._lanes,
                                                    split=s, banks=banks)

        # The ports wired by hand below have shapes each block builds from `banks`, `split`
        # and the rest: a block built with another would be truncated or padded silently.
        for a, b in ((array.wi, replay.word), (array.pick_next, replay.pick_next),
                     (replay.lanes_ready, array.ready), (array.consume, replay.consume),
                     (norm.tail, array.tail)):
            assert a.shape() == b.shape(), (a, b)

        wiring.connect(m, wiring.flipped(self.start), kv.start)
        wiring.connect(m, wiring.flipped(self.feed), kv.feed)
        wiring.connect(m, kv.row, replay.row)
        wiring.connect(m, replay.drain, norm.block)
        wiring.connect(m, norm.array, array.drain)
        wiring.connect(m, norm.o_out, wiring.flipped(self.o_out))
        m.d.comb += [
            kv.c.eq(self.c),
            kv.release.eq(replay.release),
            kv.rd_addr.eq(replay.rd_addr),
            replay.rd_data.eq(kv.rd_data),
            array.wi.eq(replay.word),
            array.pick_next.eq(replay.pick_next),
            array.c.eq(replay.c),
            array.mask.eq(replay.mask),
            replay.lanes_ready.eq(array.ready),
            array.consume.eq(replay.consume),
            norm.tail.eq(array.tail),
            self.busy.eq(kv.busy | replay.busy | norm.busy),
            self.pe_active.eq(replay.pe_active),
            self.exp_active.eq(array.exp_active),
            self.row_wait.eq(replay.starved & kv.filling),
            self.error.eq(kv.error),
        ]
        return m
