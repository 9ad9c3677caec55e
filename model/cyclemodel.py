"""The cycle model of the generated accelerator: the schedule of docs/microarchitecture.md, timed.

`simulate(plan)` walks the schedule of the microarchitecture contract for every
Q block of every head, on the memory of `attenio.model.memmodel`:

The Plan's mapping sets the pace: a Q row is split over s MACs (`Plan.split`,
s = 1: a MAC of its own), r rows per group of s MACs, and every row moves as
d/s chunks of s elements, one chunk a cycle (the "feed row" below).

* **Qload**: the block's rows enter the array one chunk per cycle (a*d/s feed
  cycles; a row of d elements is one read of the DMA; rows past N are fed as
  zeros and read nothing). It overlaps the previous block's O drain.
* **S_j / U_j**: the K_j (V_j) row replayed r times, r*d/s feed cycles each, in the
  order S0 S1 U0 S2 U1 ... S(N-1) U(N-2) U(N-1): scores one row ahead.
* **SM_j**: once the last MAC of a line has finished S_j (`line_skew` = q - 1
  cycles after the last feed cycle), each of the L = E/p lanes of a line reads
  its r*q/(L s) rows, one per cycle, and writes (P, alpha) back `lane_latency`
  cycles later. U_j may not enter before SM_j has written its last row (the
  only interlock). With L_sm = q - 1 + r*q/(L s) + lane_latency: SM_0 hides behind
  S_1 alone and SM_(N-1) behind U_(N-2) alone, so those two U phases of a block
  stall when L_sm > r*d/s (the doc's condition); every other SM_j hides behind
  U_(j-1) and S_(j+1), so the steady state stalls only when L_sm > 2*r*d/s, by
  (L_sm - 2*r*d/s)/2 cycles a K/V row (the wait of U_(j-1) is also hidden under).
  E must be L * p with L dividing q (`attenio.validate.lanes_per_line`): the model
  refuses other budgets as the RTL does.
* **O drain**: after U(N-1) the block's valid rows are normalized, `drain_row`
  cycles a row (valid*d/F cycles plus `normalizer_latency`) and written out, while
  the next block loads. S_0 of the next block waits until the drain has read
  the last O and l (SM_0 and U_0 would overwrite them), as the replay does.
* **Memory**: the DMA reads the rows in the order the feed consumes them (Q
  rows, K0, K1, V0, K2, V1, ..., V(N-1), next block's Q rows, ...), at most
  `Plan.kv_depth` rows ahead: row k is requested when row k - depth has left the
  read FIFO, and a block's first rows not before the core has taken the block's
  command (`_Machine._row`). A row fills the KV buffer one chunk per cycle
  once its first beat is through and its half of the buffer is free; a phase
  starts when its row is in; the cycles it waits for memory while no lane
  computes are `mem_stall`. O is written through the link's idle time
  (`attenio.model.memmodel.Link`).

Counters (the CSR block's): `cycles`, `pe_busy` (feed cycles of S and U; Qload
excluded), `exp_busy` (cycles in which at least one lane has a row in flight),
`mem_stall`, `bytes_read`, `bytes_written` (equal to the Plan's traffic exactly);
and the model's own `interlock_stall` (feed cycles spent waiting for SM_j) and
`drain_wait` (S_0 waiting for the previous block's drain).

Two walks, one answer. The event walk steps every phase; the fast walk steps
the same code but, inside a run of identical steps (the Q rows of a block, the
(S_j, U_(j-lead)) pairs, identical blocks), remembers the machine's state relative
to the feed's clock after each step (up to `PERIOD_WINDOW` of them). Once one
repeats the machine is periodic: every further step shifts every
time by the same period and adds the same counts, so the walk jumps over whole
periods in closed form (t += m * period, counters += m * increment) and steps
only the warm-up and the tail of each run exactly. Times the future cannot see
any more (a lane interval already over, an arrival already past) are clamped
to "now" in the state, so stale values do not hide the period. The tests hold
the two walks to exact equality.

RTL agreement. The model's clock is the RTL's: cycle 0 is the controller's LAUNCH
cycle, a phase's time is when its first word enters the array. Every latency
comes from the hardware the Plan generates (`RtlParams.of`), and on a memory the
model describes exactly (the in-design memory model: fixed latency, one beat per
cycle each way) `model_counters` equals the generated design's CSR counters, every
one of them (tests/test_rtl_timing.py). On AxiRam with random stalls it is an
estimate.

Causal masking (`causal`, default the workload's; the RTL's MODE.CAUSAL): K/V row j
is needed only by Q rows >= j, and with b = 1 a Q block stops after the K/V row of
its last row, the short block first (`attenio.analysis.q_blocks`): a block streams
the K/V rows up to its last row, so both cycles and K/V traffic shrink. Rows inside
the diagonal block are masked in the lanes (P = 0) at no cost. The short block's size
is derived by the controller before LAUNCH, so it costs no counted cycle. Blocks of
equal length are jumped over as one run, so a run without the mask takes the same time
at any N; causal blocks all differ, and the model walks them one by one, at most
`MAX_WALKED_BLOCKS` a pass (about a quarter of a millisecond each).

Query rows apart from key rows (`kv_len`, the RTL's KV_LEN): every block streams N_kv
K/V rows, causal ones up to `causal_limit(last row, N, N_kv)` (rows aligned at the
end). Query heads that share a K/V head (HEAD_GROUP) only read other addresses, unless a
block serves the whole group (`grouped`, MODE.GROUPED): then a pass's blocks hold a div g
rows of each of its g heads, and there are heads / g passes.
"""

