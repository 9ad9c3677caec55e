"""The `attenio` command: the user's face on every floor of the project.

Bad input gets one line on stderr and exit status 2, never a traceback.
"""

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from .config import PRESETS, resolve
from .errors import ConfigError
from .formats import FORMATS
from .gen.synth import LUT_MUL_WIDTH

__all__ = ["main"]


class _Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {message}\n")


def _int_at_least(low):
    def parse(text):
        try:
            value = int(text, 0)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if value < low:
            kind = "a positive" if low == 1 else "a non-negative"
            raise argparse.ArgumentTypeError(f"{text!r} is not {kind} integer")
        return value
    return parse


_positive_int = _int_at_least(1)
_non_negative_int = _int_at_least(0)


def _seed_list(text):
    seeds = [_non_negative_int(s.strip()) for s in text.split(",")]
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"{text!r} names a seed twice")
    return seeds


def _macs(text):
    try:
        p, q = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not of the form PxQ, e.g. 64x32") from None
    if p <= 0 or q <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: both P and Q must be positive")
    return p, q


def _cache_kib(text):
    try:
        kib = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of KiB") from None
    if kib <= 0 or kib * 1024 != int(kib * 1024):
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive whole number of bytes in KiB")
    return int(kib * 1024)


def _int_list(text):
    """A comma-separated list of positive integers; a K suffix multiplies by 1024 (8K = 8192)."""
    values = []
    for item in text.split(","):
        item = item.strip()
        scale = 1024 if item[-1:] in ("k", "K") else 1
        try:
            value = int(item[:-1] if scale > 1 else item, 10) * scale
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a comma-separated list of positive integers ({item!r})") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text!r}: {item!r} is not a positive integer")
        values.append(value)
    return values


def _int_or_auto(text):
    if text == "auto":
        return text
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither 'auto' nor an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def _shared_options(p):
    g = p.add_argument_group("workload and budget (override --preset and --config)")
    g.add_argument("--preset", choices=sorted(PRESETS), help="starting point (default: small)")
    g.add_argument("--config", metavar="FILE.toml", help="TOML file with [workload], [budget], format")
    g.add_argument("--seq-len", type=_positive_int, metavar="N", help="sequence length N")
    g.add_argument("--head-dim", type=_positive_int, metavar="D", help="head dimension d")
    g.add_argument("--heads", type=_positive_int, help="number of heads")
    g.add_argument("--causal", action="store_true", default=None,
                   help="causal masking: query row i sees keys 0..i (the MODE register's "
                        "CAUSAL bit; the Plan counts the traffic a causal run moves)")
    g.add_argument("--kv-len", type=_positive_int, metavar="N_KV",
                   help="key/value rows (default: N); causal rows are aligned at the end "
                        "(the KV_LEN register; the hardware holds max(N, N_KV) keys)")
    g.add_argument("--kv-heads", type=_positive_int, metavar="H_KV",
                   help="K/V heads (default: --heads), a divisor of --heads: heads / H_KV "
                        "query heads share each (the HEAD_GROUP register)")
    g.add_argument("--macs", type=_macs, metavar="PxQ", help="MAC lines x MACs per line")
    g.add_argument("--exp-units", type=_positive_int, metavar="E", help="EXP modules")
    g.add_argument("--cache-kib", type=_cache_kib, metavar="KIB", help="on-chip cache in KiB")
    g.add_argument("--kv-buffer-bytes", type=_positive_int, metavar="B", help="KV buffer in bytes")
    g.add_argument("--bw", type=_positive_int, metavar="B", help="off-chip bytes per cycle")
    g.add_argument("--latency", type=_non_negative_int, metavar="CYCLES",
                   help="off-chip latency in cycles")
    g.add_argument("--clock-mhz", type=_positive_int, metavar="MHZ", help="clock frequency")
    g.add_argument("--axi-width", type=_positive_int, metavar="BITS", help="AXI data width")
    g.add_argument("--format", choices=sorted(FORMATS),
                   help="number format: int8, or fp16 / bf16 storage with fp32 scores and O")
    g.add_argument("--name", help="name of the build directory build/<name>/")
    g.add_argument("--split", type=_int_or_auto, metavar="S|auto",
                   help="MACs that share one Q row (a divisor of d; default auto: the mapping "
                        "the cycle model finds fastest)")
    g.add_argument("--rows-per-mac", type=_int_or_auto, metavar="R|auto",
                   help="Q rows each group of s MACs holds (a = R x groups; default auto: "
                        "the planner's choice)")


