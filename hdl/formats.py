"""Number formats: the hardware builders of the datapath and their bit-exact NumPy twins.

`Int8Arith` is the int8 format of AttenIO (DESIGN.md section 5). Every operation
the PE array and the softmax unit need has an Amaranth builder here and, beside
it, a NumPy twin that computes the very same bits; the golden model
(`attenio.sim.golden`) calls only the twins, so RTL and model cannot drift apart.
Widths come from `attenio.formats.Int8Format` (configuration, pure Python) through
`Int8Format.datapath`; no constant is typed twice.

The arithmetic
==============

Q, K, V are int8 with per-tensor scales sq, sk, sv. With c = sq*sk*log2(e)/sqrt(d)
(host-computed, `Int8Format.softmax_constant`, an unsigned fixed-point register
of c_int.c_frac bits) the softmax of row i is 2**(x_ij - max_j x_ij) / sum with
x = S*c. Per K/V row j and per Q row (b = 1, all element-wise):

    S_j   = sum_k q_k * k_jk                      `mac`      exact, score_bits signed
    m_new = max(m, S_j)                           `max`      kept in the score domain
    dA    = m - m_new ; dP = S_j - m_new          `sub`      exact, <= 0
    zA    = scale(dA, c) ; zP = scale(dP, c)      `scale`    x_frac bits, clamped >= -2**x_int
    alpha = exp2(zA) ; P = exp2(zP)               `exp2`     p_frac bits, in [0, 1]
    l     = rescale(alpha, l) + P                 `update` (v = 1; twin np_update_l)
    O     = rescale(alpha, O) + P * V_j           `update` (twin np_update_o) O in V's LSBs
    ... after the last row:
    (y, e) = reciprocal(l)                        1/l = y * 2**-e, y in (1/2, 1]
    out   = sat8(round(O * y * 2**-e))            `finalize` int8 on V's scale

Since c > 0, max(S*c) = c*max(S): the running max is held as an integer score
and x_j - m = c*(S_j - m_S) is formed from an exact integer difference, rounded
once. This is bit-identical to computing x = S*c exactly (c_frac fractional bits)
and taking max and difference there, and needs score_bits instead of
score_bits + c_int + c_frac per row. The initial m is the most negative score
(l = O = 0 then, so the first alpha is irrelevant). Either dA or dP is 0, so
either alpha or P is exactly 1; the final max key contributes exactly 1 to l,
hence l lies in [1, N] when it reaches the reciprocal.

All rounding is round-half-up, ``(v >> (k-1)) + 1 >> 1`` (floor of v/2**k + 1/2),
the same expression in hardware and twin.

exp2 of z <= 0: z = zi + zf with zi = floor(z) (the high bits of z) and
zf in [0, 1) (its x_frac low bits). 2**zf comes from a table of 2**exp_lut_bits
+ 1 values of 2**(i/2**T) with p_frac + exp_guard fractional bits and linear
interpolation on the remaining x_frac - T bits; the integer part is a right
shift by -zi; one rounding to p_frac bits at the end. Arguments below -2**x_int
(where the result rounds to 0 anyway) are clamped by `scale`.

Reciprocal of l in [1, N]: a leading-one detector gives e = floor(log2 l) and
the mantissa l * 2**-e in [1, 2) with recip_frac fractional bits (truncated); its
top recip_seed_bits fraction bits index a seed table of 1/(midpoint of the
interval); recip_iters Newton steps y <- y*(2 - mnt*y), each rounded to
recip_frac bits. No division anywhere.

Error analysis (why the defaults)
=================================

Target: the int8 output equals round(O_ref / sv) for >= 99% of elements and is
never more than 1 LSB away, for N up to 16384. The output is a weighted mean
of V: out = sum_j w_j V_j / sum_j w_j, so what counts is the error of the
weights relative to each other, times |V_j - out| <= 255 LSB. The output is
exact unless that error moves the value across a rounding boundary, so the
mismatch rate is about 2 * E|err| (err in LSB before the final rounding). We
want E|err| well below 0.005 LSB on realistic data, and a hard bound below
0.5 LSB on any data (then the output is never 2 LSB off).

1. alpha cancels, mostly. The same alpha multiplies l and O, so its error
   cancels in O/l for everything accumulated before it. It does not cancel
   between keys accumulated on either side of it: the weight ratio of keys j
   and j' carries the errors of every alpha between them. With keys in random
   order the max moves ~ln N times and this is negligible; with strictly
   rising scores it moves at every step, and since equal score steps give
   bit-identical alphas their errors add up systematically over the W steps
   whose keys still carry weight (W ~ 9000 in the "ascending" inputs at
   N = 16384). This drift is what sets x_frac (item 2); the rounding of each
   rescale (1/2 ulp of 2**-p_frac of l and of O) is bounded as in item 4.
2. Rounding of x (x_frac): each exp2 argument is off by up to 2**-(x_frac+1)
   log2 units, a relative weight error up to ln2 * 2**-(x_frac+1). For
   independent keys (rms 0.2 * 2**-x_frac per weight) a row carried by two
   equal keys with V 255 apart gets an rms error of ~18 * 2**-x_frac LSB,
   i.e. 1e-4 LSB at x_frac = 18 (0.07 LSB at x_frac = 8). The systematic drift
   of item 1 is the stronger constraint: measured on the ascending inputs at
   N = 16384, x_frac = 12 gives 97.5% exact (misses the target), 14 gives
   99.77%, 16 gives 99.88%, 18 gives 99.94%. x_frac = 18 costs only the width
   of the exp2 argument (24 bits) and 2 bits of the interpolation multiply.
3. exp2 table (exp_lut_bits T, interpolation): the linear interpolation
   error of 2**f is at most (ln 2)**2 / 8 * 2**-2T * 2 ~ 0.12 * 2**-2T
   relative; T = 7 gives <= 7e-6 (3.7e-6 measured over the whole domain)
   from a 128 x 49-bit ROM (value and slope) and a 21 x 11-bit multiply;
   T = 8 measured no better on the ascending inputs (x_frac dominates);
   without interpolation it would be ln2 * 2**-T = 5e-3. exp_guard = 3 keeps
   the table's own rounding (2**-27) below the final rounding to p_frac.
4. Rounding of P (p_frac): each P_j is off by at most 2**-(p_frac+1) absolute
   and l >= 1, so the output moves by at most N * 2**-(p_frac+1) * 255 LSB
   when all N errors share a sign (many keys with identical tiny weights),
   and by about sqrt(N) * 2**-(p_frac+1) * 0.58 * rms|V - out| on independent
   data. p_frac = 24 bounds the worst case by 0.125 LSB at N = 16384 (and
   below 0.5 LSB up to N = 65536) and the typical case by 1e-4 LSB. The
   "dominant" inputs (one key with half the weight, N - 1 keys sharing the
   rest in weights ~1/N) are the sharpest probe: at N = 16384 p_frac = 16
   measures 93-98% exact (row samples differ), 20 gives 99.75-99.94%, 24
   gives >= 99.99%. The same p_frac serves l and O: O must hold P*V exactly,
   else every accumulation would round. Hence l has p_frac + bitlen(N) bits
   and O 8 + bitlen(N) + p_frac (39 and 47 at N = 16384). Strictly rising
   scores rescale at every step; their roundings obey the same bound.
5. Scale constant (c_frac): its rounding changes the temperature by a relative
   2**-(c_frac+1)/c; over the ~30 log2 units of weights that matter this is
   below 1e-4 for c >= 2**-14 (softmax_constant refuses a c with fewer than
   12 significant bits). c_int = 2, c_frac = 30 fill one 32-bit register.
6. Reciprocal: the seed's relative error ~2**-(s+1) is squared by each Newton
   step; s = 8 and 2 steps leave only the rounding of recip_frac = 24 bits
   (1.2e-7 relative measured, 1.5e-5 LSB at |out| = 128). One step would
   leave 2**-18 (5e-4 LSB), also enough; the table is 256 x 25 bits.

Hard bound. Per-weight relative errors below 1e-5 (items 2, 3, 5) move a
weighted mean by at most 2 * 1e-5 * 255 = 5e-3 LSB; with items 4 and 6 the
error stays below ~0.13 LSB on any data up to N = 16384, so the output is
never 2 LSB off, except for the systematic alpha drift of item 1, which
grows with the number of rescales among the keys that carry weight and has
no useful a-priori bound for adversarial orders; it is measured instead
(ascending inputs).

Measured (bench/bench_accuracy.py, `make bench`): on Gaussian and the five
adversarial input kinds of `attenio.sim.golden.make_inputs`, N = 256..16384,
d = 64 and 128, every case is >= 99.93% exact and never more than 1 LSB off
(the ascending inputs are the weakest; most cases are >= 99.99%).

Cost of the defaults, per unit: PE (one O element) one 25 x 47-bit multiply
(alpha*O or P*V, see `update`) into a 47-bit accumulator, plus the 8 x 8 MAC
into a 22/23-bit score; EXP module a 24 x 32-bit multiply (scale), the ROM,
a 21 x 11 multiply and a shifter; one reciprocal per Q row (4 multiplies of
25 x 26 bits, shared); finalize a 47 x 25-bit multiply per output element. A cheaper measured
alternative is p_frac = 20 (O 43 bits, alpha 21 bits: >= 99.75% exact on the
hardest cases at N = 16384) at the price of the bound of item 4 (it grows to
2 LSB at N = 16384); x_frac = 12 is not an option (ascending: 97.5%).

p_frac follows the largest N. The "small" preset (N = 256) uses p_frac = 16:
item 4's worst case is then 256 * 2**-17 * 255 = 0.498 LSB (0.125 at p_frac =
18), and P, alpha (17 bits) and l (25 bits) meet one or two 18 x 18 multipliers
and O (33 bits) two, which is what fits its 4 x 4 array on an ECP5-85F
(docs/synthesis.md). Measured at N = 256, d = 16 and 64, the six input kinds,
three seeds each: worst case 99.78% exact (p_frac 17: 99.85%, 18: 99.95%, 24:
99.98%), never more than 1 LSB off; p_frac = 15 drops to 99.32%.

Builders
========

Every builder takes the Module `m` to add its logic to, then its inputs
(Amaranth values), and returns its output signal(s).

* Combinational (latency 0; the caller registers the outputs as it needs):
  `mac`, `max`, `sub`.
* Pipelined, in clock domain `domain` (default "sync"). Every multiply is
  split into partial products that fit one ECP5 MULT18X18D each
  (`_partial_products`), registered right after the DSP, and summed in a stage
  of their own, and every ROM read (block RAM, whose clock-to-output is half a
  10 ns cycle) is registered before it is used (docs/synthesis.md):
  `scale` (`scale_latency` 3), `exp2` (`exp2_latency` 5), `update`
  (`update_latency` 3: operand, products, sum; the final shift and select are
  combinational, to be written to a memory), `finalize` (`finalize_latency` 3,
  likewise: products, sum, shift; round and saturate combinational),
  `reciprocal` (`reciprocal_latency` 3 + 6 * recip_iters, 15 by default). exp2
  and reciprocal hold their own ROM (amaranth.lib.memory, synchronous read)
  and take an optional `en` that freezes the pipeline while low (stall).

`update` is `update_l` and `update_o` in one: alpha or P is exactly one, so the
lane passes (up, e) instead of (alpha, P), and a single multiply e * (acc if up
else v) serves both terms (the twins `np_update_l` and `np_update_o` keep the
two-term form; tests/test_formats.py and the format benches hold them equal).

One exp2 per score is enough: either S_j > m_old (then P = 1 and alpha =
exp2(scale(m_old - S_j))) or not (alpha = 1, P = exp2(scale(S_j - m_old))), so
an EXP module can compute exp2(scale(-|S_j - m_old|)) and route it; that is bit
for bit what the two-exp2 formulation gives (tests/test_formats.py checks it),
and it is what the golden model does.
"""

