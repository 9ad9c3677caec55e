"""Accuracy of int8 and of fp16's O accumulators against float64; writes docs/accuracy.md.

Measures, on Gaussian inputs and the adversarial ones of
`attenio.sim.golden.make_inputs`, the fraction of int8 outputs equal to
round(float64 / scale_v), the largest distance from it in LSB and the mean
|out - float64 / scale_v| in LSB (rounding alone gives 0.25): for the default
format at N = 256, 4096, 16384 and d = 64, 128; for cheaper formats on the
hardest inputs; for the small preset's narrower format at its own N. Then the
errors of the exp2 table and of the reciprocal alone, and the golden model's wall
time. Rows are independent, so the larger cases sample query rows against all N keys.

For the fp16 format it measures what its O accumulator width costs: a float model of
the dataflow at the format's widths, O kept in fp32 (the default) or fp16 (the
paper's accounting), against float64 at N = 1024, 4096, 16384, beside what the
narrower O buys in the plan of the paper preset.

A full run renders docs/accuracy.md: the error analysis behind the defaults, its
bounds computed from the format, and every figure it quotes measured here. Seeds
are fixed, so an unchanged arithmetic renders the same file. `--quick` measures
smaller samples (N <= 1024) and writes no document unless `--doc` names one.
`--fp16-o` measures only the fp16 part (seconds) and rewrites only its section.
Exit status 1 if the default format or the small preset's misses the target
(>= 99% exact, never more than 1 LSB off).
"""

import argparse
import dataclasses
import math
import re
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
from amaranth.hdl import Signal, signed, unsigned

from attenio import FP16Format, Int8Format
from attenio.config import preset
from attenio.hdl.formats import Int8Arith
from attenio.hdl.formats.dsp import pieces
from attenio.plan import make_plan
from attenio.sim import golden as G

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "accuracy.md"
SEED = 2026
N_MAX = 16384               # the largest N the default format is sized for
TARGET_EXACT = 0.99         # of the outputs equal to the correctly rounded float64 result
TARGET_MAX_LSB = 1
V_SPAN = 255                # the largest |V_j - out| in LSB
WEIGHT_SPAN = 30            # log2 units below the max beyond which a weight no longer counts


@dataclasses.dataclass(frozen=True)
class Sizes:
    """How much a run measures."""

    ns: tuple               # N of the default format's table
    ds: tuple               # d of that table
    rows_cap: int           # query rows sampled per case at large N (all rows up to 256)
    ascending_rows: int     # the ascending inputs take the slow stepwise path: fewer rows
    sweep_n: int            # N of the cheaper formats' table (d = 64)
    sweep_rows: int
    sweep_seeds: tuple      # seeds of the dominant inputs, whose row samples differ most
    preset_seeds: tuple
    fp16_ns: tuple          # N of the fp16 O-accumulator table
    fp16_ds: tuple
    fp16_rows: int          # query rows sampled per fp16 case

    def rows_for(self, kind, n):
        if n <= 256:
            return n
        if kind == "ascending":
            return self.ascending_rows
        return self.rows_cap * 2 if n <= 4096 else self.rows_cap


FULL = Sizes(ns=(256, 4096, N_MAX), ds=(64, 128), rows_cap=512, ascending_rows=128,
             sweep_n=N_MAX, sweep_rows=256, sweep_seeds=(SEED, SEED + 1, SEED + 2),
             preset_seeds=(1, 2, 3), fp16_ns=(1024, 4096, N_MAX), fp16_ds=(64, 128),
             fp16_rows=512)
QUICK = Sizes(ns=(256, 1024), ds=(64,), rows_cap=64, ascending_rows=32, sweep_n=1024,
              sweep_rows=64, sweep_seeds=(SEED,), preset_seeds=(1,), fp16_ns=(1024,),
              fp16_ds=(64,), fp16_rows=64)

# Cheaper formats for the cost/accuracy trade-off, one field changed each.
LUT_MORE = f"exp_lut_bits={Int8Format().exp_lut_bits + 1}"
VARIANTS = {"default": {}, "p_frac=20": {"p_frac": 20}, "p_frac=16": {"p_frac": 16},
            "x_frac=16": {"x_frac": 16}, "x_frac=14": {"x_frac": 14}, "x_frac=12": {"x_frac": 12},
            LUT_MORE: {"exp_lut_bits": Int8Format().exp_lut_bits + 1}}
EXP_VARIANTS = {"default": {}, LUT_MORE: VARIANTS[LUT_MORE],
                "no interpolation": {"exp_interp": False}}
PRESET_P_FRAC = (15, 16, 17, 18, 24)


def measure(kind, n, d, rows, fmt, *, seed=SEED, a=64, max_seq_len=None):
    x = G.make_inputs(kind, seq_len=n, head_dim=d, rows=rows, seed=seed)
    c = fmt.softmax_constant(scale_q=x["scale_q"], scale_k=x["scale_k"], head_dim=d)
    out = G.attention(x["q"], x["k"], x["v"], c=c, a=a, fmt=fmt, max_seq_len=max_seq_len)
    ref = G.reference(x["q"], x["k"], x["v"], scale_q=x["scale_q"], scale_k=x["scale_k"],
                      scale_v=x["scale_v"])
    return G.accuracy(out, ref, x["scale_v"])