def config_from_args(args):
    macs = args.macs or (None, None)
    return resolve(
        preset_name=args.preset, config_file=args.config, format_name=args.format, name=args.name,
        split=args.split, rows_per_mac=args.rows_per_mac,
        workload={"seq_len": args.seq_len, "head_dim": args.head_dim, "heads": args.heads,
                  "causal": args.causal, "kv_len": args.kv_len, "kv_heads": args.kv_heads},
        budget={"mac_lines": macs[0], "macs_per_line": macs[1], "exp_units": args.exp_units,
                "cache_bytes": args.cache_kib, "kv_buffer_bytes": args.kv_buffer_bytes,
                "bw_bytes_per_cycle": args.bw, "latency_cycles": args.latency,
                "clock_mhz": args.clock_mhz, "axi_data_bits": args.axi_width})


def _out_dir(args, config):
    return Path(args.out) if args.out else Path("build") / config.name


def _show(args, data, render, paths):
    """The JSON with --json; else the tables `render()` makes and the files written."""
    if args.json:
        print(json.dumps(data, indent=2))
    else:
        print(render())
        print(f"\nwrote {', '.join(str(p) for p in paths)}")


def _choose(config):
    """The Plan of `config` with the mapping the planner chooses (`--split` forces it)."""
    from .model.planner import choose_plan
    return choose_plan(config, progress=_progress)


def _planned_config(config):
    """The configuration of the options with its mapping (split, rows per group) fixed to the
    planner's choice, so the floors that make their own Plan from it (gen, sim) build it. What the
    RTL cannot build is refused first, before the planner models anything."""
    from .hdl.top import check_plan
    from .plan import make_plan

    check_plan(make_plan(config))
    plan = _choose(config)
    c = plan.mapping_choice
    runner = "" if c.runner_up is None else "; runner-up s = {}, r = {}".format(*c.runner_up)
    _progress(f"mapping ({c.mode}): s = {plan.split}, r = {plan.rows_per_mac}, a = {plan.a}, "
              f"{plan.macs_active} of {plan.budget.macs} MACs active, "
              f"{c.candidate(*c.chosen).cycles} cycles modelled{runner}")
    return dataclasses.replace(config, split=plan.split, rows_per_mac=plan.rows_per_mac)


def cmd_plan(args):
    from .report import plan_json, plan_report

    config = config_from_args(args)
    plan = _choose(config)
    data = plan_json(plan)
    out = _out_dir(args, config)
    out.mkdir(parents=True, exist_ok=True)
    (out / "plan.json").write_text(json.dumps(data, indent=2) + "\n")
    _show(args, data, lambda: plan_report(plan), [out / "plan.json"])
    return 0


def cmd_gen(args):
    from .gen.build import generate

    config = _planned_config(config_from_args(args))
    out = _out_dir(args, config)
    summary = generate(config, out, run_lint=args.lint, log=_progress)
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


