"""Number-format configurations: widths only, no hardware.

A format decides how many bytes each stored element takes (and therefore how many
rows a of the Q block fit in the cache) and how wide the datapath registers are.
The hardware builders and their bit-exact NumPy twins live in `attenio.hdl.formats`
and are parameterized by these objects; this module stays pure Python so that the
I/O analysis can use it without importing Amaranth.
"""

import inspect
from collections.abc import Callable
from dataclasses import InitVar, dataclass, field
from math import ceil, log, log2, sqrt

import ml_dtypes
import numpy as np

from . import validate
from .errors import ConfigError

__all__ = ["DatapathWidths", "Int8Format", "FloatFormat", "FP16Format", "BF16Format",
           "FormatRow", "FORMAT_TABLE", "FORMATS", "FLOAT_FORMATS", "format_by_name", "row_of"]


@dataclass(frozen=True)
class DatapathWidths:
    """Bit widths of every on-chip value the planner must reserve space for.

    Per row of the Q block: ``score`` (S or x = S*c), ``m`` (running max), ``l``
    (running sum), ``p`` (a probability), ``alpha`` (the rescale factor); per
    element of the O block: ``o_acc``; per element of Q, K and V: ``element``.

    ``up_e``: None when P and alpha are counted as two values; else the bits of the
    one (up, e) pair in which they reach the MACs ((alpha, P) = (e, 1) if up, else
    (1, e): one exp2 a score), which the Plan then counts instead of P and alpha.
    """

    element: int
    score: int
    m: int
    l: int
    p: int
    alpha: int
    o_acc: int
    up_e: int | None = None


#: the most fractional bits of c, P and the reciprocal: the NumPy twins compute in
#: int64, and this keeps every split product below 2**62
_FRAC_MAX = 30
#: Newton steps of the reciprocal: 1 bit doubled this often passes _FRAC_MAX
RECIP_ITERS_MAX = (_FRAC_MAX - 1).bit_length()


def _clog2(n):
    return max(0, ceil(log2(n))) if n > 1 else 0