def met(acc):
    return acc["frac_exact"] >= TARGET_EXACT and acc["max_err_lsb"] <= TARGET_MAX_LSB


def pct(frac):
    """A percentage rounded down, so that 100% means every output."""
    return "100%" if frac >= 1 else f"{math.floor(frac * 1e4) / 100:.2f}%"


def plural(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"


# Kept on one line when filling, so that no line starts with what Markdown reads as a
# quote, a bullet or a numbered item (">= 1", "- 98%", "8. The").
_GLUED = (" >= ", " <= ", " = ", " - ")
_LINE_START = re.compile(r"\s*(>|[-+*] |\d+[.)] )")


def reflow(text, width=88):
    """Fill the paragraphs and numbered items of Markdown `text`; tables and headings as they are."""
    for op in _GLUED:
        text = text.replace(op, op.replace(" ", "\0"))
    blocks = []
    for block in text.split("\n\n"):
        if block.startswith(("|", "#")):
            blocks.append(block)
            continue
        items = []
        for item in re.split(r"\n(?=\d+\. )", block):
            number = re.match(r"\d+\. ", item)
            items.append(textwrap.fill(" ".join(item.split()), width, break_long_words=False,
                                       break_on_hyphens=False,
                                       subsequent_indent=" " * len(number.group()) if number else ""))
        blocks.append("\n".join(items))
    text = "\n\n".join(blocks).replace("\0", " ")
    for line in text.splitlines():
        if not line.startswith("|") and _LINE_START.match(line) and not re.match(r"\d+\. \*\*", line):
            raise ValueError(f"reflow: a line Markdown would misread: {line!r}")
    return text


def table(head, rows):
    """A Markdown table; printed as it is."""
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in rows]
    return "\n".join(lines)


# -- measurements ---------------------------------------------------------------------------

def default_table(sizes):
    fmt = Int8Format()
    print(f"default format: {fmt}")
    rows, cases = [], []
    for n in sizes.ns:
        for d in sizes.ds:
            for kind in G.INPUT_KINDS:
                r = sizes.rows_for(kind, n)
                t0 = time.perf_counter()
                acc = measure(kind, n, d, r, fmt)
                cases.append((kind, n, d, acc))
                rows.append((kind, n, d, r, f"{acc['frac_exact']:.5f}", acc["max_err_lsb"],
                             f"{acc['mean_abs_err_lsb']:.4f}"))
                print(f"  {kind:13s} N={n:5d} d={d:3d} rows={r:4d}: {acc['frac_exact']:.5f} exact, "
                      f"max {acc['max_err_lsb']} LSB, mean |err| {acc['mean_abs_err_lsb']:.4f} LSB "
                      f"({time.perf_counter() - t0:.1f} s){'' if met(acc) else '  MISSED'}", flush=True)
    head = ("input", "N", "d", "rows", "exact", "max LSB", "mean abs err LSB")
    return table(head, rows), cases


def variants_table(sizes):
    n, d = sizes.sweep_n, 64
    print(f"cheaper formats at N = {n}, d = {d}:")
    rows, res = [], {}
    for name, fields in VARIANTS.items():
        fmt = Int8Format(**fields)
        w = fmt.datapath(max_seq_len=n, head_dim=d)
        spread = measure("spread", n, d, sizes.sweep_rows, fmt)
        dominant = [measure("dominant", n, d, sizes.sweep_rows, fmt, seed=s) for s in sizes.sweep_seeds]
        ascending = measure("ascending", n, d, sizes.ascending_rows, fmt)
        dom = [acc["frac_exact"] for acc in dominant]
        worst = max(acc["max_err_lsb"] for acc in [spread, ascending, *dominant])
        res[name] = {"fmt": fmt, "spread": spread["frac_exact"], "dominant": (min(dom), max(dom)),
                     "ascending": ascending["frac_exact"], "max_lsb": worst}
        dom_text = f"{min(dom):.5f}" if len(dom) == 1 else f"{min(dom):.5f} - {max(dom):.5f}"
        rows.append((name, w.o_acc, 1 + fmt.x_int + fmt.x_frac, f"{spread['frac_exact']:.5f}",
                     dom_text, f"{ascending['frac_exact']:.5f}", worst))
        print(f"  {name:15s} spread {spread['frac_exact']:.5f}, dominant {dom_text}, "
              f"ascending {ascending['frac_exact']:.5f}, max {worst} LSB", flush=True)
    head = ("format", "O bits", "x bits", f"spread ({sizes.sweep_rows} rows)",
            f"dominant ({sizes.sweep_rows} rows, {plural(len(sizes.sweep_seeds), 'seed')})",
            f"ascending ({sizes.ascending_rows} rows)", "max LSB")
    return table(head, rows), res


def exp2_errors():
    """Largest relative error of exp2 over one octave (every x_frac fraction), final rounding
    included: the table and interpolation error, repeated in every other octave by the shift."""
    res, rows = {}, []
    for name, fields in EXP_VARIANTS.items():
        fmt = Int8Format(**fields)
        a = Int8Arith(fmt, max_seq_len=256, head_dim=64)
        z = np.arange(-(1 << fmt.x_frac), 1)
        exact = 2.0 ** (z / 2 ** fmt.x_frac) * a.one
        res[name] = float(np.max(np.abs(a.np_exp2(z) - exact) / exact))
        rows.append((name, fmt.exp_lut_bits, "yes" if fmt.exp_interp else "no", f"{res[name]:.2e}"))
    return table(("exp2", "T", "interpolation", "max relative error"), rows), res


