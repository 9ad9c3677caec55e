"""The `attenio` command: the user's face on every floor of the project.

Bad input gets one line on stderr and exit status 2, never a traceback.
"""

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from .errors import ConfigError
from .options import (Parser, add_lut_mul_width, add_shared_options, batch_from_args,
                      cache_kib_list,
                      choose_plan, config_from_args, int_list, non_negative_int, one_line,
                      planned_config, positive_int, positive_number, probability, progress,
                      seed_list, thread_count)

__all__ = ["main", "MAX_COMPARISONS"]

#: The most rows one `attenio compare` models (sequence lengths x head dimensions x budgets):
#: each runs the planner and the cycle models of every dataflow, about a second apiece, so a
#: longer list is a typo or a sweep (`attenio sweep` runs grids on every core).
MAX_COMPARISONS = 1000


def _usable_dir(path):
    """`path`, once it is known that a command can write there: an existing directory, or a
    path whose nearest existing ancestor is a writable directory. Checked before any work,
    so an output that cannot be (a file, a link to nowhere, a path under a file, a
    directory without write permission) is one line (ConfigError), not a failure after
    minutes of work."""
    path = Path(path)
    where = f"output directory {str(path)!r}"
    try:
        nearest = path
        while not (nearest.exists() or nearest.is_symlink()) and nearest != nearest.parent:
            nearest = nearest.parent
        if not nearest.is_dir():
            what = "" if nearest == path else f" is under {str(nearest)!r}, which"
            raise ConfigError(f"{where}{what} is not a directory")
    except OSError as exc:
        raise ConfigError(f"{where} cannot be used: {exc.strerror or exc}") from None
    if not os.access(nearest, os.W_OK | os.X_OK):
        what = "" if nearest == path else f" cannot be made: {str(nearest)!r}"
        raise ConfigError(f"{where}{what} is not writable")
    return path


def _out_dir(args, config, default=None):
    """The output directory of a command: -o, or `default` (build/<name>), checked
    (`_usable_dir`)."""
    return _usable_dir(args.out or default or Path("build") / config.name)


def _show(args, data, render, paths):
    """The JSON with --json; else the tables `render()` makes and the files written."""
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(render())
        print(f"\nwrote {', '.join(str(p) for p in paths)}")


def _batch(args, seqs, command):
    """`attenio plan` and `compare` of a ragged batch (--kv-lens, or a TOML [batch]): its bytes
    by tensor (the Plan's: pages, table beats, descriptors) and its cycles (the cycle model),
    one launch on paged K/V against the same sequences contiguous and against a launch a
    sequence (`attenio.model.batchmodel.compare_batch`)."""
    from .model.batchmodel import compare_batch
    from .report import table

    config = config_from_args(args)
    if not config.budget.page_rows:
        raise ConfigError("a batch (--kv-lens or [batch]) runs on paged K/V: add --page-rows "
                          "(e.g. 16)")
    w = config.workload
    config = dataclasses.replace(config, workload=dataclasses.replace(
        w, seq_len=max(s.seq_len for s in seqs), kv_len=max(s.kv_len for s in seqs),
        causal=False))
    plan = choose_plan(config)
    config = dataclasses.replace(config, split=plan.split, rows_per_mac=plan.rows_per_mac,
                                 banks=plan.banks)
    group = w.group
    grouped = plan.grouped
    try:
        r = compare_batch(config, seqs, heads=w.heads, group=group, grouped=grouped)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    out = _out_dir(args, config, Path("build") / config.name / command)
    moved = lambda x: x["bytes_read"] + x["bytes_written"]
    data = {"sequences": [dataclasses.asdict(s) for s in seqs], "heads": w.heads,
            "kv_heads": w.n_kv_heads, "grouped": grouped, "page_rows": config.budget.page_rows,
            "mapping": {"a": plan.a, "split": plan.split, "rows_per_mac": plan.rows_per_mac,
                        "banks": plan.banks},
            **{k: r[k] for k in ("batch", "contiguous", "separate", "turn", "launch_setup")},
            "bytes_by_tensor": {t.tensor: t.bytes for t in r["traffic"].reads + r["traffic"].writes}}
    out.mkdir(parents=True, exist_ok=True)
    path = out / "batch.json"
    path.write_text(json.dumps(data, indent=2) + "\n")
    b = r["batch"]
    rows = [[label, f"{x['cycles']:,}", f"{x['cycles'] / b['cycles']:.4f}", f"{moved(x):,}",
             f"{moved(x) / moved(b):.4f}"]
            for label, x in (("one launch, paged K/V", b),
                             ("the same, K/V contiguous", r["contiguous"]),
                             ("a launch a sequence (host's turn not counted)", r["separate"]))]
    _show(args, data, lambda: (
        f"a ragged batch of {len(seqs)} sequences (N_kv {min(s.kv_len for s in seqs)} to "
        f"{max(s.kv_len for s in seqs)}), {w.heads} query heads on {w.n_kv_heads} K/V heads, "
        f"pages of {config.budget.page_rows} rows; a = {plan.a} (s = {plan.split}, "
        f"r = {plan.rows_per_mac}), {'grouped' if grouped else 'blocks of one head'}\n"
        + table(["run", "cycles (model)", "/ batch", "bytes (Plan)", "/ batch"], rows)
        + "\nbytes by tensor: " + ", ".join(f"{k} {v:,}" for k, v in
                                            data["bytes_by_tensor"].items())
        + f"\nbetween two runs the batch spends {r['turn']} cycles (the next descriptor, "
        f"the setup); a separate launch {r['launch_setup']} of setup plus its host's turn"),
        [path])
    return 0


