"""A run split by Q blocks: a sample of its blocks (`attenio sim --blocks`) or all of them in
shards run side by side on Ray (`attenio sim --shards`).

Q blocks are independent: each reads all of K and V (with the mask, up to its last row)
and writes its own rows of O. A launch computes a contiguous range of them
(Q_BLOCK_FIRST, Q_BLOCK_COUNT; `attenio.analysis.block_range`), as the run of its rows,
so a range's O, bytes and cycles are checked as a whole run's are. A set of blocks
(`BlockSpec`) is one launch per contiguous range; a sharded run is `k` contiguous
ranges of about equal work, each simulated by its own process (a Ray task: local by
default, a cluster with `address`, as `attenio sweep` does), all on the one fast model
built before they start. The merged report holds every shard's checks, the sums of their
counters against the whole run's Plan and model, and for a failed shard the command
that reruns it alone.
"""

import re
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from attenio.analysis import block_count, block_keys
from attenio.errors import ConfigError
from attenio.model.cyclemodel import COUNTER_KEYS

from .e2e import build_fast_model, compute_bound_cycles, run_e2e, run_grouped

__all__ = ["BlockSpec", "contiguous", "shard_ranges", "range_text", "run_shards",
           "ADDITIVE"]

#: the counters a partition of the blocks sums to the whole run's: each block moves its own
#: bytes and computes in its own cycles; cycles and memory stall also hold each launch's start
ADDITIVE = ("bytes_read", "bytes_written", "pe_busy", "exp_busy")

_WORD = {"first": lambda total: 0, "last": lambda total: total - 1}


@dataclass(frozen=True)
class BlockSpec:
    """Which Q blocks of a pass to run, as `--blocks` writes it: comma-separated items, each
    `first`, `last`, a block `i`, blocks `a:b` (a to b - 1), `every k` (0, k, 2k, ...) or
    `random k` (k blocks drawn with the run's seed)."""

    text: str
    items: tuple

    @classmethod
    def parse(cls, text):
        items = []
        for raw in str(text).split(","):
            item = raw.strip().lower()
            m = re.fullmatch(r"(every|random)\s+(\S+)", item)
            if m:
                k = _count(m.group(2), f"--blocks {item!r}")
                items.append((m.group(1), k))
            elif item in _WORD:
                items.append((item,))
            elif re.fullmatch(r"\d+", item):
                items.append(("block", int(item)))
            elif re.fullmatch(r"\d+\s*:\s*\d+", item):
                a, b = (int(x) for x in item.split(":"))
                if b <= a:
                    raise ConfigError(f"--blocks {item!r}: a range a:b runs blocks a to b - 1, "
                                      f"so b must be above a")
                items.append(("range", a, b))
            else:
                raise ConfigError(f"--blocks: {raw.strip()!r} is not a block spec (first, last, "
                                  f"a block number, a:b, 'every K' or 'random K', "
                                  f"comma-separated)")
        return cls(str(text), tuple(items))

    def select(self, total, seed=0):
        """The blocks of a pass of `total` blocks this spec names, sorted; a block past the
        last is an error naming it."""
        rng = np.random.default_rng(seed)
        chosen = set()
        for kind, *args in self.items:
            if kind in _WORD:
                chosen.add(_WORD[kind](total))
            elif kind == "block":
                chosen.add(_within(args[0], total, self.text))
            elif kind == "range":
                _within(args[1] - 1, total, self.text)
                chosen.update(range(*args))
            elif kind == "every":
                chosen.update(range(0, total, args[0]))
            else:       # random
                if args[0] > total:
                    raise ConfigError(f"--blocks {self.text!r}: {args[0]} random blocks of "
                                      f"only {total}")
                chosen.update(int(b) for b in rng.choice(total, size=args[0], replace=False))
        return sorted(chosen)


def _count(text, where):
    if not re.fullmatch(r"\d+", text) or int(text) < 1:
        raise ConfigError(f"{where}: {text!r} must be a positive integer")
    return int(text)


def _within(block, total, text):
    if block >= total:
        raise ConfigError(f"--blocks {text!r}: block {block} is past the last of the {total} "
                          f"Q blocks of a pass (0 .. {total - 1})")
    return block


