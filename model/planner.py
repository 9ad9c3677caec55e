"""The planner: which mapping of Q rows onto the MACs to build, as the cycle model sees it.

`attenio.plan.make_plan(config, split=s, rows_per_mac=r)` gives the Plan of one
mapping (s MACs a row, r rows a group of s); which to build needs the cycle model,
so the choice lives here, above it. `choose_plan(config)` builds the Plan of every
possible s (`attenio.plan.valid_splits`) with every r worth weighing
(`attenio.plan.rows_options`: for each number of Q blocks up to twice the fewest,
the fewest rows a group that give it), times each with
`attenio.model.cyclemodel.simulate`, and returns the one with the fewest cycles, its
`mapping_choice` recording every candidate, the choice and the runner-up. A wider
split shortens a K/V pass (r d / s cycles) and fills MACs that a small a leaves
idle, but it may round a down (more K/V traffic), and it costs a wider feed and an
adder chain per group; a smaller r wastes no pass on a partial last block. The
fastest wins; mappings within `TOLERANCE` (0.1 %) of the fewest cycles count as a
tie, which the least off-chip traffic (the I/O this design exists to save), then the
smaller s, then the larger r, wins. A wider tolerance would buy traffic with speed.
"""

import time
from dataclasses import replace

from attenio.errors import ConfigError
from attenio.plan import BANKS, Candidate, MappingChoice, make_plan, rows_options, valid_splits

from .cyclemodel import simulate

__all__ = ["TOLERANCE", "MAX_BANKS", "QUIET_SECONDS", "choose_plan", "candidate_of",
           "pick_mapping"]

#: Cycles within this fraction of the fewest count as a tie, which the least traffic
#: (then the smaller s) wins: the model's own resolution, not a trade of speed for I/O.
TOLERANCE = 0.001

#: The most score and (P, alpha) banks the planner weighs: past the lanes' latency a bank
#: more only takes cache from the Q block.
MAX_BANKS = 8

#: Seconds after which `choose_plan` reports each candidate it has modelled.
QUIET_SECONDS = 1.0


def candidate_of(plan, result):
    """The `Candidate` of `plan` as timed by the cycle model's `result`."""
    return Candidate(split=plan.split, groups=plan.groups, rows_per_mac=plan.rows_per_mac,
                     a=plan.a, macs_active=plan.macs_active, kv_depth=plan.kv_depth,
                     cycles=result.cycles, pe_util=result.pe_util,
                     spatial_util=result.spatial_util, offchip_bytes=plan.traffic.bytes,
                     banks=plan.banks)


def pick_mapping(candidates):
    """(chosen, runner-up) mappings as (s, r, B): of the mappings within `TOLERANCE` of the
    fewest cycles, the least traffic, then the fewer banks, the smaller s, the larger r;
    the others follow by cycles."""
    best = min(c.cycles for c in candidates)

    def rank(c):
        if c.cycles <= best * (1 + TOLERANCE):
            return (0, c.offchip_bytes, c.banks, c.split, -c.rows_per_mac)
        return (1, c.cycles, c.banks, c.split, -c.rows_per_mac)
    ranked = [c.mapping for c in sorted(candidates, key=rank)]
    return ranked[0], ranked[1] if len(ranked) > 1 else None


def choose_plan(config, *, seq_len=None, heads=None, progress=None):
    """The Plan to build for `config`, its `mapping_choice` filled in.

    `config.split`, `config.rows_per_mac` and `config.banks` ints: that mapping
    (make_plan's errors propagate), modelled once. Either None: every possible value of it is modelled at
    runtime `seq_len` and `heads` (default: the workload's) and the fastest wins.
    `config.banks` an int: that many score and (P, alpha) banks; None: two, and more (up to
    `MAX_BANKS`) for each (s, r) whose lanes still hold up the array at one bank fewer
    (the interlock stalled more than a tie's worth of cycles: a bank more lets S run a K
    row further ahead) and whose O
    updates allow it (`attenio.hdl.core.o_update_problem`). `progress(message)` hears
    of each candidate once the choice has taken more than a second.
    """
    w = config.workload
    n, h = seq_len or w.seq_len, heads or w.heads
    splits = (config.split,) if config.split is not None else valid_splits(config)
    banks = config.banks
    bank_counts = (banks,) if banks is not None else range(BANKS, MAX_BANKS + 1)
    t0 = time.perf_counter()
    plans, candidates, stalled, refused = {}, [], None, None
    # with s or r left to the planner, a mapping that does not fit beside b banks or whose
    # O updates would overlap (`attenio.hdl.core.o_update_problem`) is skipped, not fatal,
    # as long as another one stands
    skip = banks is None or None in (config.split, config.rows_per_mac)
    for b in bank_counts:
        mappings = [(s, r) for s in splits for r in (
            (config.rows_per_mac,) if config.rows_per_mac is not None
            else _rows_options(config, s, b))]
        if stalled is not None:
            # a bank more only helps where the lanes held the array up at one fewer
            mappings = [m for m in mappings if m in stalled]
        stalled = set()
        for s, r in mappings:
            try:
                plan = make_plan(config, split=s, rows_per_mac=r, banks=b)
                result = simulate(plan, seq_len=n, heads=h)
            except ConfigError as exc:
                if skip and b > BANKS:
                    refused = refused or exc
                    continue
                raise
            c = candidate_of(plan, result)
            if result.interlock_stall > TOLERANCE * result.cycles:
                stalled.add((s, r))
            plans[c.mapping] = plan
            candidates.append(c)
            elapsed = time.perf_counter() - t0
            if progress and elapsed > QUIET_SECONDS:
                progress(f"mapping {len(candidates)}: s = {s}, r = {r}, B = {b}, a = {c.a}: "
                         f"{c.cycles} cycles modelled ({elapsed:.1f} s so far)")
        if not stalled:
            break
    if not candidates:
        raise refused
    chosen, runner_up = pick_mapping(candidates)
    forced = None not in (config.split, config.rows_per_mac, banks)
    choice = MappingChoice(mode="forced" if forced else "auto", seq_len=n, heads=h,
                           tolerance=TOLERANCE, candidates=tuple(candidates), chosen=chosen,
                           runner_up=runner_up)
    return replace(plans[chosen], mapping_choice=choice)


def _rows_options(config, split, banks):
    """`rows_options`, or () when not one row fits beside `banks` banks."""
    try:
        return rows_options(config, split, banks)
    except ConfigError:
        if banks == BANKS:
            raise
        return ()
