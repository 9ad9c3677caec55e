"""IEEE 754 binary floating point: the encodings, pipelined builders and their NumPy twins.

The floating-point formats (fp16, bf16 or fp8 storage, fp32 accumulation) are built
from these operations, each an Amaranth builder beside a NumPy twin that
computes the same bits:

* `mul`: the product of two numbers (fp16, bf16 or fp32 each), rounded to fp32;
* `add`: the sum of two fp32 numbers, rounded to fp32;
* `convert`: a number rounded to another format (exact when it widens);
* `maximum`: the larger of two fp32 numbers (-0 < +0, NaN if either is);
* `to_fixed`: an fp32 number as a signed fixed-point integer, rounded to nearest
  even and saturated (NaN reads as the most negative value): where the softmax
  leaves floating point for its fixed-point exp2;
* `from_fixed`: an unsigned integer times a power of two (a signed exponent input)
  as fp32, rounded to nearest even (exact up to 24 significant bits): where the
  fixed-point P, alpha and 1/l come back.

Semantics, the same in hardware and twin, checked against Berkeley SoftFloat
(`softfloatpy`) as an independent oracle:

* round to nearest, ties to even, the only rounding;
* subnormal inputs and results are honoured (gradual underflow): nothing is flushed;
* infinities as IEEE: a result beyond the largest finite number rounds to inf,
  inf - inf and 0 x inf are NaN;
* every NaN result is the canonical quiet NaN (`FloatSpec.nan`: sign 0, exponent
  all ones, the quiet bit alone): payloads do not propagate, and a NaN is data like
  any other, it never traps or stalls a pipeline;
* signed zeros as IEEE: x + (-x) = +0, -0 + -0 = -0, a product's sign is the XOR;
* no exception flags.

The twins compute through NumPy's float32 (IEEE binary32 with gradual underflow
on every platform NumPy runs on) and the conversions of NumPy (fp16) and
ml_dtypes (bf16), then make NaNs canonical; their agreement with SoftFloat is
tested, so they are an executable statement of the semantics above.

Each builder takes the Module to build in (``mul(m, ...)``, with its clock domain and
stall enable); its staged form (`staged_mul`, ...) takes a `dsp.Stages` instead, for a
builder that chains several of them on one pipeline and counts their stages as one
(`attenio.hdl.formats.float.FloatArith`). Each latency function (`mul_latency`, ...)
is the stage count of the staged form.

Every builder but the widening conversions ends in the same normalize-round-pack
pipeline (`_round_pack`): a value sig * 2**e with an unsigned integer significand is
normalized (leading-zero count, shift, clamped at the subnormals' scale), cut to its
significand, a guard and a sticky bit, shifted right if it starts below the normal
range, rounded by one increment of the packed exponent and mantissa (a carry out of
the mantissa steps the exponent, and out of the largest finite number gives inf), and
the special cases selected. Each builder tells it the range of e its numbers can have,
so it builds only the pieces that range needs: an fp32 sum never shifts right, an
fp16 product is never rounded. A storage format widened to fp32 is exact and takes
one stage (bf16, fp8) or two (fp16: `_widen`). Each stage holds at most one carry chain
or comparison.

No floating-point library is maintained for Amaranth 0.5 (libre-soc's ieee754fpu
targets nmigen), hence these builders.
"""

import functools
from dataclasses import dataclass

import numpy as np

from attenio.formats import FORMAT_TABLE
from amaranth.hdl import Cat, Const, Mux, Signal, Value, signed
from amaranth.lib import data

from .dsp import Stages, partial_products, sum_partials

__all__ = ["FloatSpec", "FP16", "BF16", "FP32", "STORAGE", "OUTPUTS", "SPECS", "mul", "add",
           "convert", "maximum", "to_fixed", "from_fixed", "staged_mul", "staged_add", "staged_convert",
           "staged_maximum", "staged_to_fixed", "staged_from_fixed", "mul_latency",
           "add_latency", "convert_latency", "maximum_latency", "to_fixed_latency",
           "from_fixed_latency", "sign_of", "magnitude_of", "negated", "negative_magnitude",
           "nan_of", "np_mul", "np_add", "np_convert", "np_maximum", "np_to_fixed",
           "np_from_fixed", "np_canonical", "NORMAL", "normalize", "staged_normalize",
           "normalize_latency", "np_normalize"]


@dataclass(frozen=True)
class FloatSpec:
    """A binary floating-point format: 1 sign bit, `exp_bits`, `man_bits`; IEEE 754's
    special values, or with `finite` (OCP FP8's E4M3, "fn") none of its infinities: the
    all-ones exponent holds numbers but for the all-ones mantissa, its one NaN a sign."""

    name: str
    exp_bits: int
    man_bits: int
    np_dtype: object
    bits_dtype: object
    finite: bool = False

    @property
    def width(self):
        return 1 + self.exp_bits + self.man_bits

    @property
    def bias(self):
        return (1 << (self.exp_bits - 1)) - 1

    @property
    def exp_all_ones(self):
        return (1 << self.exp_bits) - 1

    @property
    def inf(self):
        """+inf's bits (ValueError for a `finite` format: it has none)."""
        if self.finite:
            raise ValueError(f"{self.name} has no infinities")
        return self.exp_all_ones << self.man_bits

    @property
    def sign_bit(self):
        """The sign bit's mask: the encoding of x with it flipped is -x's."""
        return 1 << (self.width - 1)

    @property
    def neg_zero(self):
        """-0's bits: the sign bit alone (-0 + x is x for every x, where +0 + -0 is +0)."""
        return self.sign_bit

    @property
    def neg_inf(self):
        """-inf's bits."""
        return self.sign_bit | self.inf

    @property
    def nan(self):
        """The canonical quiet NaN's bits: sign 0, exponent all ones, the quiet bit (a
        `finite` format's: sign 0, every other bit set)."""
        if self.finite:
            return self.sign_bit - 1
        return self.inf | (1 << (self.man_bits - 1))

    @property
    def max_finite(self):
        """The largest finite number's bits."""
        return self.nan - 1 if self.finite else self.inf - 1

    def encode(self, value):
        """The encoding (an int) of the real number `value`, rounded to nearest even."""
        return int(self.from_float(np.asarray(value).astype(self.np_dtype)))

    def is_nan(self, bits):
        """Which of `bits` (an array of encodings) are NaNs."""
        bits = np.asarray(bits, dtype=np.uint64)
        mant = bits & ((1 << self.man_bits) - 1)
        top = (bits >> self.man_bits) & self.exp_all_ones == self.exp_all_ones
        return top & (mant == (1 << self.man_bits) - 1 if self.finite else mant != 0)

    def decode(self, bits):
        """The values of encodings `bits` as float64, from the format's definition (sign,
        biased exponent, hidden bit, subnormals, its special values), not from a library's
        conversion: the twins widen with it, the oracles with NumPy's and ml-dtypes'."""
        bits = np.asarray(bits).astype(np.int64)
        M = self.man_bits
        mant, ef = bits & ((1 << M) - 1), (bits >> M) & self.exp_all_ones
        sign = np.where((bits >> (self.width - 1)) & 1 == 1, -1.0, 1.0)
        normal = ef != 0
        value = sign * np.ldexp(np.where(normal, mant + (1 << M), mant).astype(np.float64),
                                np.where(normal, ef, 1) - self.bias - M)
        if not self.finite:
            value = np.where((ef == self.exp_all_ones) & (mant == 0), sign * np.inf, value)
        return np.where(self.is_nan(bits), np.nan, value)

    def to_float(self, bits):
        """The values of `bits` as this format's NumPy dtype."""
        return np.asarray(bits).astype(self.bits_dtype).view(self.np_dtype)

    def from_float(self, values):
        """The encodings of `values` (already of this format's dtype)."""
        return np.asarray(values, dtype=self.np_dtype).view(self.bits_dtype)


