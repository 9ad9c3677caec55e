"""The Plan: the I/O-optimal tiling of one configuration, with everything the hardware reserves.

`make_plan(config)` starts from the analysis' optimum (b = 1, the largest Q block
a that fits) and then counts what the real hardware keeps on chip, at the widths
it really has:

=====================  ==========================  ===========================================
item                   size                        why
=====================  ==========================  ===========================================
Q block                a x d x element             resident for the whole block
O accumulators         a x d x o_acc bits          wide enough for the largest N
score registers        2 x a x score bits          scores of K_{j+1} while the softmax of j runs
m, l                   a x their widths            the element-wise softmax state
P, alpha               2 x a x their widths        double-buffered like the scores; or, where
                                                   the format sends them as one (up, e) pair
                                                   (`DatapathWidths.up_e`), 2 x a pairs
K/V staging            depth x d x element         prefetched rows, depth from latency and rate
KV buffer              2 x d x element             one row feeding the array, one filling
=====================  ==========================  ===========================================

The KV buffer lives in its own budget (`kv_buffer_bytes`); whatever of it does
not fit there is taken from the cache and reported. The next Q block is loaded
straight into the PE-local Q storage once the last scores of the current block
are done (overlap level 3), so it needs no second Q buffer.

The mapping. A Q row lives in a group of s adjacent MACs of a line (`split`; s = 1
is one MAC a row): for Q K_j^T each MAC of the group accumulates d/s products and
the group adds its s partial sums into the row's score; for P V_j each owns d/s
columns of the row's O. The P = p x q MACs make G = P / s groups, each holding r
rows (`rows_per_mac`, its slots). A K/V row then takes r d / s cycles a pass, so
rows are consumed s times faster and the K/V staging deepens with s.

The a that fits is then rounded to suit the groups: a is a multiple r x G when
a >= G (rounded up if that still fits, else down), else every row gets a group of
its own and G - a groups idle. What the rounding costs in traffic is kept beside
the plan (`traffic_unrounded`), and so is what a split's a costs against the a of
s = 1 (`traffic_unsplit`): a wide split may round a well below the I/O optimum, and
the planner (`attenio.model.planner`) weighs that against the MACs it fills. The
planner may also take fewer rows a group than fit (`rows_options`): every K/V pass
costs r d / s cycles whether or not the last block's rows exist, so when N is not a
multiple of a, the fewest rows that keep the number of blocks do the same work in
fewer cycles, and a few more blocks of a smaller a can beat a partial one.

Which s are possible is the split rule's to say (`attenio.validate.split_breaks`: d,
the MACs of one EXP lane and the AXI beat); `split_problem` words it for a
configuration.
"""

from dataclasses import asdict, dataclass, fields
from math import ceil, isqrt

from . import validate
from .analysis import (attention_bound, attention_io, attention_optimum, block_range, block_runs,
                       grouped_blocks_win, key_rows)
from .config import Config
from .errors import ConfigError
from .formats import FloatFormat
from .regmap import TABLE_ENTRY_BYTES, descriptor_stride, table_beats
from .traffic import Traffic, Transfer

__all__ = ["BANKS", "Reservation", "Candidate", "MappingChoice", "Plan", "make_plan", "attenio_traffic",
           "run_kv_len", "wins_grouped", "table_entries_read", "BatchSequence",
           "batch_traffic", "cache_bytes_used",
           "kv_prefetch_depth", "split_problem", "check_split", "valid_splits", "rows_problem",
           "rows_options"]


@dataclass(frozen=True)
class Reservation:
    """`count` values of `bits` bits each, held in `where` ("cache" or "kv_buffer")."""

    item: str
    where: str
    count: int
    bits: int
    why: str

    @property
    def bytes(self):
        return ceil(self.count * self.bits / 8)


