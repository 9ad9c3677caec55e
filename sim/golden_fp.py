"""The golden model of the floating-point formats: fp16, bf16 or fp8 storage, fp32 accumulation.

Every rounding sits where the floating-point datapath has it (its builders and
twins are `attenio.hdl.formats.float.FloatArith`'s); per query row and K/V row j:

    S_j   = sum of fmul(q_c, k_c)       fp32: MAC g of a row's group of s holds
                                        columns g + s c, c = 0 .. d/s - 1, in k sub-sums
                                        (`attenio.hdl.mac.score_sums`; 1 without the
                                        interleave): sub-sum i adds the products of the
                                        chunks c = d/s - k + i (mod k) in order (starting
                                        from the first product); the chain adds sub-sum i
                                        of the s MACs in group order; the fold adds the k
                                        chain sums in order i = 0 .. k-1
    x_j   = fmul(S_j, c)                c = fp32(log2(e) / sqrt(d))
    z, up = to_fixed(-|x_j - m|), x_j > m   one fp32 difference, then x_frac bits,
                                        saturated at x_min; m starts at -inf
    e     = exp2(z)                     fixed point, p_frac bits: alpha = e, P = 1 if
                                        up (the max moves), else alpha = 1, P = e
    m     = maximum(m, x_j)
    l     = rescale(alpha, l) + P       fixed point, as the int8 format's l
    O     = fadd(fmul(e, O), V_j)       if up, else fadd(O, fmul(e, V_j)): O in fp32,
                                        e in fp32 (exact)
    ...after the last row:
    (y, ey) = reciprocal(l)             1/l = y * 2**(-recip_frac - ey)
    out   = convert(fmul(O, r))         r that factor in fp32 (exact), out in storage

Why these widths: the products of two fp16, bf16 or fp8 numbers are exact in fp32, so a
score rounds only in its d additions, as it would on a GPU; P and alpha lie in
[0, 1] and feed one multiply each, where fixed point with p_frac bits (the int8
format's exp2, 2**-p_frac absolute) costs less than a float exp2 and is below the
storage formats' own rounding (2**-11 relative for fp16, 2**-8 for bf16) for every
weight that matters; l keeps the int8 format's fixed point for the same reason
and because its reciprocal is built for it. O accumulates in fp32 because its
updates are many small terms (docs/accuracy.md, "O accumulators"). What this
costs is measured by bench/bench_accuracy_fp.py into docs/accuracy_fp.md.

Special values: subnormal inputs are honoured (every piece does). A row whose
running max ends NaN (a NaN in its Q row or in any K row, or inf - inf) or +inf
(an infinite score), or whose l is 0 (every score -inf), outputs NaN in every
element; a NaN in V_j reaches every row's element through 0 * NaN. NaN is data:
it stops nothing, and other heads never see it.

Causal masking (`causal=True`, `attenio.sim.golden.causal_limits`: row i of M sees
keys j < i + 1 + N - M, so N >= M): a masked (row, key) pair takes its step with the
max held (up = False, m unchanged) and e = 0, so alpha = 1, P = 0 and l is unchanged,
and O takes the not-up update fadd(O, fmul(+0, V_j)). That product is not always
nothing: a masked key whose V row holds inf or NaN makes the row's element NaN
(0 * inf), as the NaN in V_j above; a finite V_j adds a signed zero, which leaves O as
it was except that O = -0 becomes +0 where V_j's element is +0 or positive. The
score of a masked key never matters, so a NaN or inf in it changes nothing.

Rows are independent, so the model runs every row at once (no Q blocks, whose order
cannot change a row), in NumPy float32 (IEEE binary32, round to nearest even, as the
builders). `attention_bits` is the same computation through the bit-level twins, slow,
for the tests to hold the fast one to.

Public API
----------

`FloatDatapath(spec, *, max_seq_len, head_dim, split=1, rows_per_mac=None, fixed=None)`
    the datapath's parameters and its `FloatArith`.
`score_bits(dp, q, k)`
    fp32 scores through the bit-level twins, in the hardware's order of additions.
`store(spec, x)`
    float arrays rounded to storage encodings.
`attention(dp, q, k, v, causal=False)` / `attention_bits(dp, q, k, v, causal=False)`
    storage encodings of one head's output, fast / through the bit-level twins.
`reference(q, k, v, causal=False)`
    float64 softmax(Q K^T / sqrt(d)) V, masked keys left out with `causal`.
"""

import math

import numpy as np

from attenio import validate
from attenio.hdl.formats import fp
from attenio.hdl.formats.float import FloatArith
from attenio.hdl.formats.fp import FP32
from attenio.hdl.mac import score_sums
from attenio.sim.golden import causal_limits

