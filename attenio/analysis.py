"""Closed-form I/O analysis of tall-and-skinny MMM and of attention (Lu et al., "I/O Analysis
is All You Need", ASPLOS 2026).

All counts are in elements and exact (with the ceilings a finite N brings); the
`*_continuous` forms are the smooth approximations of the analysis, kept to show
where the optimum comes from. M is the fast-memory capacity in elements.

Tall-and-skinny MMM, C = A B with A N x d and B d x N: one A block of `a` rows
stays on chip while all of B streams past in blocks of `b` columns, and each
a x b block of C is finished on chip and written once::

    I/O(a, b) = N d  +  N d ceil(N / a)  +  N^2          subject to  a d + b d + a b <= M

b only costs memory, so the optimum is b = 1 and the largest a,
a = floor((M - d) / (d + 1)).

Attention with b = 1: Q once, K and V once per Q block, O once::

    T_att(a) = N d + 2 N d ceil(N / a) + N d   subject to  2 a d + b d + a b + 3 a <= M

With causal masking a Q block reads K and V only up to its last row, so the short
block goes first (`q_blocks`); against N_kv keys, N_kv replaces N in the K/V term.
When g query heads share a K/V head, a block of the same a/g rows of all g heads
reads each K/V row once for all of them: the same traffic as g one-head passes when
a/g rows tile N as well as a rows do, far less when N < a (a decode step: one pass
over the cache instead of g).

so a = floor((M - d) / (2 d + 4)) for b = 1. The order-of-growth bound it is
measured against is N^2 d^2 / M (meaningful for M >= d^2).
"""

from dataclasses import dataclass
from math import ceil, isqrt

from . import validate
from .errors import ConfigError

__all__ = [
    "mmm_io", "mmm_feasible", "mmm_optimum", "mmm_io_continuous",
    "attention_io", "q_blocks", "causal_limit", "block_runs", "block_keys", "key_rows",
    "block_count", "block_row", "BlockRange", "block_range", "grouped_blocks_win",
    "attention_feasible", "attention_optimum", "attention_io_continuous",
    "attention_bound", "general_mmm_tile", "general_mmm_reads",
]


# --- tall-and-skinny MMM ---------------------------------------------------------

def mmm_feasible(a, b, d, m):
    """Whether an a x b subcomputation fits: A block, B block, C block."""
    return a >= 1 and b >= 1 and a * d + b * d + a * b <= m


def mmm_io(n, d, a, b):
    """Exact elements moved: (reads, writes) for tiles a x b over an N x N output."""
    reads = n * d + n * d * ceil(n / a)
    writes = n * n
    return reads, writes


def mmm_io_continuous(n, d, a, b):
    """(N^2 d / ab)(a/t + b) + N^2 with t = N / b."""
    t = n / b
    return (n * n * d / (a * b)) * (a / t + b) + n * n


def mmm_optimum(n, d, m):
    """(a, b) minimizing `mmm_io` under `mmm_feasible`: b = 1, a = (M - d) / (d + 1)."""
    validate.positive("mmm_optimum", error=ConfigError, N=n, d=d, M=m)
    a = (m - d) // (d + 1)
    if a < 1:
        raise ConfigError(f"fast memory of {m} elements cannot hold one row of A, one of B and "
                          f"their product at d = {d} (needs {2 * d + 1})")
    return min(a, n), 1


# --- attention -------------------------------------------------------------------

def attention_feasible(a, b, d, m):
    """Q block + K/V rows + S block + O block + (m_old, m, l) fit in M elements."""
    return a >= 1 and b >= 1 and 2 * a * d + b * d + a * b + 3 * a <= m


def causal_limit(row, n, n_kv):
    """How many keys query row `row` of `n` sees under causal masking against `n_kv` keys:
    rows are aligned at the end (the last query row sees every key, as in a decoder whose
    cache holds the n_kv - n keys before the queries)."""
    return row + 1 + n_kv - n


