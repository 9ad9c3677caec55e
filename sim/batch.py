"""A ragged batch end to end: several sequences of their own lengths in one launch, their
K/V in pages of one pool in a seeded random order, run from a descriptor list with one DONE
(docs/microarchitecture.md, "Paged K/V and ragged batches").

`run_batch` lays the batch out in memory (Q of each sequence, the page pool, each
sequence's block table, the descriptors, O of each), programs the shared registers and
DESC_BASE / DESC_COUNT, runs the design once on the fast engine or the cocotb bench, and
checks every sequence's O bit for bit against the golden model, the byte counters against
the Plan (`attenio.plan.batch_traffic`) and the cycle counters against the model
(`attenio.model.cyclemodel.batch_counters`).
"""

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from attenio.errors import ConfigError
from attenio.model.cyclemodel import batch_counters
from attenio.plan import BatchSequence, batch_traffic
from attenio.regmap import (DESCRIPTOR_BYTES, DescFlag, ErrorCode, descriptor_stride,
                            pack_descriptor, pack_table, register_map,
                            table_pages, unpack_descriptor)

from . import fast
from .e2e import cached_verilog, cocotb_build_dir, model_depth, simulated_memory
from .run_data import RunData
from .runner import run_bench
from .tb.counters import counter_names

__all__ = ["BatchOptions", "batch_image", "run_batch"]


@dataclass
class BatchOptions:
    seed: int = 1
    heads: int = 8              # query heads of every sequence
    head_group: int = 4         # query heads a K/V head (HEAD_GROUP)
    grouped: bool = True        # MODE.GROUPED of every sequence
    head_scales: bool = False   # DescFlag.HEAD_SCALES of every sequence: the batch's one
                                # SCALE_C_TABLE, a c a head
    engine: str = "fast"        # "fast" (the in-design memory) or "cocotb"
    simulator: str = "verilator"
    memory: str = "model"       # "model" or "axiram" (cocotb only)
    latency: tuple = (0.0, 0)   # AxiRam's random stalls (probability, max cycles)
    backpressure: float = 0.0
    quick_build: bool = True
    # malformed batches, one launch each before the good one: each a descriptor list of
    # the good one's first `upto` descriptors, the last of them changed by `fields` (e.g.
    # {"kv_len": 0}), or with its table's entry `bad_page` = (page, address)
    bad_batches: tuple = ()