def contiguous(blocks):
    """Sorted blocks as the ranges (first, count) of consecutive ones: one launch each."""
    ranges = []
    for b in blocks:
        if ranges and ranges[-1][0] + ranges[-1][1] == b:
            ranges[-1][1] += 1
        else:
            ranges.append([b, 1])
    return [tuple(r) for r in ranges]


def range_text(first, count):
    """A range as `--blocks` takes it: a:b."""
    return f"{first}:{first + count}"


def shard_ranges(n, a, k, *, causal=False, n_kv=None):
    """`k` contiguous ranges (first, count) of the blocks of a pass of `n` rows in blocks of
    `a` rows, of about equal work (the K/V rows the blocks read: with the mask the later
    blocks read more), each at least one block."""
    total = block_count(n, a)
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ConfigError(f"--shards must be a positive integer, not {k!r}")
    if k > total:
        raise ConfigError(f"--shards {k}: the run has only {total} Q block(s) a pass "
                          f"(N = {n} in blocks of {a} rows), one shard a block at most")
    work = np.cumsum([keys for _, _, keys in block_keys(n, a, causal=causal, n_kv=n_kv)])
    cuts = [0]
    for i in range(1, k):
        cut = int(np.searchsorted(work, work[-1] * i / k)) + 1
        cuts.append(min(max(cut, cuts[-1] + 1), total - (k - i)))
    cuts.append(total)
    return [(lo, hi - lo) for lo, hi in zip(cuts, cuts[1:])]


def _run_shard(config, out_dir, opts, queue, index):
    """One shard, in a Ray worker: `run_e2e` of its range, its progress sent to `queue`."""
    if queue is not None:
        opts = replace(opts, progress=lambda c, w, t: queue.put_nowait((index, c, w, t)))
    report = run_e2e(config, out_dir, opts, log=lambda _: None)
    report["o"] = [np.asarray(o) for o in report["o"]]
    return report


