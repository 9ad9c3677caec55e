"""`RunData`: the inputs of an end-to-end run in each format, and what sim_outputs.npz holds."""

import dataclasses

import numpy as np
import pytest

from attenio import BF16Format, ConfigError, FP16Format, Int8Format, preset
from attenio.hdl.formats import fp
from attenio.plan import make_plan
from attenio.sim import golden_fp
from attenio.sim.run_data import RunData, input_shapes, load_inputs


def test_float_inputs_run_unquantized(rng):
    q, k, v = (rng.normal(size=(2, 5, 8)) for _ in range(3))
    data = RunData.make(BF16Format(), head_dim=8, inputs={"q": q, "k": k, "v": v})
    assert data.dtype == np.dtype("<u2") and data.scales == {}
    assert np.array_equal(data.q, golden_fp.store(fp.BF16, q))
    assert data.c == BF16Format().softmax_constant(head_dim=8)
    # values as stored, in real units: within bf16's half step of the inputs
    assert np.all(np.abs(data.real("q") - q) <= np.abs(q) * 2.0 ** -8)


def test_int8_inputs_are_dequantized_for_a_float_format(rng):
    q = rng.integers(-127, 128, (1, 4, 8)).astype(np.int8)
    data = RunData.make(FP16Format(), head_dim=8,
                        inputs={"q": q, "k": q, "v": q, "scale_q": 0.5, "scale_k": 0.25,
                                "scale_v": 1.0})
    assert np.array_equal(data.real("q"), q * 0.5)       # exact in fp16
    assert np.array_equal(data.real("k"), q * 0.25)


def test_int8_outputs_in_real_units(rng):
    x = {t: rng.normal(size=(1, 6, 8)) for t in "qkv"}
    data = RunData.make(Int8Format(), head_dim=8, inputs=x)
    assert data.dtype == np.dtype("i1") and set(data.scales) == {"q", "k", "v"}
    rtl = rng.integers(-128, 128, (1, 6, 8)).astype(np.int8)
    out = data.outputs(rtl, rtl, np.zeros((1, 6, 8)))
    assert out["scale_o"] == data.scales["v"]
    assert np.array_equal(out["o"], rtl * data.scales["v"]) and out["format"] == "int8"


def test_float_golden_is_golden_fp_per_head():
    config = dataclasses.replace(preset("small"), format=BF16Format(p_frac=16))
    plan = make_plan(config)
    data = RunData.make(config.format, head_dim=16, kind="gaussian", seq_len=9, heads=2,
                        seed=3)
    dp = golden_fp.FloatDatapath(fp.BF16, max_seq_len=256, head_dim=16, split=plan.split,
                                 rows_per_mac=plan.rows_per_mac,
                                 fixed=config.format.fixed)
    want = np.stack([golden_fp.attention(dp, data.q[h], data.k[h], data.v[h])
                     for h in range(2)])
    assert np.array_equal(data.golden(plan), want)


def test_inputs_of_another_type_are_refused(tmp_path):
    path = tmp_path / "ints.npz"
    np.savez(path, q=np.zeros((2, 4), np.int32), k=np.zeros((2, 4)), v=np.zeros((2, 4)))
    with pytest.raises(ConfigError, match=r"q must be int8 or floating point, not int32"):
        load_inputs(path, head_dim=4)


def test_int8_refuses_non_finite_inputs():
    x = np.ones((1, 2, 4))
    x[0, 0, 0] = np.nan
    with pytest.raises(ConfigError, match="int8 inputs: q: quantize: the array holds NaN"):
        RunData.make(Int8Format(), head_dim=4, inputs={"q": x, "k": x, "v": x})


@pytest.mark.parametrize("fmt", [Int8Format(p_frac=16), BF16Format(p_frac=16)],
                         ids=["int8", "bf16"])
