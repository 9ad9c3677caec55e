"""`attenio compare`: AttenIO and the baselines through the cycle models, as data, tables and plots.

`compare(config, seq_lens, head_dims)` plans and times every (N, d) on the
config's hardware and returns one JSON-ready dict; `render_text`,
`render_markdown` turn it into what people read (`attenio.model.compareplots`
writes it with its plots). Speedups are always "of AttenIO over X":
cycles(X) / cycles(AttenIO), so > 1 means AttenIO is faster; traffic ratios are
bytes(X) / bytes(AttenIO).

AttenIO is the Plan the planner chooses (`attenio.model.planner.choose_plan`: rows
split over the s MACs the cycle model finds fastest, or the config's forced
`split`). Beside it ride the same hardware with one MAC a row (s = 1, what the
split gains and what its a costs in traffic) and, beyond the paper (model
only), causal masking with row-granular skipping, next to FlashAttention-2
skipping whole K/V blocks.

Two timings, and the data says which made it (``data["timing"]``):

* fair (the default): the cycle models above, every dataflow overlapping memory
  and compute at the budget's full bandwidth;
* paper (`compare(..., timing=PaperTiming(...))`): the paper's evaluation
  assumptions as closed forms (`attenio.model.papertiming`), set beside the fair
  speedups of the same (N, d).

`sweep(config, seq_lens, head_dims, axis="bw"|"cache", values=...)` repeats a
comparison over the budget's bandwidth or cache: in fair timing the bandwidth
sweep shows where AttenIO's traffic advantage turns into speed (its crossovers
are each baseline's ridge, the bandwidth below which its traffic takes longer
than its array work); the cache sweep runs in either timing.
"""

import dataclasses
import functools
import math
import time

from attenio.baselines import all_baselines
from attenio.errors import ConfigError
from attenio.formats import FORMATS, format_by_name
from attenio.plan import BANKS, make_plan
from attenio.report import human_bytes, table

from .baselinemodel import BASELINE_ORDER, simulate_baseline
from .cyclemodel import RtlParams, simulate
from .papertiming import PAPER_REPORTED, RULES, paper_one
from .planner import choose_plan

__all__ = ["compare", "sweep", "geomeans", "timing_line", "render_text", "render_markdown",
           "is_decoder", "decoder_one", "render_decoder", "formats_one", "formats_table",
           "METRICS", "TITLES",
           "SWEEP_AXES"]

TITLES = {"attenio": "AttenIO", "standard": "Standard", "flat": "FLAT",
          "flashattention2": "FA-2", "flashattention2_fair": "FA-2 fair"}
METRICS = ("cycles", "pe_util", "spatial_util", "mac_efficiency", "exp_util", "stall_fraction",
           "offchip_bytes")


def _with(config, n, d, **budget):
    """`config` at N = n, d = d, with budget fields changed."""
    return dataclasses.replace(config, workload=dataclasses.replace(config.workload, seq_len=n,
                                                                    head_dim=d),
                               budget=dataclasses.replace(config.budget, **budget))


def _entry(res, nbytes, ours=None):
    e = {"cycles": res.cycles, "pe_busy": res.pe_busy, "exp_busy": res.exp_busy,
         "mem_stall": res.mem_stall, "bytes_read": res.bytes_read,
         "bytes_written": res.bytes_written, "offchip_bytes": nbytes,
         "pe_util": res.pe_util, "spatial_util": res.spatial_util,
         "mac_efficiency": res.mac_efficiency, "exp_util": res.exp_util,
         "exp_work_util": res.exp_work_util, "stall_fraction": res.stall_fraction}
    if ours is not None:
        e["speedup"] = res.cycles / ours["cycles"]
        e["traffic_ratio"] = nbytes / ours["offchip_bytes"]
    return e


def _unsplit(config, banks):
    """The same array at s = 1 with `banks` banks, timed; at two banks where an O update
    would be read before it is written at `banks` (`attenio.hdl.core.o_update_problem`:
    with more than two, the last V rows of a block follow each other r*d/s cycles apart,
    and at s = 1 that can be shorter than the update)."""
    for b in dict.fromkeys((banks, BANKS)):
        try:
            return _timed(make_plan(dataclasses.replace(config, rows_per_mac=None), split=1,
                                    banks=b))
        except ConfigError:
            if b == BANKS:
                raise


