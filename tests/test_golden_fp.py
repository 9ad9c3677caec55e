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


@pytest.mark.parametrize("spec, bound", [(fp.FP16, 1.5e-3), (fp.BF16, 8e-3)],
                         ids=["fp16", "bf16"])
def test_error_stays_at_the_storage_formats_own(rng, spec, bound):
    q, k, v, stored = _data(rng, 32, 200, 16, spec)
    dp = G.FloatDatapath(spec, max_seq_len=256, head_dim=16, split=2)
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


def test_storage_must_be_a_16_bit_format():
    with pytest.raises(TypeError, match="storage must be FP16 or BF16"):
        G.FloatDatapath(fp.FP32, max_seq_len=16, head_dim=8)
    with pytest.raises(ValueError, match="split 3 must divide d = 8"):
        G.FloatDatapath(fp.FP16, max_seq_len=16, head_dim=8, split=3)
