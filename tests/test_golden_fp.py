"""The floating-point golden model: the fast model equals its bit-level twin, its rounding
order follows the split, and its error stays at the storage format's own."""

import numpy as np
import pytest

from attenio.hdl.formats import fp
from attenio.sim import golden_fp as G


def _data(rng, rows, n, d, spec, scale=1.0):
    dp = G.FloatDatapath(spec, max_seq_len=256, head_dim=d, split=1)
    q, k, v = (rng.standard_normal((x, d)) * scale for x in (rows, n, n))
    return q, k, v, [dp.store(t) for t in (q, k, v)]


@pytest.mark.parametrize("spec", [fp.FP16, fp.BF16], ids=lambda s: s.name)
@pytest.mark.parametrize("split", [1, 2, 8])
def test_fast_model_equals_the_bit_level_twins(rng, spec, split):
    dp = G.FloatDatapath(spec, max_seq_len=256, head_dim=16, split=split)
    q, k, v, stored = _data(rng, 5, 300, 16, spec, scale=2.0)    # crosses a score chunk
    assert np.array_equal(G.attention(dp, *stored), G.attention_bits(dp, *stored))


def test_the_split_sets_the_order_of_the_score_additions(rng):
    q, k, v, stored = _data(rng, 32, 64, 16, fp.FP16, scale=3.0)
    outs = {s: G.attention(G.FloatDatapath(fp.FP16, max_seq_len=256, head_dim=16, split=s),
                           *stored) for s in (1, 4)}
    assert not np.array_equal(outs[1], outs[4])        # another order, other roundings


#: (r, s) at d = 16 and the sub-sums k of each (`attenio.hdl.mac.score_sums`): every k the
#: interleave takes at d/s = 16, 8, 4
_INTERLEAVED = {(2, 1): 5, (4, 2): 3, (8, 4): 2, (9, 2): 1, (1, 2): 3}


def _interleaved(spec, rows, split):
    return G.FloatDatapath(spec, max_seq_len=256, head_dim=16, split=split, rows_per_mac=rows)


@pytest.mark.parametrize("rows, split", sorted(_INTERLEAVED))
def test_the_interleave_keeps_the_sub_sums_the_mac_keeps(rows, split):
    assert _interleaved(fp.FP16, rows, split).sums == _INTERLEAVED[rows, split]


@pytest.mark.parametrize("spec", [fp.FP16, fp.BF16], ids=lambda s: s.name)
@pytest.mark.parametrize("rows, split", [(2, 1), (4, 2), (8, 4)])
def test_interleaved_fast_model_equals_the_bit_level_twins(rng, spec, rows, split):
    dp = _interleaved(spec, rows, split)
    q, k, v, stored = _data(rng, 5, 300, 16, spec, scale=2.0)
    assert np.array_equal(G.attention(dp, *stored), G.attention_bits(dp, *stored))
    assert np.array_equal(G.attention(dp, *stored, causal=True),
                          G.attention_bits(dp, *stored, causal=True))


@pytest.mark.parametrize("rows, split", sorted(_INTERLEAVED))
def test_every_order_adds_every_column_once(rng, rows, split):
    """Small integers sum exactly in any order: each order is the dot product."""
    dp = _interleaved(fp.FP16, rows, split)
    q, k = rng.integers(-8, 9, (3, 16)), rng.integers(-8, 9, (7, 16))
    got = fp.FP32.to_float(G.score_bits(dp, dp.store(q), dp.store(k)))
    assert np.array_equal(got, (q @ k.T).astype(np.float32))


def test_the_sub_sums_set_the_order_of_the_score_additions(rng):
    q, k, v, stored = _data(rng, 32, 64, 16, fp.FP16, scale=3.0)
    plain = G.FloatDatapath(fp.FP16, max_seq_len=256, head_dim=16, split=2)
    assert not np.array_equal(G.score_bits(plain, *stored[:2]),
                              G.score_bits(_interleaved(fp.FP16, 4, 2), *stored[:2]))


def test_the_rows_per_mac_must_be_a_positive_integer():
    with pytest.raises(ValueError, match="^FloatDatapath: rows_per_mac must be a positive "
                                         "integer, not 0$"):
        G.FloatDatapath(fp.FP16, max_seq_len=16, head_dim=8, rows_per_mac=0)


@pytest.mark.parametrize("spec, bound", [(fp.FP16, 1.5e-3), (fp.BF16, 8e-3)],
                         ids=["fp16", "bf16"])
