"""The paper's evaluation as a timing: one closed form per dataflow, each assumption named.

The default comparison (`attenio.model.compare`, "fair" timing) runs every dataflow
through the cycle models on the same hardware, memory and compute overlapped at
the full bandwidth; where compute binds, no dataflow can beat another. The
paper's speedups (`PAPER_REPORTED`) rest on other assumptions, decoded from its
figures (docs/paper.md measures what each contributes). `PaperTiming` states each as
a field, so any of them can be switched off and its share of the difference measured:

rule 1  ``baselines_serial``, ``bw_eff``: Standard, FLAT and FlashAttention-2 pay
        their off-chip traffic after their compute, without overlap, at an
        effective bandwidth of ``bw_eff`` bytes a cycle (default half the budget's
        peak).
rule 2  ``softmax_exposed``, ``exps_per_score``: AttenIO's memory stays hidden
        behind its compute (its three overlap levels), its softmax does not: each
        K/V row adds exps_per_score * a / E cycles after the scores (P and the
        rescale factor of each of the block's a rows, over the E EXP units), kept
        exact: rounded up to whole cycles a row it would grow by less than E / (2a).
rule 3  ``a_rule``: AttenIO's Q block is the analytic optimum with every on-chip
        value at the stored precision, a = (M - d) / (2 d + 4), M = cache bytes /
        element bytes (`analytic_a`; docs/paper.md gives it for the paper preset),
        not the Plan's a, which also counts what the hardware reserves and fills the array.

Common to every dataflow here: compute runs on the whole array, 2 d / P cycles
for each (query row, key) pair the schedule visits, whatever its tiling, and
nothing else costs time (no array fill, no reduction latency; the baselines'
softmax is free). Per head, with V pairs visited, T bytes moved, P MACs, E EXP
units and b = bw_eff::

    AttenIO    max(2 d V / P + e V / E, T / b)     rule 2 off: max(2 d V / P, e V / E, T / b)
    baseline   2 d V / P + T / b                    rule 1 off: max(2 d V / P, T / b)

Without causal masking V = N^2 for every dataflow and T is the Plan's and the
BaselinePlans' traffic. Causal (AttenIO and FlashAttention-2, as in the fair
comparison): a Q block of rows [i0, i0 + rows) streams the i0 + rows K/V rows its
last row sees, for all of its rows, so V and T count the masked pairs of the
diagonal block too, as the schedule computes them.

With every rule off (baselines overlapped at the peak bandwidth, softmax hidden,
the Plan's a) the forms are a roofline: the fair comparison without its pipeline
details (`roofline`). Cycles are exact fractions, reported as floats.
"""

from dataclasses import dataclass, fields, replace
from fractions import Fraction

from attenio import validate
from attenio.analysis import attention_optimum
from attenio.baselines import all_baselines
from attenio.errors import ConfigError
from attenio.plan import attenio_traffic

__all__ = ["PaperTiming", "roofline", "ladder", "without_each", "RULES", "A_RULES",
           "PAPER_REPORTED", "analytic_a", "visited", "attenio_timing", "baseline_timing",
           "paper_one", "break_even_bw"]

#: AttenIO's speedup over each baseline as the paper reports it, over N = 8K..128K,
#: keyed by d.
PAPER_REPORTED = {64: {"standard": 2.5, "flat": 8.8, "flashattention2": 1.6},
                  128: {"standard": 1.9, "flat": 9.9, "flashattention2": 1.3}}

#: Where AttenIO's Q block comes from: the analysis' optimum, or the Plan's a.
A_RULES = ("analytic", "plan")

#: What each parameter of `PaperTiming` means (in the JSON and the docs).
RULES = {
    "bw_eff": "rule 1: bytes a cycle at which off-chip traffic is paid in this mode "
              "(default half the budget's peak)",
    "baselines_serial": "rule 1: the baselines pay their traffic after their compute, "
                        "without overlap (false: max(compute, traffic / bw_eff))",
    "softmax_exposed": "rule 2: AttenIO's softmax runs after its scores, exps_per_score * a / E "
                       "cycles a K/V row (false: overlapped with compute); its memory stays hidden",
    "exps_per_score": "rule 2: exponentials a score costs AttenIO (P and the rescale factor)",
    "a_rule": "rule 3: AttenIO's Q block rows: 'analytic' = (M - d) / (2 d + 4) with M the cache "
              "in stored elements (fp16 O, no reservations), 'plan' = the Plan's a",
    "compute": "every dataflow: 2 d / P cycles a (query row, key) pair its schedule visits, "
               "on the whole array; no fill, no reduction latency, the baselines' softmax free",
}