def cmd_plan(args):
    from .model.compare import formats_one, formats_table
    from .report import plan_json, plan_report, table

    seqs = batch_from_args(args)
    if seqs:
        return _batch(args, seqs, "plan")
    config = config_from_args(args)
    out = _out_dir(args, config)
    plan = choose_plan(config)
    data = plan_json(plan)
    # the same workload and budget in every format of the table, each as the planner maps it
    data["formats"] = formats_one(config)
    out.mkdir(parents=True, exist_ok=True)
    (out / "plan.json").write_text(json.dumps(data, indent=2) + "\n")
    headers, cells = formats_table(data["formats"])
    _show(args, data, lambda: (
        plan_report(plan) + f"\n\nEvery number format on this budget, each as the planner maps "
        f"it (traffic against {config.format.name}'s)\n" + table(headers, cells)),
        [out / "plan.json"])
    return 0


def cmd_gen(args):
    from .gen.build import generate_complete

    config = config_from_args(args)
    out = _out_dir(args, config)
    config = planned_config(config)
    summary = generate_complete(config, out, run_lint=args.lint, log=progress)
    print(f"wrote {summary['verilog']} ({summary['verilog_bytes']} bytes, converted in "
          f"{summary['convert_seconds']} s, peak RSS {summary['peak_rss_mib']} MiB)")
    for key in ("plan", "regmap_json", "regmap_c_header", "regmap_markdown", "report"):
        print(f"wrote {summary[key]}")
    print(f"wrote {', '.join(summary['constraints'])} (clock constraints)")
    if args.lint:
        print(f"verilator --lint-only -Wall: {'clean' if summary['lint_ok'] else 'FAILED'} "
              f"(waivers and their reasons in report.md; log in lint.log)")
        return 0 if summary["lint_ok"] else 1
    return 0


def _sim_batch(args, seqs):
    """`attenio sim --kv-lens ...`: the ragged batch in one launch on paged hardware, its
    pages shuffled (seeded), every sequence against the golden model (`attenio.sim.batch`)."""
    from .sim.batch import BatchOptions, run_batch

    config = config_from_args(args)
    if not config.budget.page_rows:
        raise ConfigError("a batch (--kv-lens or [batch]) runs on paged K/V: add --page-rows")
    w = config.workload
    if args.inputs or args.latency_prob or args.latency_max or args.backpressure:
        raise ConfigError("a batch runs on generated inputs and the in-design memory (no "
                          "--inputs, --latency-*, --backpressure)")
    config = dataclasses.replace(config, workload=dataclasses.replace(
        w, seq_len=max(w.seq_len, *(s.seq_len for s in seqs)),
        kv_len=max(w.n_kv, *(s.kv_len for s in seqs)), causal=False))
    config = planned_config(config)
    plan = choose_plan(config)
    out = _out_dir(args, config)
    engine = "cocotb" if args.engine == "cocotb" or args.simulator != "verilator" else "fast"
    opts = BatchOptions(seed=args.seed, heads=w.heads, head_group=w.group,
                        grouped=plan.grouped, engine=engine, simulator=args.simulator,
                        head_scales=args.head_scales)
    try:
        r = run_batch(config, out, seqs, opts, log=progress)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    c, exact = r["counters"], all(s["bit_exact"] for s in r["sequences"])
    print(f"\na batch of {len(seqs)} sequences in one launch, {w.heads} heads on "
          f"{w.n_kv_heads} K/V heads, pages of {r['page_rows']} rows shuffled (seed "
          f"{r['seed']}), {r['engine']} on {r['simulator']}: {r['error']}")
    for i, s in enumerate(r["sequences"]):
        print(f"  {i}: N = {s['seq_len']}, N_kv = {s['kv_len']}{', causal' if s['causal'] else ''}"
              f": {'bit-exact' if s['bit_exact'] else 'MISMATCH'}")
    print(f"  cycles {c['CYCLES']} (model {r['model']['cycles']}, RTL/model "
          f"{r['cycles_vs_model']:.4f}); bytes read {c['BYTES_READ']} (Plan "
          f"{r['plan_bytes_read']}), written {c['BYTES_WRITTEN']} (Plan "
          f"{r['plan_bytes_written']}); {r['wall_seconds']} s")
    (out / "sim_batch_report.json").write_text(json.dumps(r, indent=2, default=str) + "\n")
    ok = (exact and r["error"] == "NONE" and c["BYTES_READ"] == r["plan_bytes_read"]
          and c["BYTES_WRITTEN"] == r["plan_bytes_written"])
    return 0 if ok else 1