def reciprocal_errors(n=N_MAX):
    """Largest relative error of y * 2**-e against 1/l for l in [1, n], by Newton steps."""
    res, rows = {}, []
    rng = np.random.default_rng(SEED)
    for iters in range(4):
        a = Int8Arith(Int8Format(recip_iters=iters), max_seq_len=n, head_dim=64)
        l = np.concatenate([np.arange(a.one, a.one + 5000), rng.integers(a.one, n * a.one + 1, 200000)])
        y, e = a.np_reciprocal(l)
        rel = float(np.max(np.abs(y * 2.0 ** -(a.cfg.recip_frac + e) * (l / a.one) - 1)))
        res[iters] = rel
        rows.append((iters, a.reciprocal_latency, f"{rel:.2e}", f"{128 * rel:.1e}"))
    return table(("Newton steps", "latency (cycles)", "max relative error", "LSB at out = 128"), rows), res


def preset_table(sizes):
    cfg = preset("small")
    n = cfg.workload.seq_len
    print(f"small preset at N = {n}, its format with p_frac swept:")
    rows, res = [], {}
    for p_frac in sorted({*PRESET_P_FRAC, cfg.format.p_frac}):
        fmt = dataclasses.replace(cfg.format, p_frac=p_frac)
        accs = [measure(kind, n, d, None, fmt, seed=seed, a=32, max_seq_len=n)
                for d in (16, 64) for kind in G.INPUT_KINDS for seed in sizes.preset_seeds]
        worst = min(acc["frac_exact"] for acc in accs)
        lsb = max(acc["max_err_lsb"] for acc in accs)
        res[p_frac] = (worst, lsb)
        mark = " (the preset's)" if p_frac == cfg.format.p_frac else ""
        rows.append((f"{p_frac}{mark}", f"{worst:.5f}", lsb))
        print(f"  p_frac={p_frac}{mark}: worst case {worst:.5f} exact, max {lsb} LSB", flush=True)
    head = ("p_frac", "worst case exact", "max LSB")
    return table(head, rows), res, cfg


def golden_wall_time():
    fmt = Int8Format()
    x = G.make_inputs("gaussian", seq_len=4096, head_dim=64, seed=SEED)
    c = fmt.softmax_constant(scale_q=x["scale_q"], scale_k=x["scale_k"], head_dim=64)
    t0 = time.perf_counter()
    G.attention(x["q"], x["k"], x["v"], c=c, a=64)
    t1 = time.perf_counter()
    G.reference(x["q"], x["k"], x["v"], scale_q=x["scale_q"], scale_k=x["scale_k"],
                scale_v=x["scale_v"])
    print(f"golden model, full head N=4096 d=64 (4096 x 4096 scores): {t1 - t0:.2f} s "
          f"(float64 reference {time.perf_counter() - t1:.2f} s)")


# -- fp16: the width of the O accumulators -------------------------------------------------

FLOATS = {16: np.float16, 32: np.float32}
# name: (standard deviation of Q and K, mean of V, what the inputs are for)
FP16_INPUTS = {
    "gaussian": (1.0, 0.0, "Q, K, V ~ N(0, 1): scores with standard deviation 1"),
    "peaky": (2.0, 0.0, "Q, K ~ N(0, 4): scores with standard deviation 4, so that a few "
                        "keys carry most of the weight"),
    "offset_v": (1.0, 1.0, "as gaussian, but V ~ N(1, 1): every P*V_j adds with the same "
                           "sign, so O grows with l and its rounding errors do not cancel"),
}


def fp16_inputs(kind, n, d, rows, seed=SEED):
    """`rows` query rows against `n` keys, drawn from `seed` and stored in fp16."""
    qk_sd, v_mean, _ = FP16_INPUTS[kind]
    rng = np.random.default_rng(seed)
    q = rng.normal(0.0, qk_sd, (rows, d)).astype(np.float16)
    k = rng.normal(0.0, qk_sd, (n, d)).astype(np.float16)
    v = rng.normal(v_mean, 1.0, (n, d)).astype(np.float16)
    return q, k, v


def fp16_attention(q, k, v, fmt):
    """The AttenIO dataflow (b = 1) in floating point at the widths of `fmt` (an FP16Format).

    Scores, m and l in the score width, P and alpha rounded to theirs, and
    O_i = alpha*O_i + P*V_j computed in fp32 and rounded to the O accumulator's
    width after every K/V row; then O / l in fp32, not rounded to the output's
    fp16, so that the error is the arithmetic's. Vectorized over the query rows; the
    softmax state does not depend on O's width, so it is computed for all rows first.
    """
    n, d = k.shape
    w = fmt.datapath(max_seq_len=n, head_dim=d)
    fs, fp, fa, fo = (FLOATS[b] for b in (w.score, w.p, w.alpha, w.o_acc))
    s = (q.astype(fs) @ k.astype(fs).T) * fs(1 / math.sqrt(d))
    m = np.maximum.accumulate(s, axis=1)
    m_old = np.concatenate([np.full((len(q), 1), -np.inf, fs), m[:, :-1]], axis=1)
    p = np.ascontiguousarray(np.exp(s - m).astype(fp).astype(np.float32).T)      # row j: P_j
    alpha = np.ascontiguousarray(np.exp(m_old - m).astype(fa).astype(np.float32).T)
    v32 = v.astype(np.float32)
    l = np.zeros(len(q), fs)
    o = np.zeros((len(q), d), fo)
    for j in range(n):
        l = (alpha[j] * l + p[j]).astype(fs)
        o = (alpha[j][:, None] * o.astype(np.float32) + p[j][:, None] * v32[j]).astype(fo)
    return o.astype(np.float32) / l[:, None].astype(np.float32)