@dataclass(frozen=True)
class PaperTiming:
    """The paper's evaluation assumptions; the defaults are the paper's, each field a rule
    of `RULES` (the module docstring has the closed forms they make)."""

    bw_eff: float | None = None
    baselines_serial: bool = True
    softmax_exposed: bool = True
    exps_per_score: int = 2
    a_rule: str = "analytic"

    def __post_init__(self):
        owner = "paper timing"
        if self.bw_eff is not None:
            validate.positive_number(owner, "bw_eff", self.bw_eff, error=ConfigError)
        validate.flag(owner, "baselines_serial", self.baselines_serial, error=ConfigError)
        validate.flag(owner, "softmax_exposed", self.softmax_exposed, error=ConfigError)
        validate.integer(owner, "exps_per_score", self.exps_per_score, lo=0, error=ConfigError)
        validate.one_of(owner, "a_rule", self.a_rule, A_RULES, error=ConfigError)

    def bandwidth(self, budget):
        """bw_eff in bytes a cycle on `budget`: the field, or half the peak; never above it."""
        peak = budget.bw_bytes_per_cycle
        bw = self.bw_eff if self.bw_eff is not None else peak / 2
        if bw > peak:
            raise ConfigError(f"paper timing: bw_eff = {bw:g} bytes a cycle exceeds the peak "
                              f"bandwidth of {peak} (--bw)")
        return bw

    def parameters(self, budget):
        """Every parameter with bw_eff resolved on `budget`, as the JSON records them."""
        p = {f.name: getattr(self, f.name) for f in fields(self)}
        p["bw_eff"] = self.bandwidth(budget)
        p["bw_eff_from"] = "given" if self.bw_eff is not None else "half the peak bandwidth"
        return p


def roofline(budget):
    """Every rule off on `budget`: the baselines overlapped at the peak bandwidth, AttenIO's
    softmax hidden, the Plan's a. Each dataflow is then max(compute, traffic / peak)."""
    return PaperTiming(bw_eff=budget.bw_bytes_per_cycle, baselines_serial=False,
                       softmax_exposed=False, a_rule="plan")


def ladder(budget):
    """[(label, PaperTiming)] from the roofline to the paper's rules, one rule added a step."""
    roof = roofline(budget)
    serial = replace(roof, baselines_serial=True)
    half = replace(serial, bw_eff=None)
    exposed = replace(half, softmax_exposed=True)
    return [("roofline: every dataflow max(compute, traffic / peak), the Plan's a", roof),
            ("+ rule 1: the baselines pay their traffic after their compute (at the peak)", serial),
            ("+ rule 1: ... at bw_eff, half the peak", half),
            ("+ rule 2: AttenIO's softmax after its scores", exposed),
            ("+ rule 3: the analytic a (= the paper timing)", replace(exposed, a_rule="analytic"))]


def without_each(budget):
    """[(label, PaperTiming)]: the paper's rules with one of them undone at a time."""
    paper = PaperTiming()
    return [("the paper timing", paper),
            ("rule 1 undone: the baselines overlap traffic and compute",
             replace(paper, baselines_serial=False)),
            ("rule 1 undone: bw_eff = the peak", replace(paper, bw_eff=budget.bw_bytes_per_cycle)),
            ("rule 2 undone: AttenIO's softmax overlapped", replace(paper, softmax_exposed=False)),
            ("rule 3 undone: the Plan's a", replace(paper, a_rule="plan"))]


def analytic_a(config):
    """Rule 3's a: (M - d) / (2 d + 4), M the cache in stored elements, at most N."""
    w = config.workload
    m = config.budget.cache_bytes // config.format.element_bytes
    return attention_optimum(w.seq_len, w.head_dim, m)[0]


def visited(n, block, causal):
    """(pairs, K/V rows) of one head with Q blocks of `block` rows: the (query row, key)
    pairs the schedule computes and the K/V rows it streams (each is read as K and as V)."""
    full, rem = divmod(n, block)
    if not causal:
        return n * n, n * (full + (1 if rem else 0))
    # block i (0-based, full) sees (i + 1) * block keys; a last partial block sees all n
    tri = full * (full + 1) // 2
    return block * block * tri + rem * n, block * tri + (n if rem else 0)


def _entry(*, compute, exp, memory, work, cycles, nbytes, pairs):
    """Cycles and their parts: compute + exposed exp (work) + exposed memory = cycles."""
    return {"cycles": float(cycles), "compute_cycles": float(compute), "exp_cycles": float(exp),
            "memory_cycles": float(memory), "exposed_exp_cycles": float(work - compute),
            "exposed_memory_cycles": float(cycles - work),
            "offchip_bytes": nbytes, "pairs": pairs,
            "pe_util": float(compute / cycles), "exp_util": float(exp / cycles),
            "stall_fraction": float((cycles - work) / cycles)}


def _dims(config):
    w, b = config.workload, config.budget
    return w.seq_len, w.head_dim, w.heads, b.macs, config.format.element_bytes


def _causal_bytes(config, block):
    """Q in and O out once, K and V for every row streamed: one head times the heads."""
    n, d, h, _, eb = _dims(config)
    ob = config.format.out_bytes
    return h * ((eb + ob) * n * d + eb * 2 * d * visited(n, block, True)[1])