def cmd_sim(args):
    from .plan import make_plan
    from .sim.capacity import check_fits
    from .sim.e2e import MODEL_TOLERANCE, E2EOptions, choose_engine, run_e2e
    from .sim.progress import ProgressBar
    from .sim.run_data import RunData, input_shapes, load_inputs
    from .sim.runner import SimulatorMissing

    seqs = batch_from_args(args)
    if seqs:
        if args.blocks or args.shards:
            raise ConfigError("--blocks and --shards split one run; a batch (--kv-lens) runs "
                              "every sequence whole (BLOCK_RANGE_IN_BATCH)")
        return _sim_batch(args, seqs)
    if args.blocks and args.shards:
        raise ConfigError("--blocks runs a sample of the blocks, --shards all of them: give one")
    if args.address and not args.shards:
        raise ConfigError("--address is the Ray cluster of --shards")
    spec = None
    if args.blocks:
        from .sim.shards import BlockSpec
        spec = BlockSpec.parse(args.blocks)     # a bad spec before anything is elaborated
    config = config_from_args(args)
    out = _out_dir(args, config)
    # What cannot run is refused before the planner and the elaboration: an output that
    # cannot be written, a bad inputs file (its shapes read from the headers, no array
    # loaded), and a run too large for this machine's memory.
    w = config.workload
    n, heads, n_kv, kv_heads = w.seq_len, w.heads, w.kv_len, w.n_kv_heads
    if args.inputs:
        shapes = input_shapes(args.inputs, head_dim=w.head_dim, max_keys=w.max_keys)
        (heads, n, _), (kv_heads, n_kv, _) = shapes["q"][0], shapes["k"][0]
    engine, memory, why = choose_engine(make_plan(config), seq_len=n, heads=heads,
                                        engine=args.engine, memory=args.memory,
                                        simulator=args.simulator,
                                        protocol=bool(args.latency_prob or args.latency_max
                                                      or args.backpressure))
    if args.shards:
        if engine != "fast":
            raise ConfigError(f"--shards runs each shard on the fast engine, not {engine} "
                              f"(no --engine cocotb, --memory axiram, --simulator icarus, random "
                              f"latency or back-pressure)")
        if args.inputs:
            raise ConfigError("--shards runs on generated inputs (no --inputs)")
    fits = dict(seq_len=n, heads=heads, engine=engine, memory=memory, kv_len=n_kv,
                kv_heads=kv_heads)
    if spec is None:    # else on the planner's blocks, below: the golden model computes theirs
        check_fits(make_plan(config), **fits)
    if args.inputs:     # the values (NaN, scales, the format's range), now that they fit
        RunData.make(config.format, head_dim=w.head_dim,
                     inputs=load_inputs(args.inputs, head_dim=w.head_dim),
                     head_scales=args.head_scales)
    config = planned_config(config)
    progress(f"engine: {engine} ({why})")
    plan = make_plan(config)
    spans = _block_spans(spec, config, args.seed, n=n, heads=heads, n_kv=n_kv, kv_heads=kv_heads)
    ranges = None if spans is None else [(r.first, r.count) for r in spans]
    if spans is not None:
        check_fits(plan, **fits, golden_rows=sum(r.rows for r in spans))
    written = (plan.traffic_at(seq_len=n, heads=heads).write_bytes if ranges is None else
               sum(plan.traffic_at(seq_len=r.rows, heads=heads, kv_len=r.n_kv).write_bytes
                   for r in spans))
    bar = ProgressBar(written, label="  ")
    opts = E2EOptions(simulator=args.simulator, seed=args.seed, inputs=args.inputs,
                      input_kind=args.input_kind, latency=(args.latency_prob, args.latency_max),
                      backpressure=args.backpressure, memory=memory, engine=engine,
                      threads=args.threads, progress=bar, verbose=args.verbose,
                      blocks=ranges, head_scales=args.head_scales)
    if args.shards:
        return _sim_shards(args, config, out, dataclasses.replace(opts, progress=None), bar)
    try:
        report = run_e2e(config, out, opts, log=progress)
    except SimulatorMissing as exc:
        raise ConfigError(str(exc)) from None
    finally:
        bar.close()
    if ranges is not None:
        return _print_ranges(report, out)
    run = report["runs"][0]
    c = run["counters"]
    engine = ("the fast C++ harness" if report["engine"] == "fast"
              else f"cocotb on {report['memory']}")
    print(f"\nN = {report['seq_len']}, N_kv = {report['kv_len']}, heads = {report['heads']} "
          f"({report['kv_heads']} K/V), d = {report['head_dim']}, "
          f"a = {report['a']}{', causal' if report['causal'] else ''}"
          f"{', grouped blocks (MODE.GROUPED)' if report['grouped'] else ''}"
          f"{', a scale a head (MODE.HEAD_SCALES)' if report['head_scales'] else ''}, "
          f"simulator {report['simulator']} ({engine}), seed {report['seed']}")
    print(f"  output: {'bit-exact' if run['bit_exact'] else 'MISMATCH'} against the golden model "
          f"({run['mismatches']} differing elements)")
    print(f"  cycles {c['CYCLES']}, PE busy {report['pe_busy_fraction']:.1%}, EXP busy "
          f"{report['exp_busy_fraction']:.1%}, memory stall {report['mem_stall_fraction']:.1%}")
    print(f"  bytes read {c['BYTES_READ']} (Plan {report['plan_bytes_read']}), written "
          f"{c['BYTES_WRITTEN']} (Plan {report['plan_bytes_written']}): "
          f"{'equal' if run['bytes_match_plan'] else 'DIFFERENT'}")
    print(f"  cycles / max(compute bound {report['compute_bound_cycles']}, memory bound "
          f"{report['memory_bound_cycles']}) = {report['cycles_over_bound']:.3f}")
    if report.get("model"):
        agrees = {True: "", None: ", random memory latency: not compared",
                  False: f": MORE THAN {MODEL_TOLERANCE:.0%} APART"}[report["model_agrees"]]
        print(f"  cycle model: {report['model']['cycles']} cycles (RTL/model = "
              f"{report['cycles_vs_model']:.4f}{agrees})")
    print(f"  wall time {report['wall_seconds']} s with the build, {report['sim_cycles_per_second']} "
          f"simulated cycles/s in the runs; wrote {out / 'sim_report.json'} and {out / 'sim_outputs.npz'}")
    return 0 if (run["bit_exact"] and run["bytes_match_plan"]
                 and report.get("model_agrees") is not False) else 1


