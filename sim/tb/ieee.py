"""Berkeley SoftFloat as the oracle of the floating-point builders, and the vectors they face.

The builders of `attenio.hdl.formats.fp` and their NumPy twins are checked against
SoftFloat (`softfloatpy`, round to nearest even), never only against each other. SoftFloat
has no fp8: an fp8 operand reaches it through ml-dtypes' conversion to float32 (exact),
the twins' through the format's own definition (`FloatSpec.decode`).
`oracle_mul`, `oracle_add`, `oracle_convert` take and return encodings (arrays of
unsigned integers); `same` compares results the way the semantics define them: bit
for bit, except that any NaN equals any NaN (SoftFloat propagates payloads and its
x86 default NaN is negative, the hardware's NaN is canonical).

`edge_values(spec)` lists what breaks floating-point units: signed zeros, the
smallest and largest subnormals, the smallest normal, one and its neighbours, the
largest finite number, infinities and NaNs (quiet, signalling, negative, with a
payload). `vectors(op, rng, count)` pairs them all against each other and adds
seeded random encodings and the cases random bits rarely reach: sums that cancel,
exponent distances around the alignment limit, products and conversions that land
exactly halfway between two results.
"""

import numpy as np
import softfloatpy as sf

from attenio.formats import FORMAT_TABLE
from attenio.hdl.formats.fp import FP32, SPECS

__all__ = ["oracle_mul", "oracle_add", "oracle_convert", "oracle_maximum", "oracle_to_fixed",
           "same", "edge_values", "vectors"]

#: SoftFloat's type and functions of every storage format it has (`FormatRow.softfloat`)
_SOFT = {SPECS[row.name]: row.softfloat for row in FORMAT_TABLE if row.softfloat}
_SF = {FP32: sf.Float32} | {s: getattr(sf, t) for s, (t, _) in _SOFT.items()}
_TO32 = {FP32: lambda x: x} | {s: getattr(sf, f"{n}_to_f32") for s, (_, n) in _SOFT.items()}
_FROM32 = {FP32: lambda x: x} | {s: getattr(sf, f"f32_to_{n}") for s, (_, n) in _SOFT.items()}