__all__ = ["FloatDatapath", "store", "score_bits", "attention", "attention_bits", "reference"]

#: keys scored at once (the scores of a chunk are independent of each other)
_CHUNK = 256


def store(spec, x):
    """Float arrays rounded to storage format `spec` (through fp32), as encodings."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    return fp.np_convert(bits, FP32, spec)


class FloatDatapath:
    """The floating-point datapath: storage `spec` (one of `fp.STORAGE`), O in `out` (None:
    the storage format), s = `split`, and the
    fixed-point softmax of `fixed` (an `Int8Format`: x_frac, p_frac, the exp2 table and
    the reciprocal) for up to `max_seq_len` keys at `head_dim`; `arith` is its
    `attenio.hdl.formats.float.FloatArith`. With `rows_per_mac` (r rows a group) the
    MACs keep `sums` sub-sums a slot, as the hardware does (`attenio.hdl.mac.score_sums`),
    which set the order of a score's additions; without, one sum a slot (the order
    of the MACs without the interleave, and of every r >= the accumulator's latency)."""

    def __init__(self, spec, *, max_seq_len, head_dim, split=1, rows_per_mac=None,
                 fixed=None, out=None):
        if validate.split_breaks(split, head_dim=head_dim):
            raise ValueError(f"FloatDatapath: split {split} must divide d = {head_dim}")
        if rows_per_mac is not None:
            validate.positive("FloatDatapath", rows_per_mac=rows_per_mac)
        self.spec, self.split, self.head_dim = spec, split, head_dim
        self.arith = FloatArith(spec, max_seq_len=max_seq_len, head_dim=head_dim, fixed=fixed,
                                out=out)
        self.out = self.arith.out
        self.sums = 1 if rows_per_mac is None else score_sums(
            self.arith, rows_per_mac, head_dim=head_dim, split=split)
        self.fixed = self.arith.fixed
        cfg = self.fixed.cfg
        self.x_frac, self.x_bits = cfg.x_frac, self.arith.x_shape.width
        self.p_frac, self.recip_frac = cfg.p_frac, cfg.recip_frac
        self.c = np.uint32(self.arith.c).view(np.float32)

    def store(self, x):
        return store(self.spec, x)

    def store_out(self, x):
        """Float arrays rounded to the format O is written in, as encodings."""
        return store(self.out, x)

    def widen(self, bits):
        """Storage encodings as fp32 values (exact), decoded as `fp._np_widen` does."""
        return self.spec.decode(bits).astype(np.float32)


def _score_order(d, s, k):
    """The columns of a score in the order of its additions: for each sub-sum i in fold
    order, for each MAC g of the group in chain order, its columns in accumulation
    order, g + s c for the chunks c = d/s - k + i (mod k): [[[g + s c, ...], ...], ...]."""
    chunks = d // s
    return [[[g + s * c for c in range((chunks - k + i) % k, chunks, k)] for g in range(s)]
            for i in range(k)]


def _fold(order, product, add):
    """A score from `product(col)` and `add(a, b)` in `_score_order`'s order: each MAC's
    sum from its first product, the chain's a + mine, the fold's a + chain."""
    folded = None
    for groups in order:
        chain = None
        for cols in groups:
            acc = product(cols[0])
            for c in cols[1:]:
                acc = add(acc, product(c))
            chain = acc if chain is None else add(chain, acc)
        folded = chain if folded is None else add(folded, chain)
    return folded


def _scores(dp, q, k):
    """fp32 scores [rows, keys] in the hardware's order of additions."""
    with np.errstate(all="ignore"):
        return _fold(_score_order(dp.head_dim, dp.split, dp.sums),
                     lambda c: q[:, c, None] * k[None, :, c], lambda a, b: a + b)


def score_bits(dp, q, k):
    """fp32 score encodings [rows, keys] of storage encodings q [rows, d] and k [keys, d],
    through `FloatArith`'s twins in the hardware's order of additions (slow: tests)."""
    a = dp.arith
    rows, keys = len(q), len(k)
    qq = np.repeat(np.asarray(q)[:, None, :], keys, 1).reshape(rows * keys, -1)
    kk = np.tile(np.asarray(k), (rows, 1))
    out = _fold(_score_order(dp.head_dim, dp.split, dp.sums),
                lambda c: a.np_product(qq[:, c], kk[:, c]), a.np_accumulate)
    return np.asarray(out).reshape(rows, keys)