#: the storage formats, one a float row of `attenio.formats.FORMAT_TABLE`
STORAGE = {row.name: FloatSpec(row.name, row.exp_bits, row.man_bits, row.dtype.type,
                               np.dtype(f"uint{row.element_bits}").type, finite=row.finite)
           for row in FORMAT_TABLE if row.is_float}
FP16, BF16 = STORAGE["fp16"], STORAGE["bf16"]
#: the formats O is written in (`FormatRow.out`: fp8's O is bf16)
OUTPUTS = {row.out_row.name: STORAGE[row.out_row.name] for row in FORMAT_TABLE if row.is_float}
#: the accumulation format: scores, running max, P, alpha and O
FP32 = FloatSpec("fp32", 8, 23, np.float32, np.uint32)
SPECS = {**STORAGE, FP32.name: FP32}


def _check(op, **specs):
    for role, spec in specs.items():
        if spec not in SPECS.values():
            raise TypeError(f"{op}: {role} must be one of {', '.join(SPECS)}, not {spec!r}")


# -- NumPy twins --------------------------------------------------------------------------------

def np_canonical(bits, spec):
    """`bits` with every NaN replaced by `spec.nan`."""
    bits = np.asarray(bits, dtype=spec.bits_dtype)
    return np.where(spec.is_nan(bits), spec.bits_dtype(spec.nan), bits).astype(spec.bits_dtype)


def np_mul(a, b, src_a, src_b):
    """The twin of `mul`: fp32 bits of a * b for encodings `a` of `src_a`, `b` of `src_b`.

    Every source format is a subset of fp32, so NumPy's float32 product of the exact
    operands is the correctly rounded product."""
    _check("np_mul", src_a=src_a, src_b=src_b)
    x, y = _np_widen(a, src_a), _np_widen(b, src_b)
    with np.errstate(all="ignore"):
        return np_canonical((x * y).view(np.uint32), FP32)


def _np_widen(bits, spec):
    """Encodings `bits` of `spec` as float32 values (exact: every format is a subset)."""
    if spec is FP32:
        return FP32.to_float(bits)
    return spec.decode(bits).astype(np.float32)


def np_add(a, b):
    """The twin of `add`: fp32 bits of a + b for fp32 encodings `a`, `b`."""
    with np.errstate(all="ignore"):
        return np_canonical((FP32.to_float(a) + FP32.to_float(b)).view(np.uint32), FP32)


def np_convert(x, src, dst):
    """The twin of `convert`: encodings `x` of `src` rounded to `dst` (ties to even)."""
    _check("np_convert", src=src, dst=dst)
    if src is not FP32 and dst is not FP32 and src is not dst:
        raise TypeError("np_convert: between two storage formats go through fp32 (two roundings)")
    with np.errstate(all="ignore"):
        out = _np_widen(x, src).astype(dst.np_dtype)
    return np_canonical(dst.from_float(out), dst)


def _np_order_key(bits):
    """fp32 encodings as unsigned keys in numeric order (-0 just below +0)."""
    bits = np.asarray(bits, dtype=np.uint32)
    sign = np.uint32(FP32.sign_bit)
    return np.where(bits & sign != 0, ~bits, bits | sign).astype(np.uint32)


def np_maximum(a, b):
    """The twin of `maximum`: the larger of fp32 encodings a and b; NaN if either is."""
    a, b = np.asarray(a, dtype=np.uint32), np.asarray(b, dtype=np.uint32)
    out = np.where(_np_order_key(a) >= _np_order_key(b), a, b)
    return np.where(FP32.is_nan(a) | FP32.is_nan(b), np.uint32(FP32.nan), out).astype(np.uint32)


def np_to_fixed(x, frac, width):
    """The twin of `to_fixed`: round-half-even(x * 2**frac) of fp32 encodings x, saturated
    to `width`-bit two's complement, NaN to the most negative; int64."""
    x = np.asarray(x, dtype=np.uint32)
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    with np.errstate(all="ignore"):
        v = np.ldexp(FP32.to_float(x).astype(np.float64), frac)     # exact in float64
        r = np.clip(np.rint(v), lo, hi)                             # rint: ties to even
    return np.where(FP32.is_nan(x), lo, r).astype(np.int64)


def np_from_fixed(value, exp):
    """The twin of `from_fixed`: fp32 bits of value * 2**exp (unsigned value < 2**53)."""
    with np.errstate(all="ignore"):
        v = np.ldexp(np.asarray(value, dtype=np.float64), np.asarray(exp, dtype=np.int64))
        return v.astype(np.float32).view(np.uint32)


def np_normalize(x):
    """The twin of `normalize`: the `NORMAL` bits (a Python int) of fp32 encoding `x` (a
    scalar). Zero's exponent is lowered by man_bits, as the hardware's leading-zero count
    of an all-zero significand says (`_leading_zeros`); no product reads it."""
    x = int(x)
    M, E = FP32.man_bits, FP32.exp_bits
    mant, ef, sign = x & ((1 << M) - 1), (x >> M) & FP32.exp_all_ones, x >> (M + E)
    sig = mant | (ef != 0) << M
    e = (ef or 1) - (FP32.bias + M)
    shift = M + 1 - sig.bit_length() if sig else M
    sig, e = sig << shift, e - shift
    special = ef == FP32.exp_all_ones
    return NORMAL.const({"sig": sig, "e": e, "sign": sign, "zero": ef == 0 and mant == 0,
                         "inf": special and mant == 0, "nan": special and mant != 0}
                        ).as_value().value


# -- hardware -----------------------------------------------------------------------------------

_EXP = signed(12)       # unbiased exponents of every value in flight (fp32 products: -298 .. 254)