from amaranth.hdl import Const, Mux, Signal, Value, signed, unsigned
from amaranth.lib.memory import Memory
import numpy as np

from attenio.formats import Int8Format

__all__ = ["Int8Arith"]


def _round_shift(value, k):
    """Round-half-up of value / 2**k (k >= 1), hardware side."""
    return ((value >> (k - 1)) + 1) >> 1


#: operand bits of one ECP5 MULT18X18D (18 x 18 signed) for an unsigned operand
_DSP_UNSIGNED_BITS = 17
_DSP_SIGNED_BITS = 18


def _pieces(value):
    """`value` as [(offset, piece)] with value = sum(piece << offset): 17-bit unsigned
    low pieces and a top piece of at most 18 bits, signed if `value` is (each piece
    fits one operand of an 18 x 18 signed multiplier)."""
    value = Value.cast(value)
    shape = value.shape()
    width = shape.width
    top_bits = _DSP_SIGNED_BITS if shape.signed else _DSP_UNSIGNED_BITS
    out, lo = [], 0
    while width - lo > top_bits:
        out.append((lo, value[lo:lo + _DSP_UNSIGNED_BITS]))
        lo += _DSP_UNSIGNED_BITS
    top = value[lo:]
    out.append((lo, top.as_signed() if shape.signed else top))
    return out


