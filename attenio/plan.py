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
P, alpha               2 x a x their widths        double-buffered like the scores
K/V staging            depth x d x element         prefetched rows, depth from latency and rate
KV buffer              2 x d x element             one row feeding the array, one filling
=====================  ==========================  ===========================================

The KV buffer lives in its own budget (`kv_buffer_bytes`); whatever of it does
not fit there is taken from the cache and reported. The next Q block is loaded
straight into the PE-local Q storage once the last scores of the current block
are done (overlap level 3), so it needs no second Q buffer.

The a that fits is then rounded to suit the MAC array: with P = p x q MACs, a is
a multiple r x P of the array (r rows per MAC) when a >= P, else every row gets
a MAC of its own and P - a MACs idle. What the rounding costs in traffic is kept
beside the plan (`traffic_unrounded`).
"""

from dataclasses import dataclass
from math import ceil

from . import validate
from .analysis import attention_bound, attention_io, attention_optimum
from .config import Config, Workload
from .errors import ConfigError
from .traffic import Traffic, Transfer

__all__ = ["Reservation", "Plan", "make_plan", "attenio_traffic", "kv_prefetch_depth"]


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


def kv_prefetch_depth(config):
    """Rows of K or V staged in the cache so the array never waits for a row.

    A row is consumed in d cycles at the fastest (one row per MAC); a request
    takes `latency_cycles` plus the row's transfer time to arrive, so that many
    rows must be in flight ahead of the one in use. Never below 2 (double buffer).
    """
    w, b = config.workload, config.budget
    row_bytes = w.head_dim * config.format.element_bytes
    arrival = b.latency_cycles + ceil(row_bytes / b.bw_bytes_per_cycle)
    return max(2, 1 + ceil(arrival / w.head_dim))


def reservations(config, a, depth):
    """Every on-chip reservation for Q blocks of `a` rows."""
    d = config.workload.head_dim
    wd = config.format.datapath(max_seq_len=config.workload.seq_len, head_dim=d)
    el = wd.element
    kv_bits = 2 * d * el
    kv_in_buffer = min(kv_bits, 8 * config.budget.kv_buffer_bytes) // el * el
    rows = [
        Reservation("Q block", "cache", a * d, el, "resident for the whole Q block"),
        Reservation("O accumulators", "cache", a * d, wd.o_acc,
                    f"{wd.o_acc}-bit, exact up to N = {config.workload.seq_len}"),
        Reservation("score registers", "cache", 2 * a, wd.score,
                    "double: scores of K_{j+1} while the softmax of K_j runs"),
        Reservation("running max m", "cache", a, wd.m, "online softmax state"),
        Reservation("running sum l", "cache", a, wd.l, "online softmax state"),
        Reservation("P", "cache", 2 * a, wd.p,
                    "double: P of row j+1 written while row j's is in use"),
        Reservation("alpha", "cache", 2 * a, wd.alpha, "double, like P: exp2(m_old - m)"),
        Reservation("K/V staging", "cache", depth * d, el,
                    f"{depth} prefetched K/V rows (covers latency + transfer)"),
        Reservation("KV buffer", "kv_buffer", kv_in_buffer // el, el,
                    "one K/V row feeding the array, the next one filling"),
    ]
    if kv_in_buffer < kv_bits:
        rows.append(Reservation("KV buffer overflow", "cache", (kv_bits - kv_in_buffer) // el, el,
                                "double-buffered KV row beyond kv_buffer_bytes"))
    return rows


def _cache_bytes(config, a, depth):
    return sum(r.bytes for r in reservations(config, a, depth) if r.where == "cache")


def attenio_traffic(config, a, *, seq_len=None, heads=None):
    """Off-chip traffic of the AttenIO dataflow with Q blocks of `a` rows, all heads.

    `seq_len` and `heads` default to the workload's; a run may use fewer.
    """
    w = config.workload
    if seq_len is not None or heads is not None:
        w = Workload(seq_len=seq_len or w.seq_len, head_dim=w.head_dim, heads=heads or w.heads)
    eb = config.format.element_bytes
    blocks = ceil(w.seq_len / a)
    nd = w.seq_len * w.head_dim
    per_head = Traffic(
        reads=(Transfer("Q", nd, eb), Transfer("K", nd * blocks, eb), Transfer("V", nd * blocks, eb)),
        writes=(Transfer("O", nd, eb),))
    total = per_head.scaled(w.heads)
    reads, writes = attention_io(w.seq_len, w.head_dim, a)
    assert (total.read_elements, total.write_elements) == (reads * w.heads, writes * w.heads)
    return total


@dataclass(frozen=True)
class Plan:
    """The tiling and mapping of one `Config`, and what it costs.

    `a` rows per Q block (b = 1 K/V row at a time), `rows_per_mac` (r) rows per
    MAC, `q_blocks` blocks per head. `a_ideal` is the analysis' optimum with M
    counted in stored elements and no hardware reservations; `a_fit` the largest
    a the real reservations allow; `a` the rounded value the hardware uses.
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

    @property
    def workload(self):
        return self.config.workload

    @property
    def budget(self):
        return self.config.budget

    @property
    def q_blocks(self):
        return ceil(self.workload.seq_len / self.a)

    @property
    def macs_active(self):
        return min(self.a, self.budget.macs)

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

    def traffic_at(self, *, seq_len, heads):
        """The traffic of a run of this hardware at runtime N = `seq_len` and `heads`."""
        validate.integer("plan", "runtime seq_len (at most the generated N)", seq_len,
                         lo=1, hi=self.workload.seq_len, error=ConfigError)
        return attenio_traffic(self.config, self.a, seq_len=seq_len, heads=heads)

    def row_of(self, line, mac, slot):
        """Q-block row owned by MAC `mac` of line `line` in its `slot`-th slot (< r)."""
        q = self.budget.macs_per_line
        return slot * self.budget.macs + line * q + mac

    def to_dict(self):
        w, b = self.workload, self.budget
        d = {
            "name": self.config.name,
            "format": self.config.format.name,
            "seq_len": w.seq_len, "head_dim": w.head_dim, "heads": w.heads,
            "mac_lines": b.mac_lines, "macs_per_line": b.macs_per_line,
            "a": self.a, "b": self.b, "rows_per_mac": self.rows_per_mac,
            "macs_active": self.macs_active, "q_blocks": self.q_blocks,
            "kv_prefetch_depth": self.kv_depth,
            "a_ideal": self.a_ideal, "a_fit": self.a_fit,
            "m_elements": self.m_elements,
            "cache_bytes": b.cache_bytes, "cache_used_bytes": self.cache_used_bytes,
            "kv_buffer_bytes": b.kv_buffer_bytes, "kv_buffer_used_bytes": self.kv_buffer_used_bytes,
            "budget_use": [
                {"item": r.item, "where": r.where, "count": r.count, "bits": r.bits,
                 "bytes": r.bytes, "why": r.why} for r in self.reservations],
            "bound_elements": self.bound_elements,
            "rounding_cost_bytes": self.traffic.bytes - self.traffic_unrounded.bytes,
            "reservation_cost_bytes": self.traffic_unrounded.bytes - self.traffic_ideal.bytes,
        }
        d.update(self.traffic.to_dict())
        return d