#: An fp32 number with its significand normalized (`normalize`): (-1)**sign * sig * 2**e,
#: sig's top bit set unless the number is 0 (or inf or NaN: flags). `staged_mul` takes
#: its second operand in this form (`b_normal`), normalized once for many products by
#: the same number (the softmax lanes' scale by c).
NORMAL = data.StructLayout({"sig": FP32.man_bits + 1, "e": _EXP, "sign": 1, "zero": 1,
                            "inf": 1, "nan": 1})


def _unpack(m, x, spec, name):
    """(sign, sig, e, zero, inf, nan) of encoding `x`, combinational: the value is
    (-1)**sign * sig * 2**e with sig the significand as an integer (hidden bit set
    for normal numbers), one adder for e."""
    x = Value.cast(x)
    M, E = spec.man_bits, spec.exp_bits
    mant, ef, sign = x[:M], x[M:M + E], x[M + E]
    normal = ef != 0
    special = ef == spec.exp_all_ones
    sig = Signal(M + 1, name=f"{name}_sig")
    e = Signal(_EXP, name=f"{name}_e")
    m.d.comb += [sig.eq(Cat(mant, normal)),
                 e.eq(Mux(normal, ef, 1) - (spec.bias + M))]
    if spec.finite:          # no infinities; NaN only with every mantissa bit set
        return sign, sig, e, ~normal & (mant == 0), Const(0, 1), special & mant.all()
    return sign, sig, e, ~normal & (mant == 0), special & (mant == 0), special & (mant != 0)


def sign_of(x, spec=FP32):
    """The sign bit of encoding `x` (an Amaranth value) of `spec`."""
    return Value.cast(x)[spec.width - 1]


def magnitude_of(x, spec=FP32):
    """Encoding `x` of `spec` without its sign bit: the bits of |x|, which order as |x| does
    when compared as unsigned integers."""
    return Value.cast(x)[:spec.width - 1]


def negated(x, spec=FP32):
    """-x: encoding `x` of `spec` with its sign bit inverted (wires and one inverter)."""
    return Cat(magnitude_of(x, spec), ~sign_of(x, spec))


def negative_magnitude(x, spec=FP32):
    """-|x|: encoding `x` of `spec` with its sign bit set (wires only)."""
    return Cat(magnitude_of(x, spec), Const(1, 1))


def nan_of(x, spec=FP32):
    """Whether encoding `x` of `spec` is a NaN: exponent all ones, mantissa not zero (all
    ones in a `finite` format) (combinational)."""
    x = Value.cast(x)
    M, E = spec.man_bits, spec.exp_bits
    return (x[M:M + E] == spec.exp_all_ones) & (x[:M].all() if spec.finite else x[:M] != 0)


def _round_up(guard, rest, lsb):
    """Round to nearest, ties to even: up when above half, or at half with an odd mantissa."""
    return guard & (rest | lsb)


def _e_range(spec):
    """(lowest, highest) exponent `_unpack` gives a number (not an infinity or NaN) of
    `spec`: what `_round_pack` is told, so it builds only the cases that can occur."""
    top = spec.exp_all_ones if spec.finite else spec.exp_all_ones - 1
    return 1 - spec.bias - spec.man_bits, top - spec.bias - spec.man_bits


def _leading_zeros(x):
    """(count, any) of `x` (combinational, a tree of halves): `count` the zeros above its
    highest one (meaningless if `any` is 0), `any` whether it has a one."""
    x = Value.cast(x)
    n = len(x)
    if n == 1:
        return Const(0, 1), x[0]
    half = 1 << ((n - 1).bit_length() - 1)          # the largest power of two below n
    lo, hi = x[:n - half], x[n - half:]             # hi: the top `half` bits
    c_hi, a_hi = _leading_zeros(hi)
    c_lo, a_lo = _leading_zeros(lo)
    width = max(len(c_hi), len(c_lo)) + 1
    return Mux(a_hi, c_hi, Const(half, width) + c_lo)[:width], a_hi | a_lo


#: the most bits `_round_pack` cuts below the significand and guard bit that it ORs into
#: the sticky bit after the shift (one LUT4); a wider cut (a product of two fp32
#: significands) takes the sticky bit from the trailing zeros instead, counted beside the
#: leading zeros: the OR of a shifted field's low bits is the deepest logic of its stage
_NARROW_CUT = 4