def _mapping(plan):
    return {"split": plan.split, "rows_per_mac": plan.rows_per_mac, "a": plan.a,
            "groups": plan.groups, "macs_active": plan.macs_active, "q_blocks": plan.q_blocks,
            "kv_depth": plan.kv_depth, "banks": plan.banks}


def _timed(plan, **kw):
    res = simulate(plan, **kw)
    if not kw.get("causal"):
        assert (res.bytes_read, res.bytes_written) == (plan.traffic.read_bytes,
                                                       plan.traffic.write_bytes)
    e = _entry(res, res.bytes_read + res.bytes_written)
    e.update(_mapping(plan))
    return e


@functools.lru_cache(maxsize=128)
def _chosen(config):
    """The planner's Plan of `config` (a frozen Config), made once: a comparison asks for
    the same configuration more than once (a sweep's fair and paper timings), and the
    planner models tens of mappings of the paper preset."""
    return choose_plan(config)


def formats_one(config):
    """Every format of the table on `config`'s workload and budget, side by side: its element
    and O widths, the largest a its cache holds and the planner's a, cycles and traffic, the
    traffic against `config`'s format (`config`'s own format object; the others at their
    defaults). A format the budget cannot plan is a row with its `error`."""
    own = config.format
    rows = []
    for name in FORMATS:
        fmt = own if name == own.name else format_by_name(name)
        try:
            plan = _chosen(dataclasses.replace(config, format=fmt))
        except ConfigError as exc:
            rows.append({"format": name, "error": str(exc)})
            continue
        res = simulate(plan)
        rows.append({"format": name, "element_bytes": fmt.element_bytes,
                     "out_bytes": fmt.out_bytes, "a_fit": plan.a_fit, "a": plan.a,
                     "split": plan.split, "rows_per_mac": plan.rows_per_mac,
                     "banks": plan.banks, "cycles": res.cycles, "pe_util": res.pe_util,
                     "offchip_bytes": plan.traffic.bytes})
    ours = next(r for r in rows if r["format"] == own.name)
    for r in rows:
        if "error" not in r and "error" not in ours:
            r["traffic_ratio"] = r["offchip_bytes"] / ours["offchip_bytes"]
    return rows


def formats_table(rows):
    """(headers, cells) of `formats_one`'s rows."""
    cells = []
    for r in rows:
        if "error" in r:
            cells.append((r["format"], *["-"] * 8, r["error"]))
            continue
        cells.append((r["format"], f"{r['element_bytes']} / {r['out_bytes']}", r["a_fit"],
                      r["a"], f"{r['split']},{r['rows_per_mac']},{r['banks']}",
                      f"{r['cycles'] / 1e6:.2f}", _pct(r["pe_util"]),
                      human_bytes(r["offchip_bytes"]), f"{r['traffic_ratio']:.2f}x", ""))
    return (["format", "bytes Q,K,V / O", "a fits", "a", "s,r,B", "Mcycles", "PE time",
             "traffic", "traffic / this format's", "why not"], cells)


def compare_one(config):
    """One (N, d): AttenIO as planned, the same array at s = 1, causal AttenIO, the baselines.

    The main rows are unmasked whatever the workload says (most baselines have no causal
    model); the causal rows (AttenIO against FA-2, both masked) are always there. Decoder
    shapes (N_kv != N, grouped heads) go to `decoder_one`: only FA-2 has a model of them."""
    w = config.workload
    if is_decoder(w):
        raise ConfigError("a decoder shape (N_kv != N or grouped heads) is compared with "
                          "FlashAttention-2 alone: decoder_one, not compare_one")
    config = dataclasses.replace(config, workload=dataclasses.replace(w, causal=False))
    plan = _chosen(config)
    ours = _timed(plan)
    choice = plan.mapping_choice
    ours.update(mapping_mode=choice.mode, runner_up=choice.to_dict()["runner_up"],
                split_cost_bytes=plan.split_cost_bytes)
    # s = 1 against the chosen plan (its banks): speedup > 1 is what the split gains
    unsplit = ours if plan.split == 1 else _unsplit(config, plan.banks)
    unsplit = dict(unsplit, speedup=unsplit["cycles"] / ours["cycles"],
                   traffic_ratio=unsplit["offchip_bytes"] / ours["offchip_bytes"])
    causal_e = _timed(plan, causal=True)
    causal_e.update(gain=ours["cycles"] / causal_e["cycles"],
                    traffic_ratio=causal_e["offchip_bytes"] / ours["offchip_bytes"])
    bls = all_baselines(config)
    baselines = {}
    for name in BASELINE_ORDER:
        b = simulate_baseline(config, bls[name])
        assert b.bytes_read + b.bytes_written == bls[name].traffic.bytes
        e = _entry(b, bls[name].traffic.bytes, ours)
        e["tiling"] = {k: v for k, v in bls[name].tiling.items()}
        baselines[name] = e
    fc = simulate_baseline(config, bls["flashattention2"], causal=True)
    causal_e["fa2_causal_cycles"] = fc.cycles
    causal_e["fa2_causal_bytes"] = fc.bytes_read + fc.bytes_written
    causal_e["speedup_over_fa2_causal"] = fc.cycles / causal_e["cycles"]
    return {"seq_len": config.workload.seq_len, "head_dim": config.workload.head_dim,
            "formats": formats_one(config),
            "attenio": ours, "attenio_unsplit": unsplit, "attenio_causal": causal_e,
            "mapping": choice.to_dict(), "rtl_params": dataclasses.asdict(RtlParams.of(plan)),
            "baselines": baselines}


