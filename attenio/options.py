"""The options every command shares, and what turns them into a planned `Config`.

`attenio` (cli.py), the sweep's spec, the board build and the board's host script all
parse the same workload and budget options and plan them the same way, so a point of a
sweep or a bitstream means what the same options mean to `attenio gen`. Like the CLI,
this module is the face of the project and may call every floor (lazily: parsing needs
only the configuration).
"""

import argparse
import dataclasses
import os
import sys

from .config import PRESETS, resolve
from .errors import ConfigError
from .formats import FORMATS
from .hdl.formats.dsp import FLOAT_LUT_MUL_WIDTH, LUT_MUL_WIDTH

__all__ = ["Parser", "add_lut_mul_width", "add_shared_options", "cache_kib", "cache_kib_list",
           "batch_from_args", "choose_plan", "config_from_args", "int_list", "int_or_auto", "macs",
           "non_negative_int", "one_line", "planned_config", "positive_int", "positive_number",
           "probability", "progress", "seed_list", "thread_count"]


class Parser(argparse.ArgumentParser):
    """argparse that reports a usage error in one line."""

    def error(self, message):
        self.exit(2, f"{self.prog}: error: {one_line(message)}\n")


def one_line(text):
    """`text` on one line: a message that quotes a user's value (a file's error, a path with
    a newline) must not break the one-line contract of an error."""
    return " ".join(str(text).splitlines())


def progress(message):
    """A line of progress on stderr, so stdout keeps only the results."""
    print(message, file=sys.stderr, flush=True)


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


positive_int = _int_at_least(1)
non_negative_int = _int_at_least(0)


