"""The floating-point formats (fp16, bf16 or fp8 storage, fp32 accumulation): the datapath's
builders and their bit-exact NumPy twins.

`FloatArith` is to the floating-point formats what `Int8Arith` is to int8: every
operation the MACs, the softmax lanes and the normalizer need, as an Amaranth
builder beside its twin. The arithmetic (its reasons, and what it costs in
accuracy: docs/accuracy_fp.md) is `attenio.sim.golden_fp`'s, per query row and K/V
row j:

    prod  = product(q_c, k_c)           fp32, exact (fp16, bf16 and fp8 products fit fp32)
    S     = accumulate(S, prod)         fp32 in the MACs' order, then the group's chain
    x     = scale(S, c)                 fp32, c = fp32(log2(e) / sqrt(d))
    m_new = maximum(m, x)
    z, up = exp_arg(x, m)               z = to_fixed(-|x - m|), up = x > m: one exp2 a
    e     = exp2(z)                     score, as in int8 (alpha = e, P = 1 if up, else
                                        alpha = 1, P = e), fixed point p_frac bits
    e32   = to_float(e)                 fp32, exact: what the lane sends to the MACs
    l     = update_l(alpha, l, P)       fixed point (int8's)
    O     = update(up, e32, O, v)       fadd(fmul(e32, O), v) if up, else fadd(O, fmul(e32, v))
    ...after the last row:
    (y, ey) = reciprocal(l)             int8's: 1/l = y * 2**(-recip_frac - ey)
    out   = finalize(O, y, ey)          convert(fmul(O, that factor in fp32)) to storage

The fixed-point pieces (exp2, update_l, reciprocal) are `Int8Arith`'s, built from the
`Int8Format` `fixed` (its x_frac, p_frac, table and reciprocal fields).
"""

import numpy as np
from amaranth.hdl import Const, Mux, Signal, Value, signed, unsigned

from attenio.formats import Int8Format

from . import fp
from .dsp import Stages
from .fp import FP32
from .int8 import Int8Arith

__all__ = ["FloatArith"]