def _align(x, to):
    return -(-x // to) * to


def batch_image(plan, seqs, datas, *, heads, group, grouped, rng, bad_batches=()):
    """Memory of a batch: (segments, registers, [(q_base, o_base)], the O region, the
    descriptors' bytes, the register overrides of each of `bad_batches`). Q and O are [head][row][d] with one head stride for the batch (the
    longest sequence's rows); every sequence's pages are drawn from one pool in a random
    order (`rng`), a slot holding P rows of every K head, then of every V head."""
    w, b = plan.workload, plan.budget
    beat, page_rows = b.axi_data_bits // 8, b.page_rows
    fmt = plan.config.format
    row, o_row = w.head_dim * fmt.element_bytes, w.head_dim * fmt.out_bytes
    kv_heads = heads // group
    n_max = max(s.seq_len for s in seqs)
    q_hs, o_hs = n_max * row, n_max * o_row
    head_bytes = page_rows * row
    slot = 2 * kv_heads * head_bytes
    segments, places = [], []
    addr = 0x1000
    for data in datas:                      # Q
        places.append([addr])
        for h in range(heads):
            segments.append((addr + h * q_hs, data.q[h].astype(data.dtype).tobytes()))
        addr = _align(addr + heads * q_hs, 0x1000)
    pages = [table_pages(s.kv_len, page_rows) for s in seqs]
    order = rng.permutation(sum(pages))     # the pool's slots, shuffled over the batch
    pool, tables, used = addr, [], 0
    for s, data, n_pages in zip(seqs, datas, pages):
        table = [pool + int(i) * slot for i in order[used:used + n_pages]]
        used += n_pages
        tables.append(table)
        for p, slot_addr in enumerate(table):
            rows = slice(p * page_rows, min((p + 1) * page_rows, s.kv_len))
            for h in range(kv_heads):
                segments.append((slot_addr + h * head_bytes,
                                 data.k[h, rows].astype(data.dtype).tobytes()))
                segments.append((slot_addr + (kv_heads + h) * head_bytes,
                                 data.v[h, rows].astype(data.dtype).tobytes()))
    addr = _align(pool + sum(pages) * slot, 0x1000)
    table_at = []
    for table in tables:
        table_at.append(addr)
        segments.append((addr, pack_table(table)))
        addr = _align(addr + 4 * len(table), beat)
    stride = descriptor_stride(beat)
    desc_base = addr = _align(addr, 0x100)
    addr = desc_base + stride * len(seqs)

    def place_o(addr):
        addr = _align(addr, 0x1000)
        start = addr
        for place in places:                # O, last: the region the runs may write
            place.append(addr)
            addr = _align(addr + heads * o_hs, 0x1000)
        return start, addr

    # O's place is known before the descriptors that name it: after the descriptor lists
    o_start, o_end = place_o(addr + 0x1000 * (1 + len(bad_batches)))
    descs = b"".join(pack_descriptor(
        flags=(DescFlag.CAUSAL if s.causal else 0) | (DescFlag.GROUPED if grouped else 0)
        | (DescFlag.HEAD_SCALES if datas[0].head_scales else 0),
        seq_len=s.seq_len, kv_len=s.kv_len, heads=heads, q_base=q, o_base=o,
        table=t, table_len=len(table)).ljust(stride, b"\0")
        for s, (q, o), t, table in zip(seqs, places, table_at, tables))
    segments.append((desc_base, descs))
    bad_regs = []
    for bad in bad_batches:     # after the good list, before O
        upto = bad["upto"]
        raw = [unpack_descriptor(descs[stride * i:stride * i + DESCRIPTOR_BYTES])
               for i in range(upto)]
        raw[-1].update(bad.get("fields", {}))
        if "bad_page" in bad:
            page, where = bad["bad_page"]
            table = list(tables[upto - 1])
            table[page] = where
            t_addr = _align(addr, beat)
            segments.append((t_addr, pack_table(table)))
            raw[-1]["table"] = t_addr
            addr = t_addr + 4 * len(table)
        list_addr = _align(addr, 0x100)
        segments.append((list_addr, b"".join(pack_descriptor(**d).ljust(stride, b"\0")
                                             for d in raw)))
        bad_regs.append({"DESC_BASE": list_addr, "DESC_COUNT": upto})
        addr = list_addr + stride * upto
        assert addr <= o_start, "the malformed descriptor lists outgrew their room"
    regs = {"HEADS": heads, "HEAD_GROUP": group, **datas[0].registers(),
            "Q_HEAD_STRIDE": q_hs, "Q_ROW_STRIDE": row, "O_HEAD_STRIDE": o_hs,
            "O_ROW_STRIDE": o_row, "K_BASE": 0, "K_HEAD_STRIDE": head_bytes,
            "K_ROW_STRIDE": row, "V_BASE": kv_heads * head_bytes,
            "V_HEAD_STRIDE": head_bytes, "V_ROW_STRIDE": row,
            "DESC_BASE": desc_base, "DESC_COUNT": len(seqs),
            "PAGE_LIMIT": _align(o_end, 0x1000)}
    return segments, regs, places, (o_start, o_end - o_start), descs, bad_regs


def run_batch(config, out_dir, seqs, opts=None, *, log=print):
    """Simulate the batch `seqs` ([BatchSequence]) on the paged hardware of `config`; returns
    the report (per sequence: bit-exact; bytes and counters against Plan and model)."""
    opts = opts or BatchOptions()
    if not config.budget.page_rows:
        raise ConfigError("a batch runs on paged hardware: set --page-rows")
    out_dir = Path(out_dir).resolve()
    out_dir.mkdir(parents=True, exist_ok=True)
    w = config.workload
    for s in seqs:
        if not 1 <= s.seq_len <= w.max_keys or not 1 <= s.kv_len <= w.max_keys:
            raise ConfigError(f"a sequence of {s.seq_len} rows against {s.kv_len} keys does "
                              f"not fit the hardware's {w.max_keys}")
    rng = np.random.default_rng(opts.seed)
    datas = [RunData.make(config.format, head_dim=w.head_dim, seq_len=s.seq_len,
                          kv_len=s.kv_len, heads=opts.heads, group=opts.head_group,
                          seed=opts.seed * 1000 + i, head_scales=opts.head_scales)
             for i, s in enumerate(seqs)]
    # SCALE_C and SCALE_C_TABLE are the batch's: every sequence computes with the first
    # one's constants
    datas = [dataclasses.replace(d, c=datas[0].c, head_c=datas[0].head_c) for d in datas]
    plan, verilog, toplevel = cached_verilog(config, out_dir, opts.memory, log)
    segments, regs, places, o_region, _, bad_regs = batch_image(
        plan, seqs, datas, heads=opts.heads, group=opts.head_group, grouped=opts.grouped,
        rng=rng, bad_batches=opts.bad_batches)
    beat = plan.budget.axi_data_bits // 8
    mem_size = regs["PAGE_LIMIT"]
    if opts.memory == "model" and mem_size > model_depth(plan) * beat:
        raise ConfigError(f"the batch needs {mem_size} bytes of memory, the memory model "
                          f"holds {model_depth(plan) * beat}")
    log(f"batch of {len(seqs)} sequences, {opts.heads} heads on {opts.heads // opts.head_group}"
        f" K/V heads, pages of {plan.budget.page_rows} rows shuffled (seed {opts.seed})")
    rmap = register_map(plan)
    traffic = batch_traffic(plan, seqs, heads=opts.heads, group=opts.head_group,
                            grouped=opts.grouped)
    params = {
        "image": str(out_dir / "sim_image.npz"), "results": str(out_dir / "sim_results.json"),
        "memory": opts.memory, "beat": beat, "mem_size": mem_size,
        "regs": {name: [rmap.offset(name), value] for name, value in regs.items()},
        "regmap": {r.name: r.offset for r in rmap}, "o_region": list(o_region),
        "runs": [{name: [rmap.offset(name), value] for name, value in bad.items()}
                 for bad in bad_regs] + [{}],
        "counters": list(counter_names(rmap)),
        "progress_file": str(out_dir / "sim_progress.txt"), "seed": opts.seed,
        "latency": list(opts.latency), "backpressure": opts.backpressure,
        "progress_cycles": 20000, "expect_bytes_written": traffic.write_bytes,
        "max_cycles": int(200 * sum(s.seq_len * opts.heads + 2 * s.kv_len * opts.heads
                                    for s in seqs) * w.head_dim + 100000),
    }
    t0 = time.perf_counter()
    if opts.engine == "fast":
        exe = fast.build(verilog, cache_dir=out_dir / "sim_fast" / "models",
                         cxx_opt="-O0" if opts.quick_build else "-O2", log=log,
                         toplevel=toplevel, beat=beat, depth=model_depth(plan),
                         addr_width=rmap.addr_width, threads=1)
        got = fast.run(exe, params, out_dir / "sim_fast", segments,
                       progress_file=params["progress_file"])
    else:
        import json
        np.savez(params["image"], addrs=np.array([a for a, _ in segments], np.int64),
                 lengths=np.array([len(x) for _, x in segments], np.int64),
                 data=np.frombuffer(b"".join(x for _, x in segments), np.uint8))
        build_dir, design = cocotb_build_dir(out_dir / f"sim_{opts.simulator}_{opts.memory}",
                                              verilog)
        run_bench(simulator=opts.simulator, verilog_sources=[design], toplevel=toplevel,
                  module="attenio.sim.benches.bench_top", build_dir=build_dir, params=params,
                  seed=opts.seed, quick_build=opts.quick_build)
        got = json.loads(Path(params["results"]).read_text())
        for r in got["runs"]:
            r["o_bytes"] = bytes.fromhex(r.pop("o"))
    wall = time.perf_counter() - t0
    *bad, good = got["runs"]
    blob, d = good["o_bytes"], w.head_dim
    out_dtype = datas[0].out_dtype
    n_max = max(s.seq_len for s in seqs)
    per_seq = []
    for s, data, (_, o_base) in zip(seqs, datas, places):
        o = np.empty((opts.heads, s.seq_len, d), out_dtype.newbyteorder("="))
        for h in range(opts.heads):
            for i in range(s.seq_len):
                at = o_base - o_region[0] + (h * n_max + i) * d * out_dtype.itemsize
                o[h, i] = np.frombuffer(blob[at:at + d * out_dtype.itemsize], out_dtype)
        expect = data.golden(plan, causal=s.causal)
        per_seq.append({"seq_len": s.seq_len, "kv_len": s.kv_len, "causal": s.causal,
                        "bit_exact": bool(np.array_equal(o, expect)),
                        "mismatches": int(np.sum(o != expect))})
    counters = good["counters"]
    model = batch_counters(plan, seqs, heads=opts.heads, group=opts.head_group,
                           grouped=opts.grouped, memory=simulated_memory(plan, opts.memory))
    return {
        "config": plan.config.name, "engine": opts.engine, "simulator": opts.simulator,
        "memory": opts.memory, "seed": opts.seed, "page_rows": plan.budget.page_rows,
        "heads": opts.heads, "head_group": opts.head_group, "grouped": opts.grouped,
        "head_scales": opts.head_scales,
        "head_c": list(datas[0].head_c) if opts.head_scales else [int(datas[0].c)],
        "sequences": per_seq, "error": ErrorCode(good["error"]).name,
        "status": good["status"], "counters": counters,
        "bad_runs": [{"error": ErrorCode(r["error"]).name, "status": r["status"],
                      "counters": r["counters"], "o_untouched": r["o_untouched"]}
                     for r in bad],
        "plan_bytes_read": traffic.read_bytes, "plan_bytes_written": traffic.write_bytes,
        "model": model, "cycles_vs_model": counters["CYCLES"] / model["cycles"],
        "wall_seconds": round(wall, 2),
    }