def q_blocks(n, a, *, causal=False):
    """The Q blocks of the AttenIO schedule as (first row, rows): a rows each but one.
    Without masking the short block is the last; with causal masking it is the first,
    since a block reads the keys up to its last row's and the first block's last row
    sees the fewest: N = 10, a = 4 reads 2 + 6 + 10 key rows instead of 4 + 8 + 10.
    A list of N / a blocks: for sizes that are simulated; `block_runs` holds any N."""
    return [(r0, rows) for r0, rows, _ in block_keys(n, a, causal=causal)]


def block_runs(n, a, *, causal=False, n_kv=None):
    """The blocks of `block_keys` in closed form, for any N: at most two runs
    (first row, rows, keys, count, step), each of `count` blocks of `rows` rows, the
    i-th starting at row first + i * rows and reading keys + i * step K/V rows (step =
    a with causal masking, since each block's last row sees a more keys; else 0)."""
    n_kv = n if n_kv is None else n_kv
    full, short = divmod(n, a)
    if not causal:
        runs = [(0, a, n_kv, full, 0)] if full else []
        return runs + ([(full * a, short, n_kv, 1, 0)] if short else [])
    runs = [(0, short, causal_limit(short - 1, n, n_kv), 1, 0)] if short else []
    if full:
        runs.append((short, a, causal_limit(short + a - 1, n, n_kv), full, a))
    return runs


def block_keys(n, a, *, causal=False, n_kv=None):
    """The Q blocks of `q_blocks` with the K/V rows each reads: [(first row, rows, keys)],
    N_kv keys (default n) a block, with causal masking only up to its last row's limit.
    The one statement of it that the traffic, the cycle model and the sequencer share,
    expanded from `block_runs` (so a list of N / a blocks: for simulated sizes)."""
    return [(r0 + i * rows, rows, keys + i * step)
            for r0, rows, keys, count, step in block_runs(n, a, causal=causal, n_kv=n_kv)
            for i in range(count)]