def split_problem(config, split):
    """Why `split` MACs cannot share a Q row on this configuration (`validate.split_breaks`,
    in words), or None if they can."""
    w, b, fmt = config.workload, config.budget, config.format
    try:
        validate.integer("mapping", "split", split, lo=1, error=ConfigError)
    except ConfigError as exc:
        return str(exc)
    d, q = w.head_dim, b.macs_per_line
    try:
        lanes = validate.lanes_per_line(exp_units=b.exp_units, mac_lines=b.mac_lines,
                                        macs_per_line=q, owner=f"mapping: split {split}",
                                        error=ConfigError)
        lane_macs, no_lanes = q // lanes, None
    except ConfigError as exc:
        # EXP units that map onto no lanes: only a group of one MAC never straddles two
        lanes, lane_macs, no_lanes = None, 1, str(exc)
    beat = b.axi_data_bits // 8
    # the feed's chunks of Q, K, V and the normalizer's of O (fp8's O is twice as wide)
    widest = max(fmt.element_bytes, fmt.out_bytes)
    broken = validate.split_breaks(split, head_dim=d, lane_macs=lane_macs,
                                   element_bytes=widest, beat_bytes=beat)
    if broken == "head_dim":
        return f"mapping: split {split} must divide the head dimension d = {d}"
    if broken == "lane":
        return no_lanes or (
            f"mapping: split {split} must divide the {lane_macs} MACs of one EXP lane "
            f"({q} MACs a line over {lanes} lane(s)), so no MAC group straddles two lanes")
    if broken == "beat":
        what = fmt.name if widest == fmt.element_bytes else f"{fmt.name}'s O"
        return (f"mapping: split {split} feeds chunks of {split * widest} bytes of "
                f"{what} a cycle, which must divide the {b.axi_data_bits}-bit AXI beat "
                f"({beat} bytes)")
    return None


def check_split(config, split):
    """`split` if it is a possible s for `config`; raises ConfigError naming the rule if not."""
    problem = split_problem(config, split)
    if problem:
        raise ConfigError(problem)
    return split


