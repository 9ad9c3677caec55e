"""The closed forms against loop nests walked element by element (attenio.executor),
and the planner's optimum against an exhaustive search over every (a, b)."""

import numpy as np
import pytest

from attenio import ConfigError, analysis
from attenio.executor import (CapacityError, reference_attention, run_attenio, run_mmm)


def qkv(rng, n, d):
    return (rng.standard_normal((n, d)) for _ in range(3))


@pytest.mark.parametrize("n, d, a, b", [(12, 3, 5, 1), (12, 3, 4, 3), (10, 2, 10, 2), (9, 4, 1, 1)])
def test_mmm_executor_matches_closed_form(rng, n, d, a, b):
    A, B = rng.standard_normal((n, d)), rng.standard_normal((d, n))
    m = a * d + b * d + a * b
    chip = run_mmm(A, B, a=a, b=b, capacity=m)
    assert np.allclose(chip.mem["C"], A @ B)
    assert (chip.total_reads, chip.total_writes) == analysis.mmm_io(n, d, a, b)
    assert chip.peak == m


@pytest.mark.parametrize("n, d, a, b", [(12, 3, 5, 1), (13, 2, 4, 3), (8, 4, 8, 1), (7, 3, 1, 7)])
def test_attention_executor_matches_closed_form(rng, n, d, a, b):
    q, k, v = qkv(rng, n, d)
    m = 2 * a * d + b * d + a * b + 3 * a
    chip = run_attenio(q, k, v, a=a, b=b, capacity=m)
    assert np.allclose(chip.mem["O"], reference_attention(q, k, v))
    assert (chip.total_reads, chip.total_writes) == analysis.attention_io(n, d, a)
    assert chip.peak == m


@pytest.mark.parametrize("n, n_kv, d, a, b, causal", [
    (12, 12, 3, 5, 1, True),            # short block first: 2, then 5 and 5
    (13, 13, 2, 4, 3, True),
    (10, 10, 2, 4, 1, True),
    (8, 8, 2, 4, 1, True),              # blocks divide N: nothing to reorder
    (7, 20, 3, 3, 1, True),             # a prefill after 13 cached keys
    (1, 16, 4, 1, 1, True),             # a decode step: one query, every key
    (6, 15, 2, 4, 1, False),            # cross-attention: 6 queries, 15 keys
])
def test_causal_and_longer_keys_match_the_closed_form(rng, n, n_kv, d, a, b, causal):
    q = rng.standard_normal((n, d))
    k, v = rng.standard_normal((n_kv, d)), rng.standard_normal((n_kv, d))
    m = 2 * a * d + b * d + a * b + 3 * a
    chip = run_attenio(q, k, v, a=a, b=b, capacity=m, causal=causal)
    assert np.allclose(chip.mem["O"], reference_attention(q, k, v, causal=causal))
    assert (chip.total_reads, chip.total_writes) == analysis.attention_io(
        n, d, a, causal=causal, n_kv=n_kv)
    assert chip.peak <= m


def test_causal_reads_the_keys_up_to_each_blocks_last_row():
    # N = 10, a = 4: blocks of 2, 4, 4 rows read 2, 6 and 10 key rows
    assert analysis.q_blocks(10, 4, causal=True) == [(0, 2), (2, 4), (6, 4)]
    assert analysis.q_blocks(10, 4) == [(0, 4), (4, 4), (8, 2)]
    assert analysis.attention_io(10, 3, 4, causal=True) == (10 * 3 + 2 * 3 * (2 + 6 + 10), 30)
    with pytest.raises(ConfigError, match=r"causal attention needs at least as many keys as "
                                          r"queries \(N_kv = 4 < N = 6\)"):
        analysis.attention_io(6, 2, 3, causal=True, n_kv=4)


def compositions(n, most):
    """Every split of n rows into consecutive blocks of at most `most` rows."""
    if n == 0:
        yield []
        return
    for first in range(1, min(most, n) + 1):
        for rest in compositions(n - first, most):
            yield [first] + rest