@dataclass(frozen=True)
class Int8Format:
    """int8 Q/K/V, exact integer scores, base-2 fixed-point online softmax.

    Fields are the free parameters of the arithmetic; integer widths follow from
    the largest N and d the hardware is generated for (see `datapath`). The error
    analysis behind the defaults is in docs/accuracy.md (made by bench/bench_accuracy.py);
    in short they keep the int8 output equal to the correctly rounded float64
    result for >= 99% of elements and within 1 LSB always, up to N = 16384.

    c_int, c_frac      the softmax constant c = scale_q*scale_k*log2(e)/sqrt(d) is
                       an unsigned fixed-point number, c < 2**c_int, c_frac
                       fractional bits (one 32-bit register by default)
    x_frac             fractional bits of the exp2 argument x_j - m = c*(S_j - m_S)
    p_frac             fractional bits of P, alpha, l and the O accumulators
    exp_lut_bits       index bits of the exp2 fraction table (2**bits + 1 entries)
    exp_interp         linear interpolation between table entries
    exp_guard          extra fractional bits of the exp2 mantissa before it is
                       shifted and rounded to p_frac bits
    recip_seed_bits    index bits of the reciprocal seed table
    recip_iters        Newton iterations after the seed
    recip_frac         fractional bits of the reciprocal (and of its mantissa)

    The O accumulators are not configurable: `datapath` derives their width,
    1 + 7 + bits(N) + p_frac, so that every alpha*O + P*V is exact for |O| <= 128 N,
    and the int8 RTL and its golden model use exactly that width. A narrower O would
    need saturation and rounding semantics, which neither has; ``o_acc_bits`` is
    accepted only to refuse it with that reason (FloatFormat has a real one).
    """

    name: str = field(default="int8", init=False)
    c_int: int = 2
    c_frac: int = 30
    x_frac: int = 18
    p_frac: int = 24
    exp_lut_bits: int = 7
    exp_interp: bool = True
    exp_guard: int = 3
    recip_seed_bits: int = 8
    recip_iters: int = 2
    recip_frac: int = 24
    o_acc_bits: InitVar[None] = None

    def __post_init__(self, o_acc_bits):
        if o_acc_bits is not None:
            raise ConfigError(
                f"int8 format: o_acc_bits = {o_acc_bits!r} cannot be configured: the O "
                f"accumulators are derived, 1 + 7 + bits(N) + p_frac bits (exact), and the int8 "
                f"RTL and golden model have no saturation or rounding for a narrower O")
        # Newton doubles the reciprocal's correct bits a step, so RECIP_ITERS_MAX steps take
        # a 1-bit seed past _FRAC_MAX; guard bits past _FRAC_MAX only widen the exp2 mantissa
        # (and overflow its float twin)
        for name, low, high in (("c_int", 0, None), ("c_frac", 1, None), ("x_frac", 1, None),
                                ("p_frac", 2, None), ("exp_lut_bits", 1, None),
                                ("exp_guard", 1, _FRAC_MAX), ("recip_seed_bits", 1, None),
                                ("recip_iters", 0, RECIP_ITERS_MAX), ("recip_frac", 4, None)):
            validate.integer("int8 format", name, getattr(self, name), lo=low, hi=high,
                             error=ConfigError)
        validate.flag("int8 format", "exp_interp", self.exp_interp, error=ConfigError)
        if self.exp_lut_bits > self.x_frac:
            raise ConfigError(
                f"int8 format: exp_lut_bits ({self.exp_lut_bits}) cannot exceed x_frac ({self.x_frac})")
        if self.c_frac <= self.x_frac:
            raise ConfigError(
                f"int8 format: c_frac ({self.c_frac}) must exceed x_frac ({self.x_frac})")
        if self.recip_seed_bits > self.recip_frac:
            raise ConfigError(f"int8 format: recip_seed_bits ({self.recip_seed_bits}) cannot "
                              f"exceed recip_frac ({self.recip_frac})")
        for name in ("c_frac", "p_frac", "recip_frac"):
            if getattr(self, name) > _FRAC_MAX:
                raise ConfigError(
                    f"int8 format: {name} must be at most {_FRAC_MAX}, not {getattr(self, name)}")
        if self.c_int + self.c_frac > 32:
            raise ConfigError(f"int8 format: c_int + c_frac must fit a 32-bit register, "
                              f"not {self.c_int + self.c_frac}")

    #: the SCALE_C register's meaning in this format (the register map's text)
    SCALE_C_DOC = "softmax constant c = scale_q*scale_k*log2(e)/sqrt(d), unsigned fixed point"

    @property
    def element_bits(self):
        return row_of(self.name).element_bits

    @property
    def element_bytes(self):
        return self.element_bits // 8

    @property
    def out_bytes(self):
        """Bytes of an element of O in memory: int8, on V's scale."""
        return row_of(self.name).out_row.element_bits // 8

    def spill_bytes(self, kind):
        """Bytes of an intermediate (`kind` "S" or "P") a baseline stores off chip: S as the
        exact int32 score, P as 16-bit fixed point."""
        return {"S": 4, "P": 2}[kind]

    @property
    def x_int(self):
        """Integer bits of the (clamped, non-positive) exp2 argument: it never goes
        below -2**x_int, where exp2 already rounds to zero in p_frac bits."""
        return (self.p_frac + 2).bit_length()

    def score_bits(self, head_dim):
        """Signed width of an exact int8 dot product of length head_dim (|S| <= 2**14 d)."""
        validate.positive("int8 format", error=ConfigError, head_dim=head_dim)
        return 16 + _clog2(head_dim)

    def datapath(self, *, max_seq_len, head_dim):
        """Register widths for hardware generated for up to `max_seq_len` keys.

        The running max m is kept in the score domain (c > 0, so max(S*c) =
        c*max(S)), hence ``m == score``; l <= N and |O| <= 128 N exactly.
        """
        validate.positive("int8 format", error=ConfigError, max_seq_len=max_seq_len, head_dim=head_dim)
        score = self.score_bits(head_dim)
        nbits = max_seq_len.bit_length()
        p = self.p_frac + 1                       # [0, 1] inclusive
        l = self.p_frac + nbits                   # [1, N]
        o_acc = 1 + 7 + nbits + self.p_frac       # |O| <= 128 N
        return DatapathWidths(element=self.element_bits, score=score, m=score, l=l, p=p,
                              alpha=p, o_acc=o_acc)

    def softmax_constant(self, *, scale_q, scale_k, head_dim):
        """The raw register value of c = scale_q*scale_k*log2(e)/sqrt(head_dim).

        Host-side: the hardware only ever sees this integer (c * 2**c_frac,
        rounded to nearest). Raises ConfigError if c does not fit in c_int
        integer bits or keeps fewer than 12 significant bits.
        """
        validate.positive("int8 format", error=ConfigError, head_dim=head_dim)
        validate.positive_number("int8 format", "scale_q", scale_q, error=ConfigError)
        validate.positive_number("int8 format", "scale_k", scale_k, error=ConfigError)
        c = float(scale_q) * float(scale_k) / (log(2) * sqrt(head_dim))   # log2(e) = 1/ln 2
        raw = round(c * 2 ** self.c_frac)
        if raw >= 2 ** (self.c_int + self.c_frac):
            raise ConfigError(f"int8 format: softmax constant c = {c:.6g} does not fit c_int = "
                              f"{self.c_int} integer bits (c < {2 ** self.c_int})")
        if raw < 2 ** 12:
            raise ConfigError(f"int8 format: softmax constant c = {c:.6g} keeps fewer than 12 "
                              f"significant bits with c_frac = {self.c_frac}; raise c_frac")
        return raw