def _frame(config, seq_lens, head_dims, timing):
    """What every comparison's data starts with: the hardware, the lists, the timing."""
    b = config.budget
    definitions = {
        "speedup": "cycles(X) / cycles(AttenIO): > 1 means AttenIO is faster",
        "traffic_ratio": "off-chip bytes(X) / off-chip bytes(AttenIO)",
        "pe_util": "cycles the array computes / cycles",
        "spatial_util": "useful MAC operations / (P x array-busy cycles)",
        "mac_efficiency": "useful MAC operations / (P x cycles) = pe_util x spatial_util",
        "exp_util": "cycles the softmax lanes are busy / cycles",
        "stall_fraction": "cycles waiting for memory with nothing computing / cycles",
        "gain": "cycles(AttenIO) / cycles(causal AttenIO)",
        "s, r, a": "MACs per Q row, Q rows per group of s MACs, Q block rows",
    }
    if timing is None:
        mode = {"mode": "fair", "parameters": {
            "bw_bytes_per_cycle": b.bw_bytes_per_cycle,
            "overlap": "every dataflow overlaps memory and compute at the full bandwidth "
                       "(double buffering wherever its dataflow lets it)",
            "models": "attenio.model.cyclemodel (equal to the RTL's counters), "
                      "attenio.model.baselinemodel"}}
    else:
        mode = {"mode": "paper", "parameters": timing.parameters(b), "rules": dict(RULES),
                "reported": {str(d): dict(v) for d, v in PAPER_REPORTED.items()}}
        definitions.update({
            "pe_util": "compute cycles (2 d / P a pair visited) / cycles",
            "exp_util": "AttenIO's softmax cycles / cycles",
            "stall_fraction": "off-chip cycles not hidden behind work / cycles",
            "break_even_bw": "the bw_eff at which X is as fast as AttenIO under these rules; "
                             "AttenIO is faster below it",
            "fair": "the fair timing's a, cycles and speedups of the same (N, d)",
        })
    return {
        "name": config.name, "format": config.format.name, "heads": config.workload.heads,
        "hardware": {"mac_lines": b.mac_lines, "macs_per_line": b.macs_per_line,
                     "exp_units": b.exp_units, "cache_bytes": b.cache_bytes,
                     "kv_buffer_bytes": b.kv_buffer_bytes, "bw_bytes_per_cycle": b.bw_bytes_per_cycle,
                     "latency_cycles": b.latency_cycles, "clock_mhz": b.clock_mhz,
                     "axi_data_bits": b.axi_data_bits},
        "seq_lens": list(seq_lens), "head_dims": list(head_dims),
        "split": "auto" if config.split is None else config.split,
        "rows_per_mac": "auto" if config.rows_per_mac is None else config.rows_per_mac,
        "timing": mode, "definitions": definitions,
    }


def _paper_row(config, timing, fair_row):
    """paper_one of `config` with the fair timing's view of the same (N, d) beside it."""
    row = paper_one(config, timing, plan_a=fair_row["attenio"]["a"])
    ours, causal = fair_row["attenio"], fair_row["attenio_causal"]
    row["fair"] = {"a": ours["a"], "split": ours["split"], "cycles": ours["cycles"],
                   "offchip_bytes": ours["offchip_bytes"],
                   "speedup": {n: fair_row["baselines"][n]["speedup"] for n in BASELINE_ORDER},
                   "causal_gain": causal["gain"],
                   "causal_speedup_over_fa2_causal": causal["speedup_over_fa2_causal"]}
    return row


