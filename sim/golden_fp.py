"""The golden model of the floating-point formats: fp16 or bf16 storage, fp32 accumulation.

Every rounding sits where the floating-point datapath has it (the pieces are
`attenio.hdl.formats.fp` and the fixed-point exp2 and reciprocal of
`attenio.hdl.formats.Int8Arith`); per query row and K/V row j:

    S_j   = sum of fmul(q_c, k_c)       fp32: MAC g of a row's group of s adds the
                                        products of its columns g, g + s, ... in order
                                        (starting from the first product), the chain
                                        adds the s partial sums in group order
    x_j   = fmul(S_j, c)                c = fp32(log2(e) / sqrt(d))
    m_new = maximum(m, x_j)             m starts at -inf
    zA, zP = to_fixed(m - m_new), to_fixed(x_j - m_new)     fp32 differences, then
                                        x_frac fractional bits, saturated at x_min
    alpha, P = exp2(zA), exp2(zP)       fixed point, p_frac bits; one of them is 1
    l     = rescale(alpha, l) + P       fixed point, as the int8 format's l
    O     = fadd(fmul(alpha, O), V_j)   when the max moved (P = 1), else
            fadd(O, fmul(P, V_j))       (alpha = 1): O in fp32
    ...after the last row:
    (y, e) = reciprocal(l)              1/l = y * 2**(-recip_frac - e)
    out   = convert(fmul(O, r))         r that factor in fp32 (exact), out in storage

Why these widths: the products of two fp16 or bf16 numbers are exact in fp32, so a
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

Rows are independent, so the model runs every row at once (no Q blocks), in NumPy
float32 (IEEE binary32, round to nearest even, as the builders). `attention_bits` is the same computation through
the bit-level twins, slow, for the tests to hold the fast one to.
"""

import math

import numpy as np

from attenio.formats import Int8Format
from attenio.hdl.formats import Int8Arith, fp
from attenio.hdl.formats.fp import FP32

__all__ = ["FloatDatapath", "attention", "attention_bits", "reference"]

#: keys scored at once (the scores of a chunk are independent of each other)
_CHUNK = 256


class FloatDatapath:
    """The floating-point datapath: storage `spec` (fp16 or bf16), s = `split`, and the
    fixed-point softmax of `fixed` (an `Int8Format`: x_frac, p_frac, the exp2 table and
    the reciprocal) for up to `max_seq_len` keys at `head_dim`."""

    def __init__(self, spec, *, max_seq_len, head_dim, split=1, fixed=None):
        if spec not in (fp.FP16, fp.BF16):
            raise TypeError(f"FloatDatapath: storage must be FP16 or BF16, not {spec!r}")
        if head_dim % split:
            raise ValueError(f"FloatDatapath: split {split} must divide d = {head_dim}")
        self.spec, self.split, self.head_dim = spec, split, head_dim
        self.fixed = Int8Arith(fixed or Int8Format(), max_seq_len=max_seq_len,
                               head_dim=head_dim)
        cfg = self.fixed.cfg
        self.x_frac, self.x_bits = cfg.x_frac, self.fixed.x_shape.width
        self.p_frac, self.recip_frac = cfg.p_frac, cfg.recip_frac
        self.c = np.float32(math.log2(math.e) / math.sqrt(head_dim))

    def store(self, x):
        """Float arrays rounded once to the storage format (via fp32), as encodings."""
        bits = np.asarray(x, dtype=np.float32).view(np.uint32)
        return fp.np_convert(bits, FP32, self.spec)

    def widen(self, bits):
        """Storage encodings as fp32 values (exact)."""
        return self.spec.to_float(bits).astype(np.float32)


def _score_order(d, s):
    """The columns of each MAC of a group in accumulation order: [[g, g + s, ...], ...]."""
    return [list(range(g, d, s)) for g in range(s)]


def _scores(dp, q, k):
    """fp32 scores [rows, keys] in the hardware's order of additions."""
    with np.errstate(all="ignore"):
        total = None
        for cols in _score_order(dp.head_dim, dp.split):
            acc = q[:, cols[0], None] * k[None, :, cols[0]]
            for c in cols[1:]:
                acc = acc + q[:, c, None] * k[None, :, c]
            total = acc if total is None else total + acc
    return total


def _softmax_weights(dp, m, x):
    """(m_new, alpha, P, up) of fp32 running maxima m [rows] and scaled scores x [rows]."""
    with np.errstate(all="ignore"):
        m_new = fp.FP32.to_float(fp.np_maximum(m.view(np.uint32), x.view(np.uint32)))
        za = fp.np_to_fixed((m - m_new).view(np.uint32), dp.x_frac, dp.x_bits)
        zp = fp.np_to_fixed((x - m_new).view(np.uint32), dp.x_frac, dp.x_bits)
    alpha, p = dp.fixed.np_exp2(za), dp.fixed.np_exp2(zp)
    return m_new, alpha, p, x > m