_FIXED_FIELDS = ("x_frac", "p_frac", "exp_lut_bits", "exp_interp", "exp_guard",
                 "recip_seed_bits", "recip_iters", "recip_frac")


@dataclass(frozen=True)
class FloatFormat:
    """fp16, bf16 or fp8 storage of Q, K and V (O in the row's `out` format: the storage
    format, bf16 for fp8), fp32 scores, running max and O accumulators,
    a fixed-point softmax (exp2, P, alpha, l and the reciprocal: the int8 format's, with
    the same fields and defaults; `fixed` is that `Int8Format`).

    The arithmetic and why these widths: `attenio.sim.golden_fp`; its accuracy:
    docs/accuracy_fp.md. `datapath` gives the widths the RTL keeps.

    o_acc_bits         width of the O accumulators: 32 (fp32, what the RTL builds) or
                       16, the paper's accounting of the O block at the stored precision
                       (its a = 1985 at d = 64, 1007 at d = 128 in 512 KB counts every
                       value so): analysis only, the RTL refuses it. In fp16 each
                       O = alpha*O + P*V_j rounds to 11 significant bits, so over
                       thousands of rows the small P*V_j terms are lost against a large O.
    x_frac ...         the fixed-point softmax's fields, as `Int8Format`'s (its c_int
                       and c_frac have no counterpart: c is an fp32 register here)
    """

    name: str = "fp16"
    o_acc_bits: int = 32
    # the fixed-point softmax's fields and defaults are Int8Format's
    x_frac: int = Int8Format.x_frac
    p_frac: int = Int8Format.p_frac
    exp_lut_bits: int = Int8Format.exp_lut_bits
    exp_interp: bool = Int8Format.exp_interp
    exp_guard: int = Int8Format.exp_guard
    recip_seed_bits: int = Int8Format.recip_seed_bits
    recip_iters: int = Int8Format.recip_iters
    recip_frac: int = Int8Format.recip_frac

    #: the most fractional bits of the exp2 argument: the int8 format's exp2 takes no
    #: more than its c has (x_frac < c_frac <= _FRAC_MAX)
    X_FRAC_MAX = _FRAC_MAX - 1

    def __post_init__(self):
        validate.one_of("float format", "name", self.name, FLOAT_FORMATS, error=ConfigError)
        owner = f"{self.name} format"
        validate.integer(owner, "o_acc_bits", self.o_acc_bits, error=ConfigError)
        validate.one_of(owner, "o_acc_bits", self.o_acc_bits, (16, 32), error=ConfigError)
        validate.integer(owner, "x_frac", self.x_frac, lo=1, error=ConfigError)
        if self.x_frac > self.X_FRAC_MAX:
            raise ConfigError(
                f"{owner}: x_frac must be at most {self.X_FRAC_MAX}, not {self.x_frac}: the "
                f"exp2 argument (x - m in fixed point, x_frac fractional bits) feeds the "
                f"int8 format's fixed-point exp2, which takes at most {self.X_FRAC_MAX}")
        validate.integer(owner, "p_frac", self.p_frac, lo=2, error=ConfigError)
        if self.p_frac > 24:
            raise ConfigError(
                f"{owner}: p_frac must be at most 24, not {self.p_frac}: P and alpha reach "
                f"the MACs as fp32, exact only with at most 24 significant bits")
        self.fixed       # the other fixed-point fields are checked by the Int8Format they make

    #: the SCALE_C register's meaning in the float formats (the register map's text)
    SCALE_C_DOC = "softmax constant c = log2(e)/sqrt(d), its fp32 bits"

    @property
    def element_bits(self):
        return row_of(self.name).element_bits

    @property
    def element_bytes(self):
        return self.element_bits // 8

    @property
    def out_bytes(self):
        """Bytes of an element of O in memory: the storage format's, or for fp8 bf16's
        (`FormatRow.out`)."""
        return row_of(self.name).out_row.element_bits // 8

    def spill_bytes(self, kind):
        """Bytes of an intermediate (`kind` "S" or "P") a baseline stores off chip: in the
        storage format, as the baselines' papers count them."""
        return self.element_bytes

    @property
    def fixed(self):
        """The `Int8Format` whose fixed-point softmax (exp2, l, reciprocal) this uses."""
        try:
            return Int8Format(**{k: getattr(self, k) for k in _FIXED_FIELDS})
        except ConfigError as exc:
            raise ConfigError(str(exc).replace("int8 format", f"{self.name} format")) from None

    def datapath(self, *, max_seq_len, head_dim):
        """The widths the floating-point RTL keeps for up to `max_seq_len` keys.

        Q, K, V and O elements in storage (16 bits); scores fp32 (two banks a row in
        the MACs); the running max m fp32 (in the lanes); l in `fixed`'s fixed point
        (p_frac + bits(N), l <= N); P and alpha as one (up, e) pair, e the exp2 result
        converted to fp32 (exact), two banks a row in the MACs, so ``p`` and ``alpha``
        are fp32 and ``up_e`` 33; the O accumulators ``o_acc_bits`` (fp32 in the RTL).
        """
        validate.positive(f"{self.name} format", error=ConfigError, max_seq_len=max_seq_len,
                          head_dim=head_dim)
        fixed = self.fixed.datapath(max_seq_len=max_seq_len, head_dim=head_dim)
        return DatapathWidths(element=self.element_bits, score=32, m=32, l=fixed.l, p=32,
                              alpha=32, o_acc=self.o_acc_bits, up_e=1 + 32)

    def softmax_constant(self, *, head_dim):
        """The raw register value of c = log2(e)/sqrt(head_dim): its fp32 bits."""
        validate.positive(f"{self.name} format", error=ConfigError, head_dim=head_dim)
        return int(np.float32(np.log2(np.e) / np.sqrt(head_dim)).view(np.uint32))