@pytest.mark.parametrize("rows", [None, 4], ids=["one_sum", "interleaved"])
def test_error_stays_at_the_storage_formats_own(rng, spec, bound, rows):
    q, k, v, stored = _data(rng, 32, 200, 16, spec)
    dp = G.FloatDatapath(spec, max_seq_len=256, head_dim=16, split=2, rows_per_mac=rows)
    out = spec.to_float(G.attention(dp, *stored)).astype(np.float64)
    ref = G.reference(q, k, v)
    rel = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    floor = np.linalg.norm(spec.to_float(dp.store(ref)) - ref) / np.linalg.norm(ref)
    assert floor < rel < bound, (floor, rel)


def test_specials_make_their_rows_nan_and_only_theirs(rng):
    q, k, v, stored = _data(rng, 5, 20, 8, fp.BF16)
    dp = G.FloatDatapath(fp.BF16, max_seq_len=256, head_dim=8)
    clean = G.attention(dp, *stored)
    qb = stored[0].copy()
    qb[2, 3] = fp.BF16.nan                          # a NaN score in row 2
    qb[4, 0] = fp.BF16.inf                          # an infinite score in row 4
    for out in (G.attention(dp, qb, *stored[1:]), G.attention_bits(dp, qb, *stored[1:])):
        assert list(fp.BF16.is_nan(out).all(axis=1)) == [False, False, True, False, True]
        assert np.array_equal(out[[0, 1, 3]], clean[[0, 1, 3]])
    vb = stored[2].copy()
    vb[7, 5] = fp.BF16.nan                          # column 5 of every row
    out = G.attention(dp, stored[0], stored[1], vb)
    assert fp.BF16.is_nan(out[:, 5]).all() and not fp.BF16.is_nan(np.delete(out, 5, 1)).any()


def test_storage_must_be_a_storage_format():
    with pytest.raises(TypeError, match="storage must be one of fp16, bf16, fp8_e4m3, fp8_e5m2, not"):
        G.FloatDatapath(fp.FP32, max_seq_len=16, head_dim=8)
    with pytest.raises(ValueError, match="split 3 must divide d = 8"):
        G.FloatDatapath(fp.FP16, max_seq_len=16, head_dim=8, split=3)


# -- causal masking ---------------------------------------------------------------------------

def _neg_zero(spec):
    return 1 << (spec.width - 1)


def _zero_agnostic(spec, x):
    """Encodings with -0 mapped to +0: a masked key may turn an O of -0 into +0."""
    return np.where(x == _neg_zero(spec), 0, x).astype(x.dtype)


@pytest.mark.parametrize("spec", [fp.FP16, fp.BF16], ids=lambda s: s.name)
@pytest.mark.parametrize("split", [1, 2])
@pytest.mark.parametrize("rows, n", [(12, 12), (7, 20)], ids=["self", "fewer_rows"])
def test_causal_fast_model_equals_the_bit_level_twins(rng, spec, split, rows, n):
    dp = G.FloatDatapath(spec, max_seq_len=256, head_dim=16, split=split)
    q, k, v, stored = _data(rng, rows, n, 16, spec, scale=2.0)
    got = G.attention(dp, *stored, causal=True)
    assert np.array_equal(got, G.attention_bits(dp, *stored, causal=True))
    assert not np.array_equal(got, G.attention(dp, *stored))


@pytest.mark.parametrize("spec", [fp.FP16, fp.BF16], ids=lambda s: s.name)
def test_causal_row_is_attention_over_the_keys_it_sees(rng, spec):
    # P = 0 adds a signed zero to O: the same result but for the sign of a zero
    rows, n = 30, 300                                  # crosses a score chunk
    dp = G.FloatDatapath(spec, max_seq_len=n, head_dim=8, split=2)
    q, k, v, stored = _data(rng, rows, n, 8, spec, scale=2.0)
    got = _zero_agnostic(spec, G.attention(dp, *stored, causal=True))
    for i, limit in enumerate(range(n - rows + 1, n + 1)):
        want = G.attention(dp, stored[0][i:i + 1], stored[1][:limit], stored[2][:limit])
        assert np.array_equal(got[i], _zero_agnostic(spec, want[0])), i


def test_masked_key_turns_a_negative_zero_positive():
    # row 1 sees keys 0 and 1: key 1 leads by ~65 in log2, so alpha = 0 and O = 0 * V_0 + V_1
    # = -0 in column 0 (V_0 < 0, V_1 = -0); key 2, masked, adds fmul(+0, 1.0) = +0
    spec = fp.FP16
    dp = G.FloatDatapath(spec, max_seq_len=8, head_dim=8)
    q = np.zeros((3, 8))
    q[:, 0] = 8.0
    k = np.zeros((3, 8))
    k[:, 0] = [-8.0, 8.0, 0.0]
    v = np.ones((3, 8))
    v[:2, 0] = [-1.0, -0.0]
    stored = [dp.store(t) for t in (q, k, v)]
    whole = G.attention(dp, stored[0][1:2], stored[1][:2], stored[2][:2])
    causal = G.attention(dp, *stored, causal=True)
    assert whole[0, 0] == _neg_zero(spec) and causal[1, 0] == 0
    assert np.array_equal(whole[0, 1:], causal[1, 1:])
    assert np.array_equal(causal, G.attention_bits(dp, *stored, causal=True))