def _round_pack(st, *, sign, zero_sign, sig, e, e_range, dst, nan, inf, name, lead=None,
                positive=False):
    """The fp `dst` encoding of (-1)**sign * sig * 2**e, rounded to nearest even; NaN if
    `nan`, (-1)**sign inf if `inf`, and (-1)**zero_sign 0 if sig is 0: five stages.

    `e_range` is (lowest, highest) e of the values that are not `nan` or `inf`; from it
    the pieces no such value needs are left out: the right shift of a result below the
    normal range, the overflow test, and the rounding when every result is exact.
    `lead` (None: anywhere) is how many of sig's top bits its leading one can be in when
    sig is not 0 (a product of normalized significands: 2): the leading zeros are
    counted there, the left shift is at most `lead` - 1 places, and the bits it can never
    bring above the cut are ORed into the sticky bit in stage 1. With `positive`, it
    returns (encoding, whether it is above 0) both from stage 5's registers, the second
    from the flags rather than from the encoding's 31 bits.

    1. the leading zeros (a tree; for a cut wider than `_NARROW_CUT`, the trailing zeros
       too), the biased exponent the value has with its top bit leading;
    2. the left shift that normalizes it, clamped where the exponent would fall below the
       normal range (a subnormal result is then already in place), and the right shift
       of a value that starts below it;
    3. the left shift; the significand cut to its M + 1 bits, a guard bit and a sticky bit
       (for a wide cut, whether the trailing zeros are fewer than the bits cut);
    4. the right shift (its bits shifted out folded into the sticky bit), the exponent
       field (0 for a subnormal), overflow, the rounding decision;
    5. the increment (a carry out of the mantissa steps the exponent, and out of the
       largest finite number gives inf), the special cases."""
    m = st.m
    M, E = dst.man_bits, dst.exp_bits
    sig = Value.cast(sig)
    exact = len(sig) <= M + 1                 # every value fits the significand...
    pad = max(0, M + 3 - len(sig))            # room for the mantissa, guard and round bits
    W = len(sig) + pad
    sig = Cat(Const(0, pad), sig) if pad else sig       # value = sig * 2**(e - pad)
    bias_top = W - 1 + dst.bias - pad         # the biased exponent is e + this, top bit leading
    eb_lo, eb_hi = e_range[0] + bias_top, e_range[1] + bias_top
    below = eb_lo < 1                         # ...unless it can start below the normal range
    over_possible = eb_hi >= dst.exp_all_ones
    exact = exact and not below

    def reg(shape, stage, what):
        return Signal(shape, name=f"{name}_{what}{stage}")

    def carry(stage, **flags):
        """Registers of the flags that ride along, for `stage`."""
        out = {k: reg(1, stage, k) for k in flags}
        return out, [out[k].eq(v) for k, v in flags.items()]

    # 1: leading zeros (and trailing zeros, for a wide cut); the biased exponent with
    # the top bit leading
    top = W if lead is None else lead
    count, nonzero = _leading_zeros(sig[W - top:])
    sig1, lz1, eb1 = reg(W, 1, "sig"), reg(range(top), 1, "lz"), reg(_EXP, 1, "eb")
    wide_cut = W - M - 2 > _NARROW_CUT
    # with `lead`, the bits below `low` stay below the cut whatever the shift
    low = W - M - 2 - (top - 1)
    flags1 = {"low": sig[:low] != 0} if lead is not None and low > 0 else {}
    f1, s1 = carry(1, sign=sign, zsign=zero_sign, nan=nan, inf=inf, zero=~nonzero, **flags1)
    stage1 = [s1, sig1.eq(sig), lz1.eq(count), eb1.eq(e + bias_top)]
    if wide_cut and lead is None:
        tz1 = reg(range(W), 1, "tz")
        stage1.append(tz1.eq(_leading_zeros(sig[::-1])[0]))
    st.stage(*stage1)

    # 2: the left shift, at most down to the exponent 1 (the subnormals' scale); the right
    # shift of a value whose top bit is already below it (at most M + 3: all sticky)
    sh2 = reg(range(top), 2, "sh")
    sig2, eb2 = reg(W, 2, "sig"), reg(_EXP, 2, "eb")
    room = eb1 - 1
    if eb_lo - 1 >= W - 1:
        shift = lz1
    else:
        shift = Mux(room < lz1, Mux(room < 0, 0, room[:len(sh2)]), lz1)
    f2, s2 = carry(2, **f1)
    stage2 = [s2, sh2.eq(shift), sig2.eq(sig1), eb2.eq(eb1)]
    if wide_cut and lead is None:
        # the bits below the cut (W - M - 2 of them) hold a one iff the lowest one, at
        # tz1, is shifted to below it: iff sh2 < W - M - 2 - tz1
        cut_room = reg(signed(len(sh2) + 2), 2, "cutroom")
        stage2.append(cut_room.eq(W - M - 2 - tz1))
    if below:
        k2 = reg(range(M + 4), 2, "k")
        stage2.append(k2.eq(Mux(eb1 < 1, Mux(eb1 < -(M + 1), M + 3, 1 - eb1), 0)))
    st.stage(*stage2)

    # 3: shifted; the significand, a guard bit, a sticky bit (M + 3 bits)
    shifted = (sig2 << sh2)[:W]
    if lead is not None:
        sticky = (f2["low"] if low > 0 else 0) | (shifted[max(low, 0):W - M - 2] != 0)
    elif wide_cut:
        sticky = sh2 < cut_room
    else:
        sticky = shifted[:W - M - 2] != 0
    cut = Cat(sticky, shifted[W - M - 2:])
    sig3, be3 = reg(M + 3, 3, "sig"), reg(_EXP, 3, "be")
    f3, s3 = carry(3, **f2)
    stage3 = [s3, sig3.eq(cut), be3.eq(eb2 - sh2)]
    if below:
        k3 = reg(range(M + 4), 3, "k")
        stage3.append(k3.eq(k2))
    st.stage(*stage3)

    # 4: the right shift, the fields, overflow, the rounding decision
    if below:
        lost = Cat(*(sig3[i] & (k3 > i) for i in range(M + 3))) != 0
        kept = sig3 >> k3
        kept = Cat(kept[0] | lost, kept[1:])
    else:
        kept = sig3
    mant, hidden, guard, sticky = kept[2:M + 2], kept[M + 2], kept[1], kept[0]
    base4 = reg(E + M, 4, "base")
    up4 = reg(1, 4, "up")
    over = (be3 >= dst.exp_all_ones) if over_possible else Const(0, 1)
    f4, s4 = carry(4, over=over, **f3)
    st.stage(s4, base4.eq(Cat(mant, Mux(hidden, be3[:E], 0))),
             up4.eq(0 if exact else _round_up(guard, sticky, mant[0])))

    # 5: the increment (its carry steps the exponent) and the special cases
    out = reg(dst.width, 5, "out")
    rounded = base4 if exact else (base4 + up4)[:E + M]
    inf_bits = Const(dst.inf, E + M)
    zero = f4["zero"] & ~f4["inf"]          # a zero significand overflows nothing
    stage5 = [out.eq(Mux(f4["nan"], dst.nan,
                         Cat(Mux(zero, 0, Mux(f4["inf"] | f4["over"], inf_bits, rounded)),
                             Mux(zero, f4["zsign"], f4["sign"]))))]
    if positive:
        # a significand that is not 0 stays so unless shifted out below the normal range
        assert not below, "_round_pack: positive needs results that are never rounded to 0"
        above = reg(1, 5, "pos")
        stage5.append(above.eq(~f4["nan"] & ~zero & ~f4["sign"]))
        st.stage(*stage5)
        return out, above
    st.stage(*stage5)
    return out


def mul(m, a, b, src_a, src_b, *, domain="sync", en=None, name="fmul", leads=None,
        b_normal=False):
    """fp32 bits of a * b for encodings a of `src_a` and b of `src_b`, `mul_latency`
    cycles later: unpack, the significands' product (ECP5 DSPs) with the exponents'
    sum, the partial products' sum, then `_round_pack`. `leads`, `b_normal`:
    `staged_mul`'s."""
    return staged_mul(Stages(m, domain, en), a, b, src_a, src_b, name, leads=leads,
                      b_normal=b_normal)


def _normalizing(sig, e, top, name):
    """The two stages that normalize significand `sig` (exponent `e`) whose ones are in
    its top `top` bits when it is subnormal: (stage 0's statements, stage 1's, the
    normalized significand, its exponent), all registers. 0: the leading zeros counted
    (within the top bits), 1: shifted out, the exponent lowered as much: the count and the
    shift together, eight LUT levels, do not fit a cycle after the route that brings an
    operand. With `top` 1 they are two plain stages."""
    sig0 = Signal.like(sig, name=f"{name}sig0")
    e0 = Signal(_EXP, name=f"{name}e0")
    count0 = Signal(range(top), name=f"{name}lz0")
    stage0 = [sig0.eq(sig), e0.eq(e),
              count0.eq(_leading_zeros(sig[len(sig) - top:])[0] if top > 1 else 0)]
    sig1 = Signal.like(sig, name=f"{name}sig1")
    e1 = Signal(_EXP, name=f"{name}e1")
    hi = sig0[len(sig) - top:]
    if top == 1:
        normal = sig0
    elif top == len(sig):
        normal = (sig0 << count0)[:len(sig)]
    else:           # a normal significand is left as it is, a subnormal's is in hi
        normal = Mux(sig0[-1], sig0, Cat(Const(0, len(sig) - top), (hi << count0)[:top]))
    return stage0, [sig1.eq(normal), e1.eq(e0 - count0)], sig1, e1