def make_plan(config):
    """The AttenIO Plan of `config`; raises ConfigError when not even one row fits."""
    w, b = config.workload, config.budget
    n, d = w.seq_len, w.head_dim
    m = b.cache_bytes // config.format.element_bytes
    depth = kv_prefetch_depth(config)
    if _cache_bytes(config, 1, depth) > b.cache_bytes:
        raise ConfigError(
            f"a cache of {b.cache_bytes} bytes cannot hold one query row with its accumulators, "
            f"softmax state and {depth} staged K/V rows at d = {d} "
            f"(needs {_cache_bytes(config, 1, depth)} bytes)")
    a_ideal, _ = attention_optimum(n, d, m)
    # Reservations grow linearly in a, up to rounding of bits to bytes; bisect.
    lo, hi = 1, max(1, b.cache_bytes)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if _cache_bytes(config, mid, depth) <= b.cache_bytes:
            lo = mid
        else:
            hi = mid - 1
    a_fit = lo
    macs = b.macs
    a_cap = min(a_fit, n)
    if a_cap >= macs:
        r = ceil(a_cap / macs)
        if r * macs > a_fit:
            r = a_cap // macs
        a = r * macs
    else:
        r, a = 1, a_cap
    plan = Plan(config=config, a=a, b=1, rows_per_mac=r, kv_depth=depth, a_ideal=a_ideal,
                a_fit=a_fit, reservations=tuple(reservations(config, a, depth)),
                traffic=attenio_traffic(config, a),
                traffic_unrounded=attenio_traffic(config, min(a_fit, n)),
                traffic_ideal=attenio_traffic(config, a_ideal))
    assert plan.cache_used_bytes <= b.cache_bytes
    return plan
