"""The planner: which mapping of Q rows onto the MACs to build, as the cycle model sees it.

`attenio.plan.make_plan(config, split=s)` gives the Plan of one mapping (s MACs a
row); which s to build needs the cycle model, so the choice lives here, above it.
`choose_plan(config)` builds the Plan of every possible s (`attenio.plan.valid_splits`),
times each with `attenio.sim.cyclemodel.simulate`, and returns the one with the
fewest cycles, its `mapping_choice` recording every candidate, the choice and the
runner-up. A wider split shortens a K/V pass (r d / s cycles) and fills MACs that
a small a leaves idle, but it may round a down (more K/V traffic), and it costs a
wider feed and an adder chain per group. The fastest wins; mappings within
`TOLERANCE` (0.1 %) of the fewest cycles count as a tie, which the least
off-chip traffic (the I/O this design exists to save), then the smaller s, wins.
A wider tolerance would buy traffic with speed: on the paper preset at d = 64,
2 % takes a = 1280 at s = 8 (s = 1's traffic) over a = 1024 at s = 4, 1.4 %
slower, which loses to FlashAttention-2 on the same array.
"""

import time
from dataclasses import replace

from attenio.plan import Candidate, MappingChoice, make_plan, valid_splits

from .cyclemodel import simulate

__all__ = ["TOLERANCE", "choose_plan", "candidate_of"]

#: Cycles within this fraction of the fewest count as a tie, which the least traffic
#: (then the smaller s) wins: the model's own resolution, not a trade of speed for I/O.
TOLERANCE = 0.001

#: Seconds after which `choose_plan` reports each candidate it has modelled.
_QUIET_SECONDS = 1.0


def candidate_of(plan, result):
    """The `Candidate` of `plan` as timed by the cycle model's `result`."""
    return Candidate(split=plan.split, groups=plan.groups, rows_per_mac=plan.rows_per_mac,
                     a=plan.a, macs_active=plan.macs_active, kv_depth=plan.kv_depth,
                     cycles=result.cycles, pe_util=result.pe_util,
                     spatial_util=result.spatial_util, offchip_bytes=plan.traffic.bytes)


def _pick(candidates):
    """(chosen, runner-up) splits: of the mappings within `TOLERANCE` of the fewest
    cycles, the least traffic, then the smaller s; the others follow by cycles."""
    best = min(c.cycles for c in candidates)

    def rank(c):
        if c.cycles <= best * (1 + TOLERANCE):
            return (0, c.offchip_bytes, c.split)
        return (1, c.cycles, c.split)
    ranked = sorted(candidates, key=rank)
    return ranked[0].split, ranked[1].split if len(ranked) > 1 else None


def choose_plan(config, *, seq_len=None, heads=None, progress=None):
    """The Plan to build for `config`, its `mapping_choice` filled in.

    `config.split` an int: that mapping (make_plan's errors propagate), modelled
    once. None: every possible s is modelled at runtime `seq_len` and `heads`
    (default: the workload's) and the fastest wins. `progress(message)` hears of
    each candidate once the choice has taken more than a second.
    """
    w = config.workload
    n, h = seq_len or w.seq_len, heads or w.heads
    splits = (config.split,) if config.split is not None else valid_splits(config)
    t0 = time.perf_counter()
    plans, candidates = {}, []
    for i, s in enumerate(splits, 1):
        plan = make_plan(config, split=s)
        c = candidate_of(plan, simulate(plan, seq_len=n, heads=h))
        plans[s] = plan
        candidates.append(c)
        elapsed = time.perf_counter() - t0
        if progress and elapsed > _QUIET_SECONDS:
            progress(f"mapping {i}/{len(splits)}: s = {s}, r = {c.rows_per_mac}, a = {c.a}: "
                     f"{c.cycles} cycles modelled ({elapsed:.1f} s so far)")
    chosen, runner_up = _pick(candidates)
    choice = MappingChoice(mode="auto" if config.split is None else "forced", seq_len=n, heads=h,
                           tolerance=TOLERANCE, candidates=tuple(candidates), chosen=chosen,
                           runner_up=runner_up)
    return replace(plans[chosen], mapping_choice=choice)