def normalize(m, x, *, domain="sync", en=None, name="fnorm"):
    """The `NORMAL` form of fp32 encoding `x`, `normalize_latency` cycles later."""
    return staged_normalize(Stages(m, domain, en), x, name)


def staged_normalize(st, x, name):
    """`normalize` staged on `st`: a `NORMAL` view of registers, two stages later."""
    sign, sig, e, zero, inf, nan = _unpack(st.m, x, FP32, name)
    stage0, stage1, sig1, e1 = _normalizing(sig, e, len(sig), f"{name}_")
    flags = {"sign": sign, "zero": zero, "inf": inf, "nan": nan}
    for stage, stmts in ((0, stage0), (1, stage1)):
        regs = {k: Signal(name=f"{name}_{k}{stage}") for k in flags}
        st.stage(*stmts, *[regs[k].eq(v) for k, v in flags.items()])
        flags = regs
    return data.View(NORMAL, Cat(sig1, e1, *flags.values()))


@functools.cache
def normalize_latency():
    """Cycles from `normalize`'s input to its `NORMAL` form."""
    return Stages.count_of(staged_normalize, Signal(FP32.width), "fnorm")


def staged_mul(st, a, b, src_a, src_b, name, *, leads=None, b_normal=False):
    """`mul` staged on `st` (a `dsp.Stages`), its registers named after `name`: the fp32
    product `mul_latency(src_a, src_b, leads)` stages later.

    `leads` (lead_a, lead_b), if given, is the caller's promise of how many top bits of
    each operand's significand hold all its ones when it is subnormal (1: the operand is
    normal, or 0, inf or NaN; a widened bf16 element: 8; None: any encoding of its
    format): the operands are then normalized before their product, in two stages of
    their own if a lead is above 1 (a count, then a shift, over that many bits), and the
    product's leading one is in its top two bits, so `_round_pack` shifts it at most one
    place. Without `leads` the product's leading zeros are counted and shifted out across
    all its bits, twice as wide: an fp32 product costs some 20 % fewer LUTs with leads
    (1, None) (docs/fp_cost.md). A broken promise gives wrong products: the bit-exact
    runs with subnormal operands are what hold the callers to theirs.

    `b_normal`: b is already in `NORMAL` form (`normalize`, of an fp32 number: `src_b`
    must be FP32, and its lead is None), so the stages that would normalize it only
    carry it: the same latency, without b's leading-zero count and shift."""
    _check("mul", src_a=src_a, src_b=src_b)
    if b_normal and (src_b is not FP32 or leads is None or leads[1] is not None):
        raise ValueError(f"mul: a b in NORMAL form is an fp32 number of lead None, with a "
                         f"lead given for a; not {src_b.name} with leads {leads!r}")
    m = st.m
    sa, siga, ea, za, ia, na = _unpack(m, a, src_a, f"{name}_a")
    if b_normal:
        b = data.View(NORMAL, b)
        sb, sigb, eb, zb, ib, nb = b.sign, b.sig, b.e, b.zero, b.inf, b.nan
    else:
        sb, sigb, eb, zb, ib, nb = _unpack(m, b, src_b, f"{name}_b")
    (alo, ahi), (blo, bhi) = _e_range(src_a), _e_range(src_b)
    if leads is not None:
        tops = [_check_lead(lead, src) for lead, src in zip(leads, (src_a, src_b))]
        alo, blo = alo - (tops[0] - 1), blo - (tops[1] - 1)
    if leads is not None and max(tops) > 1:
        # each significand normalized within its lead, in two stages (`_normalizing`)
        flags = {k: v for k, v in zip(("sa", "za", "ia", "na", "sb", "zb", "ib", "nb"),
                                      (sa, za, ia, na, sb, zb, ib, nb))}
        counted, stage0, stage1 = [], [], []
        for tag, sig, e, top in (("a", siga, ea, tops[0]),
                                 ("b", sigb, eb, 1 if b_normal else tops[1])):
            s0, s1, sig1, e1 = _normalizing(sig, e, top, f"{name}_{tag}")
            stage0 += s0
            stage1 += s1
            counted += [sig1, e1]
        for stage, stmts in ((0, stage0), (1, stage1)):
            regs = {k: Signal(name=f"{name}_{k}{stage}n") for k in flags}
            st.stage(*stmts, *[regs[k].eq(v) for k, v in flags.items()])
            flags = regs
        siga, ea, sigb, eb = counted
        sa, za, ia, na, sb, zb, ib, nb = flags.values()
    e1a, e1b = Signal(_EXP, name=f"{name}_ea1"), Signal(_EXP, name=f"{name}_eb1")
    s1, nan1, inf1 = (Signal(name=f"{name}_{k}1") for k in ("sign", "nan", "inf"))
    # the significands registered by the multiplier itself (`dsp.PartialProducts`)
    parts, products = partial_products(siga, sigb, name=name, registered=True)
    st.stage(products.operands, e1a.eq(ea), e1b.eq(eb), s1.eq(sa ^ sb),
             nan1.eq(na | nb | (ia & zb) | (za & ib)), inf1.eq(ia | ib))
    e2 = Signal(_EXP, name=f"{name}_e2")
    s2, nan2, inf2 = (Signal(name=f"{name}_{k}2") for k in ("sign", "nan", "inf"))
    st.stage(products, e2.eq(e1a + e1b), s2.eq(s1), nan2.eq(nan1), inf2.eq(inf1))
    e2r = Signal(_EXP, name=f"{name}_e2r")
    s2r, nan2r, inf2r = (Signal(name=f"{name}_{k}2r") for k in ("sign", "nan", "inf"))
    st.stage(products.relay, e2r.eq(e2), s2r.eq(s2), nan2r.eq(nan2), inf2r.eq(inf2))
    prod = Signal(len(siga) + len(sigb), name=f"{name}_prod")
    e3 = Signal(_EXP, name=f"{name}_e3")
    s3, nan3, inf3 = (Signal(name=f"{name}_{k}3") for k in ("sign", "nan", "inf"))
    st.stage(prod.eq(sum_partials(parts)), e3.eq(e2r), s3.eq(s2r), nan3.eq(nan2r),
             inf3.eq(inf2r))
    return _round_pack(st, sign=s3, zero_sign=s3, sig=prod, e=e3, e_range=(alo + blo, ahi + bhi),
                       dst=FP32, nan=nan3, inf=inf3, name=name,
                       lead=None if leads is None else 2)