def compare(config, seq_lens, head_dims, *, timing=None, fair=None):
    """The whole comparison as one JSON-ready dict (with its own wall time).

    `timing` None: the fair timing (the cycle models). A `PaperTiming`: its closed
    forms, each (N, d) beside the fair speedups; `fair` is the fair data of the same
    arguments when the caller already has it.
    """
    t0 = time.perf_counter()
    if timing is None:
        rows = [compare_one(_with(config, n, d)) for d in head_dims for n in seq_lens]
    else:
        fair = fair or compare(config, seq_lens, head_dims)
        if (fair["seq_lens"], fair["head_dims"]) != (list(seq_lens), list(head_dims)):
            raise ValueError("compare: the fair data is of other sequence lengths or head dims")
        rows = [_paper_row(_with(config, r["seq_len"], r["head_dim"]), timing, r)
                for r in fair["rows"]]
    data = _frame(config, seq_lens, head_dims, timing)
    data.update(rows=rows, wall_seconds=time.perf_counter() - t0)
    return data


def geomeans(data):
    """{d: {X: {speedup, traffic_ratio[, fair_speedup]}}}: geometric means over N."""
    out = {}
    for d in data["head_dims"]:
        rows = [r for r in data["rows"] if r["head_dim"] == d]
        out[d] = {}
        for name in BASELINE_ORDER:
            g = {"speedup": _geo(r["baselines"][name]["speedup"] for r in rows),
                 "traffic_ratio": _geo(r["baselines"][name]["traffic_ratio"] for r in rows)}
            if "fair" in rows[0]:
                g["fair_speedup"] = _geo(r["fair"]["speedup"][name] for r in rows)
            out[d][name] = g
    return out


def _geo(xs):
    xs = list(xs)
    return math.exp(sum(map(math.log, xs)) / len(xs))


# --- sweeps --------------------------------------------------------------------------

#: The budget field each sweep varies, and the unit it is shown in.
SWEEP_AXES = {"bw": ("bw_bytes_per_cycle", "B/cycle", 1), "cache": ("cache_bytes", "KiB", 1024)}


def _point_entry(res, nbytes):
    return {"cycles": res.cycles, "pe_busy": res.pe_busy, "useful_macs": res.useful_macs,
            "offchip_bytes": nbytes, "pe_util": res.pe_util, "mac_efficiency": res.mac_efficiency,
            "stall_fraction": res.stall_fraction,
            # below this bandwidth its traffic takes longer than its array work
            "ridge_bw": nbytes / res.pe_busy}


def _fair_point(config):
    """AttenIO (the planner's mapping) and every baseline in the fair timing, lean."""
    plan = _chosen(config)
    ours = _point_entry(simulate(plan), plan.traffic.bytes)
    ours.update(a=plan.a, split=plan.split, rows_per_mac=plan.rows_per_mac)
    bls = all_baselines(config)
    baselines = {}
    for name in BASELINE_ORDER:
        e = _point_entry(simulate_baseline(config, bls[name]), bls[name].traffic.bytes)
        e.update(speedup=e["cycles"] / ours["cycles"],
                 traffic_ratio=e["offchip_bytes"] / ours["offchip_bytes"])
        baselines[name] = e
    return {"attenio": ours, "baselines": baselines}


def _paper_point(config, timing):
    plan_a = _chosen(config).a if timing.a_rule == "plan" else None
    row = paper_one(config, timing, plan_a=plan_a)
    row["attenio"]["a"] = row["a"]
    return {"attenio": row["attenio"], "baselines": row["baselines"]}


