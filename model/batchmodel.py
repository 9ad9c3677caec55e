"""A ragged batch on paged K/V, by the cycle model: what paging costs and what batching gains.

`compare_batch` times one batch (`attenio.plan.BatchSequence`s, one launch on paged
hardware: `batch_counters`) against the same sequences

* with K and V contiguous (the same hardware without paging, `page_rows` = 0; the
  sequences still follow each other with the same turn between them): the cost of
  paging is the table beats and each block's first K row waiting for its table;
* launched one by one (each its own START and DONE on the paged hardware): each launch's
  CYCLES plus what a launch costs outside them, the controller's setup before LAUNCH
  (uncounted) and the host's turn (`host_cycles`: writing the run's registers, START, and
  seeing DONE; an assumption of the caller, the model cannot know the host's bus).

The RTL matches `batch_counters` cycle for cycle on the in-design memory
(tests/test_e2e_batch.py), so these figures are the design's, at sizes RTL simulation
cannot reach.
"""

import dataclasses

from attenio.plan import batch_traffic, make_plan

from .cyclemodel import COUNTER_KEYS, batch_counters, batch_turn, model_counters

__all__ = ["compare_batch"]


def _runs(plan, seqs, *, heads, group, grouped):
    """Each sequence's counters as a run of its own on `plan`'s hardware."""
    return [model_counters(plan, seq_len=s.seq_len, heads=heads, causal=s.causal,
                           kv_len=s.kv_len, grouped=grouped, group=group) for s in seqs]


def compare_batch(config, seqs, *, heads, group, grouped=True, host_cycles=0):
    """{batch, contiguous, separate} for `seqs` on `config`'s paged hardware (its
    `page_rows` > 0), each {cycles, bytes_read, bytes_written}, and the turn between two
    runs of a batch. `host_cycles`: what each separate launch costs the host beyond the
    accelerator's setup."""
    if not config.budget.page_rows:
        raise ValueError("compare_batch: the hardware must be paged (page_rows > 0)")
    plan = make_plan(config)
    if plan.workload.n_kv_heads != heads // group:
        raise ValueError(f"compare_batch: {heads} heads in groups of {group} need "
                         f"{heads // group} K/V heads, not {plan.workload.n_kv_heads}")
    flat = make_plan(dataclasses.replace(
        config, budget=dataclasses.replace(config.budget, page_rows=0)))
    kw = dict(heads=heads, group=group, grouped=grouped)
    batch = batch_counters(plan, seqs, **kw)
    turn = batch_turn(plan)
    contiguous = dict.fromkeys(COUNTER_KEYS, 0)
    for c in _runs(flat, seqs, **kw):
        for k in COUNTER_KEYS:
            contiguous[k] += c[k]
    contiguous["cycles"] += (len(seqs) - 1) * turn
    from attenio.hdl.controller import Controller   # the setup its blocks publish

    separate = dict.fromkeys(COUNTER_KEYS, 0)
    setup = Controller.check_cycles + Controller.setup_cycles_of(
        block_rows=plan.a, max_seq_len=plan.workload.max_keys)
    for c in _runs(plan, seqs, **kw):
        for k in COUNTER_KEYS:
            separate[k] += c[k]
    separate["cycles"] += len(seqs) * (setup + host_cycles)
    traffic = batch_traffic(plan, seqs, **kw)
    assert traffic.read_bytes == batch["bytes_read"]
    pick = lambda c: {k: c[k] for k in ("cycles", "bytes_read", "bytes_written")}
    return {"batch": pick(batch), "contiguous": pick(contiguous), "separate": pick(separate),
            "turn": turn, "launch_setup": setup, "host_cycles": host_cycles,
            "plan": plan, "traffic": traffic}