def block_count(n, a):
    """Q blocks of a pass of `n` rows in blocks of `a`: ceil(n / a), short block or not."""
    return -(-n // a)


def block_row(i, n, a, *, causal=False):
    """The first row of block `i` (0 <= i <= `block_count`; the count itself gives n) in the
    order of `block_runs`: a rows a block, but with causal masking the short block (n mod a
    rows) is block 0, so block i >= 1 starts at n mod a + (i - 1) a."""
    short = n % a
    if i == 0:
        return 0
    return min(n, short + (i - 1) * a if causal and short else i * a)


@dataclass(frozen=True)
class BlockRange:
    """The rows a launch of Q blocks `first` .. `first + count - 1` of every pass computes
    (Q_BLOCK_FIRST, Q_BLOCK_COUNT), as the whole run's blocks compute them: query rows `row0`
    .. `row0 + rows - 1` against the first `n_kv` keys. It is itself a run: `rows` query
    rows aligned at the end of `n_kv` keys, whose blocks (`block_runs(rows, a)`) are the
    range's, since rows is a multiple of a but for a short block, which stays first
    (causal) or last. Without the mask n_kv is the run's N_kv; with it, the keys the
    range's last row sees."""

    first: int
    count: int
    row0: int
    rows: int
    n_kv: int

    @property
    def last(self):
        return self.first + self.count - 1


def block_range(n, a, first, count=0, *, causal=False, n_kv=None):
    """The `BlockRange` of blocks `first` .. `first + count - 1` (`count` 0: to the last) of
    a pass of `n` query rows in blocks of `a` rows against `n_kv` keys (default n); a block
    past the last is a ConfigError naming it (the controller's BLOCK_RANGE)."""
    n_kv = n if n_kv is None else n_kv
    total = block_count(n, a)
    validate.integer("block range", "Q_BLOCK_FIRST", first, lo=0, error=ConfigError)
    validate.integer("block range", "Q_BLOCK_COUNT", count, lo=0, error=ConfigError)
    if first >= total or first + count > total:
        what = (f"first block {first}" if first >= total
                else f"blocks {first} .. {first + count - 1}")
        raise ConfigError(f"block range: {what} past the last of the {total} Q blocks of "
                          f"N = {n} in blocks of {a} rows (blocks 0 .. {total - 1})")
    count = count or total - first
    row0 = block_row(first, n, a, causal=causal)
    end = block_row(first + count, n, a, causal=causal) if first + count < total else n
    keys = causal_limit(end - 1, n, n_kv) if causal else n_kv
    return BlockRange(first, count, row0, end - row0, keys)


def key_rows(n, a, *, causal=False, n_kv=None, weight_rows=False):
    """The sum of `block_keys`' keys over every block, in closed form: the K (or V) rows one
    pass reads. `weight_rows`: each block's keys times its rows (the (row, key) pairs the
    blocks' lanes evaluate, masked ones included)."""
    total = 0
    for _, rows, keys, count, step in block_runs(n, a, causal=causal, n_kv=n_kv):
        run = count * keys + step * count * (count - 1) // 2
        total += run * rows if weight_rows else run
    return total


def attention_io(n, d, a, *, causal=False, n_kv=None, heads=1, grouped=False):
    """Exact elements moved by the AttenIO dataflow with Q blocks of a rows: (reads, writes).

    n query rows against `n_kv` key and value rows (default n). Each block reads its Q
    rows, the K and V rows it needs and writes its O rows: every key without masking,
    with causal masking (`causal_limit`) only the keys up to its last row's.

    `heads` query heads share the one K/V head (grouped-query attention). A block holds
    rows of one head (`grouped` False: each head is a separate pass over K and V) or the
    same a // heads rows of every head of the group (`grouped`: each K/V row fetched
    serves them all).
    """
    n_kv = n if n_kv is None else n_kv
    if causal and n_kv < n:
        raise ConfigError(f"causal attention needs at least as many keys as queries "
                          f"(N_kv = {n_kv} < N = {n}): the first rows would see no key")
    rows_a = a
    if grouped:
        rows_a = a // heads
        if rows_a < 1:
            raise ConfigError(f"a Q block of {a} rows cannot hold a row of each of {heads} "
                              f"heads")
    keys = key_rows(n, rows_a, causal=causal, n_kv=n_kv)
    passes = 1 if grouped else heads
    return heads * n * d + 2 * d * keys * passes, heads * n * d


def grouped_blocks_win(n, d, a, *, heads, causal=False, n_kv=None):
    """Whether blocks of the same rows of every head (`attention_io(grouped=True)`) move
    fewer elements than blocks of one head; ties go to one head (no interleaving)."""
    if a < heads:
        return False
    one = attention_io(n, d, a, causal=causal, n_kv=n_kv, heads=heads)
    grouped = attention_io(n, d, a, causal=causal, n_kv=n_kv, heads=heads, grouped=True)
    return sum(grouped) < sum(one)


def attention_io_continuous(n, d, m):
    """2 N d + 4 N^2 d (d + 2) / (M - d): T_att at the continuous optimum."""
    return 2 * n * d + 4 * n * n * d * (d + 2) / (m - d)


def attention_optimum(n, d, m):
    """(a, b) of the I/O-optimal attention tiling in M elements: b = 1, a = (M - d)/(2d + 4)."""
    validate.positive("attention_optimum", error=ConfigError, N=n, d=d, M=m)
    a = (m - d) // (2 * d + 4)
    if a < 1:
        raise ConfigError(f"fast memory of {m} elements cannot hold one query row with its "
                          f"accumulators at d = {d} (needs {3 * d + 4})")
    return min(a, n), 1


def attention_bound(n, d, m):
    """The order-of-growth lower bound N^2 d^2 / M, in elements."""
    return n * n * d * d / m


# --- general (square-tiled) MMM, the Standard baseline's tiling -------------------

def general_mmm_tile(m):
    """Side s of the square output tile the general MMM analysis picks: s^2 + 2 s <= M."""
    s = isqrt(m + 1) - 1
    if s < 1:
        raise ConfigError(f"fast memory of {m} elements cannot hold a 1 x 1 MMM tile")
    return s


def general_mmm_reads(rows, cols, k, x, y):
    """Reads of C (rows x cols) = A (rows x k) B (k x cols) with output tiles x x y.

    Each tile streams its strip of A and of B once, one k-slice at a time.
    """
    return k * (cols * ceil(rows / x) + rows * ceil(cols / y))