def _block_spans(spec, config, seed, *, n, heads, n_kv, kv_heads):
    """The `BlockRange`s (one launch each) of the blocks `spec` names (a `BlockSpec`, or None:
    the whole run, None) on `config`'s Plan, in blocks of a div gb rows as the run groups."""
    if spec is None:
        return None
    from .analysis import block_count
    from .plan import make_plan
    from .sim.e2e import run_grouped
    from .sim.shards import contiguous

    plan = make_plan(config)
    group = heads // kv_heads
    grouped = run_grouped(config, plan, heads=heads, seq_len=n, kv_len=n_kv or n, group=group)
    gb = group if grouped else 1
    ranges = contiguous(spec.select(block_count(n, plan.a // gb), seed))
    return [plan.block_range(f, c, seq_len=n, kv_len=n_kv, grouped=grouped, group=group)
            for f, c in ranges]


def _counters_line(c, model):
    return (f"cycles {c['CYCLES']:,} (model {model['cycles']:,}), PE busy {c['PE_BUSY']:,}, "
            f"bytes read {c['BYTES_READ']:,}, written {c['BYTES_WRITTEN']:,}")


def _print_ranges(report, out):
    """`attenio sim --blocks`: each launch (a contiguous range of blocks) and the whole run by
    the model; 0 if every range is bit-exact, bytes equal to the Plan, counters to the model."""
    from .sim.shards import range_text

    n, total = report["seq_len"], report["blocks_per_pass"]
    print(f"\nN = {n:,}, N_kv = {report['kv_len']:,}, heads = {report['heads']}, "
          f"d = {report['head_dim']}, a = {report['a']}{', causal' if report['causal'] else ''}"
          f"{', grouped blocks' if report['grouped'] else ''}"
          f"{', a scale a head' if report['head_scales'] else ''}: blocks "
          f"{', '.join(map(str, report['blocks']))} of {total:,} a pass, in "
          f"{len(report['runs'])} launch(es), seed {report['seed']}")
    ok = True
    for r in report["runs"]:
        if r["bad"]:
            continue
        agree = r["cycles_match_model"]
        ok &= (r["error_name"] == "NONE" and r["bit_exact"] and r["only_its_rows_written"]
               and r["bytes_match_plan"] and agree is not False)
        exact = "bit-exact" if r["bit_exact"] else f"MISMATCH ({r['mismatches']} elements)"
        model = {True: "= model", None: "not compared", False: "!= MODEL"}[agree]
        print(f"  blocks {range_text(r['first'], r['count'])} (rows {r['row0']:,} .. "
              f"{r['row0'] + r['rows'] - 1:,}, {r['kv_len']:,} keys): {exact}"
              f"{'' if r['only_its_rows_written'] else ', OTHER ROWS WRITTEN'}; "
              f"{_counters_line(r['counters'], r['model'])}: bytes "
              f"{'= Plan' if r['bytes_match_plan'] else '!= PLAN'}, counters {model}"
              f"{'' if r['error_name'] == 'NONE' else ', error ' + r['error_name']}")
    whole, rate = report["whole_run_model"], report["sim_cycles_per_second"]
    print(f"  the whole run by the model: {whole['cycles']:,} cycles, {whole['bytes_read']:,} "
          f"bytes read, {whole['bytes_written']:,} written (Plan: "
          f"{report['whole_run_plan_bytes']:,} bytes); at this run's "
          f"{rate:,} simulated cycles/s, {whole['cycles'] / max(1, rate) / 3600:.1f} h to "
          f"simulate in one process")
    print(f"  wall time {report['wall_seconds']} s with the build; wrote {out / 'sim_report.json'}")
    return 0 if ok else 1


def _sim_shards(args, config, out, opts, bar):
    """`attenio sim --shards K`: the run in K ranges of blocks on Ray, merged (`sim.shards`)."""
    from .sim.shards import run_shards

    skip = {"--shards": 1, "--address": 1, "--blocks": 1}
    argv, rerun, i = sys.argv[1:], [], 0
    while i < len(argv):
        word = argv[i].split("=")[0]
        if word in skip:
            i += 1 + (skip[word] if "=" not in argv[i] else 0)
            continue
        rerun.append(argv[i])
        i += 1
    try:
        r = run_shards(config, out, opts, args.shards, address=args.address,
                       seed_cmd=" ".join(["attenio", *rerun]), progress=bar, log=progress)
    finally:
        bar.close()
    o = r.pop("o", None)
    if o is not None:       # O as stored, every row, [heads, N, d]
        import numpy as np
        np.save(out / "sim_shards_o.npy", o)
    (out / "sim_shards_report.json").write_text(json.dumps(r, indent=2, default=str) + "\n")
    whole = r["whole_run_model"]
    print(f"\nN = {r['seq_len']:,}, N_kv = {r['kv_len']:,}, heads = {r['heads']}, a = {r['a']}: "
          f"{r['shard_count']} shards on Ray, the fast model (C++ {r['cxx_opt']}) built once in "
          f"{r['build_seconds']} s")
    for s in r["shards"]:
        if "error" in s:
            print(f"  blocks {s['first']}:{s['first'] + s['count']}: FAILED: {s['error']}")
            continue
        print(f"  blocks {s['first']}:{s['first'] + s['count']} (rows {s['row0']:,} .. "
              f"{s['row0'] + s['rows'] - 1:,}): {'bit-exact' if s['bit_exact'] else 'MISMATCH'}"
              f"{'' if s['only_its_rows_written'] else ', OTHER ROWS WRITTEN'}; "
              f"{_counters_line(s['counters'], s['model'])}; "
              f"{'ok' if s['ok'] else 'NOT OK'}; {s['wall_seconds']} s, "
              f"{s['sim_cycles_per_second']:,} cycles/s")
    c = r["counters"]
    print(f"  summed: bytes read {c['bytes_read']:,}, written {c['bytes_written']:,} (Plan "
          f"{r['plan_bytes_read']:,}, {r['plan_bytes_written']:,}: "
          f"{'equal' if r['bytes_equal_plan'] else 'DIFFERENT'}); PE busy {c['pe_busy']:,}, EXP "
          f"busy {c['exp_busy']:,} ({'equal to' if r['additive_equal_whole'] else 'NOT'} the "
          f"whole run's by the model); cycles {c['cycles']:,} against {whole['cycles']:,} for "
          f"the whole run in one launch (each launch starts its own pipeline)")
    for line in r["failed"]:
        print(f"  rerun alone: {line}")
    print(f"  wall time {r['wall_seconds']} s for the shards; wrote "
          f"{out / 'sim_shards_report.json'}")
    return 0 if r["all_ok"] and r["bytes_equal_plan"] and r["additive_equal_whole"] else 1


def _compare_decoder(args, config, bws, caches, out):
    """`attenio compare` on a decoder shape: AttenIO against FlashAttention-2 alone (the
    other baselines have no model of N_kv != N or grouped heads), at each --seq-lens N."""
    from .model.compare import decoder_one, render_decoder

    if len(bws) > 1 or len(caches) > 1 or args.timing != "fair" or args.head_dims:
        raise ConfigError("a decoder shape (--kv-len, --kv-heads) is compared at one budget "
                          "and head dimension, fair timing, against FlashAttention-2 alone")
    w = config.workload
    rows = [decoder_one(dataclasses.replace(config, workload=dataclasses.replace(w, seq_len=n)))
            for n in (args.seq_lens or [w.seq_len])]
    data = {"decoder": rows}
    out.mkdir(parents=True, exist_ok=True)
    path = out / "compare_decoder.json"
    path.write_text(json.dumps(data, indent=2) + "\n")
    _show(args, data, lambda: "AttenIO against FlashAttention-2 (each query head reads its "
          "K/V head; the other baselines have no decoder model), fair cycle models\n"
          + render_decoder(rows), [path])
    return 0


def cmd_compare(args):
    from .model.compare import compare, is_decoder, render_text, sweep
    from .model.compareplots import write_all
    from .model.papertiming import PaperTiming

    bws, caches = args.bw or [], args.cache_kib or []
    seqs = batch_from_args(args)
    if seqs:
        if len(bws) > 1 or len(caches) > 1 or args.timing != "fair":
            raise ConfigError("a batch is compared at one budget, fair timing")
        one = argparse.Namespace(**{**vars(args), "bw": bws[0] if bws else None,
                                    "cache_kib": caches[0] if caches else None})
        return _batch(one, seqs, "compare")
    if len(bws) > 1 and len(caches) > 1:
        raise ConfigError("sweep one budget at a time: a list for --bw or for --cache-kib, "
                          "not both")
    if args.timing == "fair" and args.bw_eff is not None:
        raise ConfigError("--bw-eff is the paper timing's effective bandwidth; add --timing paper")
    if args.timing == "paper" and len(bws) > 1:
        raise ConfigError("the bandwidth sweep is of the fair timing (the paper timing pays "
                          "traffic at --bw-eff); give one --bw with --timing paper")
    rows = len(args.seq_lens or [0]) * len(args.head_dims or [0]) * max(len(bws), len(caches), 1)
    if rows > MAX_COMPARISONS:
        raise ConfigError(f"{rows} comparisons (sequence lengths x head dimensions x budgets), "
                          f"more than the {MAX_COMPARISONS} one compare makes; attenio sweep "
                          f"runs larger grids")
    one = argparse.Namespace(**{**vars(args), "bw": bws[0] if len(bws) == 1 else None,
                                "cache_kib": caches[0] if len(caches) == 1 else None})
    config = config_from_args(one)
    out = _out_dir(args, config, Path("build") / config.name / "compare")
    if is_decoder(config.workload):
        return _compare_decoder(args, config, bws, caches, out)
    seq_lens = args.seq_lens or [config.workload.seq_len]
    head_dims = args.head_dims or [config.workload.head_dim]
    try:
        timing = None if args.timing == "fair" else PaperTiming(bw_eff=args.bw_eff)
        if len(bws) > 1:
            data = sweep(config, seq_lens, head_dims, axis="bw", values=bws)
        elif len(caches) > 1:
            data = sweep(config, seq_lens, head_dims, axis="cache", values=caches, timing=timing)
        else:
            data = compare(config, seq_lens, head_dims, timing=timing)
    except ValueError as exc:       # a model's own argument check, e.g. N beyond the Plan's
        raise ConfigError(str(exc)) from None
    _show(args, data, lambda: render_text(data), write_all(data, out))
    return 0


def cmd_synth(args):
    from .gen.synth import TARGETS, render_table, synthesize

    config = config_from_args(args)
    out = _out_dir(args, config)
    config = planned_config(config)
    targets = TARGETS if args.target == "all" else (args.target,)
    from concurrent.futures import ThreadPoolExecutor

    from .gen.build import generate_complete

    verilog = generate_complete(config, out, log=progress)["verilog"]

    def one(target):        # the targets run side by side: each is one tool process at a time
        log = progress if len(targets) == 1 else (lambda s: progress(f"[{target}] {s}"))
        try:
            return synthesize(config, out, target=target, verilog=verilog, seed=args.seed,
                              pnr=not args.no_pnr, lut_mul_width=args.lut_mul_width, log=log,
                              dsp_primitives=True,   # ecp5: config elaborated with MULT18X18D
                              pnr_timeout=args.pnr_timeout * 60 or None,   # 0: no limit
                              forced_dsps=not args.no_forced_dsps, floorplan=args.floorplan,
                              modules=args.modules != "none")
        except RuntimeError as exc:     # a tool failed: its log (named in the message) says why
            raise ConfigError(str(exc).splitlines()[0]) from None

    with ThreadPoolExecutor(max_workers=len(targets)) as pool:
        reports = list(pool.map(one, targets))
    print(render_table(reports))
    for r in reports:
        if r.get("modules"):
            _print_modules(r, every=args.modules == "all")
        if r.get("why_not_placed"):
            print(f"{r['target']}: {r['why_not_placed']}")
        if r.get("nextpnr"):
            cp = r["nextpnr"]["critical_paths"]
            if cp:
                print(f"{r['target']}: Fmax {r['fmax_mhz']} MHz against {r['config']['clock_mhz']} MHz "
                      f"({'met' if r['closes'] else 'NOT met'}); critical path {cp[0]['delay_ns']} ns "
                      f"({cp[0]['logic_ns']} ns logic, {cp[0]['routing_ns']} ns routing) from "
                      f"{cp[0]['start']} to {cp[0]['end']}")
        if r.get("seeds"):
            each = ", ".join(f"seed {s['seed']} " + (f"{s['fmax_mhz']} MHz" if "error" not in s
                                                     else f"did not route ({s['error']})")
                             for s in r["seeds"])
            print(f"{r['target']}: {each} (worst {r['fmax_worst_mhz']} MHz; the best is "
                  f"reported above)")
    if len(reports) > 1:
        (out / "synth_report.json").write_text(json.dumps(reports, indent=2) + "\n")
    print(f"wrote {out / 'synth_report.json'} and {out}/attenio_top.{{sdc,xdc,lpf}}")
    return 0


def _print_modules(report, *, every):
    """The per-unit breakdown of `report` (`attenio.gen.module_stat`): the units, largest
    first, the rest summed; `every`: every instance's own cells instead."""
    from .gen.module_stat import render_units

    target = report["target"]
    what = "; LUT = LUT4 + 2 x CCU2C, a carry cell holding two LUT4s" if target == "ecp5" else ""
    print(f"\n{target}: where the cells go, {'every instance (its own cells)' if every else 'by unit'}"
          f"{what} (how: docs/synthesis.md, \"Where the LUTs go\")")
    rows = report["module_instances"] if every else report["modules"]
    print(render_units(rows, target=target, limit=None if every else 12))


def cmd_sweep(args):
    from .sweep import load_spec, run_sweep

    spec = load_spec(args.spec)
    out = _usable_dir(args.out or Path("build") / spec.name)
    summary = run_sweep(spec, out, address=args.address, workers=args.workers,
                        retry_failed=args.retry_failed)
    print(f"{len(spec.points)} points x {len(spec.stages)} stages: {len(summary.ran)} run now, "
          f"{summary.reused} from earlier runs; {len(summary.failed)} rows failed "
          f"({summary.wall_seconds:.1f} s)")
    print(f"wrote {', '.join(str(p) for p in summary.paths)}")
    return 0


def _add_command(sub, name, func, help, *, with_json=False, out="build/<name>", **parser_options):
    """A subcommand with the shared options, -o/--out and, if asked, --json."""
    p = sub.add_parser(name, help=help, **parser_options)
    add_shared_options(p)
    if with_json:
        p.add_argument("--json", action="store_true", help="print the JSON instead of tables")
    p.add_argument("-o", "--out", metavar="DIR", help=f"output directory (default {out})")
    p.set_defaults(func=func)
    return p


def build_parser():
    from .gen.synth import FLOORPLANS, TARGETS
    from .sim.e2e import ENGINES, MEMORIES
    from .sim.golden import INPUT_KINDS
    from .sim.runner import SIMULATORS

    parser = Parser(prog="attenio", description=__doc__.splitlines()[0])
    parser.add_argument("--debug", action="store_true",
                        help="show the traceback of an internal error instead of one line")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=Parser)
    _add_command(sub, "plan", cmd_plan, with_json=True,
                 help="derive the I/O-optimal tiling and compare the baselines")

    p = _add_command(sub, "gen", cmd_gen,
                     help="generate the Verilog, the register map and a report")
    p.add_argument("--lint", action="store_true", help="also run verilator --lint-only -Wall")

    p = _add_command(sub, "sim", cmd_sim, help="simulate the generated accelerator end to end")
    p.add_argument("--simulator", choices=SIMULATORS, default="verilator")
    p.add_argument("--seed", type=non_negative_int, default=1, help="seed of inputs and memory model")
    p.add_argument("--inputs", metavar="FILE.npz",
                   help="q, k, v arrays [heads, N, d]: float (run unquantized in fp16/bf16, "
                        "quantized for int8) or int8 with scale_*")
    p.add_argument("--input-kind", default="gaussian", choices=INPUT_KINDS,
                   help="random inputs to use without --inputs")
    p.add_argument("--head-scales", action="store_true",
                   help="a scale a tensor and K/V head (int8, fp8; Q's shared by the K/V "
                        "head's query heads), each query head's softmax constant from "
                        "SCALE_C_TABLE (MODE.HEAD_SCALES), in one launch; default: a scale a "
                        "tensor, SCALE_C")
    p.add_argument("--latency-prob", type=probability, default=0.0, metavar="P",
                   help="probability of a random memory stall per access")
    p.add_argument("--latency-max", type=non_negative_int, default=0, metavar="CYCLES",
                   help="longest random memory stall")
    p.add_argument("--backpressure", type=probability, default=0.0, metavar="P",
                   help="probability of a pause on each AXI channel per cycle")
    p.add_argument("--engine", choices=("auto", *ENGINES), default="auto",
                   help="fast: the Verilated design driven from C++ on the in-design memory "
                        "model, no Python in the loop (long runs); cocotb: the cocotb bench "
                        "(AxiRam, random latency, back-pressure, Icarus); auto (default): the "
                        "least expected time with its build: fast unless an option needs cocotb")
    p.add_argument("--memory", choices=MEMORIES, default=None,
                   help="axiram: cocotbext-axi's AxiRam (protocol checks, random latency and "
                        "back-pressure; cocotb only, ~5k cycles/s); model: a memory model inside "
                        "the simulated design (default with the fast engine)")
    p.add_argument("--threads", type=thread_count, default=1,
                   help="Verilator --threads of the fast model (default 1: see docs/simulation.md)")
    p.add_argument("--verbose", action="store_true",
                   help="show the simulator's own log lines (cocotb's) as it runs; otherwise "
                        "they go to sim.log in the build directory")
    p.add_argument("--blocks", metavar="SPEC",
                   help="run only these Q blocks of each pass, one launch per contiguous range "
                        "(Q_BLOCK_FIRST, Q_BLOCK_COUNT), each checked: comma-separated 'first', "
                        "'last', a block, 'a:b' (a to b - 1), 'every K', 'random K' (--seed)")
    p.add_argument("--shards", type=positive_int, metavar="K",
                   help="run every Q block in K contiguous ranges, each in a process of its own "
                        "on Ray, on one fast model built first; the report is merged")
    p.add_argument("--address", metavar="ADDR",
                   help="with --shards: an existing Ray cluster (default: a local Ray on this "
                        "machine)")

    p = _add_command(sub, "synth", cmd_synth,
                     help="synthesize (Yosys) and, for ECP5, place and route (nextpnr)")
    p.add_argument("--target", choices=(*TARGETS, "all"), default="generic",
                   help="generic: Yosys gate counts; ecp5: synth_ecp5 + nextpnr-ecp5 on the "
                        "LFE5U-85F (ULX3S); all: both")
    p.add_argument("--no-pnr", action="store_true", help="ecp5: stop after synthesis")
    p.add_argument("--seed", type=seed_list, default=[1], metavar="S[,S...]",
                   help="nextpnr placement seed, or a comma-separated list: one place and route "
                        "per seed, side by side; the best is reported, with the spread")
    p.add_argument("--pnr-timeout", type=non_negative_int, default=0, metavar="MIN",
                   help="ecp5: stop a seed's nextpnr after MIN minutes and report it as not "
                        "routed (router2 can diverge and run on; default 0: no limit)")
    add_lut_mul_width(p)
    p.add_argument("--modules", choices=("top", "all", "none"), default="top",
                   help="the cells per unit after the totals: top (default) the largest units, "
                        "the rest summed; all: every instance's own cells; none: no breakdown")
    p.add_argument("--no-forced-dsps", action="store_true",
                   help="ecp5: leave the pieces the design puts in DSPs whatever the LUT width "
                        "(the lanes' scale, the reciprocal's) to --lut-mul-width: for an array "
                        "whose DSPs are nearly all taken, e.g. 8x4")
    p.add_argument("--floorplan", choices=FLOORPLANS, default="none",
                   help="ecp5: dsp pins each MAC's and lane's MULT18X18D side by side, the lines "
                        "in order, before nextpnr places the rest (the float 4x4); none "
                        "(default) leaves them to the placer")

    # "resolve": compare takes --bw and --cache-kib as lists (a list sweeps that budget)
    p = _add_command(sub, "compare", cmd_compare, with_json=True, out="build/<name>/compare",
                     help="cycles, traffic and utilization of AttenIO and the baselines",
                     conflict_handler="resolve")
    p.add_argument("--seq-lens", type=int_list, metavar="N,N,...",
                   help="sequence lengths to compare, e.g. 8K,16K,32K (default: --seq-len)")
    p.add_argument("--head-dims", type=int_list, metavar="D,D,...",
                   help="head dimensions to compare, e.g. 64,128 (default: --head-dim)")
    g = p.add_argument_group("timing and sweeps")
    g.add_argument("--timing", choices=["fair", "paper"], default="fair",
                   help="fair (default): the cycle models, every dataflow overlapping memory and "
                        "compute at the full bandwidth; paper: the paper's evaluation assumptions "
                        "as closed forms (attenio.model.papertiming), beside the fair speedups")
    g.add_argument("--bw-eff", type=positive_number, metavar="B",
                   help="paper timing: bytes a cycle at which the baselines pay their traffic "
                        "(default half of --bw: 64 on the paper preset)")
    g.add_argument("--bw", type=int_list, metavar="B[,B,...]",
                   help="off-chip bytes per cycle; a list sweeps it (fair timing): AttenIO's "
                        "speedup, each baseline's crossover and a roofline, e.g. 4,8,16,32,64,128")
    g.add_argument("--cache-kib", type=cache_kib_list, metavar="KIB[,KIB,...]",
                   help="on-chip cache in KiB; a list sweeps it (either timing), e.g. "
                        "64,128,256,512,768")

    p = sub.add_parser("sweep", help="run a grid of configurations through plan, model, synth "
                                     "and sim on Ray, with a results table and a Pareto front")
    p.add_argument("spec", metavar="SPEC.toml", help="the sweep: points and stages (README)")
    p.add_argument("--address", metavar="ADDR",
                   help="an existing Ray cluster (e.g. ray://head:10001; default: a local Ray "
                        "on every core of this machine)")
    p.add_argument("--workers", type=positive_int, metavar="N",
                   help="at most N tasks at once (default: as many as the resources allow)")
    p.add_argument("--retry-failed", action="store_true",
                   help="rerun the points that failed (default: a recorded failure is done)")
    p.add_argument("-o", "--out", metavar="DIR", help="output directory (default build/<name>)")
    p.set_defaults(func=cmd_sweep)
    return parser


def main(argv=None):
    """Run one command: 0 on success, 1 on a failed check (or a bug, in one line naming it),
    2 on bad input (one line on stderr)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"attenio {args.command}: error: {one_line(exc)}", file=sys.stderr)
        return 2
    except BrokenPipeError:         # the reader of our output went away (| head)
        return 0
    except OSError as exc:          # a path the user gave: an output that is a file, no rights
        where = f" {exc.filename!r}" if exc.filename else ""
        print(f"attenio {args.command}: error: cannot use{where}: "
              f"{one_line(exc.strerror or exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"attenio {args.command}: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:        # noqa: BLE001 - the last resort: a bug, told in one line
        if args.debug:
            raise
        what = (str(exc).splitlines() or [""])[0]
        print(f"attenio {args.command}: internal error: {type(exc).__name__}: {what} (a bug in "
              f"attenio; rerun with --debug for the traceback)", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