def _check_lead(lead, spec):
    """The top significand bits `lead` (one of `staged_mul`'s `leads`) allows an operand
    of `spec`: all of them for None."""
    bits = spec.man_bits + 1
    if lead is None:
        return bits
    if not isinstance(lead, int) or isinstance(lead, bool) or not 1 <= lead <= bits:
        raise ValueError(f"mul: the lead of a {spec.name} operand is an integer 1..{bits} "
                         f"or None, not {lead!r}")
    return lead


def widened_lead(spec):
    """The lead (`staged_mul`'s `leads`) of an element of storage `spec` widened to fp32:
    1 where fp32 holds its subnormals as normal numbers (a narrower exponent), else its
    significand's bits (bf16's subnormals stay subnormal, their leading one in the top
    man_bits + 1 bits of fp32's significand)."""
    _check("widened_lead", spec=spec)
    return 1 if spec.exp_bits < FP32.exp_bits else spec.man_bits + 1


def add(m, a, b, *, domain="sync", en=None, name="fadd"):
    """fp32 bits of a + b for fp32 encodings a, b, `add_latency` cycles later: unpack and
    compare magnitudes, swap and the exponents' difference, align (three extra bits,
    the lowest sticky), add or subtract, then `_round_pack`."""
    return staged_add(Stages(m, domain, en), a, b, name)


def staged_add(st, a, b, name, *, positive=False):
    """`add` staged on `st` (a `dsp.Stages`), its registers named after `name`: the fp32
    sum `add_latency()` stages later; with `positive`, (sum, sum > 0) (`_round_pack`)."""
    m = st.m
    a, b = Value.cast(a), Value.cast(b)
    M = FP32.man_bits
    sa, siga, ea, _, ia, na = _unpack(m, a, FP32, f"{name}_a")
    sb, sigb, eb, _, ib, nb = _unpack(m, b, FP32, f"{name}_b")

    def regs(stage, **values):
        out = {k: Signal.like(Value.cast(v), name=f"{name}_{k}{stage}") for k, v in values.items()}
        return out, [out[k].eq(v) for k, v in values.items()]

    # 1: unpacked, and which magnitude is larger (the encodings compare as integers)
    fa, fb = (Mux(x[M:M + 8] != 0, x[M:M + 8], 1) for x in (a, b))   # ea, eb + bias + M
    a_ge = magnitude_of(a) >= magnitude_of(b)      # the encodings compare as integers
    r1, s1 = regs(1, sa=sa, sb=sb, siga=siga, sigb=sigb, ea=ea, eb=eb,
                  dab=(fa - fb)[:9], dba=(fb - fa)[:9],
                  nan=na | nb | (ia & ib & (sa != sb)), inf=ia | ib, inf_sign=Mux(ia, sa, sb))
    # which is larger drives some 60 LUTs of stage 2, too many for one register's route:
    # kept copies, one for the smaller operand, one for the larger, one for the rest
    ge = {use: Signal(name=f"{name}_a_ge1_{use}", attrs={"keep": 1})
          for use in ("small", "big", "rest")}
    st.stage(s1, *[copy.eq(a_ge) for copy in ge.values()])
    # 2: the larger first, the exponents' difference (never negative); both operands'
    # trailing zeros (M + 1 for a zero significand), counted from stage 1's registers, the
    # smaller's selected in stage 3: a tree is some six LUTs deep, too deep to follow a
    # route from the caller's selection of an operand (a MAC's accumulator or fold) in
    # stage 1, or this stage's selection
    a_ge = ge["rest"]
    big_e = Mux(a_ge, r1["ea"], r1["eb"])
    tza, tzb = (Mux(r1[sig] != 0, _leading_zeros(r1[sig][::-1])[0][:5], M + 1)
                for sig in ("siga", "sigb"))
    r2, s2 = regs(2, sign=Mux(a_ge, r1["sa"], r1["sb"]), sub=r1["sa"] ^ r1["sb"],
                  zsign=r1["sa"] & r1["sb"],
                  big=Mux(ge["big"], r1["siga"], r1["sigb"]),
                  small=Mux(ge["small"], r1["sigb"], r1["siga"]),
                  tza=tza, tzb=tzb, a_ge=ge["small"],
                  nan=r1["nan"], inf=r1["inf"], inf_sign=r1["inf_sign"])
    # the exponents' difference (never negative), beyond M + 4 places all of it is sticky
    limit = M + 4
    d = Mux(a_ge, r1["dab"], r1["dba"])
    e2, dist = Signal(_EXP, name=f"{name}_e2"), Signal(range(limit + 1), name=f"{name}_dist2")
    st.stage(s2, e2.eq(big_e - 3), dist.eq(Mux(d > limit, limit, d[:len(dist)])))
    # 3: the smaller aligned: three bits below the significand, the lowest sticky (the OR
    # of everything shifted past it: some bit is, if it has fewer trailing zeros than the
    # places shifted past it)
    kept = Cat(Const(0, 3), r2["small"]) >> dist
    small3 = Signal(M + 4, name=f"{name}_small3")
    big3 = Signal(M + 4, name=f"{name}_big3")
    r3, s3 = regs(3, sign=r2["sign"], sub=r2["sub"], zsign=r2["zsign"], e=e2,
                  nan=r2["nan"], inf=r2["inf"], inf_sign=r2["inf_sign"])
    st.stage(s3, big3.eq(Cat(Const(0, 3), r2["big"])),
             small3.eq(Cat(kept[0] | (Mux(r2["a_ge"], r2["tzb"], r2["tza"]) + 3 < dist),
                           kept[1:])))
    # 4: the sum or difference (never negative: the larger magnitude comes first), one
    # adder: the smaller inverted and a carry in to subtract
    total = Signal(M + 5, name=f"{name}_sum4")
    r4, s4 = regs(4, sign=Mux(r3["inf"], r3["inf_sign"], r3["sign"]), zsign=r3["zsign"],
                  e=r3["e"], nan=r3["nan"], inf=r3["inf"])
    addend = small3 ^ r3["sub"].replicate(M + 4)
    raw = big3 + addend + r3["sub"]
    st.stage(s4, total.eq(Cat(raw[:M + 4], raw[M + 4] & ~r3["sub"])))
    lo, hi = _e_range(FP32)
    return _round_pack(st, sign=r4["sign"], zero_sign=r4["zsign"], sig=total, e=r4["e"],
                       e_range=(lo - 3, hi - 3), dst=FP32, nan=r4["nan"], inf=r4["inf"],
                       name=name, positive=positive)


def convert(m, x, src, dst, *, domain="sync", en=None, name="fcvt"):
    """`dst` bits of encoding x of `src`, rounded to nearest even, `convert_latency`
    cycles later: unpack, then `_round_pack`; a storage format to fp32 (exact) in one
    or two stages (`_widen`)."""
    return staged_convert(Stages(m, domain, en), x, src, dst, name)


#: the widest mantissa `_widen` normalizes in one stage (fp8's; fp16's takes two)
WIDEN_ONE_STAGE_BITS = 4