class FloatArith:
    """The floating-point datapath of storage `spec` (one of `fp.STORAGE`) for up to
    `max_seq_len` keys of `head_dim`, its fixed-point softmax from `fixed` (an
    `Int8Format`, defaults if None). Builders are methods, each with its twin
    ``np_<name>`` (encodings or fixed-point integers in, the same bits out)."""

    def __init__(self, spec, *, max_seq_len, head_dim, fixed=None, out=None):
        for role, s in (("storage", spec), ("out", out or spec)):
            if s not in fp.STORAGE.values():
                raise TypeError(f"FloatArith: {role} must be one of {', '.join(fp.STORAGE)}, "
                                f"not {s!r}")
        if (out or spec) not in fp.OUTPUTS.values():
            raise TypeError(f"FloatArith: O cannot be written in {(out or spec).name}; give "
                            f"out, one of {', '.join(fp.OUTPUTS)} (fp8's is bf16)")
        self._spec, self._out = spec, out or spec
        self._fixed = Int8Arith(fixed or Int8Format(), max_seq_len=max_seq_len,
                                head_dim=head_dim)
        self._head_dim = head_dim
        self._latencies = {}

    # -- configuration and shapes -------------------------------------------------------

    @property
    def spec(self):
        """The storage format of Q, K and V."""
        return self._spec

    @property
    def out(self):
        """The format O is written in: the storage format, or fp8's 16-bit one."""
        return self._out

    @property
    def fixed(self):
        """The `Int8Arith` whose fixed-point exp2, update_l and reciprocal this uses."""
        return self._fixed

    @property
    def max_seq_len(self):
        return self._fixed.max_seq_len

    @property
    def element_shape(self):
        return unsigned(self._spec.width)

    @property
    def word_shape(self):
        """An element as the PE array carries it: fp32, widened once at the array's entry
        (`widen`, in `attenio.hdl.replay.RowReplay`) rather than in every MAC."""
        return unsigned(FP32.width)

    @property
    def out_shape(self):
        """An element of O as written."""
        return unsigned(self._out.width)

    @property
    def score_shape(self):
        return unsigned(FP32.width)

    @property
    def o_shape(self):
        return unsigned(FP32.width)

    @property
    def x_shape(self):
        return self._fixed.x_shape

    @property
    def p_shape(self):
        return self._fixed.p_shape

    @property
    def factor_shape(self):
        """e on the lanes' bus to the MACs: fp32 (`to_float`), the MACs' multiplier's."""
        return unsigned(FP32.width)

    @property
    def c_shape(self):
        return unsigned(FP32.width)

    @property
    def lane_c_shape(self):
        """c as the softmax lanes take it (`lane_c`): `fp.NORMAL` where the scale's product
        normalizes its operands before multiplying (a lead for the score: fp16, fp8), so
        that c is normalized once for the array, not in every lane; fp32 bits where the
        product normalizes after multiplying (bf16), c's share included."""
        return fp.NORMAL if self._c_normal else self.c_shape

    @property
    def l_shape(self):
        return self._fixed.l_shape

    @property
    def recip_shape(self):
        return self._fixed.recip_shape

    @property
    def recip_exp_shape(self):
        return self._fixed.recip_exp_shape

    @property
    def c(self):
        """The softmax constant log2(e) / sqrt(d) as fp32 bits (a CSR's value)."""
        return FP32.encode(np.log2(np.e) / np.sqrt(self._head_dim))

    @property
    def m_init(self):
        """The initial running max: -inf."""
        return FP32.neg_inf

    # -- latencies ----------------------------------------------------------------------

    def _latency(self, op, *shapes):
        """The stages builder `staged_<op>` registers, counted once on a scratch Module fed
        with signals of `shapes` (the planner asks for them at every mapping it weighs)."""
        if op not in self._latencies:
            self._latencies[op] = Stages.count_of(getattr(self, f"staged_{op}"),
                                                  *(Signal(shape) for shape in shapes))
        return self._latencies[op]

    @property
    def product_latency(self):
        return fp.mul_latency(self._spec, self._spec)

    @property
    def widen_latency(self):
        return fp.convert_latency(self._spec, FP32)

    @property
    def accumulate_latency(self):
        return fp.add_latency()

    @property
    def scale_latency(self):
        return fp.mul_latency(FP32, FP32, self._scale_leads)

    @property
    def lane_c_latency(self):
        return fp.normalize_latency() if self._c_normal else 0

    @property
    def maximum_latency(self):
        return fp.maximum_latency()

    @property
    def exp_arg_latency(self):
        return self._latency("exp_arg", self.score_shape, self.score_shape)

    @property
    def to_float_latency(self):
        return fp.from_fixed_latency(self.p_shape.width)

    @property
    def update_latency(self):
        return self._latency("update", unsigned(1), self.factor_shape, self.o_shape,
                             self.word_shape)

    @property
    def exp2_latency(self):
        return self._fixed.exp2_latency

    @property
    def update_l_latency(self):
        return self._fixed.update_latency

    @property
    def reciprocal_latency(self):
        return self._fixed.reciprocal_latency

    @property
    def finalize_latency(self):
        return self._latency("finalize", self.o_shape, self._fixed.recip_shape,
                             self._fixed.recip_exp_shape)

    # -- what the products' operands can be (`fp.staged_mul`'s leads) ------------------

    @property
    def _score_lead(self):
        """The lead of a score (a sum of products of two widened elements): 1 where the
        smallest such product, the square of the storage format's smallest subnormal, is
        an fp32 normal number (a multiple of it is 0 or normal too), else None (bf16)."""
        smallest = 2 * (1 - self._spec.bias - self._spec.man_bits)
        return 1 if smallest >= 1 - FP32.bias else None

    @property
    def _scale_leads(self):
        """fmul(S, c): a score, and c (any fp32 a host writes); None (the product
        normalized after it) where a score can be subnormal."""
        return None if self._score_lead is None else (self._score_lead, None)

    @property
    def _c_normal(self):
        """Whether the lanes take c in `fp.NORMAL` form (`lane_c_shape`)."""
        return self._scale_leads is not None

    @property
    def _mac_leads(self):
        """A MAC's multiplier: (q or fp32(P or alpha), k or O or v). q is a widened
        element (`fp.widened_lead`), fp32(e) normal (e >= 2**-p_frac or 0); O can be any
        fp32."""
        return (fp.widened_lead(self._spec), None)

    #: the normalizer's product O * fp32(y * 2**-(recip_frac + ey)): O any fp32, the
    #: factor normal (y is in (1/2, 1], ey at most the bits of l)
    _FINALIZE_LEADS = (None, 1)

    # -- builders -----------------------------------------------------------------------

    def product(self, m, q, k, *, domain="sync", en=None):
        """fp32 bits of q * k (storage encodings): exact."""
        return fp.mul(m, q, k, self._spec, self._spec, domain=domain, en=en, name="fprod")

    def accumulate(self, m, acc, prod, *, domain="sync", en=None):
        return fp.add(m, acc, prod, domain=domain, en=en, name="facc")

    def scale(self, m, s, c, *, domain="sync", en=None):
        """fp32 bits of s * c, c as `lane_c` makes it."""
        return fp.mul(m, s, c, FP32, FP32, domain=domain, en=en, name="fscale",
                      leads=self._scale_leads, b_normal=self._c_normal)

    def lane_c(self, m, c, *, domain="sync"):
        """c (fp32 bits) as the lanes take it (`lane_c_shape`), `lane_c_latency` cycles
        later: built once for the array."""
        return fp.normalize(m, c, domain=domain, name="fcnorm") if self._c_normal else c

    def maximum(self, m, a, b, *, domain="sync", en=None):
        return fp.maximum(m, a, b, domain=domain, en=en, name="fmax")

    def exp_arg(self, m, x, mo, *, domain="sync", en=None):
        """(z, up): the exp2 argument to_fixed(-|x - mo|) in x_shape and up = x > mo
        (false if either is NaN), `exp_arg_latency` cycles later: the difference, its
        sign and negative magnitude, the conversion."""
        return self.staged_exp_arg(Stages(m, domain, en), x, mo)

    def staged_exp_arg(self, st, x, mo):
        """`exp_arg` on the caller's `dsp.Stages` `st`."""
        # up from the sum's flags, registered beside it: from its 32 bits it would be a
        # comparison five LUTs deep after the sum's register
        d, above = fp.staged_add(st, x, fp.negated(mo), "farg_d", positive=True)
        up = Signal(name="farg_up")
        neg = Signal(FP32.width, name="farg_neg")
        st.stage(up.eq(above), neg.eq(fp.negative_magnitude(d)))
        cfg = self._fixed.cfg
        z = fp.staged_to_fixed(st, neg, cfg.x_frac, self.x_shape.width, "farg_z",
                               negative=True)
        return z, st.delay(up, fp.to_fixed_latency(cfg.x_frac, self.x_shape.width), "farg_up")

    def exp2(self, m, z, *, domain="sync", en=None):
        return self._fixed.exp2(m, z, domain=domain, en=en)

    def to_float(self, m, e, *, domain="sync", en=None):
        """fp32 bits of a fixed-point P or alpha (p_frac bits): exact."""
        return fp.from_fixed(m, e, Const(-self._fixed.cfg.p_frac, signed(8)), domain=domain,
                             en=en, name="fe32")

    def widen(self, m, x, *, domain="sync", en=None):
        """An element (`element_shape`) as the array's word (`word_shape`, fp32; exact),
        `widen_latency` cycles later."""
        return self.staged_widen(Stages(m, domain, en), x)

    def staged_widen(self, st, x, name="fwiden"):
        """`widen` on the caller's `dsp.Stages` `st`."""
        return fp.staged_convert(st, x, self._spec, FP32, name)

    def update(self, m, up, e32, o, v, *, domain="sync", en=None):
        """O' = fadd(fmul(e32, O), v) if up, else fadd(O, fmul(e32, v)): fp32, one multiply
        and one add either way, `update_latency` cycles later: the operands selected, the
        product, the sum. v is the word (`word_shape`: V widened by `widen`); the twin
        `np_update` takes the stored element."""
        return self.staged_update(Stages(m, domain, en), up, e32, o, v)

    def staged_update(self, st, up, e32, o, v):
        """`update` on the caller's `dsp.Stages` `st`."""
        prod, addend = self.staged_mac_operands(st, up, e32, o, v)
        return fp.staged_add(st, prod, addend, "fupd_add")

    def mac_operands(self, m, up, e32, o, v, *, score=None, q=None, domain="sync", en=None):
        """(product, addend): the operands of a MAC's one fp32 multiplier and one fp32
        adder for its word, `mac_operands_latency` cycles later, the product made. A V
        chunk gets `update`'s: e32 * O and v (if up), or e32 * v and O. With `score` set
        (a K chunk; `v` is then k) the product is q * k, as `product` makes it (the
        exact product, rounded to fp32 by the same multiplier: the same bits), and the
        caller adds it to its score (`attenio.hdl.mac.MAC`: a word is a K or a V chunk,
        so the scores and O share the multiplier and the adder). v and q are words
        (`word_shape`, widened at the array's entry)."""
        return self.staged_mac_operands(Stages(m, domain, en), up, e32, o, v, score=score, q=q)

    @property
    def mac_operands_latency(self):
        """`update_latency` less the sum's: cycles to `mac_operands`' operands."""
        return self.update_latency - self.accumulate_latency

    def staged_mac_operands(self, st, up, e32, o, v, *, score=None, q=None):
        """`mac_operands` on the caller's `dsp.Stages` `st`: the multiplier's operands
        selected, the product."""
        other, addend, e2 = (Signal(FP32.width, name=f"fupd_{n}")
                             for n in ("b", "addend", "e2"))
        if score is None:
            st.stage(other.eq(Mux(up, o, v)), addend.eq(Mux(up, v, o)), e2.eq(e32))
        else:
            st.stage(other.eq(Mux(up & ~score, o, v)), addend.eq(Mux(up, v, o)),
                     e2.eq(Mux(score, q, e32)))
        prod = fp.staged_mul(st, e2, other, FP32, FP32, "fupd_mul", leads=self._mac_leads)
        return prod, st.delay(addend, fp.mul_latency(FP32, FP32, self._mac_leads),
                              "fupd_addend", ram=True)

    def update_l(self, m, up, e, l, *, domain="sync"):
        """l' = rescale(e, l) + 1 if up, else l + e (fixed point: `Int8Arith.update`)."""
        return self._fixed.update(m, up, e, l, 1, domain=domain)

    def reciprocal(self, m, l, *, domain="sync", en=None):
        return self._fixed.reciprocal(m, l, domain=domain, en=en)

    def finalize(self, m, o, y, ey, *, domain="sync", en=None):
        """convert(fmul(O, y * 2**(-recip_frac - ey))) to storage (two roundings),
        `finalize_latency` cycles later: the factor in fp32, the product, the conversion."""
        return self.staged_finalize(Stages(m, domain, en), o, y, ey)

    def staged_finalize(self, st, o, y, ey):
        """`finalize` on the caller's `dsp.Stages` `st`."""
        exp = Signal(signed(8), name="ffin_exp")
        st.m.d.comb += exp.eq(-self._fixed.cfg.recip_frac - Value.cast(ey))
        r = fp.staged_from_fixed(st, y, exp, "ffin_r")
        o1 = st.delay(o, fp.from_fixed_latency(len(Value.cast(y))), "ffin_o", ram=True)
        prod = fp.staged_mul(st, o1, r, FP32, FP32, "ffin_mul", leads=self._FINALIZE_LEADS)
        return fp.staged_convert(st, prod, FP32, self._out, "ffin_out")

    # -- twins --------------------------------------------------------------------------

    def np_product(self, q, k):
        return fp.np_mul(q, k, self._spec, self._spec)

    def np_accumulate(self, acc, prod):
        return fp.np_add(acc, prod)

    def np_scale(self, s, c):
        return fp.np_mul(s, c, FP32, FP32)

    def np_lane_c(self, c):
        """The twin of `lane_c`, for a testbench that drives a lane: the bits (an int) a
        lane's c port holds for fp32 bits `c`."""
        return fp.np_normalize(c) if self._c_normal else int(c)

    def np_maximum(self, a, b):
        return fp.np_maximum(a, b)

    def np_exp_arg(self, x, mo):
        sign = np.uint32(FP32.sign_bit)
        d = fp.np_add(x, np.asarray(mo, np.uint32) ^ sign)
        up = (d & sign == 0) & (d & ~sign != 0) & ~FP32.is_nan(d)
        z = fp.np_to_fixed(d | sign, self._fixed.cfg.x_frac, self.x_shape.width)
        return z, up

    def np_exp2(self, z):
        return self._fixed.np_exp2(z)

    def np_to_float(self, e):
        return fp.np_from_fixed(e, -self._fixed.cfg.p_frac)

    def np_update(self, up, e32, o, v):
        v32 = fp.np_convert(v, self._spec, FP32)
        up = np.asarray(up, bool)
        prod = fp.np_mul(e32, np.where(up, o, v32), FP32, FP32)
        return fp.np_add(prod, np.where(up, v32, o))

    def np_update_l(self, up, e, l):
        one = self._fixed.one
        alpha, p = np.where(up, e, one), np.where(up, one, e)
        return self._fixed.np_update_l(alpha, l, p)

    def np_reciprocal(self, l):
        return self._fixed.np_reciprocal(l)

    def np_finalize(self, o, y, ey):
        r = fp.np_from_fixed(y, -self._fixed.cfg.recip_frac - np.asarray(ey, np.int64))
        return fp.np_convert(fp.np_mul(o, r, FP32, FP32), FP32, self._out)
