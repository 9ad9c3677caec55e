"""A real decoder's attention shape end to end in RTL: a causal prefill and a decode step.

The shape is one K/V group of Llama-3-70B's attention (d = 128, 8 query heads
sharing each K/V head; 64 query heads and 8 K/V heads in the model), on the small
preset's 4x4 int8 array with the cache raised to 32 KiB for d = 128 rows. Two runs on
the same hardware (causal masking, KV_LEN and HEAD_GROUP are run-time registers), on
the in-design memory model with the fast engine:

* prefill: N = 256 query rows of each of the 8 heads, causal, against the K/V head;
* decode: one new query row of each head against a KV cache of N_kv = 256 rows.

Each prints whether its Q blocks serve the whole group (MODE.GROUPED: the planner's
rule, where it moves less; a block then holds the same rows of all 8 heads), cycles,
the RTL against the cycle model, bytes against the Plan, bit-exactness, and the bytes
moved against the bound of reading each K/V row once per group. A decode step grouped
reads the cache once for all 8 heads and fills 8 of a block's rows instead of 1.
"""

import dataclasses
import sys
import time
from pathlib import Path

from attenio import preset
from attenio.report import table
from attenio.model.compare import decoder_one, render_decoder
from attenio.sim.e2e import E2EOptions, run_e2e
from attenio.model.planner import choose_plan
from attenio.model.batchmodel import compare_batch
from attenio.plan import BatchSequence
from attenio.sim.batch import BatchOptions, run_batch

NAME = "llama3-70b group (d = 128, 8 query heads per K/V head)"
SEQ_LEN, HEADS, KV_HEADS, HEAD_DIM = 256, 8, 1, 128


def config():
    base = preset("small")
    c = dataclasses.replace(
        base, name="bench_decoder",
        workload=dataclasses.replace(base.workload, seq_len=SEQ_LEN, head_dim=HEAD_DIM,
                                     heads=HEADS, kv_heads=KV_HEADS),
        budget=dataclasses.replace(base.budget, cache_bytes=32 * 1024))
    plan = choose_plan(c)
    return dataclasses.replace(c, split=plan.split, rows_per_mac=plan.rows_per_mac), plan


#: the paper preset's decoder shapes: Llama-3-70B's attention (64 query heads, 8 K/V heads)
#: a causal 8K prefill, then decode steps against 8K, 32K and 128K caches
PAPER_SHAPES = [dict(seq_len=8192, causal=True), dict(seq_len=1, kv_len=8192),
                dict(seq_len=1, kv_len=32768), dict(seq_len=1, kv_len=131072)]


def paper_table():
    """AttenIO (the planner's mapping, grouped blocks where they move less) against
    FlashAttention-2 (each query head reads its K/V head) on the paper's hardware, by the
    cycle models (fair timing: both overlap memory and compute at the full bandwidth;
    `attenio.model.compare.decoder_one`, what `attenio compare` prints for these shapes)."""
    base = preset("paper")
    rows = [decoder_one(dataclasses.replace(base, workload=dataclasses.replace(
        base.workload, head_dim=128, heads=64, kv_heads=8, **kw))) for kw in PAPER_SHAPES]
    return render_decoder(rows)


#: the batch: 64 decode steps of Llama-3-70B's whole attention layer on the paper's array
BATCH, BATCH_SEED, PAGE_ROWS = 64, 48, 16
#: ShareGPT's mean prompt and response lengths in tokens as vLLM reports them (Kwon et al.,
#: "Efficient Memory Management for Large Language Model Serving with PagedAttention",
#: SOSP 2023, section 6.1, Fig. 11a); the lognormal shape and its sigma are ours
SHAREGPT_MEAN_INPUT, SHAREGPT_MEAN_OUTPUT, SIGMA = 161.31, 337.99, 1.0
#: what a separate launch costs its host beyond the accelerator's own setup, an assumption:
#: some ten 32-bit register writes, START and the DONE interrupt over PCIe, ~2 us at 1 GHz
HOST_CYCLES = 2000


def batch_lengths():
    """kv_len of `BATCH` decode steps: each request's prompt and response lengths drawn
    lognormal with ShareGPT's means, the step at a uniform point of its response."""
    import numpy as np
    rng = np.random.default_rng(BATCH_SEED)
    draw = lambda mean: rng.lognormal(np.log(mean) - SIGMA ** 2 / 2, SIGMA, BATCH)
    prompt, response = draw(SHAREGPT_MEAN_INPUT), draw(SHAREGPT_MEAN_OUTPUT)
    step = rng.random(BATCH) * response
    return [int(x) for x in np.maximum(1, np.round(prompt + step)).astype(int)]


