"""The bit-exact golden model of AttenIO attention, and its float64 yardstick.

Public API
----------

`quantize(x)` / `dequantize(q, scale)`
    float array -> (int8 array, per-tensor scale) with symmetric rounding to
    [-127, 127]; and back.
`softmax_constant(scale_q, scale_k, head_dim, fmt=None)`
    the raw fixed-point c = scale_q*scale_k*log2(e)/sqrt(d) the hardware gets.
`attention(q, k, v, *, c, a=64, arith=None, fmt=None, max_seq_len=None, causal=False)`
    int8 output on V's scale, bit for bit what the hardware computes: Q blocks of
    `a` rows, K/V one row at a time, online softmax with b = 1, then O/l via the
    reciprocal. Every value passes through the NumPy twins of
    `attenio.hdl.formats.Int8Arith`.
`run_block(arith, q_block, k, v, c, *, limits=None)`
    the same for one Q block of one head, written literally as the hardware
    order (`init_state`, `step` per K/V row, `finish`); slow, it is the
    specification `attention` is tested against. `limits`: the keys each row
    sees (causal masking), default all.
`causal_limits(rows, keys)`
    the keys each of `rows` query rows sees under causal masking
    (`attenio.analysis.causal_limit`); ValueError if keys < rows.
`reference(q, k, v, *, scale_q, scale_k, scale_v, causal=False)`
    float64 softmax(Q K^T scale_q scale_k / sqrt(d)) V on the dequantized inputs
    (real units: divide by scale_v for V's LSBs); `causal` leaves masked keys out.
`accuracy(out, ref, scale_v)`
    fraction of outputs equal to round(ref/scale_v), the largest distance from it
    in LSB, and the mean |out - ref/scale_v| in LSB.
`make_inputs(kind, seq_len=, head_dim=, heads=1, rows=None, seed=0)`
    quantized Gaussian or adversarial test inputs (`INPUT_KINDS`) with their scales.

Shapes: q is [heads, M, d] and k, v are [heads, N, d] (or all without the heads
axis); M = N for self-attention, a smaller M samples query rows (rows are
independent). Results do not depend on `a`, nor on the order of the Q blocks.

Causal masking (`causal=True`): row i of M sees keys j < i + 1 + N - M (rows aligned
at the end; j <= i for self-attention), so N >= M. A masked (row, key) pair still
takes its softmax step in the hardware, with its contribution forced: the max does
not move (up = False, m unchanged) and e = 0, so alpha = 1 and P = 0; l and O add 0.
In integers that is the same as skipping the key, which `attention` does by giving
masked scores m_init (they cannot move the max) and P = 0.

How `attention` is fast yet exact. Rows are independent and every Q block runs
the same sequence of steps, so all blocks (and heads) advance together, as
batch axes of NumPy arrays; K/V rows are taken in chunks. Within a chunk the
running max of every row is a cumulative maximum; one exp2 per score suffices
since either alpha or P is exactly 1 (exp2(0) = 1); and integer additions are
exact in any order, so a row whose max does not change within a chunk (alpha = 1,
rescale is the identity) adds its sum of P*V as one matrix product, computed in
float64 where every partial sum is an integer below 2**53, hence exact. Rows
whose max changes inside a chunk are stepped one K/V row at a time.
"""

from dataclasses import dataclass
from math import ceil

import numpy as np

from attenio import validate
from attenio.analysis import causal_limit
from attenio.formats import Int8Format
from attenio.hdl.formats import Int8Arith

__all__ = ["quantize", "dequantize", "softmax_constant", "attention", "run_block", "init_state",
           "step", "finish", "OnlineState", "causal_limits", "reference", "accuracy",
           "make_inputs", "INPUT_KINDS", "attention_peak_bytes", "reference_peak_bytes"]

_CHUNK = 64

#: `attention` holds about this many int64 arrays of one chunk's scores per Q row at once
#: (scores, running maxima, exponentials, masks; tracemalloc: 136 MiB at N = 16384, one head)
_LIVE_CHUNK_ARRAYS = 17

#: the float64 scores `reference` computes at once (bounds its score block to 128 MiB)
_REFERENCE_SCORES = 1 << 24


def attention_peak_bytes(*, heads, rows, head_dim):
    """Host memory `attention` needs at most for `rows` padded Q rows of `heads` heads."""
    return heads * rows * (_LIVE_CHUNK_ARRAYS * _CHUNK + 3 * head_dim) * 8