def sweep(config, seq_lens, head_dims, *, axis, values, timing=None):
    """The comparison over budgets that differ in one field (`axis`: "bw" in bytes a cycle,
    "cache" in bytes), as one JSON-ready dict; the bandwidth sweep is fair timing only
    (the paper's rules fix the bandwidth at bw_eff) and records each baseline's crossover."""
    if axis not in SWEEP_AXES:
        raise ValueError(f"sweep: axis must be one of {', '.join(SWEEP_AXES)}, not {axis!r}")
    if axis == "bw" and timing is not None:
        raise ValueError("sweep: the bandwidth sweep is of the fair timing; the paper timing's "
                         "bandwidth is bw_eff")
    field = SWEEP_AXES[axis][0]
    t0 = time.perf_counter()
    rows = []
    for d in head_dims:
        for n in seq_lens:
            for v in values:
                c = _with(config, n, d, **{field: v})
                point = _fair_point(c) if timing is None else _paper_point(c, timing)
                rows.append(dict(point, seq_len=n, head_dim=d, value=v))
    data = _frame(config, seq_lens, head_dims, timing)
    data.update(sweep={"axis": axis, "field": field, "values": list(values)}, rows=rows,
                crossovers=_crossovers(data, rows) if axis == "bw" else [])
    data["definitions"]["ridge_bw"] = ("bytes / array cycles: below this bandwidth a dataflow's "
                                       "traffic takes longer than its array work")
    data["wall_seconds"] = time.perf_counter() - t0
    return data


def _crossovers(data, rows):
    """Per (N, d) and baseline: its ridge (the bandwidth below which memory binds it, above
    which AttenIO's traffic advantage buys nothing), and the speedups either side."""
    out = []
    for d in data["head_dims"]:
        for n in data["seq_lens"]:
            pts = sorted((r for r in rows if (r["seq_len"], r["head_dim"]) == (n, d)),
                         key=lambda r: r["value"])
            lo, hi = pts[0], pts[-1]
            for name in BASELINE_ORDER:
                out.append({"seq_len": n, "head_dim": d, "baseline": name,
                            "ridge_bw": hi["baselines"][name]["ridge_bw"],
                            "attenio_ridge_bw": hi["attenio"]["ridge_bw"],
                            "speedup_at_lowest": lo["baselines"][name]["speedup"],
                            "speedup_at_highest": hi["baselines"][name]["speedup"],
                            "traffic_ratio": hi["baselines"][name]["traffic_ratio"]})
    return out


# --- rendering -----------------------------------------------------------------------

def _m(c):
    return f"{c / 1e6:.2f}" if c >= 1e5 else f"{c / 1e6:.4f}"


def _pct(x):
    return f"{100 * x:.1f}%"


def _tables(data):
    """[(title, headers, rows)] shared by the text and Markdown renderings."""
    out = []
    names = list(BASELINE_ORDER)
    for d in data["head_dims"]:
        rows = [r for r in data["rows"] if r["head_dim"] == d]
        if not rows:
            continue
        out.append((f"d = {d}: speedup of AttenIO over each baseline (cycles(X) / cycles(AttenIO)) "
                    f"and traffic ratio (bytes(X) / bytes(AttenIO))",
                    ["N", "s", "r", "a", "AttenIO Mcycles", "AttenIO traffic"]
                    + [f"{TITLES[n]} speedup" for n in names]
                    + [f"{TITLES[n]} traffic" for n in names],
                    [[r["seq_len"], r["attenio"]["split"], r["attenio"]["rows_per_mac"],
                      r["attenio"]["a"], _m(r["attenio"]["cycles"]),
                      human_bytes(r["attenio"]["offchip_bytes"])]
                     + [f"{r['baselines'][n]['speedup']:.2f}x" for n in names]
                     + [f"{r['baselines'][n]['traffic_ratio']:.2f}x" for n in names]
                     for r in rows]))
        util = []
        for r in rows:
            ours = r["attenio"]
            every = [(f"AttenIO s={ours['split']} r={ours['rows_per_mac']}", ours)]
            if ours["split"] != 1:
                every.append(("AttenIO s=1", r["attenio_unsplit"]))
            every += [(TITLES[n], r["baselines"][n]) for n in names]
            for title, e in every:
                util.append([r["seq_len"], title, _m(e["cycles"]),
                             f"{e.get('speedup', 1.0):.2f}x", f"{e.get('traffic_ratio', 1.0):.2f}x",
                             _pct(e["pe_util"]), _pct(e["spatial_util"]), _pct(e["mac_efficiency"]),
                             _pct(e["exp_util"]), _pct(e["stall_fraction"])])
        out.append((f"d = {d}: utilization per dataflow",
                    ["N", "dataflow", "Mcycles", "speedup", "traffic", "PE time", "spatial",
                     "MAC eff", "EXP", "stall"], util))
        ext = []
        for r in rows:
            ours, one, c = r["attenio"], r["attenio_unsplit"], r["attenio_causal"]
            ext.append([r["seq_len"], f"{ours['split']} ({r['mapping']['mode']})",
                        ours["rows_per_mac"], ours["a"], f"{ours['macs_active']}",
                        "-" if ours["runner_up"] is None else
                        "s={split} r={rows_per_mac}".format(**ours["runner_up"]),
                        _pct(ours["spatial_util"]), one["a"], _m(one["cycles"]),
                        _pct(one["spatial_util"]), f"{one['speedup']:.2f}x",
                        human_bytes(ours["split_cost_bytes"]),
                        _m(c["cycles"]), f"{c['gain']:.2f}x", f"{c['traffic_ratio']:.2f}",
                        f"{c['speedup_over_fa2_causal']:.2f}x"])
        out.append((f"d = {d}: the mapping (rows split over s MACs) against s = 1 (split gain = "
                    f"cycles(s = 1) / cycles(AttenIO)), and beyond the paper, causal row "
                    f"skipping (gain = cycles(AttenIO) / cycles(causal))",
                    ["N", "s", "r", "a", "MACs active", "runner-up", "spatial", "s=1 a",
                     "s=1 Mcycles", "s=1 spatial", "split gain", "split traffic cost",
                     "causal Mcycles", "causal gain", "causal traffic", "causal vs FA-2 causal"],
                    ext))
        fmts = [r for r in rows if "formats" in r]
        if fmts:
            headers, _ = formats_table([])
            out.append((f"d = {d}: every number format on this budget, each as the planner maps "
                        f"it (traffic against {data['format']}'s)", ["N", *headers],
                        [[r["seq_len"], *cells] for r in fmts
                         for cells in formats_table(r["formats"])[1]]))
    return out


