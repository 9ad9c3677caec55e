"""`attenio compare`: AttenIO and the baselines through the cycle models, as data, tables and plots.

`compare(config, seq_lens, head_dims)` plans and times every (N, d) on the
config's hardware and returns one JSON-ready dict; `render_text`,
`render_markdown` and `write_plots` turn it into what people read. Speedups
are always "of AttenIO over X": cycles(X) / cycles(AttenIO), so > 1 means
AttenIO is faster; traffic ratios are bytes(X) / bytes(AttenIO).

AttenIO is the Plan the planner chooses (`attenio.sim.planner.choose_plan`: rows
split over the s MACs the cycle model finds fastest, or the config's forced
`split`). Beside it ride the same hardware with one MAC a row (s = 1, what the
split gains and what its a costs in traffic) and, beyond the paper (model
only), causal masking with row-granular skipping, next to FlashAttention-2
skipping whole K/V blocks.
"""

import dataclasses
import time

from attenio.baselines import all_baselines
from attenio.plan import make_plan
from attenio.report import human_bytes, table

from .baselinemodel import BASELINE_ORDER, simulate_baseline
from .cyclemodel import RtlParams, simulate
from .planner import choose_plan

__all__ = ["compare", "render_text", "render_markdown", "write_plots", "write_all",
           "METRICS", "TITLES"]

TITLES = {"attenio": "AttenIO", "standard": "Standard", "flat": "FLAT",
          "flashattention2": "FA-2", "flashattention2_fair": "FA-2 fair"}
# one colour per dataflow in every plot
_COLORS = {"AttenIO": "black", "Standard": "tab:blue", "FLAT": "tab:orange", "FA-2": "tab:green",
           "FA-2 fair": "tab:red", "AttenIO s = 1": "tab:purple", "AttenIO causal": "tab:brown"}
METRICS = ("cycles", "pe_util", "spatial_util", "mac_efficiency", "exp_util", "stall_fraction",
           "offchip_bytes")


def _with(config, n, d):
    return dataclasses.replace(config, workload=dataclasses.replace(config.workload, seq_len=n,
                                                                    head_dim=d))


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


def _mapping(plan):
    return {"split": plan.split, "rows_per_mac": plan.rows_per_mac, "a": plan.a,
            "groups": plan.groups, "macs_active": plan.macs_active, "q_blocks": plan.q_blocks,
            "kv_depth": plan.kv_depth}


def _timed(plan, **kw):
    res = simulate(plan, **kw)
    if not kw.get("causal"):
        assert (res.bytes_read, res.bytes_written) == (plan.traffic.read_bytes,
                                                       plan.traffic.write_bytes)
    e = _entry(res, res.bytes_read + res.bytes_written)
    e.update(_mapping(plan))
    return e


def compare_one(config):
    """One (N, d): AttenIO as planned, the same array at s = 1, causal AttenIO, the baselines."""
    plan = choose_plan(config)
    ours = _timed(plan)
    choice = plan.mapping_choice
    ours.update(mapping_mode=choice.mode, runner_up=choice.runner_up,
                split_cost_bytes=plan.split_cost_bytes)
    # s = 1 against the chosen plan: speedup > 1 is what the split gains
    unsplit = ours if plan.split == 1 else _timed(make_plan(config, split=1))
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
            "attenio": ours, "attenio_unsplit": unsplit, "attenio_causal": causal_e,
            "mapping": choice.to_dict(), "rtl_params": dataclasses.asdict(RtlParams.of(plan)),
            "baselines": baselines}


def compare(config, seq_lens, head_dims):
    """The whole comparison as one JSON-ready dict (with its own wall time)."""
    t0 = time.perf_counter()
    rows = [compare_one(_with(config, n, d)) for d in head_dims for n in seq_lens]
    b = config.budget
    return {
        "name": config.name, "format": config.format.name, "heads": config.workload.heads,
        "hardware": {"mac_lines": b.mac_lines, "macs_per_line": b.macs_per_line,
                     "exp_units": b.exp_units, "cache_bytes": b.cache_bytes,
                     "kv_buffer_bytes": b.kv_buffer_bytes, "bw_bytes_per_cycle": b.bw_bytes_per_cycle,
                     "latency_cycles": b.latency_cycles, "clock_mhz": b.clock_mhz,
                     "axi_data_bits": b.axi_data_bits},
        "seq_lens": list(seq_lens), "head_dims": list(head_dims),
        "split": "auto" if config.split is None else config.split,
        "definitions": {
            "speedup": "cycles(X) / cycles(AttenIO): > 1 means AttenIO is faster",
            "traffic_ratio": "off-chip bytes(X) / off-chip bytes(AttenIO)",
            "pe_util": "cycles the array computes / cycles",
            "spatial_util": "useful MAC operations / (P x array-busy cycles)",
            "mac_efficiency": "useful MAC operations / (P x cycles) = pe_util x spatial_util",
            "exp_util": "cycles the softmax lanes are busy / cycles",
            "stall_fraction": "cycles waiting for memory with nothing computing / cycles",
            "gain": "cycles(AttenIO) / cycles(causal AttenIO)",
            "s, r, a": "MACs per Q row, Q rows per group of s MACs, Q block rows",
        },
        "rows": rows,
        "wall_seconds": time.perf_counter() - t0,
    }


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
                        "-" if ours["runner_up"] is None else ours["runner_up"],
                        _pct(ours["spatial_util"]), one["a"], _m(one["cycles"]),
                        _pct(one["spatial_util"]), f"{one['speedup']:.2f}x",
                        human_bytes(ours["split_cost_bytes"]),
                        _m(c["cycles"]), f"{c['gain']:.2f}x", f"{c['traffic_ratio']:.2f}",
                        f"{c['speedup_over_fa2_causal']:.2f}x"])
        out.append((f"d = {d}: the mapping (rows split over s MACs) against s = 1 (split gain = "
                    f"cycles(s = 1) / cycles(AttenIO)), and beyond the paper, causal row "
                    f"skipping (gain = cycles(AttenIO) / cycles(causal))",
                    ["N", "s", "r", "a", "MACs active", "runner-up s", "spatial", "s=1 a",
                     "s=1 Mcycles", "s=1 spatial", "split gain", "split traffic cost",
                     "causal Mcycles", "causal gain", "causal traffic", "causal vs FA-2 causal"],
                    ext))
    return out


