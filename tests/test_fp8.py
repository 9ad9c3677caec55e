"""fp8 (OCP E4M3 "fn" and E5M2) as operands of the floating-point datapath: the encodings,
the twins against ml-dtypes (SoftFloat has no fp8), and the per-tensor scaling of the inputs.

The builders themselves are checked with every other float operation in tests/test_fp.py
(its ops are derived from the format table, so the fp8 products and widenings are there)."""

import ml_dtypes
import numpy as np
import pytest

from attenio.formats import FORMAT_TABLE, format_by_name, row_of
from attenio.hdl.formats import fp
from attenio.hdl.formats.fp import FP32
from attenio.sim import golden_fp
from attenio.sim.run_data import RunData, fp8_quantize
from attenio.sim.tb import ieee

FP8 = {name: fp.STORAGE[name] for name in ("fp8_e4m3", "fp8_e5m2")}
EVERY = np.arange(256, dtype=np.uint64)


def _oracle_values(spec, bits):
    """ml-dtypes' values of `bits` as float64."""
    return np.asarray(bits).astype(np.uint8).view(spec.np_dtype).astype(np.float64)


@pytest.mark.parametrize("name", FP8)
def test_every_encoding_decodes_as_ml_dtypes_says(name):
    spec = FP8[name]
    got, want = spec.decode(EVERY), _oracle_values(spec, EVERY)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok], want[ok])
    assert np.array_equal(np.signbit(got[ok]), np.signbit(want[ok]))     # -0 stays -0
    assert np.array_equal(spec.is_nan(EVERY), np.isnan(want))


def test_the_two_formats_special_values():
    e4m3, e5m2 = FP8["fp8_e4m3"], FP8["fp8_e5m2"]
    assert e4m3.finite and not e5m2.finite
    assert (e4m3.nan, e4m3.max_finite, e4m3.decode(e4m3.max_finite)) == (0x7F, 0x7E, 448.0)
    assert e4m3.decode(0x78) == 256.0                     # the all-ones exponent holds numbers
    assert int(e4m3.is_nan(EVERY).sum()) == 2             # one NaN a sign
    with pytest.raises(ValueError, match="fp8_e4m3 has no infinities"):
        e4m3.inf
    assert (e5m2.inf, e5m2.nan, e5m2.decode(e5m2.max_finite)) == (0x7C, 0x7E, 57344.0)
    assert e5m2.decode(0x7C) == np.inf and int(e5m2.is_nan(EVERY).sum()) == 6


@pytest.mark.parametrize("name", FP8)
def test_every_product_of_two_fp8_numbers_is_exact_in_fp32(name):
    """All 65,536 pairs: the twin's fp32 product equals ml-dtypes' operands multiplied in
    float64 (exact: 4 x 4 significant bits, exponents well inside fp32's), NaN for NaN."""
    spec = FP8[name]
    a, b = np.repeat(EVERY, 256), np.tile(EVERY, 256)
    got = FP32.to_float(fp.np_mul(a, b, spec, spec)).astype(np.float64)
    with np.errstate(invalid="ignore"):
        want = _oracle_values(spec, a) * _oracle_values(spec, b)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    ok = ~np.isnan(want)
    assert np.array_equal(got[ok], want[ok])
    assert np.array_equal(np.signbit(got[ok]), np.signbit(want[ok]))
    assert (fp.np_mul(a, b, spec, spec)[np.isnan(got)] == FP32.nan).all()   # canonical


@pytest.mark.parametrize("name", FP8)
def test_p_times_v_and_the_widening_agree_with_softfloat(name, rng):
    """fp32 x fp8 (P x V) and fp8 -> fp32 (V widened) against SoftFloat's fp32 arithmetic
    on ml-dtypes' conversion of the fp8 operand."""
    spec = FP8[name]
    a, b = ieee.vectors(f"mul_fp32_{name}", rng, 3000)
    assert ieee.same(fp.np_mul(a, b, FP32, spec), ieee.oracle_mul(a, b, FP32, spec), FP32).all()
    x, _ = ieee.vectors(f"cvt_{name}_fp32", rng, 0)
    assert len(x) == 256
    assert ieee.same(fp.np_convert(x, spec, FP32), ieee.oracle_convert(x, spec, FP32), FP32).all()


def test_no_builder_rounds_to_a_format_without_infinities():
    from amaranth.hdl import Module, Signal
    with pytest.raises(TypeError, match="no builder rounds to fp8_e4m3"):
        fp.convert(Module(), Signal(32), FP32, FP8["fp8_e4m3"])


def test_fp8_writes_o_in_bf16():
    for name in FP8:
        row = row_of(name)
        assert row.out == "bf16" and row.out_row.element_bits == 16
        fmt = format_by_name(name)
        assert (fmt.element_bytes, fmt.out_bytes) == (1, 2)
        dp = golden_fp.FloatDatapath(FP8[name], max_seq_len=16, head_dim=8,
                                     out=fp.STORAGE["bf16"])
        assert dp.out is fp.BF16 and dp.arith.out_shape.width == 16
    with pytest.raises(TypeError, match="O cannot be written in fp8_e5m2"):
        golden_fp.FloatDatapath(FP8["fp8_e5m2"], max_seq_len=16, head_dim=8)
    others = [r for r in FORMAT_TABLE if r.name not in FP8]
    assert all(r.out_row is r for r in others)


@pytest.mark.parametrize("name", FP8)
def test_inputs_are_scaled_as_the_fp8_recipes_do(name, rng):
    """scale = amax / the largest number; amax lands on it; SCALE_C carries scale_q *
    scale_k; the values in real units are the scaled encodings times the scale."""
    spec = FP8[name]
    x = rng.normal(size=(2, 40, 8)) * 300.0
    bits, scale = fp8_quantize(spec, x)
    top = spec.decode(spec.max_finite)
    assert scale == pytest.approx(np.abs(x).max() / top, rel=1e-6)
    assert np.abs(spec.decode(bits)).max() == top
    # one rounding: half an ulp of the scaled value (a subnormal's ulp is the smallest one)
    ulp = np.maximum(np.abs(spec.decode(bits)), 2.0 ** (1 - spec.bias)) * 2.0 ** -spec.man_bits
    assert np.all(np.abs(spec.decode(bits) - x / scale) <= ulp / 2)
    zeros, one = fp8_quantize(spec, np.zeros((1, 2, 8)))
    assert one == 1.0 and not zeros.any()
    inputs = {"q": x, "k": x[:, ::-1] * 0.01, "v": x * 1e4}
    data = RunData.make(format_by_name(name), head_dim=8, inputs=inputs)
    s = data.scales
    assert set(s) == {"q", "k", "v"} and s["k"] == pytest.approx(s["q"] * 0.01, rel=1e-6)
    c = np.uint32(data.c).view(np.float32)
    plain = np.uint32(format_by_name(name).softmax_constant(head_dim=8)).view(np.float32)
    assert c == np.float32(plain * np.float32(s["q"]) * np.float32(s["k"]))
    assert np.allclose(data.real("v"), x * 1e4, rtol=2.0 ** -spec.man_bits,
                       atol=s["v"] * 2.0 ** (1 - spec.bias - spec.man_bits))