def reference_peak_bytes(*, heads, rows, seq_len, head_dim):
    """Host memory `reference` needs at most: its score block (scores, exponentials, a
    temporary) and its float64 inputs and output."""
    block = max(1, _REFERENCE_SCORES // seq_len) * seq_len
    return 3 * 8 * min(block, rows * seq_len) + 4 * 8 * heads * seq_len * head_dim


# -- quantization ---------------------------------------------------------------------------

def quantize(x):
    """Symmetric per-tensor int8 quantization: (q, scale) with x ~= q * scale, |q| <= 127."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        raise ValueError("quantize: empty array")
    if not np.all(np.isfinite(x)):
        raise ValueError("quantize: the array holds NaN or infinite values")
    peak = float(np.max(np.abs(x)))
    scale = peak / 127 if peak > 0 else 1.0
    q = np.clip(np.rint(x / scale), -127, 127).astype(np.int8)
    return q, scale


def dequantize(q, scale):
    return np.asarray(q, dtype=np.float64) * scale


def softmax_constant(scale_q, scale_k, head_dim, fmt=None):
    """The register value of c (see `Int8Format.softmax_constant`)."""
    fmt = Int8Format() if fmt is None else fmt
    return fmt.softmax_constant(scale_q=scale_q, scale_k=scale_k, head_dim=head_dim)


# -- input checks ---------------------------------------------------------------------------

def _as_3d(name, x):
    x = np.asarray(x)
    if x.ndim not in (2, 3):
        raise ValueError(f"{name} must have shape [heads, rows, d] or [rows, d], not {list(x.shape)}")
    if x.ndim == 2:
        x = x[None]
    if x.shape[1] == 0 or x.shape[2] == 0:
        raise ValueError(f"{name} must not be empty, got shape {list(x.shape)}")
    return x


def _check_int8(name, x):
    if not np.issubdtype(x.dtype, np.integer):
        raise ValueError(f"{name} must hold int8 values (integer dtype), not {x.dtype}; "
                         f"use quantize() on float data")
    lo, hi = int(x.min()), int(x.max())
    if lo < -128 or hi > 127:
        raise ValueError(f"{name} holds values outside int8 [-128, 127]: min {lo}, max {hi}")
    return x.astype(np.int64)


def _check_qkv(q, k, v, *, ints):
    squeeze = np.ndim(q) == 2
    q, k, v = _as_3d("q", q), _as_3d("k", k), _as_3d("v", v)
    if ints:
        q, k, v = _check_int8("q", q), _check_int8("k", k), _check_int8("v", v)
    if k.shape != v.shape:
        raise ValueError(f"k and v must have the same shape, not {list(k.shape)} and {list(v.shape)}")
    if q.shape[0] != k.shape[0] or q.shape[2] != k.shape[2]:
        raise ValueError(f"q {list(q.shape)} and k {list(k.shape)} disagree on heads or d")
    return q, k, v, squeeze


# -- the literal hardware order -------------------------------------------------------------

@dataclass
class OnlineState:
    """The online-softmax state of the rows of one Q block: m (running max score),
    l (running sum, p_frac fractional bits), o (accumulators [rows, d])."""

    m: np.ndarray
    l: np.ndarray
    o: np.ndarray


def init_state(arith, rows, d):
    return OnlineState(m=np.full(rows, arith.m_init, np.int64), l=np.zeros(rows, np.int64),
                       o=np.zeros((rows, d), np.int64))


def step(arith, state, s_j, v_j, c, visible=None):
    """One K/V row j for every row of a block: exactly the hardware's operations.

    s_j: the block's scores against K_j (exact integers, [rows]); v_j: V_j ([d]);
    visible: bool [rows], False where causal masking hides K_j from the row (default all
    True): its step runs with the max held, alpha = 1 and P = 0.
    """
    visible = np.ones(len(state.m), bool) if visible is None else np.asarray(visible, bool)
    m_new = np.where(visible, arith.np_max(state.m, s_j), state.m)
    alpha = np.where(visible, arith.np_exp2(arith.np_scale(arith.np_sub(state.m, m_new), c)),
                     arith.one)
    p = np.where(visible, arith.np_exp2(arith.np_scale(arith.np_sub(s_j, m_new), c)), 0)
    l = arith.np_update_l(alpha, state.l, p)
    o = arith.np_update_o(alpha[:, None], state.o, p[:, None], np.asarray(v_j, np.int64)[None, :])
    return OnlineState(m=m_new, l=l, o=o)


def _check_widths(arith, l, o):
    # the format's widths are claimed exact for N <= max_seq_len: hold them to it
    w = arith.widths
    if l.size and (l.min() < 0 or l.max() >= 1 << w.l):
        raise RuntimeError(f"l left its {w.l}-bit register: [{l.min()}, {l.max()}]")
    if o.size and (o.min() < -(1 << (w.o_acc - 1)) or o.max() >= 1 << (w.o_acc - 1)):
        raise RuntimeError(f"O left its {w.o_acc}-bit accumulator: [{o.min()}, {o.max()}]")


def finish(arith, state):
    """O/l through the reciprocal, rounded and saturated to int8 on V's scale."""
    _check_widths(arith, state.l, state.o)
    y, e = arith.np_reciprocal(state.l)
    return arith.np_finalize(state.o, y[..., None], e[..., None]).astype(np.int8)


def run_block(arith, q_block, k, v, c, *, limits=None):
    """One Q block [a, d] of one head against K, V [N, d], one K/V row at a time.

    `limits` [a]: how many keys each row sees (causal masking; `causal_limits` gives a
    block's slice of them), default N; the block still steps through all N keys.
    """
    q_block = np.asarray(q_block, np.int64)
    k = np.asarray(k, np.int64)
    v = np.asarray(v, np.int64)
    rows, n = q_block.shape[0], k.shape[0]
    limits = np.full(rows, n) if limits is None else np.asarray(limits)
    if limits.shape != (rows,):
        raise ValueError(f"run_block: limits must have one entry per row ({rows}), "
                         f"not shape {list(limits.shape)}")
    state = init_state(arith, rows, q_block.shape[1])
    for j in range(n):
        s = np.zeros(rows, np.int64)
        for t in range(q_block.shape[1]):                  # the MAC chain, d steps
            s = arith.np_mac(s, q_block[:, t], k[j, t])
        state = step(arith, state, s, v[j], c, visible=j < limits)
    return finish(arith, state)


def causal_limits(rows, keys):
    """The keys each of `rows` query rows sees under causal masking against `keys` keys
    (int64 [rows]); every row must see one at least, so keys >= rows."""
    if keys < rows:
        raise ValueError(f"causal attention needs at least as many keys as queries "
                         f"(N = {keys} < M = {rows}): the first rows would see no key")
    return causal_limit(np.arange(rows, dtype=np.int64), rows, keys)


# -- the fast, equivalent model -------------------------------------------------------------

def _arith_for(arith, fmt, max_seq_len, n, d):
    if arith is None:
        arith = Int8Arith(fmt, max_seq_len=max_seq_len or n, head_dim=d)
    elif fmt is not None or max_seq_len is not None:
        raise ValueError("give either arith or fmt/max_seq_len, not both")
    if n > arith.max_seq_len:
        raise ValueError(f"N = {n} keys exceed the hardware's max_seq_len = {arith.max_seq_len}")
    if d > arith.head_dim:
        raise ValueError(f"d = {d} exceeds the hardware's head_dim = {arith.head_dim}")
    return arith


def _check_c(arith, c):
    limit = 1 << (arith.cfg.c_int + arith.cfg.c_frac)
    return int(validate.integer("attention", "c (the raw fixed-point softmax constant, see "
                                "softmax_constant())", c, lo=1, hi=limit - 1))


def attention(q, k, v, *, c, a=64, arith=None, fmt=None, max_seq_len=None, causal=False):
    """Bit-exact AttenIO attention: int8 q [.., M, d], k, v [.., N, d] -> int8 [.., M, d].

    `c` is the raw softmax constant (`softmax_constant`); `a` the Q block rows;
    `arith` an `Int8Arith` (or build one from `fmt` and `max_seq_len`, default N);
    `causal` masks key j from row i when j >= `causal_limit(i, M, N)` (needs N >= M).
    """
    q, k, v, squeeze = _check_qkv(q, k, v, ints=True)
    validate.integer("attention", "a (Q block rows)", a, lo=1)
    H, M, d = q.shape
    N = k.shape[1]
    arith = _arith_for(arith, fmt, max_seq_len, N, d)
    c = _check_c(arith, c)
    one = arith.one
    # Q blocks of `a` rows, padded; all blocks of all heads advance together.
    blocks = ceil(M / a)
    qp = np.zeros((H, blocks * a, d), np.int64)
    qp[:, :M] = q
    R = blocks * a
    if causal:
        limits = np.full(R, N, np.int64)                   # padding rows: any limit
        limits[:M] = causal_limits(M, N)
    m = np.full((H, R), arith.m_init, np.int64)
    l = np.zeros((H, R), np.int64)
    o = np.zeros((H, R, d), np.int64)
    qf = qp.astype(np.float64)
    for j0 in range(0, N, _CHUNK):
        j1 = min(N, j0 + _CHUNK)
        kc, vc = k[:, j0:j1], v[:, j0:j1]
        # |S| < 2**22: exact in float64, so BLAS gives the MAC chain's integers.
        s = np.rint(qf @ kc.transpose(0, 2, 1).astype(np.float64)).astype(np.int64)
        if causal:
            # masked scores at the floor of the max cannot move it (up is False); P is
            # forced to 0 below, alpha is 1 since up is False
            masked = np.arange(j0, j1)[None, :] >= limits[:, None]        # [R, chunk]
            s = np.where(masked, arith.m_init, s)
        mc = np.maximum.accumulate(np.concatenate([m[..., None], s], axis=-1), axis=-1)
        m_old, m_new = mc[..., :-1], mc[..., 1:]
        up = s > m_old
        # one of alpha, P is exp2(0) = 1: one exp2 of -|S_j - m_old| per score
        ex = arith.np_exp2(arith.np_scale(-np.abs(s - m_old), c))
        alpha = np.where(up, ex, one)
        p = np.where(up, one, ex)
        if causal:
            p = np.where(masked, 0, p)
        moved = up.any(axis=-1)
        # rows without a max change: l += sum P, O += P @ V exactly
        pq = np.where(moved[..., None], 0, p)
        l += pq.sum(axis=-1)
        o += np.rint(pq.astype(np.float64) @ vc.astype(np.float64)).astype(np.int64)
        # rows with a change: step through the chunk
        hs, rs = np.nonzero(moved)
        if hs.size:
            lm, om = l[hs, rs], o[hs, rs]
            for t in range(j1 - j0):
                at = alpha[hs, rs, t]
                ch = at != one
                if ch.any():
                    lm[ch] = arith.np_rescale(at[ch], lm[ch])
                    om[ch] = arith.np_rescale(at[ch, None], om[ch])
                pt = p[hs, rs, t]
                lm += pt
                om += pt[:, None] * vc[hs, t]
            l[hs, rs], o[hs, rs] = lm, om
        m = m_new[..., -1]
    _check_widths(arith, l, o)
    y, e = arith.np_reciprocal(l)
    out = arith.np_finalize(o, y[..., None], e[..., None]).astype(np.int8)[:, :M]
    return out[0] if squeeze else out


# -- the float64 yardstick ------------------------------------------------------------------

def reference(q, k, v, *, scale_q, scale_k, scale_v, causal=False):
    """softmax(Q K^T / sqrt(d)) V in float64 on dequantized inputs, in real units;
    `causal` leaves the keys a row does not see out of its softmax."""
    q, k, v, squeeze = _check_qkv(q, k, v, ints=False)
    for name, s in (("scale_q", scale_q), ("scale_k", scale_k), ("scale_v", scale_v)):
        validate.positive_number("reference", name, s)
    d = q.shape[2]
    if causal:
        limits = causal_limits(q.shape[1], k.shape[1])
    qf, kf, vf = dequantize(q, scale_q), dequantize(k, scale_k), dequantize(v, scale_v)
    out = np.empty(q.shape, np.float64)
    rows = max(1, (1 << 24) // k.shape[1])            # bound the score block to 128 MB
    for h in range(q.shape[0]):
        for r0 in range(0, q.shape[1], rows):
            s = qf[h, r0:r0 + rows] @ kf[h].T / np.sqrt(d)
            if causal:
                s[np.arange(k.shape[1])[None, :] >= limits[r0:r0 + rows, None]] = -np.inf
            s -= s.max(axis=1, keepdims=True)
            w = np.exp(s)
            out[h, r0:r0 + rows] = (w @ vf[h]) / w.sum(axis=1, keepdims=True)
    return out[0] if squeeze else out


def accuracy(out, ref, scale_v):
    """{'frac_exact', 'max_err_lsb', 'mean_abs_err_lsb'} of int8 `out` against float `ref`."""
    out = np.asarray(out, np.int64)
    exact = ref / scale_v
    target = np.clip(np.rint(exact), -128, 127).astype(np.int64)
    if out.shape != target.shape:
        raise ValueError(f"out {list(out.shape)} and ref {list(target.shape)} differ in shape")
    return {"frac_exact": float(np.mean(out == target)),
            "max_err_lsb": int(np.max(np.abs(out - target))),
            "mean_abs_err_lsb": float(np.mean(np.abs(out - exact)))}


# -- test inputs ----------------------------------------------------------------------------

INPUT_KINDS = ("gaussian", "spread", "equal", "dominant", "dominant_far", "ascending")


def make_inputs(kind, *, seq_len, head_dim, heads=1, rows=None, seed=0, quantized=True):
    """Quantized test inputs: dict(q, k, v, scale_q, scale_k, scale_v); with `quantized`
    False the float64 arrays before quantization, dict(q, k, v) (for the float formats).

    kind: "gaussian" (unit normal Q, K, V), "spread" (scores with a standard
    deviation of 8 nats: a few keys carry each row), "equal" (every key the same,
    so all scores of a row are equal and l reaches N), "dominant" (one key leads
    by ln N + 3 nats: it carries about half the weight, the N - 1 others share the
    rest in tiny weights), "dominant_far" (one key leads by ~40 nats), "ascending"
    (every row's scores rise strictly along the keys, so the max moves and O and l
    are rescaled at every step; N <= 16384).
    `rows` query rows (default seq_len).
    """
    if kind not in INPUT_KINDS:
        raise ValueError(f"unknown input kind {kind!r}; choose one of {', '.join(INPUT_KINDS)}")
    rng = np.random.default_rng(seed)
    n, d, m = seq_len, head_dim, seq_len if rows is None else rows
    q = rng.normal(size=(heads, m, d))
    k = rng.normal(size=(heads, n, d))
    v = rng.normal(size=(heads, n, d))
    if kind == "spread":
        q *= 8.0
    elif kind == "equal":
        k[:] = k[:, :1]
    elif kind in ("dominant", "dominant_far"):
        q += 2.0                                  # a shared direction: all ones
        gap = np.log(n) + 3 if kind == "dominant" else 40.0
        j = rng.integers(n, size=heads)
        k[np.arange(heads), j] = gap / (2 * np.sqrt(d)) + 0.0
        k *= 1.0
    elif kind == "ascending":
        x = _ascending(rng, n, d, heads, m, v)
        if quantized:
            return x
        return {t: dequantize(x[t], x[f"scale_{t}"]) for t in "qkv"}
    if not quantized:
        return {"q": q, "k": k, "v": v}
    (q, sq), (k, sk), (v, sv) = quantize(q), quantize(k), quantize(v)
    return {"q": q, "k": k, "v": v, "scale_q": sq, "scale_k": sk, "scale_v": sv}


def _ascending(rng, n, d, heads, m, v):
    # Integer scores strictly rising with j for every row: key j = (hi, lo) = divmod(j, L)
    # in two coordinates, a query row (q0, 1) with q0 > L - 1, so S_j = q0*hi + lo (+0 from
    # the other coordinates, where K is 0). The scales put ~25 nats over the sequence.
    if n > 256 * 64:
        raise ValueError(f"ascending inputs go up to N = {256 * 64}, not {n}")
    if d < 2:
        raise ValueError("ascending inputs need head_dim >= 2")
    L = 64
    j = np.arange(n)
    k = np.zeros((heads, n, d), np.int64)
    k[:, :, 0] = j // L - 128
    k[:, :, 1] = j % L - L // 2
    q = rng.integers(-127, 128, (heads, m, d))
    q[:, :, 0] = rng.integers(L, 128, (heads, m))
    q[:, :, 1] = 1
    span = 127 * (n // L) + L
    sqk = 25.0 * np.sqrt(d) / span
    v, sv = quantize(v)
    return {"q": q.astype(np.int8), "k": k.astype(np.int8), "v": v, "scale_q": float(np.sqrt(sqk)),
            "scale_k": float(np.sqrt(sqk)), "scale_v": sv}