def float_reference(q, k, v):
    """Softmax attention in float64 on the same (fp16) inputs."""
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    s = q @ k.T / math.sqrt(k.shape[1])
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return (e @ v) / e.sum(axis=1, keepdims=True)


def float_errors(out, ref):
    """Relative L2 error over all outputs and the largest absolute error."""
    err = out.astype(np.float64) - ref
    return float(np.linalg.norm(err) / np.linalg.norm(ref)), float(np.max(np.abs(err)))


def fp16_o_table(sizes):
    """fp32 against fp16 O accumulators; the error of storing the exact result in fp16 beside."""
    widths = (32, 16)
    print(f"fp16 format, O accumulated in {' and '.join(map(str, widths))} bits (seed {SEED}, "
          f"{sizes.fp16_rows} query rows):")
    rows, res = [], {}
    for n in sizes.fp16_ns:
        for d in sizes.fp16_ds:
            for kind in FP16_INPUTS:
                q, k, v = fp16_inputs(kind, n, d, sizes.fp16_rows)
                ref = float_reference(q, k, v)
                t0 = time.perf_counter()
                errs = {b: float_errors(fp16_attention(q, k, v, FP16Format(o_acc_bits=b)), ref)
                        for b in widths}
                floor = float_errors(ref.astype(np.float16), ref)
                res[kind, n, d] = {"floor": floor, **errs}
                rows.append((kind, n, d, *(f"{errs[b][0]:.2e}" for b in widths), f"{floor[0]:.2e}",
                             *(f"{errs[b][1]:.2e}" for b in widths), f"{floor[1]:.2e}"))
                print(f"  {kind:8s} N={n:5d} d={d:3d}: relative L2 "
                      + ", ".join(f"O{b} {errs[b][0]:.2e}" for b in widths)
                      + f" (fp16 output {floor[0]:.2e}); max abs "
                      + ", ".join(f"O{b} {errs[b][1]:.2e}" for b in widths)
                      + f" (fp16 output {floor[1]:.2e}) ({time.perf_counter() - t0:.1f} s)",
                      flush=True)
    head = ("input", "N", "d", *(f"rel. L2, O {b}-bit" for b in widths), "rel. L2, fp16 output",
            *(f"max abs, O {b}-bit" for b in widths), "max abs, fp16 output")
    return table(head, rows), res


def fp16_plan_table():
    """What the narrower O buys on the paper preset: the Q block and the off-chip traffic."""
    base = preset("paper")
    rows, res = [], {}
    for d in (64, 128):
        for bits in (32, 16):
            cfg = dataclasses.replace(base, workload=dataclasses.replace(base.workload, head_dim=d),
                                      format=FP16Format(o_acc_bits=bits))
            plan = make_plan(cfg)
            res[d, bits] = plan
            rows.append((d, bits, plan.a_ideal, plan.a_fit, plan.a,
                         f"{plan.traffic.bytes / 2**30:.3f}",
                         f"{plan.traffic.bytes / res[d, 32].traffic.bytes:.3f}"))
    head = ("d", "O bits", "a (paper's count)", "a_fit", "a", "off-chip GiB", "traffic vs O 32-bit")
    print(table(head, rows))
    return table(head, rows), res


FP16_TEMPLATE = """\
# The fp16 format: the width of the O accumulators

Generated by `bench/bench_accuracy.py` (`make bench`, or `--fp16-o` for this
section alone){quick_note}; do not edit by hand (seed {seed}).

`FP16Format(o_acc_bits={default_bits})`, the default, keeps the O accumulators
in fp32; `o_acc_bits = 16` (in a TOML file, in the `[format]` table of an fp16
configuration) keeps them in fp16, which is how the paper counts them: every
on-chip value at the stored precision. The Plan reserves a x d x o_acc_bits for
them.

**What it buys.** The paper preset (N = {n}, {cache_kib} KB cache); "a (paper's
count)" is a = (M - d)/(2d + 4) with M in fp16 elements, a_fit what the Plan's
reservations leave (scores, m and l stay 32-bit, P and alpha are double-buffered,
K/V rows are staged), a the rows the hardware uses:

{plan_table}

**What it costs.** A float model of the dataflow at the format's widths (b = 1,
the online softmax over the K/V rows one at a time; Q, K, V in fp16; scores, m
and l in fp32; P and alpha rounded to fp16; O = alpha O + P V_j computed in fp32
and rounded to the accumulator's width after every K/V row; then O / l in fp32)
against float64 attention on the same fp16 inputs, {rows} query rows per case
(rows are independent) against all N keys. The errors are of O / l before it is
stored; "fp16 output" is the error of storing the exact result in fp16, which
every fp16 output carries anyway. Inputs:

{inputs}

{acc_table}

At N = {n_max} the fp16 accumulators leave a relative L2 error {lo16} to {hi16}
times that of the fp16 output itself; the fp32 accumulators, at every N
measured, at most {hi32} times. With offset_v at d = {d0} the fp16 accumulators'
relative L2 error is {growth}. Hence the default of 32 bits; `o_acc_bits = 16`
plans with the paper's count and carries this cost.
"""


