"""The closed forms against loop nests walked element by element (attenio.executor),
and the planner's optimum against an exhaustive search over every (a, b)."""

import numpy as np
import pytest

from attenio import analysis
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
