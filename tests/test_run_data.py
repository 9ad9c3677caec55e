"""`RunData`: the inputs of an end-to-end run in each format, and what sim_outputs.npz holds."""

import dataclasses

import numpy as np
import pytest

from attenio import BF16Format, ConfigError, FP16Format, Int8Format, preset
from attenio.hdl.formats import fp
from attenio.plan import make_plan
from attenio.sim import golden_fp
from attenio.sim.run_data import RunData, load_inputs


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