@pytest.mark.parametrize("n, d, a", [(10, 2, 4), (11, 2, 3), (9, 3, 5)])
def test_no_causal_blocking_reads_less_than_the_planners(rng, n, d, a):
    """Every blocking of N rows into blocks of at most a rows (uneven ones too), walked
    with causal masking: none moves fewer elements than the closed form's."""
    q, k, v = qkv(rng, n, d)
    m = 2 * a * d + d + a + 3 * a
    best = None
    for sizes in compositions(n, a):
        starts = np.cumsum([0] + sizes[:-1])
        chip = run_attenio(q, k, v, a=a, capacity=m, causal=True,
                           blocks=list(zip(starts.tolist(), sizes)))
        io = chip.total_reads + chip.total_writes
        best = io if best is None else min(best, io)
    assert best == sum(analysis.attention_io(n, d, a, causal=True))
    # the short block last (the unmasked order) reads more
    last = run_attenio(q, k, v, a=a, capacity=m, causal=True, blocks=analysis.q_blocks(n, a))
    assert last.total_reads + last.total_writes > best


@pytest.mark.parametrize("n, n_kv, heads, a, causal", [
    (6, 6, 2, 4, False), (7, 7, 3, 6, True), (1, 12, 4, 4, True), (2, 9, 2, 8, False),
])
@pytest.mark.parametrize("grouped", [False, True])
def test_grouped_heads_match_the_closed_form(rng, n, n_kv, heads, a, causal, grouped):
    d = 2
    q = rng.standard_normal((heads * n, d))
    k, v = rng.standard_normal((n_kv, d)), rng.standard_normal((n_kv, d))
    m = 2 * a * d + d + a + 3 * a
    chip = run_attenio(q, k, v, a=a, capacity=m, causal=causal, heads=heads, grouped=grouped)
    for h in range(heads):
        assert np.allclose(chip.mem["O"][h * n:(h + 1) * n],
                           reference_attention(q[h * n:(h + 1) * n], k, v, causal=causal))
    assert (chip.total_reads, chip.total_writes) == analysis.attention_io(
        n, d, a, causal=causal, n_kv=n_kv, heads=heads, grouped=grouped)


def test_a_decode_step_reads_the_cache_once_for_the_whole_group():
    # one query row of each of 8 heads against 4096 cached keys, a = 64
    one = analysis.attention_io(1, 64, 64, causal=True, n_kv=4096, heads=8)
    grouped = analysis.attention_io(1, 64, 64, causal=True, n_kv=4096, heads=8, grouped=True)
    assert one[0] == 8 * 64 + 8 * 2 * 64 * 4096 and grouped[0] == 8 * 64 + 2 * 64 * 4096
    assert analysis.grouped_blocks_win(1, 64, 64, heads=8, causal=True, n_kv=4096)
    # a long prefill: a / g rows tile N as a rows do, so grouping gains nothing
    assert not analysis.grouped_blocks_win(4096, 64, 1024, heads=8)
    with pytest.raises(ConfigError, match="a Q block of 4 rows cannot hold a row of each of 8"):
        analysis.attention_io(4, 2, 4, heads=8, grouped=True)


@pytest.mark.parametrize("n, n_kv, heads, a, causal", [(5, 5, 2, 4, True), (2, 7, 3, 6, False),
                                                       (6, 6, 2, 4, False)])