def _softmax_weights(dp, m, x, visible):
    """(m_new, alpha, P, up) of fp32 running maxima m [rows] and scaled scores x [rows]:
    one exp2 of -|x - m|, which is alpha if the max moves (P = 1), else P (alpha = 1).
    Where `visible` is False (a masked key) the max holds, alpha = 1 and P = 0."""
    with np.errstate(all="ignore"):
        d = x - m
        up = (d > 0) & visible
        z = fp.np_to_fixed((-np.abs(d)).view(np.uint32), dp.x_frac, dp.x_bits)
        m_new = fp.FP32.to_float(fp.np_maximum(m.view(np.uint32), x.view(np.uint32)))
    e, one = np.where(visible, dp.fixed.np_exp2(z), 0), dp.fixed.one
    return np.where(visible, m_new, m), np.where(up, e, one), np.where(up, one, e), up


def _finish(dp, o, l, m):
    """O / l in the storage format; NaN in every element of a row whose running max is
    NaN or +inf, or whose l is 0 (every score -inf)."""
    y, e = dp.fixed.np_reciprocal(l)
    r = np.ldexp(y.astype(np.float64), -dp.recip_frac - e).astype(np.float32)
    with np.errstate(all="ignore"):
        out = fp.np_convert((o * r[:, None]).view(np.uint32), FP32, dp.out)
        bad = np.isnan(m) | (m == np.inf) | (l == 0)
    return np.where(bad[:, None], dp.out.bits_dtype(dp.out.nan), out).astype(dp.out.bits_dtype)


def _limits(rows, n, causal):
    """The keys each row sees: all, or `causal_limits` (which refuses n < rows)."""
    return causal_limits(rows, n) if causal else np.full(rows, n, np.int64)


def attention(dp, q, k, v, causal=False, c=None):
    """Encodings of the output [rows, d] (in `dp.out`) for storage encodings q [rows, d],
    k, v [N, d] of one head; `causal` masks key j from row i when j >= causal_limit; `c` the
    SCALE_C register's fp32 bits (None: the datapath's log2(e) / sqrt(d), unscaled inputs)."""
    c = dp.c if c is None else np.uint32(c).view(np.float32)
    qf, kf, vf = dp.widen(q), dp.widen(k), dp.widen(v)
    rows, n = len(qf), len(kf)
    limits = _limits(rows, n, causal)
    scale = np.float32(2.0 ** -dp.p_frac)
    m = np.full(rows, -np.inf, np.float32)
    l = np.zeros(rows, np.int64)
    o = np.zeros((rows, dp.head_dim), np.float32)
    with np.errstate(all="ignore"):
        for j0 in range(0, n, _CHUNK):
            x = _scores(dp, qf, kf[j0:j0 + _CHUNK]) * c
            for t in range(x.shape[1]):
                m, alpha, p, up = _softmax_weights(dp, m, x[:, t], j0 + t < limits)
                l = dp.fixed.np_update_l(alpha, l, p)
                vj = vf[j0 + t][None, :]
                af = (alpha.astype(np.float32) * scale)[:, None]
                pf = (p.astype(np.float32) * scale)[:, None]
                o = np.where(up[:, None], af * o + vj, o + pf * vj)
    return _finish(dp, o, l, m)


def attention_bits(dp, q, k, v, causal=False):
    """`attention` through `FloatArith`'s twins, one operation at a time (slow: tests)."""
    a = dp.arith
    rows, n, d = len(q), len(k), dp.head_dim
    limits = _limits(rows, n, causal)
    c = np.full(rows, a.c, np.uint32)
    m = np.full(rows, a.m_init, np.uint32)
    l = np.zeros(rows, np.int64)
    o = np.zeros((rows, d), np.uint32)
    for j in range(n):
        total = score_bits(dp, q, k[j:j + 1])[:, 0]
        x = a.np_scale(total, c)
        z, up = a.np_exp_arg(x, m)
        e = a.np_exp2(z)
        visible = j < limits                  # masked: up = False, e = 0, m held
        up, e = up & visible, np.where(visible, e, 0)
        l = a.np_update_l(up, e, l)
        o = a.np_update(np.repeat(up[:, None], d, 1),
                        np.repeat(a.np_to_float(e)[:, None], d, 1), o,
                        np.broadcast_to(v[j], (rows, d)))
        m = np.where(visible, a.np_maximum(m, x), m)
    return _finish(dp, FP32.to_float(o), l, FP32.to_float(m))


def reference(q, k, v, causal=False):
    """float64 softmax(Q K^T / sqrt(d)) V of float arrays; `causal` leaves the keys a row
    does not see out of its softmax."""
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    s = q @ k.T / math.sqrt(q.shape[-1])
    if causal:
        limits = causal_limits(len(q), len(k))
        s[np.arange(len(k))[None, :] >= limits[:, None]] = -np.inf
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v