def run_shards(config, out, opts, k, *, address=None, seed_cmd="", progress=None, log=print):
    """Run every Q block of `config`'s run in `k` shards on Ray (`shard_ranges`), each a
    process of its own on the fast model built here first; returns the merged report.

    `opts`: the run's `E2EOptions` (the shards add their range, the shared build and its C++
    level); `progress`: a callable(cycles, bytes_written, wall_s) fed the sums over the
    shards; `seed_cmd`: the command a failed shard's rerun line starts with."""
    from attenio.plan import make_plan, run_kv_len
    from attenio.sweep.runner import connect_ray, ray_module

    out = Path(out).resolve()
    w = config.workload
    plan = make_plan(config)
    n = opts.seq_len or w.seq_len
    n_kv = run_kv_len(w, n, opts.kv_len)
    group = opts.head_group or w.group
    heads = opts.heads or w.heads
    grouped = run_grouped(config, plan, heads=heads, seq_len=n, kv_len=n_kv, group=group,
                          grouped=opts.grouped)
    gb = group if grouped else 1
    ranges = shard_ranges(n, plan.a // gb, k, causal=w.causal, n_kv=n_kv)
    # the one build, before any shard starts: sized for the longest shard's run
    longest = max((plan.block_range(f, c, seq_len=n, kv_len=n_kv, grouped=grouped, group=group)
                   for f, c in ranges), key=lambda r: r.rows)
    cycles = compute_bound_cycles(plan, seq_len=longest.rows, heads=heads, causal=w.causal,
                                  kv_len=longest.n_kv, gb=gb)
    t0 = time.perf_counter()
    cxx_opt = build_fast_model(config, out, opts, cycles=cycles, log=log)
    build_s = time.perf_counter() - t0
    ray = ray_module("attenio sim --shards runs its shards")
    started = connect_ray(ray, address)
    shards, totals = [], {}
    try:
        from ray.util.queue import Queue
        queue = Queue(actor_options={"num_cpus": 0})
        remote = ray.remote(_run_shard)
        pending = {}
        for i, (first, count) in enumerate(ranges):
            shard_opts = replace(opts, blocks=((first, count),), build_dir=str(out),
                                 grouped=grouped,
                                 cxx_opt=cxx_opt, engine="fast", memory="model", progress=None)
            ref = remote.options(num_cpus=1, max_retries=0).remote(
                config, str(out / f"shard{i}"), shard_opts, queue, i)
            pending[ref] = i
        log(f"{k} shards of blocks {', '.join(range_text(*r) for r in ranges)} on Ray "
            f"({'cluster ' + address if address else 'this machine'}) ...")
        t0 = time.perf_counter()
        results = [None] * k
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
            for ref in ready:
                i = pending.pop(ref)
                try:
                    results[i] = ray.get(ref)
                except Exception as exc:        # the shard's error, not a stop
                    text = str(exc).strip().splitlines()
                    results[i] = {"error": next((ln for ln in reversed(text) if ln.strip()),
                                                type(exc).__name__)}
            while not queue.empty():
                i, c, b, t = queue.get_nowait()
                totals[i] = (c, b, t)
            if progress and totals:
                progress(sum(v[0] for v in totals.values()), sum(v[1] for v in totals.values()),
                         time.perf_counter() - t0)
        wall = time.perf_counter() - t0
    finally:
        if started:
            ray.shutdown()
    for i, ((first, count), r) in enumerate(zip(ranges, results)):
        shards.append({"first": first, "count": count, "report": r,
                       "rerun": f"{seed_cmd} --blocks {range_text(first, count)}".strip()})
    return _merge(plan, n, heads, n_kv, grouped, group, shards, wall, build_s, cxx_opt, k)


def _merge(plan, n, heads, n_kv, grouped, group, shards, wall, build_s, cxx_opt, k):
    """The sharded run's report: each shard's checks, and the sums against the whole run."""
    from attenio.model.cyclemodel import model_counters

    from .e2e import simulated_memory

    shape = dict(heads=heads, kv_len=n_kv, grouped=grouped, group=group)
    whole = model_counters(plan, seq_len=n, memory=simulated_memory(plan, "model"), **shape)
    traffic = plan.traffic_at(seq_len=n, **shape)
    ok = [s for s in shards if "error" not in s["report"]]
    failed = [s for s in shards if "error" in s["report"]]
    rows, entries = [], []
    for s in shards:
        r = s["report"]
        entry = {"first": s["first"], "count": s["count"], "rerun": s["rerun"]}
        if "error" in r:
            entry["error"] = r["error"]
        else:
            run = r["runs"][-1]
            entry.update({key: run[key] for key in (
                "row0", "rows", "bit_exact", "only_its_rows_written", "bytes_match_plan",
                "cycles_match_model", "counters", "model", "sim_cycles", "error_name")})
            entry.update({"wall_seconds": r["wall_seconds"],
                          "sim_cycles_per_second": r["sim_cycles_per_second"],
                          "sim_cycles_per_cpu_second": r["sim_cycles_per_cpu_second"]})
            entry["ok"] = (run["error_name"] == "NONE" and run["bit_exact"]
                           and run["only_its_rows_written"] and run["bytes_match_plan"]
                           and run["cycles_match_model"] is not False)
            rows.append((run["row0"], r["o"][0]))
        entries.append(entry)
    sums = {key: sum(e["counters"][key.upper()] for e in entries if "counters" in e)
            for key in COUNTER_KEYS}
    report = {
        "seq_len": n, "heads": heads, "kv_len": n_kv, "a": plan.a, "shards": entries,
        "failed": [e["rerun"] for e in entries if "error" in e or not e["ok"]],
        "counters": sums, "whole_run_model": whole,
        "plan_bytes_read": traffic.read_bytes, "plan_bytes_written": traffic.write_bytes,
        "additive_equal_whole": (not failed and all(sums[key] == whole[key]
                                                    for key in ADDITIVE)),
        "bytes_equal_plan": (not failed and sums["bytes_read"] == traffic.read_bytes
                             and sums["bytes_written"] == traffic.write_bytes),
        "all_ok": not failed and all(e["ok"] for e in entries),
        "wall_seconds": round(wall, 2), "build_seconds": round(build_s, 1), "cxx_opt": cxx_opt,
        "shard_count": k,
    }
    if not failed:
        report["o"] = np.concatenate([o for _, o in sorted(rows, key=lambda x: x[0])], axis=1)
    return report