def _widen(st, x, src, name):
    """fp32 bits of encoding `x` of a storage format `src`: exact, since every number of
    `src` is an fp32 number. The exponent is rebiased and the mantissa placed at the top;
    a subnormal of a format with fewer exponent bits becomes a normal fp32 number (its
    leading zeros shifted out, the exponent lowered by as many); bf16's subnormals are
    fp32's; NaN is the canonical one. One stage, but for a mantissa wider than
    `WIDEN_ONE_STAGE_BITS` (fp16's): two, the leading zeros and the special cases in the
    first, the shift and the exponent's subtraction in the second. fp16's in one stage
    was the fp16 2x2's worst path (12.07 ns from V's register to the widened V); fp8's
    2 or 3 bits are a LUT or two."""
    M, E = src.man_bits, src.exp_bits
    x = Value.cast(x)
    mant, ef, sign = x[:M], x[M:M + E], x[M + E]
    pad = Const(0, FP32.man_bits - M)
    nan = nan_of(x, src)
    inf = Const(0, 1) if src.finite else (ef == src.exp_all_ones) & (mant == 0)
    rebias = FP32.bias - src.bias
    out = Signal(FP32.width, name=f"{name}_out")
    if E == FP32.exp_bits:                      # the same exponents: bits placed, no more
        st.stage(out.eq(Mux(nan, FP32.nan, Cat(Mux(inf, FP32.inf, Cat(pad, mant, ef)), sign))))
        return out
    lz, _ = _leading_zeros(mant)
    lz = lz[:max(1, (M - 1).bit_length())]
    if M <= WIDEN_ONE_STAGE_BITS:
        sub = Cat(pad, ((mant << (lz + 1))[:M]), (rebias - lz)[:8])   # 1.f * 2**(-bias - lz)
        number = Mux(ef == 0, Mux(mant == 0, 0, sub), Cat(pad, mant, (ef + rebias)[:8]))
        st.stage(out.eq(Mux(nan, FP32.nan, Cat(Mux(inf, FP32.inf, number), sign))))
        return out
    # stage 1: the fields, the leading zeros, the cases
    mant1, lz1, sign1 = (Signal.like(v, name=f"{name}_{n}1")
                         for v, n in ((mant, "mant"), (lz, "lz"), (sign, "sign")))
    e1 = Signal(8, name=f"{name}_e1")           # the normal number's fp32 exponent
    sub1, zero1, nan1, inf1 = (Signal(name=f"{name}_{n}1") for n in ("sub", "zero", "nan", "inf"))
    st.stage(mant1.eq(mant), lz1.eq(lz), sign1.eq(sign), e1.eq((ef + rebias)[:8]),
             sub1.eq(ef == 0), zero1.eq(mant == 0), nan1.eq(nan), inf1.eq(inf))
    # stage 2: a subnormal's 1.f * 2**(-bias - lz), the cases selected
    sub = Cat(pad, ((mant1 << (lz1 + 1))[:M]), (rebias - lz1)[:8])
    number = Mux(sub1, Mux(zero1, 0, sub), Cat(pad, mant1, e1))
    st.stage(out.eq(Mux(nan1, FP32.nan, Cat(Mux(inf1, FP32.inf, number), sign1))))
    return out


def staged_convert(st, x, src, dst, name):
    """`convert` staged on `st` (a `dsp.Stages`), its registers named after `name`: the
    `dst` encoding `convert_latency(src, dst)` stages later."""
    _check("convert", src=src, dst=dst)
    if dst.finite:
        # no datapath result is stored in such a format (fp8 O is written in bf16), and its
        # overflow (to NaN, or saturated as the FP8 recipes do) is the host's choice
        raise TypeError(f"convert: no builder rounds to {dst.name} (a format without infinities)")
    if dst is FP32 and src is not FP32:
        return _widen(st, x, src, name)
    m = st.m
    s, sig, e, _, inf, nan = _unpack(m, x, src, name)
    s1, inf1, nan1 = (Signal(name=f"{name}_{k}1") for k in ("sign", "inf", "nan"))
    sig1, e1 = Signal.like(sig, name=f"{name}_sig1"), Signal(_EXP, name=f"{name}_e1")
    st.stage(s1.eq(s), inf1.eq(inf), nan1.eq(nan), sig1.eq(sig), e1.eq(e))
    return _round_pack(st, sign=s1, zero_sign=s1, sig=sig1, e=e1, e_range=_e_range(src),
                       dst=dst, nan=nan1, inf=inf1, name=name)


def maximum(m, a, b, *, domain="sync", en=None, name="fmax"):
    """fp32 bits of the larger of fp32 encodings a and b (NaN if either is, -0 < +0),
    `maximum_latency` cycles later: the order keys and NaN tests, then one comparison."""
    return staged_maximum(Stages(m, domain, en), a, b, name)


def _order_key(x):
    """An fp32 encoding as an unsigned key in numeric order: negative encodings inverted,
    positive ones above them."""
    x = Value.cast(x)
    return Mux(sign_of(x), ~x, negative_magnitude(x))


def staged_maximum(st, a, b, name):
    """`maximum` staged on `st` (a `dsp.Stages`), its registers named after `name`: the
    larger fp32 encoding `maximum_latency()` stages later."""
    a, b = Value.cast(a), Value.cast(b)
    W = FP32.width
    ka, kb = Signal(W, name=f"{name}_ka"), Signal(W, name=f"{name}_kb")
    a1, b1 = Signal(W, name=f"{name}_a1"), Signal(W, name=f"{name}_b1")
    nan1 = Signal(name=f"{name}_nan1")
    st.stage(ka.eq(_order_key(a)), kb.eq(_order_key(b)), a1.eq(a), b1.eq(b),
             nan1.eq(nan_of(a) | nan_of(b)))
    out = Signal(W, name=f"{name}_out")
    st.stage(out.eq(Mux(nan1, FP32.nan, Mux(ka >= kb, a1, b1))))
    return out


def to_fixed(m, x, frac, width, *, domain="sync", en=None, name="ffix"):
    """round-half-even(x * 2**frac) of fp32 encoding x as a signed(`width`) integer,
    saturated, NaN to the most negative value; `to_fixed_latency` cycles later:
    unpack, the shift distance, the shift with its guard and sticky bits, the rounding
    increment, the sign, the saturation."""
    return staged_to_fixed(Stages(m, domain, en), x, frac, width, name)