def batch_section():
    """The batch on the paper's array (fp16, 64x32 MACs, 128 B/cycle, 512-bit AXI), d = 128,
    64 query heads on 8 K/V heads, pages of 16 rows, by the cycle model (which the RTL
    matches cycle for cycle on the in-design memory, tests/test_e2e_batch.py): one launch
    against the same sequences with contiguous K/V and against one launch a sequence."""
    kv = batch_lengths()
    base = preset("paper")
    c = dataclasses.replace(base, workload=dataclasses.replace(
        base.workload, seq_len=1, kv_len=max(kv), head_dim=128, heads=64, kv_heads=8),
        budget=dataclasses.replace(base.budget, page_rows=PAGE_ROWS))
    plan = choose_plan(c)
    c = dataclasses.replace(c, split=plan.split, rows_per_mac=plan.rows_per_mac,
                            banks=plan.banks)
    seqs = [BatchSequence(1, n) for n in kv]
    r = compare_batch(c, seqs, heads=64, group=8, grouped=True, host_cycles=HOST_CYCLES)
    bare = compare_batch(c, seqs, heads=64, group=8, grouped=True, host_cycles=0)
    b, flat, sep = r["batch"], r["contiguous"], r["separate"]
    moved = lambda x: x["bytes_read"] + x["bytes_written"]
    rows = [["one launch, paged (the batch)", f"{b['cycles']:,}", "1.0000",
             f"{moved(b):,}", f"{moved(b) / moved(b):.4f}"],
            ["the same, K/V contiguous", f"{flat['cycles']:,}",
             f"{flat['cycles'] / b['cycles']:.4f}", f"{moved(flat):,}",
             f"{moved(flat) / moved(b):.4f}"],
            ["a launch a sequence, paged, host 0", f"{bare['separate']['cycles']:,}",
             f"{bare['separate']['cycles'] / b['cycles']:.4f}", f"{moved(sep):,}",
             f"{moved(sep) / moved(b):.4f}"],
            [f"a launch a sequence, paged, host {HOST_CYCLES:,}", f"{sep['cycles']:,}",
             f"{sep['cycles'] / b['cycles']:.4f}", f"{moved(sep):,}",
             f"{moved(sep) / moved(b):.4f}"]]
    text = table(["run", "cycles", "/ batch", "bytes", "/ batch"], rows)
    paging = b["cycles"] / flat["cycles"] - 1
    summary = (
        f"{BATCH} decode steps, kv_len {min(kv)} to {max(kv)} (mean {sum(kv) / len(kv):.0f}); "
        f"mapping s = {plan.split}, r = {plan.rows_per_mac}, a = {plan.a}, B = {plan.banks}, "
        f"grouped blocks. Paging costs {100 * paging:.4f} % more cycles than contiguous K/V "
        f"(target <= 2 %) and {moved(b) - moved(flat):,} bytes (the table beats and "
        f"{BATCH} descriptors). Between two runs the batch spends {r['turn']} counted "
        f"cycles (the next descriptor's read and the setup), a separate launch "
        f"{r['launch_setup']} of setup plus its host's turn: batching gains "
        f"{sep['cycles'] - b['cycles']:,} cycles "
        f"({100 * (sep['cycles'] / b['cycles'] - 1):.2f} %) at a host turn of "
        f"{HOST_CYCLES:,} cycles, and breaks even at "
        f"{r['turn'] - r['launch_setup']} cycles a launch.")
    return text, summary, kv


def rtl_batch():
    """The issue's batch on the small paged hardware (int8 4x4, d = 16), on the fast engine:
    eight decode rows against 1 to 1,000 keys and a causal chunk of 16 rows against 80,
    8 query heads on 2 K/V heads, pages of 16 shuffled."""
    base = preset("small")
    hw = dataclasses.replace(base, name="bench_batch", workload=dataclasses.replace(
        base.workload, seq_len=1000, heads=8, kv_heads=2),
        budget=dataclasses.replace(base.budget, page_rows=PAGE_ROWS))
    seqs = [BatchSequence(1, n) for n in (1, 17, 90, 300, 512, 733, 1000, 64)] + [
        BatchSequence(16, 80, causal=True)]
    t0 = time.perf_counter()
    r = run_batch(hw, "build/bench_batch", seqs, BatchOptions(seed=1, quick_build=False),
                  log=lambda _: None)
    wall = time.perf_counter() - t0
    c = r["counters"]
    exact = all(s["bit_exact"] for s in r["sequences"])
    line = (f"RTL: {len(seqs)} sequences in one launch, {c['CYCLES']:,} cycles, RTL / model "
            f"{r['cycles_vs_model']:.4f}, bytes read {c['BYTES_READ']:,} "
            f"({'=' if c['BYTES_READ'] == r['plan_bytes_read'] else '!='} Plan), every "
            f"sequence bit-exact: {'yes' if exact else 'NO'}; {wall:.0f} s wall")
    return line, exact and c["BYTES_READ"] == r["plan_bytes_read"]