def test_no_blocking_of_either_kind_beats_the_planners_choice(rng, n, n_kv, heads, a, causal):
    """Every split of a head's rows into consecutive blocks, as one-head blocks (at most a
    rows) and as blocks of every head (at most a // heads rows each): none moves fewer
    elements than the better closed form."""
    d = 2
    q = rng.standard_normal((heads * n, d))
    k, v = rng.standard_normal((n_kv, d)), rng.standard_normal((n_kv, d))
    m = 2 * a * d + d + a + 3 * a
    best = None
    for grouped, most in ((False, a), (True, a // heads)):
        for sizes in compositions(n, most):
            starts = np.cumsum([0] + sizes[:-1]).tolist()
            chip = run_attenio(q, k, v, a=a, capacity=m, causal=causal, heads=heads,
                               grouped=grouped, blocks=list(zip(starts, sizes)))
            io = chip.total_reads + chip.total_writes
            best = io if best is None else min(best, io)
    win = analysis.grouped_blocks_win(n, d, a, heads=heads, causal=causal, n_kv=n_kv)
    assert best == sum(analysis.attention_io(n, d, a, causal=causal, n_kv=n_kv, heads=heads,
                                             grouped=win))


def test_executor_refuses_to_overfill():
    rng = np.random.default_rng(1)
    q, k, v = qkv(rng, 6, 2)
    with pytest.raises(CapacityError):
        run_attenio(q, k, v, a=3, capacity=2 * 3 * 2 + 2 + 3 + 9 - 1)


def least_io(n, walk, feasible):
    """The least I/O of any a x b tiling `walk(a, b)` runs, for a, b in 1..n; every
    tiling the walk refuses (CapacityError) must be one that `feasible` rejects."""
    best = None
    for a in range(1, n + 1):
        for b in range(1, n + 1):
            try:
                chip = walk(a, b)
            except CapacityError:
                assert not feasible(a, b)
                continue
            assert feasible(a, b)
            io = chip.total_reads + chip.total_writes
            best = io if best is None else min(best, io)
    return best


@pytest.mark.parametrize("n, d", [(14, 2), (10, 3)])
def test_exhaustive_search_finds_nothing_better_than_the_mmm_optimum(rng, n, d):
    A, B = rng.standard_normal((n, d)), rng.standard_normal((d, n))
    for m in range(3 * d + 1, n * d + 1, 3):
        best = least_io(n, lambda a, b: run_mmm(A, B, a=a, b=b, capacity=m),
                        lambda a, b: analysis.mmm_feasible(a, b, d, m))
        a, b = analysis.mmm_optimum(n, d, m)
        assert sum(analysis.mmm_io(n, d, a, b)) == best, f"M={m}"


@pytest.mark.parametrize("n, d", [(12, 2), (9, 3)])
def test_exhaustive_search_finds_nothing_better_than_the_attention_optimum(rng, n, d):
    q, k, v = qkv(rng, n, d)

    def walk(a, b):
        if not analysis.attention_feasible(a, b, d, m + 2 * d):
            raise CapacityError("far from fitting")     # skip the walk, it would only raise
        return run_attenio(q, k, v, a=a, b=b, capacity=m)

    for m in range(3 * d + 4, 2 * n * d + 3 * n + d + n + 2, 4):
        best = least_io(n, walk, lambda a, b: analysis.attention_feasible(a, b, d, m))
        a, b = analysis.attention_optimum(n, d, m)
        assert (a, b) == (min((m - d) // (2 * d + 4), n), 1)
        assert sum(analysis.attention_io(n, d, a)) == best, f"M={m}"


def test_continuous_forms_agree_with_exact_ones_when_blocks_divide():
    n, d, a = 4096, 64, 64
    assert analysis.mmm_io_continuous(n, d, a, 1) == sum(analysis.mmm_io(n, d, a, 1))
    m = a * (2 * d + 4) + d
    assert analysis.attention_optimum(n, d, m) == (a, 1)
    assert analysis.attention_io_continuous(n, d, m) == pytest.approx(
        sum(analysis.attention_io(n, d, a)))


def test_bound_grows_as_n2_d2_over_m():
    assert analysis.attention_bound(1024, 64, 2 ** 18) == 1024 ** 2 * 64 ** 2 / 2 ** 18
    # for fixed M the optimal traffic tracks the bound within a constant
    ratios = [sum(analysis.attention_io(n, 64, analysis.attention_optimum(n, 64, 2 ** 18)[0]))
              / analysis.attention_bound(n, 64, 2 ** 18) for n in (2 ** 14, 2 ** 16, 2 ** 18)]
    assert max(ratios) / min(ratios) < 1.25


def test_too_small_memory_is_a_clear_error():
    with pytest.raises(ValueError, match="cannot hold one query row"):
        analysis.attention_optimum(64, 16, 40)
    with pytest.raises(ValueError, match="attention_optimum: M must be a positive integer, not 0"):
        analysis.attention_optimum(64, 16, 0)


def test_block_runs_and_key_rows_are_the_blocks_in_closed_form():
    """Against the blocks walked one by one, at every small shape: the runs expand to
    `block_keys`, and `key_rows` is the sum of their keys (and of rows x keys)."""
    seed = 20261205
    rng = np.random.default_rng(seed)
    print(f"seed {seed}")
    for _ in range(2000):
        n, a = int(rng.integers(1, 300)), int(rng.integers(1, 40))
        causal = bool(rng.integers(2))
        n_kv = n + int(rng.integers(0, 50))
        blocks = analysis.block_keys(n, a, causal=causal, n_kv=n_kv)
        assert [rows for _, rows in analysis.q_blocks(n, a, causal=causal)] == \
            [rows for _, rows, _ in blocks]
        assert sum(rows for _, rows, _ in blocks) == n
        assert all(b[0] + b[1] == c[0] for b, c in zip(blocks, blocks[1:]))
        assert all(k == (analysis.causal_limit(r0 + rows - 1, n, n_kv) if causal else n_kv)
                   for r0, rows, k in blocks)
        assert analysis.key_rows(n, a, causal=causal, n_kv=n_kv) == sum(k for *_, k in blocks)
        assert analysis.key_rows(n, a, causal=causal, n_kv=n_kv, weight_rows=True) == \
            sum(rows * k for _, rows, k in blocks)


def test_the_closed_forms_hold_any_32_bit_sequence_length_at_once():
    n = 2**32 - 1
    assert analysis.block_runs(n, 24, causal=True) == [
        (0, 15, 15, 1, 0), (15, 24, 39, n // 24, 24)]
    # every key of row i is i + 1: the blocks' last rows' keys, summed by Gauss
    full = n // 24
    assert analysis.key_rows(n, 24, causal=True) == 15 + sum((39, 24 * (full - 1) + 39)) * full // 2
    assert analysis.attention_io(n, 64, 1024) == (n * 64 + 2 * 64 * n * -(-n // 1024), n * 64)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("extra_keys", [0, 3])
def test_a_block_range_is_the_run_of_its_rows_with_the_same_blocks(causal, extra_keys):
    """Every range of blocks of every small run: the run `block_range` gives (its rows aligned
    at the end of its keys) has exactly the whole run's blocks of that range, rows shifted by
    row0, each reading the same keys; count 0 runs to the last block."""
    for n in range(1, 40):
        for a in (1, 2, 3, 5, 8):
            n_kv = n + extra_keys
            whole = analysis.block_keys(n, a, causal=causal, n_kv=n_kv)
            total = analysis.block_count(n, a)
            assert total == len(whole)
            for first in range(total):
                for count in range(total - first + 1):
                    r = analysis.block_range(n, a, first, count, causal=causal, n_kv=n_kv)
                    assert r.count == (count or total - first) and r.first == first
                    assert r.row0 == whole[first][0]
                    ours = analysis.block_keys(r.rows, a, causal=causal, n_kv=r.n_kv)
                    assert ours == [(r0 - r.row0, rows, keys)
                                    for r0, rows, keys in whole[first:first + r.count]]


@pytest.mark.parametrize("first, count, what", [
    (4, 0, "first block 4 past the last of the 4 Q blocks"), (3, 2, "blocks 3 .. 4 past"),
    (-1, 0, "Q_BLOCK_FIRST must be an integer >= 0"), (0, -2, "Q_BLOCK_COUNT must be")])
def test_a_range_past_the_last_block_is_refused_naming_it(first, count, what):
    with pytest.raises(ConfigError, match=what):
        analysis.block_range(100, 32, first, count)