def staged_to_fixed(st, x, frac, width, name, *, negative=False):
    """`to_fixed` staged on `st` (a `dsp.Stages`), its registers named after `name`: the
    signed(`width`) integer `to_fixed_latency(frac, width)` stages later. `negative`: x's
    sign bit is set (x is -|y|, or NaN), which leaves out the sign's registers, the
    positive results' negation choice and their overflow test (a register of a constant
    sign bit is not a constant to Yosys: it starts at 0)."""
    m = st.m
    s, sig, e, _, inf, nan = _unpack(m, x, FP32, name)
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    W = width + 1                              # magnitudes up to 2**width: hi + 1 rounds there

    def sign_reg(stage):
        return Const(1, 1) if negative else Signal(name=f"{name}_sign{stage}")

    def carry_sign(new, old):
        return [] if negative else [new.eq(old)]

    # 1: unpacked; value = sig * 2**(e + frac)
    s1, nan1, inf1 = sign_reg(1), Signal(name=f"{name}_nan1"), Signal(name=f"{name}_inf1")
    sig1, sh1 = Signal(24, name=f"{name}_sig1"), Signal(_EXP, name=f"{name}_sh1")
    st.stage(*carry_sign(s1, s), nan1.eq(nan), inf1.eq(inf), sig1.eq(sig), sh1.eq(e + frac))
    # 2: too large for `width` bits (a left shift past W), or how far right it shifts
    big2, nan2 = Signal(name=f"{name}_big2"), Signal(name=f"{name}_nan2")
    s2 = sign_reg(2)
    left2 = Signal(range(max(0, W - 24) + 1), name=f"{name}_left2")   # more is too large
    right2 = Signal(range(27), name=f"{name}_right2")
    sig2 = Signal(24, name=f"{name}_sig2")
    st.stage(*carry_sign(s2, s1), nan2.eq(nan1), sig2.eq(sig1),
             big2.eq(inf1 | (sh1 > W - 24)),
             left2.eq(Mux(sh1 > 0, sh1[:len(left2)], 0)),
             right2.eq(Mux(sh1 < -25, 26, Mux(sh1 < 0, -sh1, 0))))
    # 3: the shift: the integer part, and below it the guard bit and the sticky rest (the
    # bits below the guard's place: i < right - 1)
    shifted = Cat(Const(0, 1), sig2) >> right2              # the guard bit, the integer part
    mag3 = Signal(W + 1, name=f"{name}_mag3")
    guard3, sticky3 = Signal(name=f"{name}_guard3"), Signal(name=f"{name}_sticky3")
    s3, nan3, big3 = sign_reg(3), Signal(name=f"{name}_nan3"), Signal(name=f"{name}_big3")
    st.stage(*carry_sign(s3, s2), nan3.eq(nan2), big3.eq(big2),
             mag3.eq(shifted[1:] << left2), guard3.eq(shifted[0]),
             sticky3.eq(Cat(*(sig2[i] & (right2 > i + 1) for i in range(24))) != 0))
    # 4: round to nearest even
    mag4 = Signal(W + 1, name=f"{name}_mag4")
    s4, nan4, big4 = sign_reg(4), Signal(name=f"{name}_nan4"), Signal(name=f"{name}_big4")
    st.stage(*carry_sign(s4, s3), nan4.eq(nan3), big4.eq(big3),
             mag4.eq(mag3 + _round_up(guard3, sticky3, mag3[0])))
    # 5: the sign
    val5 = Signal(signed(W + 2), name=f"{name}_val5")
    s5, nan5, big5 = sign_reg(5), Signal(name=f"{name}_nan5"), Signal(name=f"{name}_big5")
    st.stage(*carry_sign(s5, s4), nan5.eq(nan4), big5.eq(big4),
             val5.eq(-mag4 if negative else Mux(s4, -mag4, mag4)))
    # 6: saturate
    out = Signal(signed(width), name=f"{name}_out")
    if negative:
        st.stage(out.eq(Mux(nan5 | big5 | (val5 < lo), lo, val5)))
    else:
        st.stage(out.eq(Mux(nan5, lo, Mux(big5, Mux(s5, lo, hi),
                                          Mux(val5 > hi, hi, Mux(val5 < lo, lo, val5))))))
    return out


def from_fixed(m, value, exp, *, domain="sync", en=None, name="fflt"):
    """fp32 bits of unsigned `value` times 2**`exp` (a signed input), rounded to nearest
    even, `from_fixed_latency` cycles later: the operands registered, then `_round_pack`."""
    return staged_from_fixed(Stages(m, domain, en), value, exp, name)


def staged_from_fixed(st, value, exp, name):
    """`from_fixed` staged on `st` (a `dsp.Stages`), its registers named after `name`: the
    fp32 encoding `from_fixed_latency(len(value))` stages later."""
    value, exp = Value.cast(value), Value.cast(exp)
    sig1 = Signal(len(value), name=f"{name}_sig1")
    e1 = Signal(_EXP, name=f"{name}_e1")
    st.stage(sig1.eq(value), e1.eq(exp))
    if isinstance(exp, Const):
        e_range = (exp.value, exp.value)
    else:
        n = len(exp)
        e_range = (-(1 << (n - 1)), (1 << (n - 1)) - 1) if exp.shape().signed else (0, (1 << n) - 1)
    return _round_pack(st, sign=Const(0, 1), zero_sign=Const(0, 1), sig=sig1, e=e1,
                       e_range=e_range, dst=FP32, nan=Const(0, 1), inf=Const(0, 1), name=name)


@functools.cache
def mul_latency(src_a, src_b, leads=None):
    """Cycles from `mul`'s operands (of `src_a` and `src_b`, with `leads`) to its product:
    the stages `staged_mul` registers (the same with b in `NORMAL` form)."""
    return Stages.count_of(functools.partial(staged_mul, leads=leads), Signal(src_a.width),
                           Signal(src_b.width), src_a, src_b, "fmul")


@functools.cache
def add_latency():
    """Cycles from `add`'s operands to its sum: the stages `staged_add` registers."""
    return Stages.count_of(staged_add, Signal(FP32.width), Signal(FP32.width), "fadd")


@functools.cache
def convert_latency(src, dst):
    """Cycles from `convert`'s input (of `src`) to its `dst` encoding: the stages
    `staged_convert` registers."""
    return Stages.count_of(staged_convert, Signal(src.width), src, dst, "fcvt")


@functools.cache
def maximum_latency():
    """Cycles from `maximum`'s operands to its result: the stages `staged_maximum`
    registers."""
    return Stages.count_of(staged_maximum, Signal(FP32.width), Signal(FP32.width), "fmax")


@functools.cache
def to_fixed_latency(frac, width):
    """Cycles from `to_fixed`'s input to its integer: the stages `staged_to_fixed`
    registers."""
    return Stages.count_of(staged_to_fixed, Signal(FP32.width), frac, width, "ffix")


@functools.cache
def from_fixed_latency(value_bits):
    """Cycles from `from_fixed`'s inputs (a `value_bits`-bit value) to its fp32 encoding:
    the stages `staged_from_fixed` registers."""
    return Stages.count_of(staged_from_fixed, Signal(value_bits), Signal(signed(8)), "fflt")