from collections import deque
from dataclasses import dataclass, field

from attenio.analysis import block_runs, key_rows
from attenio.errors import ConfigError
from attenio.plan import run_kv_len
from attenio.regmap import descriptor_stride, table_beats

from .memmodel import Link, Memory
from .rtl_params import RtlParams

__all__ = ["RtlParams", "Mapping", "Result", "simulate", "model_counters", "batch_counters",
           "COUNTER_KEYS",
           "MAX_WALKED_BLOCKS"]

COUNTER_KEYS = ("cycles", "pe_busy", "exp_busy", "mem_stall", "bytes_read", "bytes_written")

#: Q blocks of distinct lengths (causal masking) the model walks in one pass at most:
#: a few seconds a mapping; past it `simulate` refuses rather than run for hours.
MAX_WALKED_BLOCKS = 1 << 14


@dataclass(frozen=True)
class Mapping:
    """How the Plan's Q block sits on the array (`Plan.split`, `Plan.rows_per_mac`)."""

    a: int
    d: int
    split: int          # s MACs per Q row
    rows_per_mac: int   # r: Q rows per MAC group (slots)
    feed_row: int       # cycles one K/V (or Q) row takes on the feed: d / s chunks
    phase: int          # cycles of U_j (and of S_j, slot by slot): r * feed_row
    s_phase: int        # cycles of S_j: score_period * feed_row (the float formats' idle
                        # slots included)
    s_tail: int         # idle cycles after S_j's last word: score_period - r
    lane_rows: int      # rows each lane handles per SM (`RtlParams.lane_rows`)
    skew: int           # cycles from a word at MAC 0 to the line's last MAC (`line_skew`)
    macs: int           # P
    lanes: int          # E
    depth: int          # rows the DMA may read ahead (the Plan's kv_depth)

    @classmethod
    def of(cls, plan, params=None):
        params = params or RtlParams.of(plan)
        b, d, s = plan.budget, plan.workload.head_dim, plan.split
        feed_row = d // s
        r = plan.rows_per_mac
        period = params.score_period or r
        return cls(a=plan.a, d=d, split=s, rows_per_mac=r, feed_row=feed_row,
                   phase=r * feed_row, s_phase=period * feed_row, s_tail=period - r,
                   lane_rows=params.lane_rows, skew=params.line_skew,
                   macs=b.macs, lanes=b.exp_units, depth=plan.kv_depth)