def _sf(bits, spec):
    return _SF[spec].from_bytes(int(bits).to_bytes(spec.width // 8, "big"))


def _to_f32(bits, spec):
    """SoftFloat's Float32 of encoding `bits` of `spec` (exact): SoftFloat's own conversion,
    or for a format it lacks, ml-dtypes' (`spec.to_float`)."""
    if spec in _TO32:
        return _TO32[spec](_sf(bits, spec))
    f32 = spec.to_float(np.array([bits])).astype(np.float32).view(np.uint32)[0]
    return _sf(int(f32), FP32)


def _bits(x):
    return int.from_bytes(x.to_bytes(), "big")


def _map(fn, *arrays, dtype):
    return np.array([fn(*vals) for vals in zip(*(np.asarray(a).tolist() for a in arrays))],
                    dtype=dtype)


def oracle_mul(a, b, src_a, src_b):
    """fp32 bits of a * b (every source widens to fp32 exactly, then one rounding)."""
    def one(x, y):
        return _bits(sf.f32_mul(_to_f32(x, src_a), _to_f32(y, src_b)))
    return _map(one, a, b, dtype=np.uint32)


def oracle_add(a, b):
    """fp32 bits of a + b."""
    return _map(lambda x, y: _bits(sf.f32_add(_sf(x, FP32), _sf(y, FP32))), a, b,
                dtype=np.uint32)


def oracle_convert(x, src, dst):
    """`dst` bits of x, through fp32 (exact for every storage source)."""
    return _map(lambda v: _bits(_FROM32[dst](_to_f32(v, src))), x, dtype=dst.bits_dtype)


def oracle_maximum(a, b):
    """fp32 bits of the larger of a and b, -0 below +0; NaN if either is."""
    def one(x, y):
        fx, fy = _sf(x, FP32), _sf(y, FP32)
        if sf.f32_is_nan(fx) or sf.f32_is_nan(fy):
            return FP32.nan
        if sf.f32_lt_quiet(fx, fy):
            return y
        if sf.f32_lt_quiet(fy, fx):
            return x
        return x if x >> 31 == 0 else y                 # equal: +0 over -0
    return _map(one, a, b, dtype=np.uint32)


def oracle_to_fixed(x, frac, width):
    """round-half-even(x * 2**frac) as a `width`-bit signed integer, saturated; NaN to the
    most negative (SoftFloat's f64 product and conversion: both exact or correctly rounded)."""
    lo, hi = -(1 << (width - 1)), (1 << (width - 1)) - 1
    scale = sf.Float64.from_float(2.0 ** frac)
    top, bottom = sf.Float64.from_float(hi + 0.5), sf.Float64.from_float(lo - 0.5)

    def one(v):
        f = _sf(v, FP32)
        if sf.f32_is_nan(f):
            return lo
        y = sf.f64_mul(sf.f32_to_f64(f), scale)
        if sf.f64_le(top, y):
            return hi
        if sf.f64_le(y, bottom):
            return lo
        return int(sf.f64_to_i64(y, sf.RoundingMode.NEAR_EVEN, False).to_int())
    return _map(one, x, dtype=np.int64)


def same(got, want, spec):
    """Which results agree: equal bits, or both NaN."""
    got, want = np.asarray(got, dtype=np.uint64), np.asarray(want, dtype=np.uint64)
    return (got == want) | (spec.is_nan(got) & spec.is_nan(want))


def edge_values(spec):
    """Encodings of `spec` at every boundary, both signs."""
    M = spec.man_bits
    one = spec.bias << M
    special = [spec.nan] if spec.finite else [spec.inf, spec.nan, spec.inf | 1, spec.nan | 1]
    pos = [0, 1, 2, (1 << M) - 1, 1 << M, (1 << M) + 1, one - 1, one, one + 1,
           one | (1 << (M - 1)), spec.max_finite - 1, spec.max_finite, *special]
    return np.array(pos + [v | (1 << (spec.width - 1)) for v in pos], dtype=np.uint64)


def _random_bits(rng, spec, count):
    return rng.integers(0, 1 << spec.width, size=count, dtype=np.uint64)


def _pairs(x, y):
    return np.repeat(x, len(y)), np.tile(y, len(x))


def _mul_vectors(sa, sb, rng, count, exhaustive):
    if sa.width + sb.width <= 16:                # fp8 x fp8: every pair (or `count` of them)
        a, b = _pairs(np.arange(1 << sa.width, dtype=np.uint64),
                      np.arange(1 << sb.width, dtype=np.uint64))
        if exhaustive:
            return a, b
        ea, eb = _pairs(edge_values(sa), edge_values(sb))
        pick = rng.choice(len(a), size=min(count, len(a)), replace=False)
        return np.concatenate([ea, a[pick]]), np.concatenate([eb, b[pick]])
    a, b = _pairs(edge_values(sa), edge_values(sb))
    out_a, out_b = [a, _random_bits(rng, sa, count)], [b, _random_bits(rng, sb, count)]
    # exponents that put the product near fp32's underflow or overflow threshold
    n = count // 4
    ea = rng.integers(1, sa.exp_all_ones, size=n)
    eb = (FP32.bias + sa.bias + sb.bias - ea + rng.integers(-30, 30, size=n)).clip(
        0, sb.exp_all_ones - 1)
    under = sa.bias + sb.bias - FP32.bias + 1 - ea + rng.integers(-30, 30, size=n)
    eb = np.where(rng.integers(0, 2, size=n) == 1, eb, under.clip(0, sb.exp_all_ones - 1))
    out_a.append(_with_exponent(rng, sa, ea))
    out_b.append(_with_exponent(rng, sb, eb))
    if sa.man_bits + sb.man_bits <= 14:
        # every pair of significands (or `count` of them), at exponents for normal,
        # subnormal, underflowing and overflowing products
        ma, mb = _pairs(np.arange(1 << sa.man_bits, dtype=np.uint64),
                        np.arange(1 << sb.man_bits, dtype=np.uint64))
        if not exhaustive:
            pick = rng.choice(len(ma), size=min(count, len(ma)), replace=False)
            ma, mb = ma[pick], mb[pick]
        for fa, fb in ((sa.bias, sb.bias), (0, sb.bias), (1, 1), (0, 0),
                       (sa.bias - 63, sb.bias - 64), (sa.bias - 70, sb.bias - 70),
                       (sa.bias + 64, sb.bias + 63)):
            signs = rng.integers(0, 2, size=(2, len(ma))).astype(np.uint64)
            out_a.append((signs[0] << np.uint64(sa.width - 1)) |
                         np.uint64(fa << sa.man_bits) | ma)
            out_b.append((signs[1] << np.uint64(sb.width - 1)) |
                         np.uint64(fb << sb.man_bits) | mb)
    return np.concatenate(out_a), np.concatenate(out_b)


def _with_exponent(rng, spec, exps):
    """Random encodings of `spec` with exponent fields `exps` and random signs."""
    bits = _random_bits(rng, spec, len(exps))
    keep = np.uint64((1 << spec.man_bits) - 1) | np.uint64(1 << (spec.width - 1))
    return (bits & keep) | (np.asarray(exps, dtype=np.uint64) << np.uint64(spec.man_bits))


def _add_vectors(rng, count):
    a, b = _pairs(edge_values(FP32), edge_values(FP32))
    out_a, out_b = [a, _random_bits(rng, FP32, count)], [b, _random_bits(rng, FP32, count)]
    n = count // 4
    # cancellation: b = -a give or take a few ulps
    ca = _random_bits(rng, FP32, n)
    out_a.append(ca)
    out_b.append((ca ^ np.uint64(1 << 31)) + rng.integers(-3, 4, size=n).astype(np.uint64))
    # alignment: exponents 0 .. 30 apart, either sign
    ea = rng.integers(31, FP32.exp_all_ones, size=n)
    out_a.append(_with_exponent(rng, FP32, ea))
    out_b.append(_with_exponent(rng, FP32, ea - rng.integers(0, 31, size=n)))
    return (np.concatenate(out_a) & np.uint64(0xFFFFFFFF),
            np.concatenate(out_b) & np.uint64(0xFFFFFFFF))


def _cvt_vectors(src, dst, rng, count, exhaustive):
    if src.width <= 16:                          # every encoding (or `count` of them)
        every = np.arange(1 << src.width, dtype=np.uint64)
        if exhaustive:
            return every
        return np.concatenate([edge_values(src),
                               rng.choice(every, size=min(count, len(every)), replace=False)])
    x = [edge_values(src), _random_bits(rng, src, count)]
    # exactly halfway between two dst values, and a src ulp either side
    drop = np.uint64(src.man_bits - dst.man_bits)
    mid = (_random_bits(rng, src, count // 2) >> drop << drop) | (np.uint64(1) << (drop - 1))
    x += [mid, mid + np.uint64(1), mid - np.uint64(1)]
    # exponents around dst's subnormal range and its overflow threshold
    e = rng.integers(src.bias - dst.bias - dst.man_bits - 2, src.bias + dst.bias + 2,
                     size=count // 2)
    x.append(_with_exponent(rng, src, e))
    return np.concatenate(x) & np.uint64((1 << src.width) - 1)


def _max_vectors(rng, count):
    a, b = _add_vectors(rng, count)
    eq = _random_bits(rng, FP32, count // 4)                 # equal, and +0 against -0
    zeros = np.array([0, 1 << 31], dtype=np.uint64)
    za, zb = _pairs(zeros, zeros)
    return np.concatenate([a, eq, za]), np.concatenate([b, eq, zb])


def _fix_vectors(rng, count, frac, width):
    x = [edge_values(FP32), _random_bits(rng, FP32, count)]
    # exponents from well below the fixed-point LSB to beyond saturation
    e = rng.integers(FP32.bias - frac - 27, FP32.bias + width - frac + 2, size=count)
    x.append(_with_exponent(rng, FP32, e))
    # exactly halfway between two fixed-point values
    half = rng.integers(1, 1 << (width - 2), size=count // 4) * 2 + 1      # odd
    signs = np.where(rng.integers(0, 2, size=count // 4) == 1, -1.0, 1.0)
    vals = (signs * half * 2.0 ** -(frac + 1)).astype(np.float32)
    x.append(vals.view(np.uint32).astype(np.uint64))
    return np.concatenate(x) & np.uint64(0xFFFFFFFF)


#: the fixed point `vectors` and the harness use for "fix": the int8 format's x_frac = 18
#: in a 24-bit word
FIX_FRAC, FIX_WIDTH = 18, 24


def _spec_names(rest):
    """The two format names of "<src>_<dst>" (names may hold "_", as fp8_e4m3 does)."""
    for i, ch in enumerate(rest):
        if ch == "_" and rest[:i] in SPECS and rest[i + 1:] in SPECS:
            return rest[:i], rest[i + 1:]
    return ()


def _lead_of(rest):
    """("<src_a>_<src_b>", lead) of "<src_a>_<src_b>[_l<lead>]"."""
    head, sep, tail = rest.rpartition("_l")
    if sep and tail.isdigit() and _spec_names(head):
        return head, int(tail)
    return rest, None


def _with_lead(a, spec, lead):
    """`a` with every subnormal's ones in the top `lead` bits of its significand
    (`attenio.hdl.formats.fp.staged_mul`'s promise): its mantissa keeps its top lead - 1
    bits, or its highest if they are all 0 (lead 1: it gets the smallest normal
    exponent instead)."""
    M = spec.man_bits
    mant = a & np.uint64((1 << M) - 1)
    sub = ((a >> np.uint64(M)) & np.uint64(spec.exp_all_ones)) == 0
    if lead == 1:
        return np.where(sub & (mant != 0), a | np.uint64(1 << M), a)
    keep = np.uint64(((1 << (lead - 1)) - 1) << (M - (lead - 1)))
    top = np.uint64(1 << (M - 1))
    sign_exp = a & ~np.uint64((1 << M) - 1)
    return np.where(sub & (mant != 0), sign_exp | np.where(mant & keep != 0, mant & keep, top),
                    a)


#: the suffix of a product's op whose b is normalized before the product takes it (the
#: same vectors as the op without it)
NORMAL_B = "_nb"


def vectors(op, rng, count, exhaustive=True):
    """Input arrays (a, b) of op "mul_<src_a>_<src_b>[_l<lead>][_nb]" (with a lead, a's
    subnormals kept to it), "add" or "max", (x, None) of
    "cvt_<src>_<dst>" or "fix" (fp32 to fixed point): every edge value against every edge value, `count` random
    cases, and the op's hard ones. `exhaustive`: every significand pair of products
    of two bf16 numbers and every encoding of a 16-bit source, else `count` of each."""
    kind, _, rest = op.partition("_")
    rest, lead = _lead_of(rest.removesuffix(NORMAL_B))
    names = _spec_names(rest)
    if kind == "mul":
        a, b = _mul_vectors(SPECS[names[0]], SPECS[names[1]], rng, count, exhaustive)
        return (a if lead is None else _with_lead(a, SPECS[names[0]], lead)), b
    if kind == "add":
        return _add_vectors(rng, count)
    if kind == "cvt":
        return _cvt_vectors(SPECS[names[0]], SPECS[names[1]], rng, count, exhaustive), None
    if kind == "max":
        return _max_vectors(rng, count)
    if kind == "fix":
        return _fix_vectors(rng, count, FIX_FRAC, FIX_WIDTH), None
    raise ValueError(f"vectors: unknown op {op!r}")