def FP16Format(**params):
    """fp16 storage (`FloatFormat`)."""
    return FloatFormat(name="fp16", **params)


def BF16Format(**params):
    """bf16 storage (`FloatFormat`)."""
    return FloatFormat(name="bf16", **params)


def FP8E4M3Format(**params):
    """OCP FP8 E4M3 storage of Q, K and V (`FloatFormat`), O in bf16."""
    return FloatFormat(name="fp8_e4m3", **params)


def FP8E5M2Format(**params):
    """OCP FP8 E5M2 storage of Q, K and V (`FloatFormat`), O in bf16."""
    return FloatFormat(name="fp8_e5m2", **params)


@dataclass(frozen=True)
class FormatRow:
    """One number format: what the project knows of it by its name.

    `FORMAT_TABLE` is the one list of the formats. Every other list is derived from it:
    the `--format` choices and the TOML names (`FORMATS`), the FORMAT register's values
    (`attenio.regmap.FORMAT_IDS`), the float encodings the builders take
    (`attenio.hdl.formats.fp.SPECS`), the oracles of the tests (`attenio.sim.tb.ieee`) and
    the benches' rows.

    name          the format's name (`--format`, `[format] name`, every report)
    register_id   the FORMAT register's value: a constant of a design built for it
    make          the configuration: ``make(**fields)`` is an `Int8Format` or `FloatFormat`
    element_bits  one element of Q, K, V and O in memory
    exp_bits      a float format's exponent and fraction bits (1 sign bit besides);
    man_bits      None for an integer format
    dtype         the NumPy dtype of its values (ml-dtypes' for bf16): the oracle of every
                  conversion to and from the format
    softfloat     Berkeley SoftFloat's type and short name of the format (("Float16", "f16"):
                  softfloatpy.Float16, f16_to_f32 ...), the oracle of its IEEE arithmetic;
                  None where SoftFloat has no such format (fp8: ml-dtypes is the oracle)
    finite        a float format without infinities (OCP E4M3, "fn"): its all-ones exponent
                  holds numbers, and its one NaN a sign has every other bit set
    out           the format O is written in, when not this one: fp8's O is bf16, whose
                  range holds O at any scale (an fp16 O overflows past 65504 once scale_v
                  is applied) and whose 8 significant bits are finer than fp8's 4
    scaled        each tensor is stored with a scale (int8's quantization, fp8's amax
                  scaling): SCALE_C then carries scale_q * scale_k, and O is in V's units
    """

    name: str
    register_id: int
    make: Callable
    element_bits: int
    exp_bits: int | None
    man_bits: int | None
    dtype: np.dtype
    softfloat: tuple[str, str] | None
    finite: bool = False
    out: str | None = None
    scaled: bool = False

    @property
    def is_float(self):
        return self.exp_bits is not None

    @property
    def out_row(self):
        """The `FormatRow` of the format O is written in."""
        return self if self.out is None else row_of(self.out)


