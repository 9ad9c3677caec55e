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
    doc = Path(__file__).parent.parent / "docs" / "decoder.md"
    doc.write_text(f"# A decoder's attention in RTL\n\nGenerated by `make bench` "
                   f"(bench/bench_decoder.py); do not edit by hand.\n\n{__doc__.strip()}\n\n"
                   f"{NAME}: 4x4 int8 MACs, s = {plan.split}, r = {plan.rows_per_mac}, "
                   f"a = {plan.a}.\n\n```\n{text}\n```\n\n{note}.\n\n"
                   f"## On the paper's hardware, against FlashAttention-2\n\n"
                   f"{paper_table.__doc__.strip()} Llama-3-70B's whole attention layer: "
                   f"d = 128, 64 query heads on 8 K/V heads. bound: Q and O once, each K/V "
                   f"row once per K/V head.\n\n```\n{paper}\n```\n")
    print(f"wrote {doc}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