def cmd_sim(args):
    from .plan import make_plan
    from .sim.capacity import check_fits
    from .sim.e2e import E2EOptions, choose_engine, load_inputs, run_e2e
    from .sim.progress import ProgressBar
    from .sim.runner import SimulatorMissing

    config = config_from_args(args)
    # What cannot run is refused before the planner and the elaboration: a bad inputs
    # file, and a run too large for this machine's memory.
    w = config.workload
    n, heads = w.seq_len, w.heads
    if args.inputs:
        data = load_inputs(args.inputs, head_dim=w.head_dim)
        heads, n = data["q"].shape[:2]
    engine, memory, why = choose_engine(make_plan(config), seq_len=n, heads=heads,
                                        engine=args.engine, memory=args.memory,
                                        simulator=args.simulator,
                                        protocol=bool(args.latency_prob or args.latency_max
                                                      or args.backpressure))
    check_fits(make_plan(config), seq_len=n, heads=heads, engine=engine, memory=memory,
               kv_len=w.kv_len, kv_heads=heads // w.group)
    config = _planned_config(config)
    out = _out_dir(args, config)
    _progress(f"engine: {engine} ({why})")
    plan = make_plan(config)
    bar = ProgressBar(plan.traffic_at(seq_len=n, heads=heads).write_bytes, label="  ")
    opts = E2EOptions(simulator=args.simulator, seed=args.seed, inputs=args.inputs,
                      input_kind=args.input_kind, latency=(args.latency_prob, args.latency_max),
                      backpressure=args.backpressure, memory=memory, engine=engine,
                      threads=args.threads, progress=bar)
    try:
        report = run_e2e(config, out, opts, log=_progress)
    except SimulatorMissing as exc:
        raise ConfigError(str(exc)) from None
    finally:
        bar.close()
    run = report["runs"][0]
    c = run["counters"]
    engine = ("the fast C++ harness" if report["engine"] == "fast"
              else f"cocotb on {report['memory']}")
    print(f"\nN = {report['seq_len']}, N_kv = {report['kv_len']}, heads = {report['heads']} "
          f"({report['kv_heads']} K/V), d = {report['head_dim']}, "
          f"a = {report['a']}{', causal' if report['causal'] else ''}"
          f"{', grouped blocks (MODE.GROUPED)' if report['grouped'] else ''}, "
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
        print(f"  cycle model: {report['model']['cycles']} cycles (RTL/model = "
              f"{report['cycles_vs_model']:.4f})")
    print(f"  wall time {report['wall_seconds']} s with the build, {report['sim_cycles_per_second']} "
          f"simulated cycles/s in the runs; wrote {out / 'sim_report.json'} and {out / 'sim_outputs.npz'}")
    return 0 if run["bit_exact"] and run["bytes_match_plan"] else 1


def _progress(message):
    print(message, file=sys.stderr, flush=True)


def _positive_number(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive finite number")
    return value


def _cache_kib_list(text):
    """A comma-separated list of cache sizes in KiB, each as --cache-kib takes it."""
    return [_cache_kib(item.strip()) for item in text.split(",")]


def _compare_decoder(args, config, bws, caches):
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
    out = Path(args.out) if args.out else Path("build") / config.name / "compare"
    out.mkdir(parents=True, exist_ok=True)
    path = out / "compare_decoder.json"
    path.write_text(json.dumps(data, indent=2) + "\n")
    _show(args, data, lambda: "AttenIO against FlashAttention-2 (each query head reads its "
          "K/V head; the other baselines have no decoder model), fair cycle models\n"
          + render_decoder(rows), [path])
    return 0


def cmd_compare(args):
    from .model.compare import compare, is_decoder, render_text, sweep, write_all
    from .model.papertiming import PaperTiming

    bws, caches = args.bw or [], args.cache_kib or []
    if len(bws) > 1 and len(caches) > 1:
        raise ConfigError("sweep one budget at a time: a list for --bw or for --cache-kib, "
                          "not both")
    if args.timing == "fair" and args.bw_eff is not None:
        raise ConfigError("--bw-eff is the paper timing's effective bandwidth; add --timing paper")
    if args.timing == "paper" and len(bws) > 1:
        raise ConfigError("the bandwidth sweep is of the fair timing (the paper timing pays "
                          "traffic at --bw-eff); give one --bw with --timing paper")
    one = argparse.Namespace(**{**vars(args), "bw": bws[0] if len(bws) == 1 else None,
                                "cache_kib": caches[0] if len(caches) == 1 else None})
    config = config_from_args(one)
    if is_decoder(config.workload):
        return _compare_decoder(args, config, bws, caches)
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
    out = Path(args.out) if args.out else Path("build") / config.name / "compare"
    _show(args, data, lambda: render_text(data), write_all(data, out))
    return 0


def cmd_synth(args):
    from .gen.synth import TARGETS, render_table, synthesize

    config = _planned_config(config_from_args(args))
    out = _out_dir(args, config)
    targets = TARGETS if args.target == "all" else (args.target,)
    from concurrent.futures import ThreadPoolExecutor

    from .gen.build import generate

    verilog = generate(config, out, log=_progress)["verilog"]

    def one(target):        # the targets run side by side: each is one tool process at a time
        log = _progress if len(targets) == 1 else (lambda s: _progress(f"[{target}] {s}"))
        try:
            return synthesize(config, out, target=target, verilog=verilog, seed=args.seed,
                              pnr=not args.no_pnr, lut_mul_width=args.lut_mul_width, log=log,
                              dsp_primitives=True,   # ecp5: config elaborated with MULT18X18D
                              pnr_timeout=args.pnr_timeout * 60 or None,   # 0: no limit
                              forced_dsps=not args.no_forced_dsps)
        except RuntimeError as exc:     # a tool failed: its log (named in the message) says why
            raise ConfigError(str(exc).splitlines()[0]) from None

    with ThreadPoolExecutor(max_workers=len(targets)) as pool:
        reports = list(pool.map(one, targets))
    print(render_table(reports))
    for r in reports:
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


def cmd_sweep(args):
    from .sweep import load_spec, run_sweep

    spec = load_spec(args.spec)
    out = Path(args.out) if args.out else Path("build") / spec.name
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
    _shared_options(p)
    if with_json:
        p.add_argument("--json", action="store_true", help="print the JSON instead of tables")
    p.add_argument("-o", "--out", metavar="DIR", help=f"output directory (default {out})")
    p.set_defaults(func=func)
    return p


def build_parser():
    parser = _Parser(prog="attenio", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    _add_command(sub, "plan", cmd_plan, with_json=True,
                 help="derive the I/O-optimal tiling and compare the baselines")

    p = _add_command(sub, "gen", cmd_gen,
                     help="generate the Verilog, the register map and a report")
    p.add_argument("--lint", action="store_true", help="also run verilator --lint-only -Wall")

    p = _add_command(sub, "sim", cmd_sim, help="simulate the generated accelerator end to end")
    p.add_argument("--simulator", choices=["verilator", "icarus"], default="verilator")
    p.add_argument("--seed", type=_non_negative_int, default=1, help="seed of inputs and memory model")
    p.add_argument("--inputs", metavar="FILE.npz",
                   help="q, k, v arrays [heads, N, d]: float (run unquantized in fp16/bf16, "
                        "quantized for int8) or int8 with scale_*")
    p.add_argument("--input-kind", default="gaussian",
                   choices=["gaussian", "spread", "equal", "dominant", "dominant_far", "ascending"],
                   help="random inputs to use without --inputs")
    p.add_argument("--latency-prob", type=float, default=0.0, metavar="P",
                   help="probability of a random memory stall per access")
    p.add_argument("--latency-max", type=_non_negative_int, default=0, metavar="CYCLES",
                   help="longest random memory stall")
    p.add_argument("--backpressure", type=float, default=0.0, metavar="P",
                   help="probability of a pause on each AXI channel per cycle")
    p.add_argument("--engine", choices=["auto", "fast", "cocotb"], default="auto",
                   help="fast: the Verilated design driven from C++ on the in-design memory "
                        "model, no Python in the loop (long runs); cocotb: the cocotb bench "
                        "(AxiRam, random latency, back-pressure, Icarus); auto (default): fast "
                        "for long runs that ask for no cocotb-only option, else cocotb")
    p.add_argument("--memory", choices=["axiram", "model"], default=None,
                   help="axiram: cocotbext-axi's AxiRam (protocol checks, random latency and "
                        "back-pressure; cocotb only, ~5k cycles/s); model: a memory model inside "
                        "the simulated design (default with the fast engine)")
    p.add_argument("--threads", type=_positive_int, default=1,
                   help="Verilator --threads of the fast model (default 1: see docs/simulation.md)")

    p = _add_command(sub, "synth", cmd_synth,
                     help="synthesize (Yosys) and, for ECP5, place and route (nextpnr)")
    p.add_argument("--target", choices=["generic", "ecp5", "all"], default="generic",
                   help="generic: Yosys gate counts; ecp5: synth_ecp5 + nextpnr-ecp5 on the "
                        "LFE5U-85F (ULX3S); all: both")
    p.add_argument("--no-pnr", action="store_true", help="ecp5: stop after synthesis")
    p.add_argument("--seed", type=_seed_list, default=[1], metavar="S[,S...]",
                   help="nextpnr placement seed, or a comma-separated list: one place and route "
                        "per seed, side by side; the best is reported, with the spread")
    p.add_argument("--pnr-timeout", type=_non_negative_int, default=0, metavar="MIN",
                   help="ecp5: stop a seed's nextpnr after MIN minutes and report it as not "
                        "routed (router2 can diverge and run on; default 0: no limit)")
    p.add_argument("--lut-mul-width", type=_non_negative_int, default=LUT_MUL_WIDTH,
                   metavar="BITS",
                   help="ecp5: build multipliers with an operand of at most BITS bits and the "
                        "other of at most 2 x BITS from LUTs instead of DSP blocks (default 8: "
                        "the q*k products and the narrowest pieces of wide products; 0: every "
                        "product in DSPs)")
    p.add_argument("--no-forced-dsps", action="store_true",
                   help="ecp5: leave the pieces the design puts in DSPs whatever the LUT width "
                        "(the lanes' scale, the reciprocal's) to --lut-mul-width: for an array "
                        "whose DSPs are nearly all taken, e.g. 8x4")

    # "resolve": compare takes --bw and --cache-kib as lists (a list sweeps that budget)
    p = _add_command(sub, "compare", cmd_compare, with_json=True, out="build/<name>/compare",
                     help="cycles, traffic and utilization of AttenIO and the baselines",
                     conflict_handler="resolve")
    p.add_argument("--seq-lens", type=_int_list, metavar="N,N,...",
                   help="sequence lengths to compare, e.g. 8K,16K,32K (default: --seq-len)")
    p.add_argument("--head-dims", type=_int_list, metavar="D,D,...",
                   help="head dimensions to compare, e.g. 64,128 (default: --head-dim)")
    g = p.add_argument_group("timing and sweeps")
    g.add_argument("--timing", choices=["fair", "paper"], default="fair",
                   help="fair (default): the cycle models, every dataflow overlapping memory and "
                        "compute at the full bandwidth; paper: the paper's evaluation assumptions "
                        "as closed forms (attenio.model.papertiming), beside the fair speedups")
    g.add_argument("--bw-eff", type=_positive_number, metavar="B",
                   help="paper timing: bytes a cycle at which the baselines pay their traffic "
                        "(default half of --bw: 64 on the paper preset)")
    g.add_argument("--bw", type=_int_list, metavar="B[,B,...]",
                   help="off-chip bytes per cycle; a list sweeps it (fair timing): AttenIO's "
                        "speedup, each baseline's crossover and a roofline, e.g. 4,8,16,32,64,128")
    g.add_argument("--cache-kib", type=_cache_kib_list, metavar="KIB[,KIB,...]",
                   help="on-chip cache in KiB; a list sweeps it (either timing), e.g. "
                        "64,128,256,512,768")

    p = sub.add_parser("sweep", help="run a grid of configurations through plan, model, synth "
                                     "and sim on Ray, with a results table and a Pareto front")
    p.add_argument("spec", metavar="SPEC.toml", help="the sweep: points and stages (README)")
    p.add_argument("--address", metavar="ADDR",
                   help="an existing Ray cluster (e.g. ray://head:10001; default: a local Ray "
                        "on every core of this machine)")
    p.add_argument("--workers", type=_positive_int, metavar="N",
                   help="at most N tasks at once (default: as many as the resources allow)")
    p.add_argument("--retry-failed", action="store_true",
                   help="rerun the points that failed (default: a recorded failure is done)")
    p.add_argument("-o", "--out", metavar="DIR", help="output directory (default build/<name>)")
    p.set_defaults(func=cmd_sweep)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.func(args)
    except ConfigError as exc:
        print(f"attenio {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