def positive_number(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive finite number")
    return value


def thread_count(text):
    """Threads of a Verilated model: a positive integer up to this machine's cores (its
    threads spin while they wait, so more than the cores only slows it, and a count past
    what the system can start fails after the minutes of its build)."""
    value = positive_int(text)
    cores = os.cpu_count() or 1
    if value > cores:
        raise argparse.ArgumentTypeError(f"{text!r} is more than this machine's {cores} cores")
    return value


def seed_list(text):
    seeds = [non_negative_int(s.strip()) for s in text.split(",")]
    if len(set(seeds)) != len(seeds):
        raise argparse.ArgumentTypeError(f"{text!r} names a seed twice")
    return seeds


def macs(text):
    try:
        p, q = (int(x) for x in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not of the form PxQ, e.g. 64x32") from None
    if p <= 0 or q <= 0:
        raise argparse.ArgumentTypeError(f"{text!r}: both P and Q must be positive")
    return p, q


def probability(text):
    """A probability of an event each cycle: a number in [0, 1) (1 would stall forever)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < 1:          # NaN fails both comparisons
        raise argparse.ArgumentTypeError(f"{text!r} is not a probability in [0, 1)")
    return value


def cache_kib(text):
    try:
        kib = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of KiB") from None
    if not 0 < kib < 2 ** 40 or kib * 1024 != int(kib * 1024):     # NaN and inf included
        raise argparse.ArgumentTypeError(f"{text!r} must be a positive whole number of bytes in KiB")
    return int(kib * 1024)


def cache_kib_list(text):
    """A comma-separated list of cache sizes in KiB, each as --cache-kib takes it."""
    return [cache_kib(item.strip()) for item in text.split(",")]


def int_list(text):
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


def int_or_auto(text):
    if text == "auto":
        return text
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is neither 'auto' nor an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive integer")
    return value


def add_shared_options(p):
    """The workload and budget options of every command, in their own group of `p`."""
    g = p.add_argument_group("workload and budget (override --preset and --config)")
    g.add_argument("--preset", choices=sorted(PRESETS), help="starting point (default: small)")
    g.add_argument("--config", metavar="FILE.toml", help="TOML file with [workload], [budget], format")
    g.add_argument("--seq-len", type=positive_int, metavar="N", help="sequence length N")
    g.add_argument("--head-dim", type=positive_int, metavar="D", help="head dimension d")
    g.add_argument("--heads", type=positive_int, help="number of heads")
    g.add_argument("--causal", action="store_true", default=None,
                   help="causal masking: query row i sees keys 0..i (the MODE register's "
                        "CAUSAL bit; the Plan counts the traffic a causal run moves)")
    g.add_argument("--kv-len", type=positive_int, metavar="N_KV",
                   help="key/value rows (default: N); causal rows are aligned at the end "
                        "(the KV_LEN register; the hardware holds max(N, N_KV) keys)")
    g.add_argument("--kv-lens", type=int_list, metavar="N_KV,N_KV,...",
                   help="plan and compare: a ragged batch in one launch, one sequence of "
                        "--seq-len query rows (default 1, a decode step) per key count, on "
                        "paged hardware (--page-rows); or a TOML [batch] table (kv_lens, "
                        "seq_lens, causal)")
    g.add_argument("--kv-heads", type=positive_int, metavar="H_KV",
                   help="K/V heads (default: --heads), a divisor of --heads: heads / H_KV "
                        "query heads share each (the HEAD_GROUP register)")
    g.add_argument("--macs", type=macs, metavar="PxQ", help="MAC lines x MACs per line")
    g.add_argument("--exp-units", type=positive_int, metavar="E", help="EXP modules")
    g.add_argument("--cache-kib", type=cache_kib, metavar="KIB", help="on-chip cache in KiB")
    g.add_argument("--kv-buffer-bytes", type=positive_int, metavar="B", help="KV buffer in bytes")
    g.add_argument("--bw", type=positive_int, metavar="B", help="off-chip bytes per cycle")
    g.add_argument("--latency", type=non_negative_int, metavar="CYCLES",
                   help="off-chip latency in cycles")
    g.add_argument("--clock-mhz", type=positive_int, metavar="MHZ", help="clock frequency")
    g.add_argument("--axi-width", type=positive_int, metavar="BITS", help="AXI data width")
    g.add_argument("--page-rows", type=int, metavar="P",
                   help="K/V rows of a page of a paged K/V cache found through a block table "
                        "(a power of two; 0, the default: K and V contiguous)")
    g.add_argument("--format", choices=sorted(FORMATS),
                   help="number format: int8, or fp16 / bf16 storage with fp32 scores and O")
    g.add_argument("--name", help="name of the build directory build/<name>/")
    g.add_argument("--split", type=int_or_auto, metavar="S|auto",
                   help="MACs that share one Q row (a divisor of d; default auto: the mapping "
                        "the cycle model finds fastest)")
    g.add_argument("--rows-per-mac", type=int_or_auto, metavar="R|auto",
                   help="Q rows each group of s MACs holds (a = R x groups; default auto: "
                        "the planner's choice)")
    g.add_argument("--banks", type=int_or_auto, metavar="B|auto",
                   help="score and (P, alpha) banks, at least 2: S runs B - 1 K rows ahead of "
                        "U while the lanes finish (default auto: two, more where the cycle "
                        "model finds the lanes holding the array up)")


def add_lut_mul_width(p, default=None):
    """--lut-mul-width, as `attenio synth` and the board build take it; `default` says what
    the command takes without it (None: the format's, as `attenio synth`)."""
    default = default or (
        f"{LUT_MUL_WIDTH} in int8: the q*k products and the narrowest pieces of wide "
        f"products; {FLOAT_LUT_MUL_WIDTH} in a float format, which leaves the fp32 products' "
        "7 x 7 pieces to DSPs too")
    p.add_argument("--lut-mul-width", type=non_negative_int, default=None,
                   metavar="BITS",
                   help="ecp5: build multipliers with an operand of at most BITS bits and the "
                        f"other of at most 2 x BITS from LUTs instead of DSP blocks (default "
                        f"{default}; 0: every product in DSPs)")


def batch_from_args(args):
    """The ragged batch `args` name ([BatchSequence]), or None: --kv-lens (each sequence of
    --seq-len query rows, default 1, causal with --causal), else the [batch] table of
    --config (kv_lens, and seq_lens and causal: one value or one per sequence)."""
    from .plan import BatchSequence

    kv_lens = getattr(args, "kv_lens", None)
    rows, causal = [args.seq_len or 1], [bool(args.causal)]
    if not kv_lens and args.config:
        from .config import load_toml
        batch = load_toml(args.config).get("batch")
        if batch is None:
            return None
        where = f"config file {args.config!r}: [batch]"
        unknown = set(batch) - {"kv_lens", "seq_lens", "causal"}
        if unknown:
            raise ConfigError(f"{where} has unknown key(s) {', '.join(sorted(unknown))}; "
                              f"expected causal, kv_lens, seq_lens")
        kv_lens = batch.get("kv_lens")
        if not isinstance(kv_lens, list) or not kv_lens:
            raise ConfigError(f"{where} needs kv_lens, a list of key counts")
        rows = batch.get("seq_lens", 1)
        causal = batch.get("causal", False)
        rows = rows if isinstance(rows, list) else [rows]
        causal = causal if isinstance(causal, list) else [causal]
    if not kv_lens:
        return None
    if len(kv_lens) > MAX_BATCH:
        raise ConfigError(f"a batch of {len(kv_lens)} sequences, more than the {MAX_BATCH} "
                          f"one command models")
    for what, values in (("seq_lens", rows), ("causal", causal)):
        if len(values) not in (1, len(kv_lens)):
            raise ConfigError(f"batch: {what} must be one value or one per sequence "
                              f"({len(kv_lens)}), not {len(values)}")
    rows = rows * len(kv_lens) if len(rows) == 1 else rows
    causal = causal * len(kv_lens) if len(causal) == 1 else causal
    for name, values in (("kv_lens", kv_lens), ("seq_lens", rows)):
        for v in values:
            if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v < 2 ** 32:
                raise ConfigError(f"batch: {name} must be positive 32-bit integers, not {v!r}")
    for v in causal:
        if not isinstance(v, bool):
            raise ConfigError(f"batch: causal must be true or false, not {v!r}")
    return [BatchSequence(n, k, causal=c) for n, k, c in zip(rows, kv_lens, causal)]


#: sequences one `plan` or `compare` models at most (each a run of the cycle model)
MAX_BATCH = 4096


def config_from_args(args):
    """The `Config` the shared options of `args` describe (preset < TOML < options)."""
    pq = args.macs or (None, None)
    return resolve(
        preset_name=args.preset, config_file=args.config, format_name=args.format, name=args.name,
        split=args.split, rows_per_mac=args.rows_per_mac, banks=args.banks,
        workload={"seq_len": args.seq_len, "head_dim": args.head_dim, "heads": args.heads,
                  "causal": args.causal, "kv_len": args.kv_len, "kv_heads": args.kv_heads},
        budget={"mac_lines": pq[0], "macs_per_line": pq[1], "exp_units": args.exp_units,
                "cache_bytes": args.cache_kib, "kv_buffer_bytes": args.kv_buffer_bytes,
                "bw_bytes_per_cycle": args.bw, "latency_cycles": args.latency,
                "clock_mhz": args.clock_mhz, "axi_data_bits": args.axi_width,
                "page_rows": args.page_rows})


def choose_plan(config):
    """The Plan of `config` with the mapping the planner chooses (`--split` forces it)."""
    from .model.planner import choose_plan as choose

    return choose(config, progress=progress)


def planned_config(config):
    """The configuration of the options with its mapping (split, rows per group, banks) fixed to the
    planner's choice, so the floors that make their own Plan from it (gen, sim) build it. What the
    RTL cannot build is refused first, before the planner models anything."""
    from .hdl.top import check_plan
    from .plan import make_plan

    check_plan(make_plan(config))
    plan = choose_plan(config)
    c = plan.mapping_choice
    runner = "" if c.runner_up is None else "; runner-up s = {}, r = {}, B = {}".format(
        *c.runner_up)
    progress(f"mapping ({c.mode}): s = {plan.split}, r = {plan.rows_per_mac}, "
             f"B = {plan.banks}, a = {plan.a}, {plan.macs_active} of {plan.budget.macs} MACs "
             f"active, {c.candidate(*c.chosen).cycles} cycles modelled{runner}")
    return dataclasses.replace(config, split=plan.split, rows_per_mac=plan.rows_per_mac,
                               banks=plan.banks)