def attenio_timing(config, timing, a, *, causal=False):
    """AttenIO with Q blocks of `a` rows under `timing`: rule 2's closed form."""
    n, d, h, macs, _ = _dims(config)
    pairs = h * visited(n, a, causal)[0]
    nbytes = _causal_bytes(config, a) if causal else attenio_traffic(config, a).bytes
    compute = Fraction(2 * d * pairs, macs)
    exp = Fraction(timing.exps_per_score * pairs, config.budget.exp_units)
    memory = Fraction(nbytes) / Fraction(timing.bandwidth(config.budget))
    work = compute + exp if timing.softmax_exposed else max(compute, exp)
    return _entry(compute=compute, exp=exp, memory=memory, work=work,
                  cycles=max(work, memory), nbytes=nbytes, pairs=pairs)


def baseline_timing(config, timing, bl, *, causal=False):
    """BaselinePlan `bl` under `timing`: rule 1's closed form."""
    n, d, h, macs, _ = _dims(config)
    if causal:
        if bl.name not in ("flashattention2", "flashattention2_fair"):
            raise ValueError(f"causal masking is modelled for FlashAttention-2 only, not {bl.name}")
        br = bl.tiling["B_r"]
        pairs, nbytes = h * visited(n, br, True)[0], _causal_bytes(config, br)
    else:
        pairs, nbytes = h * n * n, bl.traffic.bytes
    compute = Fraction(2 * d * pairs, macs)
    memory = Fraction(nbytes) / Fraction(timing.bandwidth(config.budget))
    cycles = compute + memory if timing.baselines_serial else max(compute, memory)
    return _entry(compute=compute, exp=0, memory=memory, work=compute, cycles=cycles,
                  nbytes=nbytes, pairs=pairs)


def _lines(entry, *, serial, exposed):
    """The entry's cycles as max of lines c + t u in u = 1 / bandwidth (for `break_even_bw`)."""
    t = entry["offchip_bytes"]
    work = entry["compute_cycles"] + (entry["exp_cycles"] if exposed else 0)
    if serial:
        return [(work, t)]
    return [(work, 0), (entry["exp_cycles"], 0), (0, t)]


def break_even_bw(ours, theirs, timing):
    """The bandwidth (bytes a cycle) at which the dataflow `theirs` (a baseline entry) is
    as fast as AttenIO's `ours` under `timing`, above which AttenIO is not faster; 0.0
    when AttenIO is never faster, inf when it is at every bandwidth.

    Both are timed at the same bw_eff; each cycle count is a maximum of lines in
    u = 1 / bw_eff, so the crossing is found segment by segment.
    """
    a = _lines(ours, serial=False, exposed=timing.softmax_exposed)
    x = _lines(theirs, serial=timing.baselines_serial, exposed=False)
    f = lambda ls, u: max(c + t * u for c, t in ls)
    diff = lambda u: f(x, u) - f(a, u)
    cuts = sorted({0.0} | {(c2 - c1) / (t1 - t2) for c1, t1 in a + x for c2, t2 in a + x
                           if t1 != t2 and (c2 - c1) / (t1 - t2) > 0})
    # diff is linear between cuts and past the last; AttenIO is faster where diff > 0
    if diff(0.0) > 0:
        return float("inf")
    for lo, hi in zip(cuts, cuts[1:] + [cuts[-1] + 1.0]):
        if diff(hi) > 0 or (hi not in cuts and diff(hi) > diff(lo)):
            u = _root(diff, lo, hi)
            return float("inf") if u == 0 else 1 / u
    return 0.0


def _root(g, lo, hi):
    """Where g, linear through lo and hi with g(lo) <= 0 < g(hi) or rising, crosses 0."""
    glo, ghi = g(lo), g(hi)
    return lo + (hi - lo) * (-glo) / (ghi - glo)


def paper_one(config, timing, *, plan_a=None):
    """One (N, d) under `timing`: AttenIO, every baseline, and causal AttenIO against causal
    FlashAttention-2. `plan_a` is the Plan's a, needed when the timing's a_rule is "plan"."""
    if timing.a_rule == "analytic":
        a = analytic_a(config)
    elif plan_a is None:
        raise ValueError("paper timing: a_rule 'plan' needs the Plan's a (plan_a)")
    else:
        a = plan_a
    ours = attenio_timing(config, timing, a)
    bls = all_baselines(config)
    baselines = {}
    for name, bl in bls.items():
        e = baseline_timing(config, timing, bl)
        e.update(speedup=e["cycles"] / ours["cycles"],
                 traffic_ratio=e["offchip_bytes"] / ours["offchip_bytes"],
                 break_even_bw=break_even_bw(ours, e, timing), tiling=dict(bl.tiling))
        baselines[name] = e
    causal = attenio_timing(config, timing, a, causal=True)
    fc = baseline_timing(config, timing, bls["flashattention2"], causal=True)
    causal.update(gain=ours["cycles"] / causal["cycles"],
                  traffic_ratio=causal["offchip_bytes"] / ours["offchip_bytes"],
                  fa2_causal_cycles=fc["cycles"], fa2_causal_bytes=fc["offchip_bytes"],
                  speedup_over_fa2_causal=fc["cycles"] / causal["cycles"])
    return {"seq_len": config.workload.seq_len, "head_dim": config.workload.head_dim,
            "a": a, "a_rule": timing.a_rule, "bw_eff": timing.bandwidth(config.budget),
            "attenio": ours, "baselines": baselines, "attenio_causal": causal}