def _partial_products(m, a, b, *, name, domain, en=None):
    """a * b as registered partial products, one MULT18X18D each with no logic between
    it and its output register: [(offset, Signal)], a * b = sum(p << offset) one cycle
    after a and b (`_sum_partials` adds them, in a stage of the caller's)."""
    parts = []
    for i, (oa, pa) in enumerate(_pieces(a)):
        for j, (ob, pb) in enumerate(_pieces(b)):
            signed_ = pa.shape().signed or pb.shape().signed
            prod = Signal(signed(len(pa) + len(pb) + 1) if signed_ else unsigned(len(pa) + len(pb)),
                          name=f"{name}_pp{i}{j}")
            if en is None:
                m.d[domain] += prod.eq(pa * pb)
            else:
                with m.If(en):
                    m.d[domain] += prod.eq(pa * pb)
            parts.append((oa + ob, prod))
    return parts


def _sum_partials(parts):
    return sum(prod << offset for offset, prod in parts)


def _comb(m, value, shape, name):
    """A signal of `shape` driven by `value` (truncated: widths are chosen so nothing is lost)."""
    sig = Signal(shape, name=name)
    m.d.comb += sig.eq(value)
    return sig


def _np_mulshr(a, b, s):
    """floor(a * b / 2**s), exact in int64 for |a| < 2**62 / b and 0 <= b < 2**32."""
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    s = np.asarray(s, dtype=np.int64)
    k = int(min(30, int(s.min()) if s.size else 30))
    lo = ((a & ((1 << k) - 1)) * b) >> k
    return ((a >> k) * b + lo) >> (s - k)