def render_fp16(sizes, quick, fp16, plans):
    (acc_md, acc), (plan_md, _) = fp16, plans
    paper = preset("paper")
    n_max, d0 = max(sizes.fp16_ns), min(sizes.fp16_ds)

    def ratios(bits, keys):
        r = [acc[key][bits][0] / acc[key]["floor"][0] for key in keys]
        return f"{min(r):.1f}", f"{max(r):.1f}"

    lo16, hi16 = ratios(16, [key for key in acc if key[1] == n_max])
    _, hi32 = ratios(32, acc)
    growth = ", ".join(f"{acc['offset_v', n, d0][16][0]:.1e} at N = {n}" for n in sizes.fp16_ns)
    inputs = "\n".join(f"{i}. **{kind}**: {text}." for i, (kind, (*_, text))
                       in enumerate(FP16_INPUTS.items(), 1))
    return reflow(FP16_TEMPLATE.format(
        quick_note=" in its quick mode (smaller samples)" if quick else "", seed=SEED,
        default_bits=FP16Format().o_acc_bits, n=paper.workload.seq_len,
        cache_kib=paper.budget.cache_bytes // 1024, plan_table=plan_md, rows=sizes.fp16_rows,
        inputs=inputs, acc_table=acc_md, n_max=n_max, lo16=lo16, hi16=hi16, hi32=hi32,
        d0=d0, growth=growth)) + "\n"


FP16_HEADING = FP16_TEMPLATE.splitlines()[0]


def with_fp16_section(text, section):
    """`text` (a document) with its fp16 section, from FP16_HEADING to the end, replaced."""
    head = text.split(FP16_HEADING)[0].rstrip("\n")
    return f"{head}\n\n{section}" if head else section


# -- what the defaults cost (from the shapes the builders use) -------------------------------

def dsps(a_shape, b_shape):
    """MULT18X18D of one a x b multiply, split as the builders split it."""
    return len(pieces(Signal(a_shape))) * len(pieces(Signal(b_shape)))


def exp_rom_widths(arith):
    """Bits of a value and of a slope in the exp2 table."""
    t, dt = arith.exp_table
    return max(t).bit_length(), max(dt).bit_length()


def cost_table(arith):
    cfg = arith.cfg
    F = cfg.recip_frac
    R = cfg.x_frac - cfg.exp_lut_bits
    tw, dw = exp_rom_widths(arith)
    l_signed = signed(arith.l_shape.width + 1)
    mults = [
        ("PE: score", "`mac`", arith.element_shape, arith.element_shape, "0"),
        ("PE: alpha*O or P*V", "`update`", arith.p_shape, arith.o_shape, arith.update_latency),
        ("softmax lane: l", "`update`", arith.p_shape, l_signed, arith.update_latency),
        ("EXP: x = c*(S - m)", "`scale`", arith.diff_shape, arith.c_shape, arith.scale_latency),
        ("EXP: interpolation", "`exp2`", dw, R, arith.exp2_latency),
        ("per Q row: mnt*y, per Newton step", "`reciprocal`", F + 1, F + 1, arith.reciprocal_latency),
        ("per Q row: y*(2 - mnt*y), per step", "`reciprocal`", F + 1, F + 3, arith.reciprocal_latency),
        ("out: O*y", "`finalize`", arith.o_shape, arith.recip_shape, arith.finalize_latency),
    ]
    rows = []
    for what, op, a_shape, b_shape, latency in mults:
        a_w = a_shape if isinstance(a_shape, int) else a_shape.width
        b_w = b_shape if isinstance(b_shape, int) else b_shape.width
        rows.append((what, op, f"{a_w} x {b_w}", dsps(a_shape, b_shape), latency))
    text = table(("multiply", "builder", "bits", "MULT18X18D", "builder latency (cycles)"), rows)
    roms = (f"ROMs: the exp2 table, {2 ** cfg.exp_lut_bits} x {tw + dw} bits (value and slope), "
            f"in every EXP module; the reciprocal seed, {2 ** cfg.recip_seed_bits} x {F + 1} bits.")
    return text + "\n\n" + roms


# -- the document ---------------------------------------------------------------------------