def test_grouped_heads_and_kv_len_golden_is_per_query_head(fmt):
    """Four query heads of 5 rows, two K/V heads of 12 rows (g = 2): query head h's golden is
    the one-head golden against K/V head h // 2, causal rows aligned at the end."""
    config = dataclasses.replace(preset("small"), format=fmt)
    plan = make_plan(config)
    data = RunData.make(fmt, head_dim=16, kind="gaussian", seq_len=5, kv_len=12, heads=4,
                        group=2, seed=5)
    assert (data.heads, data.kv_heads, data.seq_len, data.kv_len, data.group) == (4, 2, 5, 12, 2)
    for causal in (False, True):
        got, ref = data.golden(plan, causal=causal), data.reference(causal=causal)
        for h in range(4):
            one = dataclasses.replace(data, q=data.q[h:h + 1], k=data.k[h // 2:h // 2 + 1],
                                      v=data.v[h // 2:h // 2 + 1])
            assert np.array_equal(got[h], one.golden(plan, causal=causal)[0])
            assert np.allclose(ref[h], one.reference(causal=causal)[0])


def test_npz_with_fewer_kv_heads_and_other_kv_rows(tmp_path):
    path = tmp_path / "gqa.npz"
    np.savez(path, q=np.zeros((4, 3, 4)), k=np.zeros((2, 7, 4)), v=np.zeros((2, 7, 4)))
    x = load_inputs(path, head_dim=4)
    assert x["k"].shape == (2, 7, 4)
    np.savez(path, q=np.zeros((4, 3, 4)), k=np.zeros((3, 7, 4)), v=np.zeros((3, 7, 4)))
    with pytest.raises(ConfigError, match="heads must divide q's"):
        load_inputs(path, head_dim=4)


def test_inputs_are_checked_from_their_headers_before_loading(tmp_path, monkeypatch):
    """Shapes, dtypes and pickles come from the .npy headers: np.load is never called on a
    file they refuse, and a header that declares more than the archive holds is refused."""
    import io
    import zipfile

    from numpy.lib import format as npy

    def no_load(*args, **kwargs):
        raise AssertionError("an array was loaded")
    monkeypatch.setattr(np, "load", no_load)
    path = tmp_path / "x.npz"
    np.savez(path, q=np.array([{"a": 1}], dtype=object), k=np.zeros((2, 4)), v=np.zeros((2, 4)))
    with pytest.raises(ConfigError, match="q.npy holds Python objects"):
        load_inputs(path, head_dim=4)
    head = io.BytesIO()
    npy.write_array_header_1_0(head, {"descr": "<f4", "fortran_order": False,
                                      "shape": (1, 10 ** 9, 4)})
    with zipfile.ZipFile(path, "w") as zf:
        for t in "qkv":
            zf.writestr(f"{t}.npy", head.getvalue())
    with pytest.raises(ConfigError, match=r"q.npy's header declares \[1, 1000000000, 4\] of "
                                          r"float32 \(16000000000 bytes\), but the archive "
                                          r"holds 0"):
        load_inputs(path, head_dim=4)


def test_compressed_and_two_dimensional_inputs_load(tmp_path, rng):
    q = rng.normal(size=(3, 4)).astype(np.float32)
    path = tmp_path / "x.npz"
    np.savez_compressed(path, q=q, k=q, v=q)
    assert input_shapes(path, head_dim=4)["q"] == ((1, 3, 4), np.dtype(np.float32))
    assert np.array_equal(load_inputs(path, head_dim=4)["q"], q[None])


@pytest.mark.parametrize("arrays, message", [
    ({"q": np.full((1, 2, 4), np.nan)}, "q holds NaN or infinite values"),
    ({"q": np.full((1, 2, 4), 1e300)}, "q holds values beyond float32's range"),
    ({"q": np.zeros((1, 2, 4), np.int8), "scale_q": -0.5},
     "scale_q must be a positive finite number, not -0.5"),
    ({"q": np.zeros((1, 2, 4), np.int8), "scale_q": "0.5"}, r"scale_q must be one real number"),
    ({"q": np.zeros((300, 2, 4))}, "heads / kv_heads = 300 query heads a K/V head is more"),
])
def test_values_no_run_can_take_are_refused(tmp_path, arrays, message):
    path = tmp_path / "x.npz"
    np.savez(path, **{"k": np.zeros((1, 2, 4)), "v": np.zeros((1, 2, 4)), **arrays})
    with pytest.raises(ConfigError, match=message):
        load_inputs(path, head_dim=4)


def test_float_inputs_past_the_formats_range_are_refused():
    x = np.full((1, 2, 4), 1e5)         # finite in bf16, past fp16's 65504
    RunData.make(BF16Format(), head_dim=4, inputs={"q": x, "k": x, "v": x})
    with pytest.raises(ConfigError, match="fp16 inputs: q holds values that round to infinity"):
        RunData.make(FP16Format(), head_dim=4, inputs={"q": x, "k": x, "v": x})


@pytest.mark.parametrize("name", ["int8", "fp8_e4m3", "fp8_e5m2", "fp16"])
def test_head_scales_are_a_tensors_and_kv_heads(rng, name):
    """`head_scales`: K and V scaled a K/V head, Q a K/V head's g query heads together; each
    query head's c is the per-tensor c of its K/V head's own tensors, so a head's run alone
    (`head_scales` off) computes the same c; SCALE_C_TABLE holds them by query head."""
    from attenio.formats import format_by_name
    fmt = format_by_name(name)
    heads, kv_heads, n, d = 6, 2, 5, 8
    j = np.arange(kv_heads)[:, None, None]
    x = {"q": rng.normal(size=(heads, n, d)), "k": rng.normal(size=(kv_heads, n, d)) * 4.0 ** -j,
         "v": rng.normal(size=(kv_heads, n, d)) * 8.0 ** j}
    data = RunData.make(fmt, head_dim=d, inputs=x, head_scales=True)
    assert data.head_scales and len(data.head_c) == heads and data.group == 3
    for kv in range(kv_heads):
        alone = RunData.make(fmt, head_dim=d, inputs={"q": x["q"][3 * kv:3 * kv + 3],
                                                      "k": x["k"][kv:kv + 1],
                                                      "v": x["v"][kv:kv + 1]})
        assert data.head_c[3 * kv:3 * kv + 3] == (alone.c,) * 3
        assert np.array_equal(data.q[3 * kv:3 * kv + 3], alone.q)
        assert np.array_equal(data.v[kv], alone.v[0])
        for t in ("q", "k", "v"):
            assert np.array_equal(data.real(t)[3 * kv if t == "q" else kv],
                                  alone.real(t)[0]), t
    if name == "fp16":          # unscaled: one c for every head, no scales
        assert data.scales == {} and len(set(data.head_c)) == 1
    else:
        assert len(set(data.head_c)) == 2
        assert {t: s.shape for t, s in data.scales.items()} == {t: (2,) for t in "qkv"}
    regs = data.registers()
    assert regs["SCALE_C"] == data.head_c[0]
    assert [regs[f"SCALE_C_TABLE[{h}]"] for h in range(heads)] == list(data.head_c)
    assert not RunData.make(fmt, head_dim=d, inputs=x).head_scales


def test_head_scaled_golden_and_reference_are_each_heads_own(rng):
    """With `head_scales` every query head's O (golden, and float64 in real units) is its K/V
    head's run alone."""
    config = dataclasses.replace(preset("small"), format=Int8Format())
    plan = make_plan(config)
    x = {"q": rng.normal(size=(4, 9, 16)), "k": rng.normal(size=(2, 9, 16)) * [[[1]], [[0.1]]],
         "v": rng.normal(size=(2, 9, 16))}
    data = RunData.make(config.format, head_dim=16, inputs=x, head_scales=True)
    gold, ref = data.golden(plan), data.reference()
    for kv in range(2):
        alone = RunData.make(config.format, head_dim=16, inputs={
            "q": x["q"][2 * kv:2 * kv + 2], "k": x["k"][kv:kv + 1], "v": x["v"][kv:kv + 1]})
        assert np.array_equal(gold[2 * kv:2 * kv + 2], alone.golden(plan))
        assert np.allclose(ref[2 * kv:2 * kv + 2], alone.reference())