@dataclass
class Result:
    """Counters of one run and the ratios derived from them."""

    cycles: int = 0
    pe_busy: int = 0
    exp_busy: int = 0
    mem_stall: int = 0
    interlock_stall: int = 0
    drain_wait: int = 0         # S_0 waiting for the previous block's drain to read O and l
    bytes_read: int = 0
    bytes_written: int = 0
    useful_macs: int = 0        # MAC operations on valid, unmasked rows
    exps: int = 0               # exp2 evaluations (P and alpha per valid row and K/V row)
    macs: int = 0
    exp_units: int = 1
    mapping: Mapping | None = field(default=None, repr=False)

    @property
    def pe_util(self):
        """Fraction of cycles in which the array computes (an element entered it)."""
        return self.pe_busy / self.cycles if self.cycles else 0.0

    @property
    def spatial_util(self):
        """Of the MACs' busy cycles, the share doing useful work (valid rows / (r P))."""
        return self.useful_macs / (self.macs * self.pe_busy) if self.pe_busy else 0.0

    @property
    def mac_efficiency(self):
        """Useful MAC operations / (P * cycles): time times spatial utilization."""
        return self.useful_macs / (self.macs * self.cycles) if self.cycles else 0.0

    @property
    def exp_util(self):
        return self.exp_busy / self.cycles if self.cycles else 0.0

    @property
    def exp_work_util(self):
        """exp2 evaluations / (E * cycles): how much of the EXP units' capacity is used."""
        return self.exps / (self.exp_units * self.cycles) if self.cycles else 0.0

    @property
    def stall_fraction(self):
        return self.mem_stall / self.cycles if self.cycles else 0.0

    def counters(self):
        return {k: getattr(self, k) for k in COUNTER_KEYS}

    def to_dict(self):
        d = {k: getattr(self, k)
             for k in COUNTER_KEYS + ("interlock_stall", "drain_wait", "useful_macs", "exps")}
        d.update(pe_util=self.pe_util, spatial_util=self.spatial_util,
                 mac_efficiency=self.mac_efficiency, exp_util=self.exp_util,
                 exp_work_util=self.exp_work_util, stall_fraction=self.stall_fraction)
        if self.mapping is not None:
            d.update(split=self.mapping.split, rows_per_mac=self.mapping.rows_per_mac,
                     phase_cycles=self.mapping.phase)
        return d


_COUNT = ("pe_busy", "exp_busy", "mem_stall", "interlock_stall", "drain_wait", "bytes_read",
          "bytes_written")