TEMPLATE = """\
# Accuracy of the int8 format

Generated by `bench/bench_accuracy.py` (`make bench`){quick_note}; do not edit by
hand: the prose and its bounds are rendered from the bench, every figure is
computed from the format or measured by it (seed {seed}). The arithmetic itself
is described in `attenio/hdl/formats/int8.py`.

## Target

The int8 output equals round(O_ref / sv) for >= {target_pct} of elements and is
never more than {target_lsb} LSB away, for N up to {n_max}. The output is a
weighted mean of V: out = sum_j w_j V_j / sum_j w_j, so what counts is the error
of the weights relative to each other, times |V_j - out| <= {v_span} LSB. The
output is exact unless that error moves the value across a rounding boundary, so
the mismatch rate is about 2 E|err| (err in LSB before the final rounding). We
want E|err| well below {e_err:.3f} LSB on realistic data, and a hard bound below
0.5 LSB on any data (then the output is never 2 LSB off).

## Error analysis (why the defaults)

Defaults: `{fmt}`; widths at N = {n_max}, d = 128: score {w.score},
P and alpha {w.p}, l {w.l}, O {w.o_acc} bits.

1. **alpha cancels, mostly.** The same alpha multiplies l and O, so its error
   cancels in O/l for everything accumulated before it. It does not cancel
   between keys accumulated on either side of it: the weight ratio of keys j and
   j' carries the errors of every alpha between them. With keys in random order
   the max moves about ln N times and this is negligible; with strictly rising
   scores it moves at every step, and since equal score steps give bit-identical
   alphas their errors add up systematically over the steps whose keys still
   carry weight (on the "ascending" inputs, which spread their scores over the
   whole sequence, most of them). This drift is what sets x_frac (item 2); the
   rounding of each rescale (1/2 ulp of 2^-p_frac of l and of O) is bounded as
   in item 4.
2. **Rounding of x (x_frac).** Each exp2 argument is off by up to
   2^-(x_frac+1) log2 units, a relative weight error up to ln2 2^-(x_frac+1).
   For independent keys (rms {x_rms:.2f} 2^-x_frac per weight) a row carried by
   two equal keys with V {v_span} apart gets an rms error of about
   {two_key:.0f} 2^-x_frac LSB: {two_key_default:.1e} LSB at x_frac = {cfg.x_frac},
   {two_key_8:.2f} LSB at x_frac = 8. The systematic drift of item 1 is the
   stronger constraint: measured on the ascending inputs at N = {sweep_n}
   ({ascending_rows} rows), x_frac = 12 gives {asc12} exact, 14 gives {asc14},
   16 gives {asc16}, {cfg.x_frac} gives {asc_default}. x_frac = {cfg.x_frac}
   costs only the width of the exp2 argument ({x_bits} bits) and of the
   interpolation multiply ({interp_bits} bits of the fraction).
3. **exp2 table (exp_lut_bits T, interpolation).** The linear interpolation
   error of 2^f is at most (ln 2)^2 / 8 2^-2T 2 = {interp_coef:.2f} 2^-2T
   relative; T = {cfg.exp_lut_bits} gives <= {interp_bound:.1e} ({exp_measured:.1e}
   measured over a whole octave, final rounding included) from a
   {rom_depth} x {rom_bits}-bit ROM (value and slope) and a {dw} x {interp_bits}-bit
   multiply. T = {lut_more} measures {exp_lut_more:.1e} and gives {asc_lut_more}
   exact on the ascending inputs against {asc_default}, for a table twice the
   size. Without
   interpolation the error would be about ln2 2^-T = {no_interp_bound:.1e}
   ({exp_no_interp:.1e} measured). exp_guard = {cfg.exp_guard} keeps the table's own
   rounding (2^-{table_round_bits}) below the final rounding to p_frac.
4. **Rounding of P (p_frac).** Each P_j is off by at most 2^-(p_frac+1) absolute
   and l >= 1, so the output moves by at most N 2^-(p_frac+1) {v_span} LSB when
   all N errors share a sign (many keys with identical tiny weights), and by
   about sqrt(N) 2^-(p_frac+1) 0.58 rms|V - out| on independent data.
   p_frac = {cfg.p_frac} bounds the worst case by {p_bound:.3f} LSB at
   N = {n_max} (and below 0.5 LSB up to N = {p_n_half}); the typical case is
   smaller by about sqrt(N). The "dominant" inputs (one key with half the
   weight, N - 1 keys sharing the rest in weights ~1/N) are the sharpest probe:
   at N = {sweep_n} ({sweep_rows} rows, {seeds}) p_frac = 16 measures
   {dom16} exact, 20 gives {dom20}, {cfg.p_frac} gives {dom_default}. The same
   p_frac serves l and O: O must hold P*V exactly, else every accumulation would
   round. Hence l has p_frac + bitlen(N) bits and O 8 + bitlen(N) + p_frac
   ({w.l} and {w.o_acc} at N = {n_max}). Strictly rising scores rescale at every
   step; their roundings obey the same bound.
5. **Scale constant (c_frac).** Its rounding changes the temperature by a
   relative 2^-(c_frac+1)/c; over the ~{weight_span} log2 units of weights that
   matter this moves a weight by at most {c_term:.1e} for c >= 2^-14
   (`softmax_constant` refuses a c with fewer than 12 significant bits).
   c_int = {cfg.c_int}, c_frac = {cfg.c_frac} fill one {c_bits}-bit register.
6. **Reciprocal.** The seed's relative error ~2^-(s+1) is squared by each Newton
   step; s = {cfg.recip_seed_bits} and {cfg.recip_iters} steps leave only the
   rounding of recip_frac = {cfg.recip_frac} bits ({recip_default:.1e} relative
   measured, {recip_default_lsb:.1e} LSB at |out| = 128). One step measures
   {recip_1:.1e} ({recip_1_lsb:.1e} LSB), also enough; the bare seed
   {recip_0:.1e}. The seed table is {seed_depth} x {seed_bits} bits.

**Hard bound.** Per-weight relative errors of items 2, 3 and 5 (at most
{per_weight:.1e} for c >= 2^-14) move a weighted mean by at most
2 {per_weight:.1e} {v_span} = {weights_lsb:.1e} LSB; with items 4 and 6 the error
stays below {hard_bound:.2f} LSB on any data up to N = {n_max}, so the output is
never 2 LSB off, except for the systematic alpha drift of item 1, which grows
with the number of rescales among the keys that carry weight and has no useful
a-priori bound for adversarial orders; it is measured instead (ascending inputs).

**Measured** (tables below): on Gaussian and the five adversarial input kinds of
`attenio.sim.golden.make_inputs`, N = {ns}, d = {ds}, every case is
>= {worst_exact} exact and never more than {worst_lsb} LSB off (the
{weakest} inputs are the weakest; {n_9999} of {n_cases} cases are >= 99.99%).

**Cost of the defaults** (at N = {n_max}, d = 128; one MULT18X18D per 18 x 18
signed partial product, `attenio.hdl.formats.dsp`):

{cost}

A cheaper measured alternative is p_frac = 20 (O {w20.o_acc} bits, alpha
{w20.p} bits: >= {dom20_min} exact on the dominant inputs at N = {sweep_n}) at
the price of the bound of item 4 (it grows to {p20_bound:.1f} LSB at
N = {n_max}); x_frac = 12 {x12_verdict} (ascending: {asc12}).

**p_frac follows the largest N.** The "small" preset (N = {small_n}) uses
p_frac = {small.p_frac}: item 4's worst case is then {small_bound:.3f} LSB
({small_bound2:.3f} at p_frac = {small_p2}), and P and alpha ({ws.p} bits) meet l
({ws.l} bits) in {small_l_dsps} MULT18X18D per update and O ({ws.o_acc} bits) in
{small_o_dsps}, which is what fits its array on an ECP5-85F (docs/synthesis.md).
Measured at N = {small_n}, d = 16 and 64, the six input kinds, {preset_seeds}
each: worst case {small_worst} exact ({small_sweep}), never more than
{small_lsb} LSB off; p_frac = {small_low} drops to {small_low_exact}.

## Measured

### The default format

Fraction of outputs equal to the correctly rounded float64 result, the largest
distance from it and the mean distance from the unrounded result (rounding alone
gives 0.25).

{default_table}

### Cheaper formats on the hardest inputs (N = {sweep_n}, d = 64)

{variants_table}

### exp2 and the reciprocal alone

{exp_table}

{recip_table}

### The small preset's format at N = {small_n} (d = 16 and 64, every input kind)

{preset_table}
"""