FORMAT_TABLE = (
    FormatRow("int8", 1, Int8Format, 8, None, None, np.dtype(np.int8), None, scaled=True),
    FormatRow("fp16", 2, FP16Format, 16, 5, 10, np.dtype(np.float16), ("Float16", "f16")),
    FormatRow("bf16", 3, BF16Format, 16, 8, 7, np.dtype(ml_dtypes.bfloat16), ("BFloat16", "bf16")),
    FormatRow("fp8_e4m3", 4, FP8E4M3Format, 8, 4, 3, np.dtype(ml_dtypes.float8_e4m3fn), None,
              finite=True, out="bf16", scaled=True),
    FormatRow("fp8_e5m2", 5, FP8E5M2Format, 8, 5, 2, np.dtype(ml_dtypes.float8_e5m2), None,
              out="bf16", scaled=True),
)

#: name -> the format's configuration (`FormatRow.make`), in the table's order
FORMATS = {row.name: row.make for row in FORMAT_TABLE}
#: the floating-point formats' names
FLOAT_FORMATS = tuple(row.name for row in FORMAT_TABLE if row.is_float)


def row_of(name):
    """The `FormatRow` of format `name`; ConfigError naming the known ones."""
    for row in FORMAT_TABLE:
        if row.name == name:
            return row
    raise ConfigError(f"unknown format {name!r}; choose one of {', '.join(sorted(FORMATS))}")


def format_by_name(name, **params):
    """The format `name` (one of `FORMATS`) with `params` for its fields; ConfigError
    naming an unknown name or field."""
    make = row_of(name).make
    # int8's o_acc_bits is accepted only to be refused with its reason: not listed
    cls = Int8Format if make is Int8Format else FloatFormat
    fields = [k for k in inspect.signature(cls).parameters
              if k != "name" and (make, k) != (Int8Format, "o_acc_bits")]
    unknown = sorted(set(params) - set(fields) - {"o_acc_bits"})
    if unknown:
        raise ConfigError(f"format {name!r} has no field(s) {', '.join(unknown)}; its fields are "
                          f"{', '.join(fields)}")
    return make(**params)