def valid_splits(config):
    """Every possible s of `config`, smallest first (1 always is). An s divides the MACs of
    a line (`validate.split_breaks`), so only those divisors are tried."""
    q = config.budget.macs_per_line
    divisors = sorted({x for i in range(1, isqrt(q) + 1) if q % i == 0 for x in (i, q // i)})
    return tuple(s for s in divisors if split_problem(config, s) is None)


def kv_prefetch_depth(config, split=1):
    """Rows of K or V staged in the cache so the array never waits for a row.

    A row is consumed in d/s cycles at the fastest (one row per MAC group); a
    request takes `latency_cycles` plus the row's transfer time to arrive, so that
    many rows must be in flight ahead of the one in use. Never below 2 (double buffer).
    """
    check_split(config, split)
    w, b = config.workload, config.budget
    row_bytes = w.head_dim * config.format.element_bytes
    arrival = b.latency_cycles + ceil(row_bytes / b.bw_bytes_per_cycle)
    return max(2, 1 + ceil(arrival / (w.head_dim // split)))


#: Score and (P, alpha) banks of a Plan unless the planner weighs more: S_(j+1) is computed
#: while the lanes turn S_j into (P, alpha).
BANKS = 2


def reservations(config, a, depth, banks=BANKS):
    """Every on-chip reservation for Q blocks of `a` rows and `banks` score and (P, alpha)
    banks."""
    d = config.workload.head_dim
    n = config.workload.max_keys
    wd = config.format.datapath(max_seq_len=n, head_dim=d)
    el = wd.element
    kv_bits = 2 * d * el
    kv_in_buffer = min(kv_bits, 8 * config.budget.kv_buffer_bytes) // el * el
    if not isinstance(config.format, FloatFormat):
        o_why = f"{wd.o_acc}-bit, exact up to N = {n}"
    elif wd.o_acc == 32:
        o_why = "fp32"
    else:
        o_why = f"{wd.o_acc}-bit: the paper's accounting, analysis only (the RTL's are fp32)"
    if wd.up_e is None:
        weights = [
            Reservation("P", "cache", banks * a, wd.p,
                        f"{banks} banks: P of rows j+1 .. j+{banks - 1} written while row j's "
                        f"is in use"),
            Reservation("alpha", "cache", banks * a, wd.alpha,
                        f"{banks} banks, like P: exp2(m_old - m)")]
    else:
        weights = [Reservation(
            "P, alpha as (up, e)", "cache", banks * a, wd.up_e,
            f"{banks} banks: {wd.up_e - 1}-bit e and the up bit, (alpha, P) = (e, 1) if up "
            f"else (1, e)")]
    rows = [
        Reservation("Q block", "cache", a * d, el, "resident for the whole Q block"),
        Reservation("O accumulators", "cache", a * d, wd.o_acc, o_why),
        Reservation("score registers", "cache", banks * a, wd.score,
                    f"{banks} banks: scores of K_(j+1) .. K_(j+{banks - 1}) while the softmax "
                    f"of K_j runs"),
        Reservation("running max m", "cache", a, wd.m, "online softmax state"),
        Reservation("running sum l", "cache", a, wd.l, f"online softmax state, l <= N = {n}"),
        *weights,
        Reservation("K/V staging", "cache", depth * d, el,
                    f"{depth} prefetched K/V rows (covers latency + transfer)"),
        Reservation("KV buffer", "kv_buffer", kv_in_buffer // el, el,
                    "one K/V row feeding the array, the next one filling"),
    ]
    if kv_in_buffer < kv_bits:
        rows.append(Reservation("KV buffer overflow", "cache", (kv_bits - kv_in_buffer) // el, el,
                                "double-buffered KV row beyond kv_buffer_bytes"))
    return rows


def cache_bytes_used(config, a, depth, banks=BANKS):
    """Bytes of the on-chip cache that a Q block of `a` rows takes with K/V staging `depth`
    and `banks` score and (P, alpha) banks."""
    return sum(r.bytes for r in reservations(config, a, depth, banks) if r.where == "cache")


def run_kv_len(workload, seq_len, kv_len=None):
    """N_kv of a run of `seq_len` query rows: `kv_len`, else the workload's kv_len when it
    names one, else seq_len (the KV_LEN register's 0)."""
    if kv_len is not None:
        return kv_len
    return seq_len if workload.kv_len is None else workload.kv_len


@dataclass(frozen=True)
class BatchSequence:
    """One sequence of a ragged batch: `seq_len` query rows (1 for a decode step) against
    `kv_len` keys, with or without the causal mask."""

    seq_len: int
    kv_len: int
    causal: bool = False

    def __post_init__(self):
        validate.positive("batch sequence", error=ConfigError, seq_len=self.seq_len,
                          kv_len=self.kv_len)
        if self.causal and self.kv_len < self.seq_len:
            raise ConfigError(f"batch sequence: causal attention needs kv_len >= seq_len, "
                              f"not {self.kv_len} < {self.seq_len}")


def batch_traffic(plan, seqs, *, heads, group=1, grouped=False):
    """Off-chip traffic of a batch of `seqs` ([BatchSequence]) in one launch on paged hardware:
    each sequence's run (`Plan.traffic_at`: its Q, K, V pages, table beats and O), plus the
    descriptors (each read whole, at least a beat)."""
    reads, writes = {}, {}
    for s in seqs:
        t = plan.traffic_at(seq_len=s.seq_len, heads=heads, kv_len=s.kv_len, causal=s.causal,
                            grouped=grouped, group=group)
        for acc, moved in ((reads, t.reads), (writes, t.writes)):
            for x in moved:
                acc[x.tensor] = (acc.get(x.tensor, (0, x.element_bytes))[0] + x.elements,
                                 x.element_bytes)
    beat = plan.budget.axi_data_bits // 8
    reads["descriptors"] = (len(seqs) * descriptor_stride(beat), 1)
    return Traffic(reads=tuple(Transfer(k, e, b) for k, (e, b) in reads.items()),
                   writes=tuple(Transfer(k, e, b) for k, (e, b) in writes.items()))


def table_entries_read(n, a, *, causal, n_kv, page_rows, beat_bytes):
    """Block-table entries one pass of Q blocks of `a` rows reads from a paged K/V cache: each
    block reads the beats of its pages' entries, whole beats (`attenio.regmap.table_beats`)."""
    per_beat = beat_bytes // TABLE_ENTRY_BYTES
    return per_beat * sum(count_blocks * table_beats(keys + i * step, page_rows, beat_bytes)
                          for _, _, keys, count, step in block_runs(n, a, causal=causal,
                                                                    n_kv=n_kv)
                          for i, count_blocks in ([(0, count)] if not step
                                                  else [(i, 1) for i in range(count)]))


def attenio_traffic(config, a, *, seq_len=None, heads=None, causal=None, kv_len=None,
                    grouped=False, group=None):
    """Off-chip traffic of the AttenIO dataflow with Q blocks of `a` rows, all heads.

    `seq_len`, `heads`, `causal`, `kv_len` and `group` default to the workload's
    (`run_kv_len`, `Workload.group`); a run may use fewer rows and heads, and set or clear
    the causal mask. Every Q block reads N_kv K and V rows; with causal masking only up to
    its last row's limit (`attenio.analysis.causal_limit`, the short block first). A block
    holds rows of one query head, so each query head's blocks read its K/V head again; with
    `grouped` (MODE.GROUPED) it holds the same a div g rows of the g query heads of a K/V
    head, so K and V are read once per group (`attention_io(grouped=True)`).
    """
    w = config.workload
    n, heads = seq_len or w.seq_len, heads or w.heads
    n_kv = run_kv_len(w, n, kv_len)
    causal = w.causal if causal is None else causal
    gb = (group or w.group) if grouped else 1
    eb, ob = config.format.element_bytes, config.format.out_bytes
    keys = key_rows(n, a // gb, causal=causal, n_kv=n_kv)
    nd, kd = n * w.head_dim, keys * w.head_dim
    passes = ceil(heads / gb)
    table = ()
    if config.budget.page_rows:
        entries = table_entries_read(n, a // gb, causal=causal, n_kv=n_kv,
                                     page_rows=config.budget.page_rows,
                                     beat_bytes=config.budget.axi_data_bits // 8)
        table = (Transfer("table", entries * passes, TABLE_ENTRY_BYTES),)
    total = Traffic(
        reads=(Transfer("Q", nd * heads, eb), Transfer("K", kd * passes, eb),
               Transfer("V", kd * passes, eb), *table),
        writes=(Transfer("O", nd * heads, ob),))
    reads, writes = attention_io(n, w.head_dim, a, causal=causal, n_kv=n_kv, heads=gb,
                                 grouped=grouped)
    reads, writes = reads * passes, writes * passes
    if heads % gb == 0:
        rows_read = total.read_elements - sum(t.elements for t in table)
        assert (rows_read, total.write_elements) == (reads, writes)
    return total


def wins_grouped(config, a, *, seq_len=None, causal=None, kv_len=None, group=None):
    """Whether blocks serving a whole K/V group (MODE.GROUPED) move less than blocks of one
    head for this workload at Q blocks of `a` rows (`attenio.analysis.grouped_blocks_win`)."""
    w = config.workload
    n, g = seq_len or w.seq_len, group or w.group
    causal = w.causal if causal is None else causal
    return g > 1 and grouped_blocks_win(n, w.head_dim, a, heads=g, causal=causal,
                                        n_kv=run_kv_len(w, n, kv_len))


@dataclass(frozen=True)
class Candidate:
    """One mapping the planner modelled: s MACs a row, r rows a group, B banks, its a, and
    what it gives."""

    split: int
    groups: int
    rows_per_mac: int
    a: int
    macs_active: int
    kv_depth: int
    cycles: int
    pe_util: float
    spatial_util: float
    offchip_bytes: int
    banks: int = BANKS

    @property
    def mapping(self):
        """(s, r, B): what names a candidate."""
        return (self.split, self.rows_per_mac, self.banks)

    def to_dict(self):
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class MappingChoice:
    """How the Plan's mapping was chosen: the candidates modelled at `seq_len` and `heads`,
    the `chosen` (s, r, B) and the `runner_up` (s, r, B) (None when nothing else was
    modelled).

    `mode` is "auto" (of the mappings within `tolerance` of the fewest modelled cycles,
    the least traffic, then the fewer banks, the smaller s, the larger r) or "forced" (the
    configuration's split and rows_per_mac; the one candidate is what they give).
    """

    mode: str
    seq_len: int
    heads: int
    tolerance: float
    candidates: tuple
    chosen: tuple
    runner_up: tuple | None = None

    def candidate(self, split, rows_per_mac, banks=BANKS):
        return next(c for c in self.candidates if c.mapping == (split, rows_per_mac, banks))

    def to_dict(self):
        def named(m):
            return None if m is None else {"split": m[0], "rows_per_mac": m[1], "banks": m[2]}
        return {"mode": self.mode, "seq_len": self.seq_len, "heads": self.heads,
                "tolerance": self.tolerance, "chosen": named(self.chosen),
                "runner_up": named(self.runner_up),
                "candidates": [c.to_dict() for c in self.candidates]}


@dataclass(frozen=True)
class Plan:
    """The tiling and mapping of one `Config`, and what it costs.

    `a` rows per Q block (b = 1 K/V row at a time), `split` (s) MACs per row,
    `rows_per_mac` (r) rows per MAC group of s MACs (its slots), `q_blocks` blocks
    per head. `a_ideal` is the analysis' optimum with M counted in stored elements
    and no hardware reservations; `a_fit` the largest a the real reservations allow;
    `a_largest` that rounded to the MAC groups (the largest r that fits); `a` what the
    hardware uses, r times the groups (fewer rows a group than the largest when the
    planner finds it faster); `a_unsplit` the a of the same configuration at s = 1
    (`traffic_unsplit` its traffic). `mapping_choice` records how the planner chose s
    and r (None for a Plan made directly by `make_plan`). `banks` (B): score and
    (P, alpha) banks, so S runs B - 1 K rows ahead of U. `grouped`: its blocks serve a
    whole K/V group (MODE.GROUPED; `wins_grouped`, only when a >= g), and its traffic counts so.
    """

    config: Config
    a: int
    b: int
    rows_per_mac: int
    kv_depth: int
    a_ideal: int
    a_fit: int
    reservations: tuple
    traffic: Traffic
    traffic_unrounded: Traffic
    traffic_ideal: Traffic
    split: int = 1
    a_unsplit: int | None = None
    traffic_unsplit: Traffic | None = None
    mapping_choice: MappingChoice | None = None
    a_largest: int | None = None
    grouped: bool = False
    banks: int = BANKS

    @property
    def workload(self):
        return self.config.workload

    @property
    def budget(self):
        return self.config.budget

    @property
    def q_blocks(self):
        """Q blocks a pass: of one head, or with `grouped` of the g heads of a K/V group
        (a div g rows of each a block)."""
        rows = self.a // self.workload.group if self.grouped else self.a
        return ceil(self.workload.seq_len / rows)

    @property
    def groups(self):
        """G, the MAC groups of s MACs: each holds `rows_per_mac` rows."""
        return self.budget.macs // self.split

    @property
    def macs_active(self):
        return min(self.a, self.groups) * self.split

    @property
    def cache_used_bytes(self):
        return sum(r.bytes for r in self.reservations if r.where == "cache")

    @property
    def kv_buffer_used_bytes(self):
        return sum(r.bytes for r in self.reservations if r.where == "kv_buffer")

    @property
    def m_elements(self):
        """M of the analysis: the cache in elements of the stored precision."""
        return self.budget.cache_bytes // self.config.format.element_bytes

    @property
    def bound_elements(self):
        w = self.workload
        return attention_bound(w.seq_len, w.head_dim, self.m_elements) * w.heads

    @property
    def split_cost_bytes(self):
        """Traffic of this plan's a beyond that of s = 1's a (0 at s = 1)."""
        return self.traffic.bytes - (self.traffic_unsplit or self.traffic).bytes

    def block_range(self, first, count=0, *, seq_len, causal=None, kv_len=None, grouped=None,
                    group=None):
        """The `attenio.analysis.BlockRange` of Q blocks `first` .. `first + count - 1` (`count`
        0: to the last) of each pass of a run of this hardware (Q_BLOCK_FIRST, Q_BLOCK_COUNT),
        the run's options as `traffic_at` takes them: its rows and keys, a run of its own."""
        w = self.workload
        causal = w.causal if causal is None else causal
        grouped = self.grouped if grouped is None else grouped
        gb = (group or w.group) if grouped else 1
        return block_range(seq_len, self.a // gb, first, count, causal=causal,
                           n_kv=run_kv_len(w, seq_len, kv_len))

    def traffic_at(self, *, seq_len, heads, causal=None, kv_len=None, grouped=None, group=None,
                   blocks=None):
        """The traffic of a run of this hardware at runtime N = `seq_len`, `heads` query heads
        and N_kv = `kv_len` (default `run_kv_len`), with or without the causal mask (default:
        the workload's), with blocks serving `group` query heads (default the workload's g)
        when `grouped` (default the Plan's); `blocks` (first, count): only those Q blocks of
        each pass (`block_range`)."""
        if blocks is not None:
            r = self.block_range(*blocks, seq_len=seq_len, causal=causal, kv_len=kv_len,
                                 grouped=grouped, group=group)
            seq_len, kv_len = r.rows, r.n_kv
        n_max = self.workload.max_keys
        validate.integer("plan", "runtime seq_len (at most the generated N)", seq_len,
                         lo=1, hi=n_max, error=ConfigError)
        validate.integer("plan", "runtime kv_len (at most the generated N)",
                         run_kv_len(self.workload, seq_len, kv_len), lo=1, hi=n_max,
                         error=ConfigError)
        grouped = self.grouped if grouped is None else grouped
        return attenio_traffic(self.config, self.a, seq_len=seq_len, heads=heads, causal=causal,
                               kv_len=kv_len, grouped=grouped, group=group)

    def row_of(self, line, group, slot):
        """Q-block row owned by MAC group `group` of line `line` in its `slot`-th slot (< r).

        Group g of a line is its MACs g*s .. g*s + s - 1; a line holds q/s groups.
        """
        per_line = self.budget.macs_per_line // self.split
        return slot * self.groups + line * per_line + group

    def to_dict(self):
        w, b = self.workload, self.budget
        d = {
            "name": self.config.name,
            "format": self.config.format.name,
            "seq_len": w.seq_len, "head_dim": w.head_dim, "heads": w.heads,
            "kv_len": w.n_kv, "kv_heads": w.n_kv_heads, "max_keys": w.max_keys,
            "mac_lines": b.mac_lines, "macs_per_line": b.macs_per_line,
            "a": self.a, "b": self.b, "split": self.split, "groups": self.groups,
            "grouped": self.grouped,
            "rows_per_mac": self.rows_per_mac, "banks": self.banks,
            "macs_active": self.macs_active, "q_blocks": self.q_blocks,
            "kv_prefetch_depth": self.kv_depth,
            "a_ideal": self.a_ideal, "a_fit": self.a_fit,
            "a_unsplit": self.a if self.a_unsplit is None else self.a_unsplit,
            "m_elements": self.m_elements,
            "cache_bytes": b.cache_bytes, "cache_used_bytes": self.cache_used_bytes,
            "kv_buffer_bytes": b.kv_buffer_bytes, "kv_buffer_used_bytes": self.kv_buffer_used_bytes,
            "widths": asdict(self.config.format.datapath(max_seq_len=w.max_keys,
                                                         head_dim=w.head_dim)),
            "budget_use": [
                {"item": r.item, "where": r.where, "count": r.count, "bits": r.bits,
                 "bytes": r.bytes, "why": r.why} for r in self.reservations],
            "bound_elements": self.bound_elements,
            "rounding_cost_bytes": self.traffic.bytes - self.traffic_unrounded.bytes,
            "reservation_cost_bytes": self.traffic_unrounded.bytes - self.traffic_ideal.bytes,
            "split_cost_bytes": self.split_cost_bytes,
            "mapping": None if self.mapping_choice is None else self.mapping_choice.to_dict(),
        }
        d.update(self.traffic.to_dict())
        return d


def _fit(config, split, banks=BANKS):
    """(K/V staging depth, largest a that fits, r, a rounded to the MAC groups) at s = `split`
    with `banks` score and (P, alpha) banks."""
    w, b = config.workload, config.budget
    d = w.head_dim
    depth = kv_prefetch_depth(config, split)
    if cache_bytes_used(config, 1, depth, banks) > b.cache_bytes:
        raise ConfigError(
            f"a cache of {b.cache_bytes} bytes cannot hold one query row with its accumulators, "
            f"softmax state and {depth} staged K/V rows at d = {d}"
            f"{f' and split {split}' if split > 1 else ''} "
            f"(needs {cache_bytes_used(config, 1, depth, banks)} bytes)")
    # Reservations grow linearly in a, up to rounding of bits to bytes; bisect.
    lo, hi = 1, max(1, b.cache_bytes)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if cache_bytes_used(config, mid, depth, banks) <= b.cache_bytes:
            lo = mid
        else:
            hi = mid - 1
    a_fit = lo
    groups = b.macs // split
    # a block serving a whole K/V group (`wins_grouped`) holds up to N rows of each of g heads
    a_cap = min(a_fit, w.seq_len * w.group)
    if a_cap >= groups:
        # up to fill the last slot if it still fits, else down to whole slots
        r = ceil(a_cap / groups)
        if r * groups > a_fit:
            r = a_cap // groups
        return depth, a_fit, r, r * groups
    return depth, a_fit, 1, a_cap


def rows_problem(config, split, rows_per_mac, banks=BANKS):
    """Why groups of `split` MACs cannot hold `rows_per_mac` rows each beside `banks` banks,
    or None if they can."""
    try:
        validate.integer("mapping", "rows_per_mac", rows_per_mac, lo=1, error=ConfigError)
    except ConfigError as exc:
        return str(exc)
    r_max = _fit(config, split, banks)[2]
    if rows_per_mac > r_max:
        at = f"s = {split}" + (f" and {banks} banks" if banks != BANKS else "")
        return (f"mapping: {rows_per_mac} rows per group of {split} MAC(s) do not fit the cache "
                f"(at most {r_max} at {at})")
    return None


def rows_options(config, split, banks=BANKS):
    """The rows per group (r) the planner weighs at s = `split` and `banks` banks, largest
    first.

    For each number of Q blocks from the fewest (the largest r that fits) up to twice
    as many, the fewest rows per group that give that many blocks: the last block is
    then as full as it can be, so no K/V pass runs for rows that do not exist. A
    smaller r shortens every pass (r d / s cycles) but adds blocks, each a pass over
    K and V; which wins is the cycle model's to say. (1,) when a < G (every row has
    a group of its own and a pass takes d / s cycles whatever a is).
    """
    check_split(config, split)
    _, _, r_max, a = _fit(config, split, banks)
    groups = config.budget.macs // split
    if a < groups:
        return (1,)
    n = config.workload.seq_len * config.workload.group     # as many as `_fit` caps a at
    fewest = ceil(n / (r_max * groups))
    r_most, r_least = ceil(n / (fewest * groups)), ceil(n / (2 * fewest * groups))
    if fewest < r_most - r_least:
        # fewer block counts than r values: walk the counts
        out = dict.fromkeys(ceil(n / (blocks * groups))
                            for blocks in range(fewest, 2 * fewest + 1))
        return tuple(out)
    # fewer r values: r is the fewest rows for its block count when one row less
    # needs more blocks (walking at most sqrt(N / G) values either way)
    blocks = lambda r: ceil(n / (r * groups))
    return tuple(r for r in range(r_most, r_least - 1, -1)
                 if r == 1 or blocks(r - 1) > blocks(r))


def make_plan(config, split=None, rows_per_mac=None, banks=None):
    """The AttenIO Plan of `config` with rows split over `split` MACs, `rows_per_mac`
    rows a group, and `banks` score and (P, alpha) banks (at least 2; default
    `config.banks`, and `BANKS` when that is None).

    `split` defaults to `config.split`, and to 1 when that is None; `rows_per_mac` to
    `config.rows_per_mac`, and to the largest r that fits when that is None (choosing
    either is `attenio.model.planner.choose_plan`'s, which needs the cycle model). Raises
    ConfigError for an impossible split (`split_problem`), rows that do not fit
    (`rows_problem`), or when not even one row fits.
    """
    s = split if split is not None else config.split if config.split is not None else 1
    check_split(config, s)
    banks = banks if banks is not None else config.banks if config.banks is not None else BANKS
    validate.integer("mapping", "banks", banks, lo=2, error=ConfigError)
    w = config.workload
    m = config.budget.cache_bytes // config.format.element_bytes
    depth, a_fit, r_max, a_max = _fit(config, s, banks)
    r = rows_per_mac if rows_per_mac is not None else config.rows_per_mac
    if r is None or r == r_max:
        r, a = r_max, a_max
    else:
        problem = rows_problem(config, s, r, banks)
        if problem:
            raise ConfigError(problem)
        a = r * (config.budget.macs // s)
    a_unsplit = a if s == 1 else _fit(config, 1, banks)[3]
    a_ideal, _ = attention_optimum(w.seq_len, w.head_dim, m)

    def best(a):
        """The traffic at Q blocks of `a` rows, grouped where that moves less."""
        return attenio_traffic(config, a, grouped=wins_grouped(config, a))

    plan = Plan(config=config, a=a, b=1, rows_per_mac=r, kv_depth=depth, a_ideal=a_ideal,
                a_fit=a_fit, reservations=tuple(reservations(config, a, depth, banks)),
                traffic=best(a), traffic_unrounded=best(min(a_fit, w.seq_len)),
                traffic_ideal=best(a_ideal), split=s, a_unsplit=a_unsplit,
                traffic_unsplit=best(a_unsplit), a_largest=a_max,
                grouped=wins_grouped(config, a), banks=banks)
    assert plan.cache_used_bytes <= config.budget.cache_bytes
    return plan