def _x(v):
    return "-" if v is None else "inf" if v == float("inf") else f"{v:.2f}x"


def _paper_tables(data):
    """[(title, headers, rows)] of a paper-timing comparison, the fair speedups beside."""
    out = []
    names = list(BASELINE_ORDER)
    means = geomeans(data)
    reported = data["timing"]["reported"]
    for d in data["head_dims"]:
        rows = [r for r in data["rows"] if r["head_dim"] == d]
        speed = []
        for r in rows:
            speed.append([r["seq_len"], "paper", r["a"], _m(r["attenio"]["cycles"])]
                         + [f"{r['baselines'][n]['speedup']:.2f}x" for n in names])
            speed.append(["", "fair", r["fair"]["a"], _m(r["fair"]["cycles"])]
                         + [f"{r['fair']['speedup'][n]:.2f}x" for n in names])
        if len(rows) > 1:
            speed.append(["geo. mean", "paper", "", ""]
                         + [f"{means[d][n]['speedup']:.2f}x" for n in names])
            speed.append(["geo. mean", "fair", "", ""]
                         + [f"{means[d][n]['fair_speedup']:.2f}x" for n in names])
        rep = reported.get(str(d), {})
        if rep:
            speed.append(["the paper", "reports", "", ""] + [_x(rep.get(n)) for n in names])
        out.append((f"d = {d}: speedup of AttenIO over each baseline (cycles(X) / "
                    f"cycles(AttenIO)), paper timing beside fair (a: AttenIO's Q block rows)",
                    ["N", "timing", "a", "AttenIO Mcycles"] + [TITLES[n] for n in names], speed))
        parts = []
        for r in rows:
            every = [("AttenIO", r["attenio"])] + [(TITLES[n], r["baselines"][n]) for n in names]
            for title, e in every:
                parts.append([r["seq_len"], title, _m(e["cycles"]), _pct(e["pe_util"]),
                              _pct(e["exp_util"]), _pct(e["stall_fraction"]),
                              human_bytes(e["offchip_bytes"]),
                              _x(e.get("traffic_ratio", 1.0)),
                              "-" if title == "AttenIO" else f"{e['break_even_bw']:.0f}"])
        out.append((f"d = {d}, paper timing: where the time goes (compute, AttenIO's softmax, "
                    f"memory not hidden, as fractions of cycles); break-even bw_eff: AttenIO is "
                    f"faster below it",
                    ["N", "dataflow", "Mcycles", "compute", "softmax", "memory", "traffic",
                     "traffic ratio", "break-even bw_eff"], parts))
        causal = [[r["seq_len"], r["a"], _m(r["attenio_causal"]["cycles"]),
                   f"{r['attenio_causal']['gain']:.2f}x",
                   f"{r['attenio_causal']['speedup_over_fa2_causal']:.2f}x",
                   f"{r['fair']['causal_gain']:.2f}x",
                   f"{r['fair']['causal_speedup_over_fa2_causal']:.2f}x",
                   f"{r['attenio_causal']['traffic_ratio']:.2f}"] for r in rows]
        out.append((f"d = {d}: causal, AttenIO skipping the K/V rows past each Q block's last "
                    f"row, FA-2 likewise (gain = cycles(AttenIO) / cycles(causal AttenIO))",
                    ["N", "a", "causal Mcycles", "paper gain", "paper vs FA-2 causal",
                     "fair gain", "fair vs FA-2 causal", "causal traffic"], causal))
    return out