@pytest.mark.parametrize("spec", [fp.FP16, fp.BF16], ids=lambda s: s.name)
def test_masked_key_with_an_infinite_v_makes_its_element_nan(rng, spec):
    # 0 * inf = NaN in the column of the inf, for the rows that mask the key; the rows that
    # see it are what attention over their keys makes of an inf in V
    rows, n, j, col = 8, 8, 4, 3
    dp = G.FloatDatapath(spec, max_seq_len=n, head_dim=8)
    q, k, v, stored = _data(rng, rows, n, 8, spec)
    vb = stored[2].copy()
    vb[j, col] = spec.inf
    outs = [f(dp, stored[0], stored[1], vb, causal=True) for f in (G.attention, G.attention_bits)]
    clean = G.attention(dp, *stored, causal=True)
    for out in outs:
        nan = spec.is_nan(out)
        assert nan[:j, col].all() and not np.delete(nan[:j], col, 1).any()
        assert np.array_equal(np.delete(out[:j], col, 1), np.delete(clean[:j], col, 1))
        for i in range(j, rows):
            want = G.attention(dp, stored[0][i:i + 1], stored[1][:i + 1], vb[:i + 1])
            assert np.array_equal(spec.is_nan(out[i]), spec.is_nan(want[0]))
            assert np.array_equal(_zero_agnostic(spec, np.where(spec.is_nan(out[i]), 0, out[i])),
                                  _zero_agnostic(spec, np.where(spec.is_nan(want[0]), 0, want[0])))


def test_masked_key_with_a_nan_score_changes_nothing(rng):
    # a NaN in K_j makes the rows that see it NaN; the rows that mask it hold their max
    rows, n, j = 8, 8, 4
    dp = G.FloatDatapath(fp.BF16, max_seq_len=n, head_dim=8)
    q, k, v, stored = _data(rng, rows, n, 8, fp.BF16)
    kb = stored[1].copy()
    kb[j, 2] = fp.BF16.nan
    clean = G.attention(dp, *stored, causal=True)
    for f in (G.attention, G.attention_bits):
        out = f(dp, stored[0], kb, stored[2], causal=True)
        assert np.array_equal(out[:j], clean[:j])
        assert fp.BF16.is_nan(out[j:]).all()


@pytest.mark.parametrize("spec, bound", [(fp.FP16, 1.5e-3), (fp.BF16, 8e-3)],
                         ids=["fp16", "bf16"])
@pytest.mark.parametrize("rows", [200, 32])
def test_causal_error_stays_at_the_storage_formats_own(rng, spec, bound, rows):
    q, k, v, stored = _data(rng, rows, 200, 16, spec)
    dp = G.FloatDatapath(spec, max_seq_len=256, head_dim=16, split=2)
    out = spec.to_float(G.attention(dp, *stored, causal=True)).astype(np.float64)
    ref = G.reference(q, k, v, causal=True)
    rel = np.linalg.norm(out - ref) / np.linalg.norm(ref)
    floor = np.linalg.norm(spec.to_float(dp.store(ref)) - ref) / np.linalg.norm(ref)
    assert floor < rel < bound, (floor, rel)


def test_causal_reference_is_masked_softmax(rng):
    q, k, v = rng.standard_normal((3, 8)), rng.standard_normal((5, 8)), rng.standard_normal((5, 8))
    ref = G.reference(q, k, v, causal=True)
    for i in range(3):                                  # row i sees keys 0 .. i + 2
        assert np.allclose(ref[i], G.reference(q[i:i + 1], k[:i + 3], v[:i + 3])[0])


def test_causal_needs_as_many_keys_as_queries(rng):
    dp = G.FloatDatapath(fp.FP16, max_seq_len=16, head_dim=8)
    q, k, v, stored = _data(rng, 4, 3, 8, fp.FP16)
    message = r"causal attention needs at least as many keys as queries \(N = 3 < M = 4\)"
    for f in (G.attention, G.attention_bits):
        with pytest.raises(ValueError, match=message):
            f(dp, *stored, causal=True)
    with pytest.raises(ValueError, match=message):
        G.reference(q, k, v, causal=True)