def render(sizes, quick, default, variants, exp2, recip, small):
    (default_md, cases), (variants_md, var), (exp_md, exp_res), (recip_md, rec) = \
        default, variants, exp2, recip
    preset_md, pre, preset_cfg = small
    cfg = Int8Format()
    n_max = N_MAX
    arith = Int8Arith(cfg, max_seq_len=n_max, head_dim=128)
    w = cfg.datapath(max_seq_len=n_max, head_dim=128)
    tw, dw = exp_rom_widths(arith)
    x_rms = math.log(2) / (2 * math.sqrt(3))      # a uniform error of +-1/2 ulp of x, as a weight error
    two_key = 0.25 * V_SPAN * math.sqrt(2) * x_rms
    interp_coef = math.log(2) ** 2 / 8 * 2        # max f''/f of 2^f over an octave is 2 (ln 2)^2

    def item4(p_frac, n):
        return n * 2.0 ** -(p_frac + 1) * V_SPAN

    c_term = WEIGHT_SPAN * math.log(2) * 2.0 ** -(cfg.c_frac + 1) / 2.0 ** -14
    interp_bound = interp_coef * 2.0 ** (-2 * cfg.exp_lut_bits)
    per_weight = math.log(2) * 2.0 ** -(cfg.x_frac + 1) + interp_bound + c_term
    weights_lsb = 2 * per_weight * V_SPAN
    hard = weights_lsb + item4(cfg.p_frac, n_max) + 128 * rec[cfg.recip_iters]
    worst = min(cases, key=lambda c: c[3]["frac_exact"])
    small = preset_cfg.format
    small_n = preset_cfg.workload.seq_len
    ws = small.datapath(max_seq_len=small_n, head_dim=preset_cfg.workload.head_dim)
    others = [p for p in PRESET_P_FRAC if p > small.p_frac]
    low = min(PRESET_P_FRAC)
    dom = {k: v["dominant"] for k, v in var.items()}

    def span(lo_hi):
        lo, hi = lo_hi
        return pct(lo) if len(sizes.sweep_seeds) == 1 or lo == hi else f"{pct(lo)} - {pct(hi)}"

    p_n_half = 1 << int(math.log2(0.5 / item4(cfg.p_frac, 1)))
    return reflow(TEMPLATE.format(
        quick_note=" in its quick mode (smaller samples)" if quick else "",
        seed=SEED, target_pct=pct(TARGET_EXACT), target_lsb=TARGET_MAX_LSB, n_max=n_max,
        v_span=V_SPAN, e_err=(1 - TARGET_EXACT) / 2, fmt=cfg, w=w, cfg=cfg,
        x_rms=x_rms, two_key=two_key, two_key_default=two_key * 2.0 ** -cfg.x_frac,
        two_key_8=two_key * 2.0 ** -8, sweep_n=sizes.sweep_n, ascending_rows=sizes.ascending_rows,
        asc12=pct(var["x_frac=12"]["ascending"]), asc14=pct(var["x_frac=14"]["ascending"]),
        asc16=pct(var["x_frac=16"]["ascending"]), asc_default=pct(var["default"]["ascending"]),
        x_bits=arith.x_shape.width, interp_bits=cfg.x_frac - cfg.exp_lut_bits, interp_coef=interp_coef,
        interp_bound=interp_bound, exp_measured=exp_res["default"],
        rom_depth=2 ** cfg.exp_lut_bits, rom_bits=tw + dw, dw=dw, lut_more=cfg.exp_lut_bits + 1,
        exp_lut_more=exp_res[LUT_MORE], asc_lut_more=pct(var[LUT_MORE]["ascending"]),
        no_interp_bound=math.log(2) * 2.0 ** -cfg.exp_lut_bits, exp_no_interp=exp_res["no interpolation"],
        table_round_bits=cfg.p_frac + cfg.exp_guard,
        p_bound=item4(cfg.p_frac, n_max), p_n_half=p_n_half, sweep_rows=sizes.sweep_rows,
        seeds=plural(len(sizes.sweep_seeds), 'seed'), dom16=span(dom["p_frac=16"]),
        dom20=span(dom["p_frac=20"]),
        dom_default=span(dom["default"]), weight_span=WEIGHT_SPAN, c_term=c_term,
        c_bits=cfg.c_int + cfg.c_frac,
        recip_default=rec[cfg.recip_iters], recip_default_lsb=128 * rec[cfg.recip_iters],
        recip_1=rec[1], recip_1_lsb=128 * rec[1], recip_0=rec[0],
        seed_depth=2 ** cfg.recip_seed_bits, seed_bits=cfg.recip_frac + 1,
        per_weight=per_weight, weights_lsb=weights_lsb, hard_bound=hard,
        ns=", ".join(map(str, sizes.ns)), ds=" and ".join(map(str, sizes.ds)),
        worst_exact=pct(worst[3]["frac_exact"]), worst_lsb=max(c[3]["max_err_lsb"] for c in cases),
        weakest=worst[0], n_9999=sum(c[3]["frac_exact"] >= 0.9999 for c in cases), n_cases=len(cases),
        cost=cost_table(arith), w20=Int8Format(p_frac=20).datapath(max_seq_len=n_max, head_dim=128),
        dom20_min=pct(dom["p_frac=20"][0]),
        x12_verdict="is not an option" if var["x_frac=12"]["ascending"] < TARGET_EXACT
        else "meets the target only narrowly", p20_bound=item4(20, n_max),
        small_n=small_n, small=small, small_bound=item4(small.p_frac, small_n),
        small_p2=small.p_frac + 2, small_bound2=item4(small.p_frac + 2, small_n), ws=ws,
        small_l_dsps=dsps(unsigned(ws.p), signed(ws.l + 1)),
        small_o_dsps=dsps(unsigned(ws.p), signed(ws.o_acc)),
        preset_seeds=plural(len(sizes.preset_seeds), 'seed'), small_worst=pct(pre[small.p_frac][0]),
        small_sweep=", ".join(f"p_frac {p}: {pct(pre[p][0])}" for p in others),
        small_lsb=pre[small.p_frac][1], small_low=low,
        small_low_exact=pct(pre[low][0]),
        default_table=default_md, variants_table=variants_md, exp_table=exp_md,
        recip_table=recip_md, preset_table=preset_md)) + "\n"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true",
                    help="smaller samples (N <= 1024); writes no document unless --doc")
    ap.add_argument("--doc", type=Path, default=None,
                    help=f"where to write the document (default {DOC.relative_to(ROOT)} for a full run)")
    ap.add_argument("--fp16-o", action="store_true",
                    help="measure only the fp16 O accumulators and rewrite only their section")
    args = ap.parse_args(argv)
    sizes = QUICK if args.quick else FULL
    doc = args.doc if args.doc is not None else (None if args.quick else DOC)
    t0 = time.perf_counter()
    print(f"seed {SEED}{', quick' if args.quick else ''}")
    fp16 = fp16_o_table(sizes), fp16_plan_table()
    fp16_md = render_fp16(sizes, args.quick, *fp16)
    if args.fp16_o:
        if doc is not None:
            doc.write_text(with_fp16_section(doc.read_text() if doc.exists() else "", fp16_md))
            print(f"wrote the fp16 section of {doc}")
        print(f"{time.perf_counter() - t0:.0f} s")
        return 0
    default = default_table(sizes)
    variants = variants_table(sizes)
    exp2 = exp2_errors()
    print(exp2[0])
    recip = reciprocal_errors()
    print(recip[0])
    small = preset_table(sizes)
    golden_wall_time()
    ok = all(met(acc) for *_, acc in default[1]) and all(
        exact >= TARGET_EXACT and lsb <= TARGET_MAX_LSB
        for p, (exact, lsb) in small[1].items() if p == small[2].format.p_frac)
    if doc is not None:
        doc.parent.mkdir(parents=True, exist_ok=True)
        doc.write_text(with_fp16_section(
            render(sizes, args.quick, default, variants, exp2, recip, small), fp16_md))
        print(f"wrote {doc}")
    print(f"\naccuracy target (>= {pct(TARGET_EXACT)} exact, never > {TARGET_MAX_LSB} LSB) with the "
          f"default format and the small preset's: {'met' if ok else 'MISSED'}; "
          f"{time.perf_counter() - t0:.0f} s")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