def _finish(dp, o, l, m):
    """O / l in the storage format; NaN in every element of a row whose running max is
    NaN or +inf, or whose l is 0 (every score -inf)."""
    y, e = dp.fixed.np_reciprocal(l)
    r = np.ldexp(y.astype(np.float64), -dp.recip_frac - e).astype(np.float32)
    with np.errstate(all="ignore"):
        out = fp.np_convert((o * r[:, None]).view(np.uint32), FP32, dp.spec)
        bad = np.isnan(m) | (m == np.inf) | (l == 0)
    return np.where(bad[:, None], dp.spec.bits_dtype(dp.spec.nan), out).astype(dp.spec.bits_dtype)


def attention(dp, q, k, v):
    """Storage encodings of the output [rows, d] for storage encodings q [rows, d],
    k, v [N, d] of one head."""
    qf, kf, vf = dp.widen(q), dp.widen(k), dp.widen(v)
    rows, n = len(qf), len(kf)
    scale = np.float32(2.0 ** -dp.p_frac)
    m = np.full(rows, -np.inf, np.float32)
    l = np.zeros(rows, np.int64)
    o = np.zeros((rows, dp.head_dim), np.float32)
    with np.errstate(all="ignore"):
        for j0 in range(0, n, _CHUNK):
            x = _scores(dp, qf, kf[j0:j0 + _CHUNK]) * dp.c
            for t in range(x.shape[1]):
                m, alpha, p, up = _softmax_weights(dp, m, x[:, t])
                l = dp.fixed.np_update_l(alpha, l, p)
                vj = vf[j0 + t][None, :]
                af = (alpha.astype(np.float32) * scale)[:, None]
                pf = (p.astype(np.float32) * scale)[:, None]
                o = np.where(up[:, None], af * o + vj, o + pf * vj)
    return _finish(dp, o, l, m)


def attention_bits(dp, q, k, v):
    """`attention` through the bit-level twins, one operation at a time (slow: tests)."""
    qb = fp.np_convert(q, dp.spec, FP32)
    kb = fp.np_convert(k, dp.spec, FP32)
    vb = fp.np_convert(v, dp.spec, FP32)
    rows, n, d = len(qb), len(kb), dp.head_dim
    c = np.full(rows, dp.c, np.float32).view(np.uint32)
    one = dp.fixed.one
    m = np.full(rows, 0xFF800000, np.uint32)
    l = np.zeros(rows, np.int64)
    o = np.zeros((rows, d), np.uint32)
    to_f32 = FP32.to_float
    for j in range(n):
        total = None
        for cols in _score_order(d, dp.split):
            acc = fp.np_mul(qb[:, cols[0]], np.full(rows, kb[j, cols[0]]), FP32, FP32)
            for col in cols[1:]:
                acc = fp.np_add(acc, fp.np_mul(qb[:, col], np.full(rows, kb[j, col]),
                                               FP32, FP32))
            total = acc if total is None else fp.np_add(total, acc)
        x = fp.np_mul(total, c, FP32, FP32)
        m_new = fp.np_maximum(m, x)
        neg = np.uint32(1 << 31)
        za = fp.np_to_fixed(fp.np_add(m, m_new ^ neg), dp.x_frac, dp.x_bits)
        zp = fp.np_to_fixed(fp.np_add(x, m_new ^ neg), dp.x_frac, dp.x_bits)
        alpha, p = dp.fixed.np_exp2(za), dp.fixed.np_exp2(zp)
        up = to_f32(x) > to_f32(m)
        l = dp.fixed.np_update_l(alpha, l, p)
        a32 = (alpha.astype(np.float32) * np.float32(2.0 ** -dp.p_frac)).view(np.uint32)
        p32 = (p.astype(np.float32) * np.float32(2.0 ** -dp.p_frac)).view(np.uint32)
        vj = np.broadcast_to(vb[j], (rows, d))
        moved = fp.np_add(fp.np_mul(np.repeat(a32[:, None], d, 1), o, FP32, FP32), vj)
        kept = fp.np_add(o, fp.np_mul(np.repeat(p32[:, None], d, 1), vj, FP32, FP32))
        o = np.where(up[:, None], moved, kept)
        m = m_new
        assert np.all((alpha == one) | (p == one) | ~np.isfinite(to_f32(x)))
    return _finish(dp, FP32.to_float(o), l, FP32.to_float(m))


def reference(q, k, v):
    """float64 softmax(Q K^T / sqrt(d)) V of float arrays."""
    q, k, v = (np.asarray(t, np.float64) for t in (q, k, v))
    s = q @ k.T / math.sqrt(q.shape[-1])
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    return (p / p.sum(axis=-1, keepdims=True)) @ v