class _Machine:
    """The state of the accelerator between phases; every time is an absolute cycle."""

    def __init__(self, m, mem, params, row_bytes, depth, total_rows, out_bytes):
        self.m, self.params = m, params
        self.row_bytes, self.depth, self.total = row_bytes, depth, total_rows
        self.out_bytes = out_bytes          # bytes of one O row
        t0 = params.feed_start
        self.t = t0                         # first cycle the feed is free
        self.link = Link(mem, start=params.read_start)
        self.k_cons = 0
        self.sm = [(t0, t0), (t0, t0)]      # the last two lane-busy intervals [start, end)
        self.sm_read_end = t0               # a lane may start the next SM from here
        self.pending = deque()              # SM done of the S rows whose U is still to run
        self.drain_end = t0                 # the drain has read the last O and l
        self.done_floor = t0
        # The feed path (see `_row`): when the last `depth` rows' last beats left the
        # read FIFO, when the last two rows' phases ended, when the KV buffer may take
        # the next row's first element, and the sequencer's command bound
        self.pops = deque()
        self.ends = deque([t0, t0], maxlen=2)
        self.fill_free = t0
        self.cmd = [params.read_start, depth]    # [next command's earliest issue, left]
        mem = self.link.mem
        self.xfer = mem.transfer_cycles(row_bytes)
        self.first_beat = -(-min(mem.axi_bytes, row_bytes) // mem.rate)
        beat_elems = min(mem.axi_bytes, row_bytes) * m.feed_row // row_bytes
        self.beat_fill = max(1, beat_elems)      # fill cycles of one beat
        self.beats = -(-row_bytes // mem.axi_bytes)
        self.c = dict.fromkeys(_COUNT, 0)
        self.table_floor = None     # paged: the block's first K read not before this
        self.k_floor = None         # ... armed for the next row read (`s_first`)

    def table_read(self, beat_bytes):
        """Paged K/V: a block's first table beat, read before its Q rows (one command); the
        block's first K row waits for it (`table_turn`)."""
        issue = self.cmd[0] if self.cmd[1] else self.t
        arrival = self.link.read(issue, beat_bytes)
        self.c["bytes_read"] += beat_bytes
        if self.cmd[1]:
            self.cmd = [self.cmd[0] + 1, self.cmd[1]]
        self.table_floor = arrival - 1 + self.params.table_turn

    # --- the feed path -----------------------------------------------------------
    def _row(self):
        """The next row's read, fill and usable time, as the RTL moves it.

        The DMA requests a row when the read FIFO has room for it (`depth` rows): when
        the row `depth` before it has left the FIFO, or, for the first rows of a run
        or of a block, when the read sequencer has its command out (the sequencer
        hands the core a block's command before its reads, and the core takes it when
        the previous block's feed is complete). The row fills the KV buffer one
        element a cycle once its first beat is through and its half of the buffer is
        free (the row two before it has been replayed); the replay may launch it
        `row_ready` cycles after its last element, and its first word is at the array
        `row_issue` cycles after the launch. A row leaves the FIFO with its last beat:
        when the link brings it, or, while the KV buffer sets the pace, `feed_lead`
        cycles before the buffer takes the beat before it (the feed's register slice
        between them holds two elements). Times: the model's clock, on which a read
        issued at t has its last byte at the link's arrival time
        (`attenio.model.memmodel.Link`)."""
        p, fill = self.params, self.m.feed_row
        issue = self.cmd[0] if self.cmd[1] else 0
        if self.k_floor is not None:
            issue = max(issue, self.k_floor)
            if self.cmd[1]:     # the commands after it follow it
                self.cmd = [max(self.cmd[0], self.k_floor), self.cmd[1]]
            self.k_floor = None
        if len(self.pops) == self.depth:
            issue = max(issue, self.pops.popleft() + p.room_issue)
        if self.cmd[1]:
            self.cmd = [self.cmd[0] + 1, self.cmd[1] - 1]
        arrival = self.link.read(issue, self.row_bytes)
        self.c["bytes_read"] += self.row_bytes
        first_elem = arrival - self.xfer + self.first_beat - p.row_issue
        # the half is free `row_refill` cycles after the last word's issue of the row two
        # before it
        start = max(first_elem, self.ends[0] - p.row_issue + p.row_refill, self.fill_free)
        self.fill_free = start + fill
        self.pops.append(max(start + (self.beats - 1) * self.beat_fill - 1 - p.feed_lead,
                             arrival - p.beat_leave))
        last_elem = max(start + fill - 1, arrival + self.beat_fill - p.row_issue - 1)
        return last_elem + p.row_ready + p.row_issue

    def _new_block(self):
        """A block's last V row is in the KV buffer: the core takes the next block's
        command, and the sequencer issues that block's commands from then on."""
        p = self.params
        accepted = self.fill_free
        self.fill_free = accepted + p.block_fill
        self.cmd = [accepted + p.block_command, self.depth]

    def _lane_free(self, a, b):
        """Cycles of [a, b) in which no lane is busy."""
        if b <= a:
            return 0
        busy, lo = 0, a
        for s, e in sorted(self.sm):
            s, e = max(s, lo), min(e, b)
            if e > s:
                busy += e - s
                lo = e
        return b - a - busy

    # --- the feed ---------------------------------------------------------------
    def _phase(self, length, row, interlock, busy, wait="interlock_stall"):
        """A phase of `length` cycles, `busy` of them with words in the array."""
        t = self.t
        ready = max(t, interlock)
        if row:
            arr = self._row()
            start = max(ready, arr)
            # the replay waits for the row until it launches it, `row_issue` before its
            # first word reaches the array
            self.c["mem_stall"] += self._lane_free(t, arr - self.params.row_issue)
            self.k_cons += 1
        else:
            start = ready
        if interlock > t:
            self.c[wait] += min(interlock, start) - t
        self.t = start + length
        if row:
            self.ends.append(self.t)
        self.c["pe_busy"] += busy

    def _softmax(self):
        """SM of the S phase that just ended; returns when its last row is written."""
        m = self.m
        s = max(self.t - m.s_tail + m.skew, self.sm_read_end, self.drain_end)
        done = s + m.lane_rows + self.params.lane_latency
        # the lanes show busy from their first row's issue
        busy = s + self.params.lane_start
        busy_end = busy + m.lane_rows + self.params.lane_busy_tail
        self.c["exp_busy"] += max(0, busy_end - max(busy, self.sm[1][1]))
        self.sm = [self.sm[1], (busy, max(busy_end, self.sm[1][1]))]
        # the next pass may start when this one has issued its rows, and lane_busy_tail + 1
        # cycles after this one at the earliest (it reads the m and l this one writes)
        self.sm_read_end = s + max(m.lane_rows, self.params.lane_busy_tail + 1)
        return done

    # --- steps --------------------------------------------------------------------
    def q_row(self):
        self._phase(self.m.feed_row, True, self.t, 0)

    def q_pad(self, rows):
        self._phase(rows * self.m.feed_row, False, self.t, 0)

    def s_first(self):
        # the previous block's drain must have read its O and l first
        m = self.m
        self.k_floor, self.table_floor = self.table_floor, None
        self._phase(m.s_phase, True, self.drain_end, m.phase, "drain_wait")
        self.pending.append(self._softmax())

    def s_ahead(self):
        """S_j with no U after it: the first lead rows of a block."""
        m = self.m
        self._phase(m.s_phase, True, self.t, m.phase)
        self.pending.append(self._softmax())

    def pair(self):
        """S_j then U_(j - lead)."""
        self.s_ahead()
        self.u_next()

    def u_next(self):
        """U of the oldest S row, once the lanes have written its (P, alpha)."""
        self._phase(self.m.phase, True, self.pending.popleft(), self.m.phase)

    def u_last(self):
        self.u_next()
        self._new_block()

    def block_end(self, valid):
        m, p = self.m, self.params
        drain_start = self.t + m.skew + p.drain_start
        drain_last = drain_start + valid * p.drain_row - 1  # its last read of O and l
        self.drain_end = drain_last + 1 + p.row_issue       # the next S_0 may enter
        self.link.write(drain_start, valid * self.out_bytes)
        self.c["bytes_written"] += valid * self.out_bytes
        self.done_floor = max(self.done_floor, drain_last + p.normalizer_latency
                              + self.link.mem.write_latency + p.write_tail)
        self.t += p.block_gap

    def finish(self):
        end = max(self.t, self.done_floor)
        if self.c["bytes_written"]:
            # the link's last write data, when writes queue behind reads
            end = max(end, self.link.flush() + self.link.mem.write_latency + self.params.write_tail)
        return end

    # --- periodicity --------------------------------------------------------------
    def snapshot(self, frozen=False):
        """The state relative to the feed's clock; `frozen` leaves out the drain's
        end and the done floor, which steps of the Qload never read."""
        t = self.t
        clamp = lambda x: max(x - t, 0)
        free, debt = self.link.snapshot(t)
        if not debt:    # every later read is issued at >= t: max(t + latency, free)
            free = max(free, self.link.mem.latency)
        return (free, debt, tuple(x - t for x in self.pops), tuple(x - t for x in self.ends),
                self.fill_free - t, self.cmd[0] - t if self.cmd[1] else None,
                tuple((clamp(s), clamp(e)) for s, e in self.sm),
                clamp(self.sm_read_end), tuple(clamp(x) for x in self.pending),
                None if frozen else clamp(self.drain_end),
                None if frozen else clamp(self.done_floor),
                None if self.table_floor is None else self.table_floor - t)

    def mark(self, frozen=False):
        return self.snapshot(frozen), self.t, dict(self.c), self.k_cons

    def jump(self, old, new, times, frozen=False):
        """Repeat the period between marks `old` and `new` `times` more times."""
        dt = (new[1] - old[1]) * times
        dk = (new[3] - old[3]) * times
        self.t += dt
        self.link.shift(dt)
        self.pops = deque(x + dt for x in self.pops)
        self.ends = deque((x + dt for x in self.ends), maxlen=2)
        self.fill_free += dt
        self.cmd = [self.cmd[0] + dt, self.cmd[1]]
        self.sm = [(s + dt, e + dt) for s, e in self.sm]
        self.sm_read_end += dt
        self.pending = deque(x + dt for x in self.pending)
        if self.table_floor is not None:
            self.table_floor += dt
        if not frozen:
            self.drain_end += dt
            self.done_floor += dt
        self.k_cons += dk
        for k in _COUNT:
            self.c[k] += (new[2][k] - old[2][k]) * times


#: States `_repeat` remembers while it looks for a period: any period of up to this many
#: steps is found (B banks make periods of B steps and more; a bounded window of the last
#: few steps once missed a period of 5 and walked every K row of N = 2^32).
PERIOD_WINDOW = 4096


def _repeat(mc, count, step, fast, rows_per_step, frozen=False):
    """Run `step` `count` times; in fast mode jump over whole periods once periodic.

    The machine is periodic once its state relative to the feed's clock repeats: the
    steps in between then repeat forever. `frozen`: the steps never read the drain's
    end or the done floor (Qload rows), so those stay where they are while the clock
    jumps.
    """
    i, seen = 0, {}
    while i < count:
        step()
        i += 1
        if not fast or count - i < 2:
            continue
        mark = mc.mark(frozen)
        before = seen.get(mark[0])
        if before is None:
            if len(seen) >= PERIOD_WINDOW:
                seen.clear()
            seen[mark[0]] = (i, mark)
            continue
        p = i - before[0]
        # leave the stream's end (no more reads to issue) to the exact walk
        room = mc.total - mc.k_cons - rows_per_step * (p + 2) - mc.depth
        times = (count - i - 1) // p
        if rows_per_step:
            times = min(times, max(0, room // (rows_per_step * p)))
        if times > 0:
            mc.jump(before[1], mark, times, frozen)
            i += times * p
        seen.clear()


def _blocks(plan, n, causal, n_kv=None, gb=1):
    """[(valid rows, K/V rows, blocks)] runs of the Q blocks of one pass, in run order: N_kv
    keys (default N) a block, causal ones up to the block's last row. A pass serves `gb`
    query heads (MODE.GROUPED: a div gb rows of each a block), one head otherwise."""
    out = []
    for _, rows, keys, count, step in block_runs(n, plan.a // gb, causal=causal, n_kv=n_kv):
        if not step:
            out.append((gb * rows, keys, count))
            continue
        if count > MAX_WALKED_BLOCKS:
            raise ConfigError(
                f"the cycle model walks causal Q blocks one by one, at most "
                f"{MAX_WALKED_BLOCKS:,} a pass; N = {n:,} in blocks of {plan.a // gb} rows "
                f"makes {count:,} (plan a shorter N, or without the causal mask)")
        out += [(gb * rows, keys + i * step, 1) for i in range(count)]
    return out


def _useful(plan, n, causal, n_kv=None, gb=1):
    """Useful MACs of one query head and exp2 evaluations of one pass of `gb` heads."""
    d = plan.workload.head_dim
    n_kv = n if n_kv is None else n_kv
    # (Q row, K/V row) pairs kept: causal row i sees causal_limit(i, n, n_kv) keys
    keys = n * (n + 1) // 2 + n * (n_kv - n) if causal else n * n_kv
    # the lanes still evaluate every row of the diagonal block (masked to P = 0)
    evals = gb * key_rows(n, plan.a // gb, causal=causal, n_kv=n_kv, weight_rows=True)
    return 2 * d * keys, 2 * evals


def simulate(plan, *, seq_len=None, heads=None, causal=None, params=None, fast=True,
             memory=None, kv_len=None, grouped=None, group=None, blocks=None):
    """Run the schedule of `plan` for `seq_len` query rows and `kv_len` key rows (each <= the
    Plan's max_keys; kv_len's default: `attenio.plan.run_kv_len`) and `heads` query heads,
    with or without causal masking (default: the workload's), on `memory` (an
    `attenio.model.memmodel.Memory`; default: the budget's link, `Memory.of`). Which K/V
    head a query head reads does not change the time; whether a block serves the `group`
    query heads of a K/V head (`grouped`, MODE.GROUPED; defaults: the Plan's and the
    workload's g) does: a pass of a Q block's rows then covers them all, heads / g passes.
    `blocks` (first, count): only those Q blocks of each pass (Q_BLOCK_FIRST, Q_BLOCK_COUNT),
    which the hardware runs as the run of their rows (`attenio.plan.Plan.block_range`)."""
    if blocks is not None:
        n = plan.workload.seq_len if seq_len is None else seq_len
        r = plan.block_range(*blocks, seq_len=n, causal=causal, kv_len=kv_len, grouped=grouped,
                             group=group)
        seq_len, kv_len = r.rows, r.n_kv
    params = params or RtlParams.of(plan)
    causal = plan.workload.causal if causal is None else causal
    w, b = plan.workload, plan.budget
    n = w.seq_len if seq_len is None else seq_len
    h = w.heads if heads is None else heads
    n_kv = run_kv_len(w, n, kv_len)
    for name, v in (("seq_len", n), ("heads", h), ("kv_len", n_kv)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"simulate: {name} must be a positive integer, not {v!r}")
        if name != "heads" and v > w.max_keys:
            raise ValueError(f"simulate: {name} {v} exceeds the Plan's N = {w.max_keys}")
    if causal and n_kv < n:
        raise ValueError(f"simulate: causal attention needs kv_len >= seq_len, not {n_kv} < {n}")
    m = Mapping.of(plan, params)
    eb = plan.config.format.element_bytes
    page_rows, beat_bytes = b.page_rows, b.axi_data_bits // 8
    mem = memory or Memory.of(b)
    grouped = plan.grouped if grouped is None else grouped
    gb = (group or w.group) if grouped else 1
    if gb > plan.a or h % gb:
        raise ValueError(f"simulate: blocks serving {gb} heads need a = {plan.a} >= {gb} and "
                         f"heads = {h} a multiple of it")
    passes = h // gb
    blocks = _blocks(plan, n, causal, n_kv, gb)    # of one pass; every pass is the same
    per_head = sum((v + 2 * k) * count for v, k, count in blocks)
    mc = _Machine(m, mem, params, m.d * eb, m.depth, per_head * passes,
                  m.d * plan.config.format.out_bytes)

    def run_block(valid, kv):
        # S runs `lead` rows ahead of U (bank j mod B holds S_j until U_j): lead S rows,
        # then pairs (S_j, U_(j - lead)), then the last lead U rows
        lead = min(params.banks - 1, kv)
        if page_rows:
            mc.table_read(beat_bytes)
            # the block's later table beats, each read a page run ahead of its use
            mc.c["bytes_read"] += (table_beats(kv, page_rows, beat_bytes) - 1) * beat_bytes
        _repeat(mc, valid, mc.q_row, fast, 1, frozen=True)
        if plan.a > valid and params.feed_pad_rows:
            mc.q_pad(plan.a - valid)
        mc.s_first()
        _repeat(mc, lead - 1, mc.s_ahead, fast, 1)
        _repeat(mc, kv - lead, mc.pair, fast, 2)
        _repeat(mc, lead - 1, mc.u_next, fast, 1)
        mc.u_last()
        mc.block_end(valid)

    def run_head():
        for valid, kv, count in blocks:
            _repeat(mc, count, lambda: run_block(valid, kv), fast, valid + 2 * kv)

    _repeat(mc, passes, run_head, fast, per_head)
    res = Result(cycles=mc.finish(), macs=b.macs, exp_units=b.exp_units, mapping=m, **mc.c)
    useful, exps = _useful(plan, n, causal, n_kv, gb)
    res.useful_macs, res.exps = useful * h, exps * passes
    return res


def model_counters(plan, *, seq_len=None, heads=None, causal=None, params=None, memory=None,
                   kv_len=None, grouped=None, group=None, blocks=None):
    """The CSR counters the RTL should report for a run of `plan` at runtime N, N_kv and
    heads, with or without causal masking (default: the workload's).

    Keys: cycles, pe_busy, exp_busy, mem_stall, bytes_read, bytes_written; equal to the
    generated design's counters on a memory the model describes exactly (`memory`).
    `blocks` (first, count): a launch of those Q blocks of each pass (`simulate`).
    """
    return simulate(plan, seq_len=seq_len, heads=heads, causal=causal, params=params,
                    memory=memory, kv_len=kv_len, grouped=grouped, group=group,
                    blocks=blocks).counters()


def batch_counters(plan, seqs, *, heads, group=1, grouped=False, params=None, memory=None):
    """The CSR counters of a batch of `seqs` (`attenio.plan.BatchSequence`) in one launch
    (DESC_COUNT): each sequence's run as `model_counters` times it, one after the other,
    and between two runs the controller's turn to the next descriptor (`batch_turn`)."""
    total = dict.fromkeys(COUNTER_KEYS, 0)
    for s in seqs:
        c = model_counters(plan, seq_len=s.seq_len, heads=heads, causal=s.causal,
                           params=params, memory=memory, kv_len=s.kv_len, grouped=grouped,
                           group=group)
        for k in COUNTER_KEYS:
            total[k] += c[k]
    mem = memory or Memory.of(plan.budget)
    total["cycles"] += (len(seqs) - 1) * batch_turn(plan, params=params, memory=mem)
    total["bytes_read"] += len(seqs) * descriptor_stride(plan.budget.axi_data_bits // 8)
    return total


def batch_turn(plan, *, params=None, memory=None):
    """Counted cycles between two runs of a batch: from one run's end to the next one's
    LAUNCH (the next descriptor's read, the check and the setup)."""
    params = params or RtlParams.of(plan)
    mem = memory or Memory.of(plan.budget)
    desc = descriptor_stride(plan.budget.axi_data_bits // 8)
    return params.desc_turn + mem.latency + mem.transfer_cycles(desc) - 1