def main():
    hw, plan = config()
    print(f"{NAME}: 4x4 int8 MACs, s = {plan.split}, r = {plan.rows_per_mac}, a = {plan.a}",
          flush=True)
    fast = dict(memory="model", engine="fast")
    runs = [("prefill, causal", dict(causal=True), E2EOptions(seed=1, **fast)),
            ("decode step", {}, E2EOptions(seed=2, seq_len=1, kv_len=SEQ_LEN, **fast))]
    rows, ok = [], True
    for label, workload, opts in runs:
        c = dataclasses.replace(hw, workload=dataclasses.replace(hw.workload, **workload))
        print(f"{label}: simulating ...", flush=True)
        t0 = time.perf_counter()
        r = run_e2e(c, "build/bench_decoder", opts, log=lambda _: None)
        wall = time.perf_counter() - t0
        run = r["runs"][0]
        cyc = run["counters"]["CYCLES"]
        moved = r["plan_bytes_read"] + r["plan_bytes_written"]
        n, n_kv = r["seq_len"], r["kv_len"]
        # the bound: Q and O once, each K/V row once per K/V head (not per query head);
        # a causal prefill's last row sees every key, so all N_kv rows are read
        bound = 2 * HEADS * n * HEAD_DIM + 2 * KV_HEADS * n_kv * HEAD_DIM
        ok &= run["bit_exact"] and run["bytes_match_plan"]
        rows.append([label, "yes" if r["grouped"] else "no", n, n_kv, cyc,
                     f"{r['cycles_vs_model']:.4f}",
                     "=" if run["bytes_match_plan"] else "!=",
                     "yes" if run["bit_exact"] else "NO", moved, f"{moved / HEADS:.0f}",
                     f"{moved / bound:.2f}", f"{r['pe_busy_fraction']:.3f}", f"{wall:.0f}"])
    text = table(["run", "grouped", "N", "N_kv", "cycles", "RTL / model", "bytes vs Plan",
                  "bit-exact",
                  "bytes", "bytes / query head", "bytes / bound", "PE busy", "wall s"], rows)
    note = ("bound: Q and O once, each K/V row read once per K/V head (a block serving the "
            "whole group of 8); int8, 1 byte an element")
    print(text + "\n" + note)
    print("\nThe paper's hardware (64x32 MACs, fp16, 128 B/cycle), Llama-3-70B's attention "
          "(d = 128, 64 query heads, 8 K/V heads), cycle models ...", flush=True)
    paper = paper_table()
    print(paper)
    print("\nA ragged decode batch on paged K/V ...", flush=True)
    batch, summary, _ = batch_section()
    print(batch + "\n" + summary)
    rtl_line, rtl_ok = rtl_batch()
    ok &= rtl_ok
    print(rtl_line)
    doc = Path(__file__).parent.parent / "docs" / "decoder.md"
    doc.write_text(f"# A decoder's attention in RTL\n\nGenerated by `make bench` "
                   f"(bench/bench_decoder.py); do not edit by hand.\n\n{__doc__.strip()}\n\n"
                   f"{NAME}: 4x4 int8 MACs, s = {plan.split}, r = {plan.rows_per_mac}, "
                   f"a = {plan.a}.\n\n```\n{text}\n```\n\n{note}.\n\n"
                   f"## On the paper's hardware, against FlashAttention-2\n\n"
                   f"{paper_table.__doc__.strip()} Llama-3-70B's whole attention layer: "
                   f"d = 128, 64 query heads on 8 K/V heads. bound: Q and O once, each K/V "
                   f"row once per K/V head.\n\n```\n{paper}\n```\n\n"
                   f"## A ragged decode batch over a paged K/V cache\n\n"
                   f"{batch_section.__doc__.strip()} Each request's prompt and response "
                   f"lengths are drawn lognormal (sigma {SIGMA}, seed {BATCH_SEED}) with the "
                   f"means vLLM reports for ShareGPT (Kwon et al., SOSP 2023, Fig. 11a: "
                   f"{SHAREGPT_MEAN_INPUT} and {SHAREGPT_MEAN_OUTPUT} tokens), the step at a "
                   f"uniform point of the response; the shape of the distribution is our "
                   f"assumption, its means are the dataset's. A separate launch's host turn "
                   f"({HOST_CYCLES:,} cycles) is an assumption too.\n\n```\n{batch}\n```\n\n"
                   f"{summary}\n\n{rtl_batch.__doc__.strip()}\n\n{rtl_line}.\n")
    print(f"wrote {doc}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