def _np_round_shift_mul(a, b, s):
    """round-half-up(a * b / 2**s), s >= 1, the twin of `_round_shift(a * b, s)`."""
    return (_np_mulshr(a, b, np.asarray(s) - 1) + 1) >> 1


class Int8Arith:
    """The int8 datapath arithmetic for hardware sized for `max_seq_len` keys of `head_dim`.

    `cfg` is an `attenio.formats.Int8Format` (defaults if None). Shapes, tables
    and latencies are read-only properties; builders are methods, each with its
    NumPy twin ``np_<name>`` (int64 arrays in, int64 arrays out, same bits).
    """

    def __init__(self, cfg=None, *, max_seq_len, head_dim):
        if cfg is None:
            cfg = Int8Format()
        if not isinstance(cfg, Int8Format):
            raise TypeError(f"Int8Arith needs an Int8Format, not {cfg!r}")
        self._cfg = cfg
        self._widths = cfg.datapath(max_seq_len=max_seq_len, head_dim=head_dim)
        self._max_seq_len = max_seq_len
        self._head_dim = head_dim
        mf = cfg.p_frac + cfg.exp_guard
        T = cfg.exp_lut_bits
        t = [round(2.0 ** (i / 2 ** T) * 2 ** mf) for i in range(2 ** T + 1)]
        self._exp_t = tuple(t[:-1])
        self._exp_d = tuple(t[i + 1] - t[i] for i in range(2 ** T))
        F, s = cfg.recip_frac, cfg.recip_seed_bits
        self._seed = tuple(min(2 ** F, round(2 ** F / (1 + (i + 0.5) / 2 ** s))) for i in range(2 ** s))
        self._np_exp_t = np.array(self._exp_t, dtype=np.int64)
        self._np_exp_d = np.array(self._exp_d, dtype=np.int64)
        self._np_seed = np.array(self._seed, dtype=np.int64)

    # -- configuration ------------------------------------------------------------------

    @property
    def cfg(self):
        return self._cfg

    @property
    def widths(self):
        """The `DatapathWidths` this arithmetic uses (the planner's view of it)."""
        return self._widths

    @property
    def max_seq_len(self):
        return self._max_seq_len

    @property
    def head_dim(self):
        return self._head_dim

    # -- shapes -------------------------------------------------------------------------

    @property
    def element_shape(self):
        return signed(8)

    @property
    def score_shape(self):
        """S = Q.K (exact) and the running max m."""
        return signed(self._widths.score)

    @property
    def diff_shape(self):
        """S_j - m and m_old - m_new (<= 0, exact)."""
        return signed(self._widths.score + 1)

    @property
    def c_shape(self):
        """The softmax constant register (unsigned c_int.c_frac)."""
        return unsigned(self._cfg.c_int + self._cfg.c_frac)

    @property
    def x_shape(self):
        """The exp2 argument (signed, x_frac fractional bits, in [-2**x_int, 0])."""
        return signed(1 + self._cfg.x_int + self._cfg.x_frac)

    @property
    def p_shape(self):
        """P and alpha (unsigned, p_frac fractional bits, in [0, 1])."""
        return unsigned(self._widths.p)

    @property
    def l_shape(self):
        return unsigned(self._widths.l)

    @property
    def o_shape(self):
        """An O accumulator, in V's LSBs with p_frac fractional bits."""
        return signed(self._widths.o_acc)

    @property
    def recip_shape(self):
        """The reciprocal mantissa y (unsigned, recip_frac fractional bits, in (1/2, 1])."""
        return unsigned(self._cfg.recip_frac + 1)

    @property
    def recip_exp_shape(self):
        """The reciprocal exponent e (1/l = y * 2**-e)."""
        return unsigned(max(1, (self._max_seq_len.bit_length() - 1).bit_length()))

    @property
    def out_shape(self):
        return signed(8)

    # -- constants ----------------------------------------------------------------------

    @property
    def one(self):
        """1.0 in P, alpha and l (2**p_frac)."""
        return 1 << self._cfg.p_frac

    @property
    def m_init(self):
        """The initial running max: the most negative score."""
        return -(1 << (self._widths.score - 1))

    @property
    def x_min(self):
        """The most negative exp2 argument (raw, x_frac fractional bits)."""
        return -(1 << (self._cfg.x_int + self._cfg.x_frac))

    @property
    def exp_table(self):
        """(t, dt): 2**(i/2**T) with p_frac + exp_guard fractional bits, and the slopes."""
        return self._exp_t, self._exp_d

    @property
    def recip_seed_table(self):
        return self._seed

    @property
    def exp2_latency(self):
        return 5

    @property
    def reciprocal_latency(self):
        return 3 + 6 * self._cfg.recip_iters

    # -- combinational builders ---------------------------------------------------------

    def mac(self, m, acc, q, k):
        """acc + q*k, score_shape (combinational)."""
        return _comb(m, acc + q * k, self.score_shape, "mac")

    def max(self, m, a, b):
        """max(a, b) of two scores, score_shape (combinational)."""
        return _comb(m, Mux(a > b, a, b), self.score_shape, "max")

    def sub(self, m, a, b):
        """a - b of two scores, diff_shape (combinational)."""
        return _comb(m, a - b, self.diff_shape, "sub")

    # -- pipelined builders -------------------------------------------------------------

    def scale(self, m, diff, c, *, domain="sync"):
        """z = round(diff * c) to x_frac bits, clamped to [x_min, 0]: x_shape, `scale_latency`
        (3) cycles after diff and c (both registers). Stage 1: the partial products (four
        MULT18X18D); 2: their sum plus the rounding half; 3: shift and clamp."""
        k = self._cfg.c_frac - self._cfg.x_frac
        diff, c = Value.cast(diff), Value.cast(c)
        wide = signed(diff.shape().width + c.shape().width + 1)
        parts = _partial_products(m, diff, c, name="scale", domain=domain)
        total = Signal(wide, name="scale_sum")
        m.d[domain] += total.eq(_sum_partials(parts) + (1 << (k - 1)))
        x = Signal(self.x_shape, name="scale")
        v = total >> k
        m.d[domain] += x.eq(Mux(v < self.x_min, self.x_min, Mux(v > 0, 0, v)))
        return x

    @property
    def scale_latency(self):
        return 3

    def update(self, m, up, e, acc, v, *, domain="sync"):
        """acc' = rescale(alpha, acc) + P * v with (alpha, P) = (e, 1) if `up` else (1, e):
        `update_o` (v an element) and, with v = 1, `update_l`; acc's shape, `update_latency`
        (3) cycles after the inputs. Since alpha or P is exactly one, one multiply serves
        both terms: up: (e*acc + 2**(p_frac-1) + v * 2**(2 p_frac)) >> p_frac, else
        e*v + acc. Stage 1: the operand e * (acc if up else v) and the addend, selected
        and registered (the inputs may be multiplexers); 2: the partial products; 3: their
        sum with the addend. The shift and the final select are combinational."""
        pf = self._cfg.p_frac
        acc = Value.cast(acc)
        acc_bits = acc.shape().width + (0 if acc.shape().signed else 1)
        operand = Signal(signed(max(acc_bits, 9)), name="upd_operand")
        e1 = Signal(self.p_shape, name="upd_e")
        addend = Signal(signed(max(acc.shape().width, 8 + 2 * pf) + 2), name="upd_addend")
        ups = [Signal(name=f"upd_up{k}") for k in range(3)]
        m.d[domain] += [operand.eq(Mux(up, acc, v)), e1.eq(e), ups[0].eq(up),
                        addend.eq(Mux(up, (1 << (pf - 1)) + (Value.cast(v) << (2 * pf)), acc))]
        parts = _partial_products(m, e1, operand, name="upd", domain=domain)
        addend2 = Signal.like(addend, name="upd_addend2")
        total = Signal(signed(acc.shape().width + self.p_shape.width + 3), name="upd_total")
        m.d[domain] += [addend2.eq(addend), total.eq(_sum_partials(parts) + addend2)]
        m.d[domain] += [ups[k].eq(ups[k - 1]) for k in range(1, 3)]
        return _comb(m, Mux(ups[2], total >> pf, total), acc.shape(), "update")

    @property
    def update_latency(self):
        return 3

    def finalize(self, m, o, y, e, *, domain="sync"):
        """sat8(round(O * y * 2**-e)) on V's scale: out_shape, `finalize_latency` (3) cycles
        after the inputs. Stage 1: the partial products (e carried); 2: their sum; 3: the
        shift by p_frac + recip_frac - 1 + e. Round and saturate are combinational."""
        shift = self._cfg.p_frac + self._cfg.recip_frac
        o, y = Value.cast(o), Value.cast(y)
        parts = _partial_products(m, o, y, name="finalize", domain=domain)
        es = [Signal(self.recip_exp_shape, name=f"finalize_e{k}") for k in range(2)]
        prod = Signal(signed(o.shape().width + y.shape().width + 1), name="finalize_prod")
        wide = signed(self.o_shape.width + self.recip_shape.width + 3 - shift)
        half = Signal(wide, name="finalize_half")       # value / 2**(shift - 1 + e)
        m.d[domain] += [es[0].eq(e), es[1].eq(es[0]), prod.eq(_sum_partials(parts)),
                        half.eq((prod >> (shift - 1)) >> es[1])]
        v = _comb(m, half + 1 >> 1, wide, "finalize_wide")
        return _comb(m, Mux(v > 127, 127, Mux(v < -128, -128, v)), self.out_shape, "finalize")

    @property
    def finalize_latency(self):
        return 3

    def exp2(self, m, z, *, en=None, domain="sync"):
        """P = 2**z for z in x_shape (<= 0); returns a p_shape signal `exp2_latency` (5)
        cycles after z. Stage 1: table read (ROM); 2: its output registered; 3: the
        interpolation's product (a MULT18X18D); 4: its sum; 5: shift and round."""
        cfg = self._cfg
        en = Const(1) if en is None else en
        z = Value.cast(z)
        if z.shape() != self.x_shape:
            raise TypeError(f"exp2: z must have x_shape {self.x_shape!r}, not {z.shape()!r}")
        T, R, g = cfg.exp_lut_bits, cfg.x_frac - cfg.exp_lut_bits, cfg.exp_guard
        tw = max(self._exp_t).bit_length()
        dw = max(1, max(self._exp_d).bit_length())
        rom = Memory(shape=unsigned(tw + dw), depth=2 ** T,
                     init=[t | (d << tw) for t, d in zip(self._exp_t, self._exp_d)])
        m.submodules += rom
        rd = rom.read_port(domain=domain)
        zf = z[:cfg.x_frac]
        sh = _comb(m, -z[cfg.x_frac:].as_signed(), unsigned(cfg.x_int + 1), "exp2_shift")
        m.d.comb += [rd.addr.eq(zf[R:]), rd.en.eq(en)]
        r1, r2 = Signal(max(1, R), name="exp2_r1"), Signal(max(1, R), name="exp2_r2")
        sh1, sh2, sh3, sh4 = (Signal.like(sh, name=f"exp2_sh{k}") for k in range(1, 5))
        t2, d2, t3 = Signal(tw, name="exp2_t2"), Signal(dw, name="exp2_d2"), Signal(tw, name="exp2_t3")
        prod3 = Signal(dw + max(1, R), name="exp2_prod")
        mant4 = Signal(tw + 1)
        p5 = Signal(self.p_shape)
        t, d = rd.data[:tw], rd.data[tw:]
        interp = R > 0 and cfg.exp_interp
        with m.If(en):
            m.d[domain] += [
                r1.eq(zf[:R] if R > 0 else 0), sh1.eq(sh),
                t2.eq(t), d2.eq(d), r2.eq(r1), sh2.eq(sh1),
                t3.eq(t2), prod3.eq(d2 * r2 if interp else 0), sh3.eq(sh2),
                mant4.eq(t3 + _round_shift(prod3, R) if interp else t3), sh4.eq(sh3),
                p5.eq(((mant4 >> (g - 1)) >> sh4) + 1 >> 1),
            ]
        return p5

    def reciprocal(self, m, l, *, en=None, domain="sync"):
        """(y, e) with 1/l = y * 2**-e, y in recip_shape, for l in l_shape (l < 1 reads as 1);
        valid `reciprocal_latency` (3 + 6*recip_iters) cycles after l. Stage 1: leading
        one; 2: normalize and seed ROM; 3: the ROM's output registered; then six stages per
        Newton step (each of its two multiplies: partial products, their sum, what follows)."""
        cfg = self._cfg
        en = Const(1) if en is None else en
        F, s, p = cfg.recip_frac, cfg.recip_seed_bits, cfg.p_frac
        l = Value.cast(l)
        W = self._widths.l
        if l.shape().signed or l.shape().width > W:
            raise TypeError(f"reciprocal: l must be unsigned of at most {W} bits (l_shape), "
                            f"not {l.shape()!r}")
        lsat = Mux(l < self.one, self.one, l)
        lead = Signal(range(W), name="recip_lead")
        for i in range(W):
            with m.If(lsat[i]):
                m.d.comb += lead.eq(i)
        l1 = Signal(W)
        lead1 = Signal(range(W))
        mnt2, mnt3 = Signal(F + 1, name="recip_mnt2"), Signal(F + 1, name="recip_mnt3")
        e2, e3 = Signal(self.recip_exp_shape, name="recip_e2"), Signal(self.recip_exp_shape, name="recip_e3")
        y3 = Signal(F + 1, name="recip_seed")
        rom = Memory(shape=unsigned(F + 1), depth=2 ** s, init=self._seed)
        m.submodules += rom
        rd = rom.read_port(domain=domain)
        mnt = ((l1 << F) >> lead1)[:F + 1]
        m.d.comb += [rd.addr.eq(mnt[F - s:F]), rd.en.eq(en)]
        with m.If(en):
            m.d[domain] += [l1.eq(lsat), lead1.eq(lead), mnt2.eq(mnt), e2.eq(lead1 - p),
                            y3.eq(rd.data), mnt3.eq(mnt2), e3.eq(e2)]
        y, mnt_k, e_k = y3, mnt3, e3
        one2 = 1 << (F + 1)
        for k in range(cfg.recip_iters):
            # y <- y * (2 - mnt*y), six stages: products, sum, 2 - round(sum) (one
            # subtraction: one2 - floor((t + h) / 2**F) = floor((K - t) / 2**F) with
            # K = one2 * 2**F - h + 2**F - 1), products, sum, round and clamp.
            carried = [(y, f"y{k}"), (mnt_k, f"mnt{k}"), (e_k, f"e{k}")]
            regs = []
            for stage in range(6):
                nxt = [Signal.like(v, name=f"recip_{n}_{stage}") for v, n in carried]
                with m.If(en):
                    m.d[domain] += [a.eq(b) for a, (b, _) in zip(nxt, carried)]
                carried = [(v, n) for v, (_, n) in zip(nxt, carried)]
                regs.append(nxt)
            tp = Signal(2 * F + 2, name=f"recip_tp{k}")
            two_t = Signal(F + 3, name=f"recip_2t{k}")
            yp = Signal(2 * F + 4, name=f"recip_yp{k}")
            yb = Signal(F + 1, name=f"recip_y{k}")
            K = (one2 << F) - (1 << (F - 1)) + (1 << F) - 1
            ynew = _round_shift(yp, F)
            pp1 = _partial_products(m, mnt_k, y, name=f"recip_t{k}", domain=domain, en=en)
            pp2 = _partial_products(m, regs[2][0], two_t, name=f"recip_y{k}", domain=domain, en=en)
            with m.If(en):
                m.d[domain] += [
                    tp.eq(_sum_partials(pp1)),                      # stage 2
                    two_t.eq((K - tp) >> F),                        # stage 3
                    yp.eq(_sum_partials(pp2)),                      # stage 5
                    yb.eq(Mux(ynew > (1 << F), 1 << F, ynew)),      # stage 6
                ]
            y, mnt_k, e_k = yb, regs[5][1], regs[5][2]
        return y, e_k

    # -- NumPy twins --------------------------------------------------------------------

    def np_mac(self, acc, q, k):
        return np.asarray(acc, np.int64) + np.asarray(q, np.int64) * np.asarray(k, np.int64)

    def np_max(self, a, b):
        return np.maximum(np.asarray(a, np.int64), np.asarray(b, np.int64))

    def np_sub(self, a, b):
        return np.asarray(a, np.int64) - np.asarray(b, np.int64)

    def np_scale(self, diff, c):
        x = _np_round_shift_mul(diff, c, self._cfg.c_frac - self._cfg.x_frac)
        return np.clip(x, self.x_min, 0)

    def np_exp2(self, z):
        cfg = self._cfg
        z = np.asarray(z, np.int64)
        R, g = cfg.x_frac - cfg.exp_lut_bits, cfg.exp_guard
        zf = z & ((1 << cfg.x_frac) - 1)
        sh = -(z >> cfg.x_frac)
        idx = zf >> R
        mant = self._np_exp_t[idx]
        if R > 0 and cfg.exp_interp:
            r = zf & ((1 << R) - 1)
            mant = mant + ((((self._np_exp_d[idx] * r) >> (R - 1)) + 1) >> 1)
        return ((mant >> (g - 1 + sh)) + 1) >> 1

    def np_rescale(self, alpha, acc):
        return _np_round_shift_mul(acc, alpha, self._cfg.p_frac)

    def np_update_l(self, alpha, l, p):
        return self.np_rescale(alpha, l) + np.asarray(p, np.int64)

    def np_update_o(self, alpha, o, p, v):
        return self.np_rescale(alpha, o) + np.asarray(p, np.int64) * np.asarray(v, np.int64)

    def np_reciprocal(self, l):
        cfg = self._cfg
        F, s = cfg.recip_frac, cfg.recip_seed_bits
        l = np.maximum(np.asarray(l, np.int64), self.one)
        lead = np.frexp(l.astype(np.float64))[1].astype(np.int64) - 1   # exact below 2**53
        up = np.maximum(F - lead, 0)
        down = np.maximum(lead - F, 0)
        mnt = (l << up) >> down
        y = self._np_seed[(mnt >> (F - s)) & ((1 << s) - 1)]
        one2 = 1 << (F + 1)
        for _ in range(cfg.recip_iters):
            t = ((((mnt * y) >> (F - 1)) + 1) >> 1)
            y = np.minimum(((((y * (one2 - t)) >> (F - 1)) + 1) >> 1), 1 << F)
        return y, lead - cfg.p_frac

    def np_finalize(self, o, y, e):
        s = self._cfg.p_frac + self._cfg.recip_frac + np.asarray(e, np.int64)
        v = (_np_mulshr(o, y, s - 1) + 1) >> 1
        return np.clip(v, -128, 127)