def _value(data, v):
    field, unit, scale = SWEEP_AXES[data["sweep"]["axis"]]
    return f"{v / scale:g}"


def _sweep_tables(data):
    """[(title, headers, rows)] of a sweep: one table per (N, d), then the crossovers."""
    out = []
    names = list(BASELINE_ORDER)
    axis = data["sweep"]["axis"]
    _, unit, _ = SWEEP_AXES[axis]
    mode = data["timing"]["mode"]
    for d in data["head_dims"]:
        for n in data["seq_lens"]:
            pts = [r for r in data["rows"] if (r["seq_len"], r["head_dim"]) == (n, d)]
            rows = [[_value(data, r["value"]), r["attenio"].get("split", "-"), r["attenio"]["a"],
                     _m(r["attenio"]["cycles"]), _pct(r["attenio"]["stall_fraction"])]
                    + [f"{r['baselines'][x]['speedup']:.2f}x" for x in names]
                    + [f"{r['baselines'][x]['traffic_ratio']:.2f}x" for x in names] for r in pts]
            out.append((f"{mode} timing, N = {n}, d = {d}: speedup of AttenIO over X "
                        f"(cycles(X) / cycles(AttenIO)) and traffic ratio as the "
                        f"{'bandwidth' if axis == 'bw' else 'cache'} varies",
                        [unit, "s", "a", "AttenIO Mcycles", "AttenIO stall"]
                        + [f"{TITLES[x]} speedup" for x in names]
                        + [f"{TITLES[x]} traffic" for x in names], rows))
    if data["crossovers"]:
        vals = data["sweep"]["values"]
        rows = [[c["seq_len"], c["head_dim"], TITLES[c["baseline"]], f"{c['ridge_bw']:.1f}",
                 f"{c['attenio_ridge_bw']:.2f}", f"{c['speedup_at_lowest']:.2f}x",
                 f"{c['speedup_at_highest']:.2f}x", f"{c['traffic_ratio']:.2f}x"]
                for c in data["crossovers"]]
        out.append(("Crossovers: X is memory-bound below its ridge (its bytes / its array "
                    "cycles), where AttenIO wins by up to the traffic ratio; above the ridge, "
                    "compute binds both and AttenIO's traffic advantage buys nothing",
                    ["N", "d", "X", "X ridge B/cycle", "AttenIO ridge B/cycle",
                     f"speedup at {min(vals)}", f"speedup at {max(vals)}", "traffic ratio"], rows))
    return out


def _all_tables(data):
    if "sweep" in data:
        return _sweep_tables(data)
    if data["timing"]["mode"] == "paper":
        return _paper_tables(data)
    return _tables(data)


def _header(data):
    h = data["hardware"]
    return (f"'{data['name']}' ({data['format']}, {data['heads']} head(s)): "
            f"{h['mac_lines']}x{h['macs_per_line']} MACs, {h['exp_units']} EXP units, "
            f"cache {human_bytes(h['cache_bytes'])}, {h['bw_bytes_per_cycle']} B/cycle, "
            f"latency {h['latency_cycles']} cycles")


def timing_line(data):
    """One sentence: which timing made `data`, with every parameter of it."""
    t = data["timing"]
    if t["mode"] == "fair":
        return (f"fair timing: the cycle models, every dataflow overlapping memory and compute "
                f"at the full {t['parameters']['bw_bytes_per_cycle']} B/cycle")
    p = t["parameters"]
    base = ("the baselines pay their traffic after their compute" if p["baselines_serial"]
            else "the baselines overlap traffic and compute")
    soft = ("its softmax after its scores" if p["softmax_exposed"]
            else "its softmax overlapped")
    a = ("a analytic, (M - d) / (2d + 4) at the stored precision (fp16 O, no reservations)"
         if p["a_rule"] == "analytic" else "a the Plan's")
    return (f"paper timing: every dataflow computes on the whole array (2 d / P cycles a pair); "
            f"{base} at bw_eff = {p['bw_eff']:g} B/cycle ({p['bw_eff_from']}); AttenIO hides "
            f"its memory, {soft} ({p['exps_per_score']} exponentials a score over the EXP "
            f"units); {a}")