def _header(data):
    h = data["hardware"]
    return (f"'{data['name']}' ({data['format']}, {data['heads']} head(s)): "
            f"{h['mac_lines']}x{h['macs_per_line']} MACs, {h['exp_units']} EXP units, "
            f"cache {human_bytes(h['cache_bytes'])}, {h['bw_bytes_per_cycle']} B/cycle, "
            f"latency {h['latency_cycles']} cycles")


def render_text(data):
    parts = [f"Cycle-model comparison on {_header(data)}"]
    for title, headers, rows in _tables(data):
        parts += ["", title, table(headers, rows, ["<"] * (2 if headers[1] == "dataflow" else 1)
                                   + [">"] * (len(headers) - (2 if headers[1] == "dataflow" else 1)))]
    parts.append(f"\nmodelled {len(data['rows'])} configurations in {data['wall_seconds']:.2f} s")
    return "\n".join(parts)


def render_markdown(data):
    lines = [f"# Cycle-model comparison", "", _header(data), ""]
    for k, v in data["definitions"].items():
        lines.append(f"* **{k}**: {v}")
    for title, headers, rows in _tables(data):
        lines += ["", f"## {title}", "", "| " + " | ".join(headers) + " |",
                  "|" + "|".join("---" for _ in headers) + "|"]
        lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    lines.append("")
    return "\n".join(lines)


def write_plots(data, out):
    """speedup.png, traffic.png, utilization.png in `out`; returns their paths."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    dims = data["head_dims"]
    names = list(BASELINE_ORDER)
    paths = []

    def series(d, get):
        rows = [r for r in data["rows"] if r["head_dim"] == d]
        return [r["seq_len"] for r in rows], rows, [get(r) for r in rows]

    def figure(fname, ylabel, curves, logy=True, rows_of=None):
        nrows = len(curves)
        fig, axes = plt.subplots(nrows, len(dims), figsize=(5 * len(dims), 3.6 * nrows),
                                 squeeze=False)
        for i, (label, lines) in enumerate(curves):
            for j, d in enumerate(dims):
                ax = axes[i][j]
                for name, get in lines:
                    xs, _, ys = series(d, get)
                    ax.plot(xs, ys, marker="o", label=name,
                            color=_COLORS.get(name.replace(" (vs plain)", "")))
                ax.set_xscale("log", base=2)
                if logy:
                    ax.set_yscale("log")
                ax.set_title(f"{label}, d = {d}")
                ax.set_xlabel("N")
                ax.set_ylabel(ylabel if nrows == 1 else label)
                ax.grid(True, which="both", alpha=0.3)
                ax.legend(fontsize=7)
        fig.tight_layout()
        path = out / fname
        fig.savefig(path, dpi=100)
        plt.close(fig)
        paths.append(path)

    figure("speedup.png", "cycles(X) / cycles(AttenIO)", [
        ("AttenIO speedup", [(TITLES[n], lambda r, n=n: r["baselines"][n]["speedup"]) for n in names]
         + [("AttenIO s = 1", lambda r: r["attenio_unsplit"]["speedup"]),
            ("AttenIO causal (vs plain)", lambda r: 1 / r["attenio_causal"]["gain"])])])
    figure("traffic.png", "bytes(X) / bytes(AttenIO)", [
        ("off-chip traffic", [(TITLES[n], lambda r, n=n: r["baselines"][n]["traffic_ratio"])
                              for n in names]
         + [("AttenIO causal", lambda r: r["attenio_causal"]["traffic_ratio"])])])
    every = [("AttenIO", lambda r, k=None: r["attenio"])] + \
        [(TITLES[n], lambda r, n=n: r["baselines"][n]) for n in names] + \
        [("AttenIO s = 1", lambda r: r["attenio_unsplit"])]
    figure("utilization.png", "fraction", [
        (label, [(name, lambda r, get=get, key=key: get(r)[key]) for name, get in every])
        for label, key in (("PE time utilization", "pe_util"),
                           ("spatial utilization", "spatial_util"),
                           ("EXP utilization", "exp_util"))], logy=False)
    return paths


def write_all(data, out):
    """compare.json, compare.md and the plots in directory `out`; returns the paths."""
    import json

    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "compare.json", out / "compare.md"]
    paths[0].write_text(json.dumps(data, indent=2) + "\n")
    paths[1].write_text(render_markdown(data))
    return paths + write_plots(data, out)
