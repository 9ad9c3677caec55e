"""Closed-form I/O analysis of tall-and-skinny MMM and of attention (DESIGN.md section 3).

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

so a = floor((M - d) / (2 d + 4)) for b = 1. The order-of-growth bound it is
measured against is N^2 d^2 / M (meaningful for M >= d^2).
"""

from math import ceil, isqrt

from . import validate
from .errors import ConfigError

__all__ = [
    "mmm_io", "mmm_feasible", "mmm_optimum", "mmm_io_continuous",
    "attention_io", "attention_feasible", "attention_optimum", "attention_io_continuous",
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


def attention_io(n, d, a):
    """Exact elements moved by the AttenIO dataflow with Q blocks of a rows: (reads, writes)."""
    blocks = ceil(n / a)
    return n * d + 2 * n * d * blocks, n * d


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