def _what(data):
    if "sweep" in data:
        return f"{'Bandwidth' if data['sweep']['axis'] == 'bw' else 'Cache'} sweep"
    fair = data["timing"]["mode"] == "fair"
    return "Cycle-model comparison" if fair else "Paper-timing comparison"


def render_text(data):
    parts = [f"{_what(data)} on {_header(data)}", timing_line(data)]
    for title, headers, rows in _all_tables(data):
        left = 2 if headers[1] in ("dataflow", "timing") else 1
        parts += ["", title, table(headers, rows, ["<"] * left + [">"] * (len(headers) - left))]
    parts.append(f"\nmodelled {len(data['rows'])} configurations in {data['wall_seconds']:.2f} s")
    return "\n".join(parts)


def render_markdown(data):
    lines = [f"# {_what(data)}", "", _header(data), "", timing_line(data), ""]
    for k, v in data["definitions"].items():
        lines.append(f"* **{k}**: {v}")
    for title, headers, rows in _all_tables(data):
        lines += ["", f"## {title}", "", "| " + " | ".join(headers) + " |",
                  "|" + "|".join("---" for _ in headers) + "|"]
        lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    lines.append("")
    return "\n".join(lines)


# -- decoder shapes: AttenIO against FlashAttention-2 -------------------------------------

def is_decoder(workload):
    """N_kv != N or grouped K/V heads: the shapes only FlashAttention-2's model takes."""
    return workload.n_kv != workload.seq_len or workload.group > 1


def decoder_one(config):
    """One decoder shape: AttenIO (the planner's mapping, blocks serving a K/V group where
    they move less) against FlashAttention-2, which reads each query head's K/V head
    again (its model: `simulate_baseline`), by the fair cycle models; the bytes of both
    against the bound of Q and O once and each K/V row once per K/V head."""
    w = config.workload
    plan = _chosen(config)
    ours = simulate(plan)
    fa2 = simulate_baseline(config, all_baselines(config)["flashattention2"], causal=w.causal)
    eb, ob = config.format.element_bytes, config.format.out_bytes
    bound = (w.heads * w.seq_len * (eb + ob) + 2 * w.n_kv_heads * w.n_kv * eb) * w.head_dim
    entry = lambda r: {"cycles": r.cycles, "bytes": r.bytes_read + r.bytes_written,
                       "pe_util": r.pe_util}
    return {"seq_len": w.seq_len, "kv_len": w.n_kv, "heads": w.heads, "kv_heads": w.n_kv_heads,
            "head_dim": w.head_dim, "causal": w.causal, "bound_bytes": bound,
            "mapping": {**_mapping(plan), "grouped": plan.grouped},
            "attenio": entry(ours), "flashattention2": entry(fa2)}


def render_decoder(rows):
    """The table of `decoder_one` rows."""
    out = []
    for r in rows:
        ours, fa2, m = r["attenio"], r["flashattention2"], r["mapping"]
        out.append([f"{r['seq_len']}{' causal' if r['causal'] else ''}", r["kv_len"],
                    f"{r['heads']}/{r['kv_heads']}", f"{m['a']} ({m['split']}, {m['rows_per_mac']})",
                    "yes" if m["grouped"] else "no", f"{ours['cycles']:,}",
                    f"{fa2['cycles']:,}", f"{fa2['cycles'] / ours['cycles']:.2f}x",
                    human_bytes(ours["bytes"]), human_bytes(fa2["bytes"]),
                    f"{fa2['bytes'] / ours['bytes']:.2f}x",
                    f"{ours['bytes'] / r['bound_bytes']:.2f}", f"{ours['pe_util']:.3f}"])
    return table(["N", "N_kv", "heads/K/V", "a (s, r)", "grouped", "AttenIO cycles",
                  "FA-2 cycles", "speedup", "AttenIO bytes", "FA-2 bytes", "traffic ratio",
                  "AttenIO / bound", "AttenIO PE time"], out)
