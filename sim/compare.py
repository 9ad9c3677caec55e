"""`attenio compare`: AttenIO and the baselines through the cycle models, as data, tables and plots.

`compare(config, seq_lens, head_dims)` plans and times every (N, d) on the
config's hardware and returns one JSON-ready dict; `render_text`,
`render_markdown` and `write_plots` turn it into what people read. Speedups
are always "of AttenIO over X": cycles(X) / cycles(AttenIO), so > 1 means
AttenIO is faster; traffic ratios are bytes(X) / bytes(AttenIO).

Two what-ifs beyond the paper ride along (model only, see
`attenio.sim.cyclemodel`): rows split over s MACs (`split`, "auto" picks the
s of `best_split`), and causal masking with row-granular skipping, next to
FlashAttention-2 skipping whole K/V blocks.
"""

import dataclasses
import time

from attenio.baselines import all_baselines
from attenio.plan import make_plan
from attenio.report import human_bytes, table

from .baselinemodel import BASELINE_ORDER, simulate_baseline
from .cyclemodel import RtlParams, best_split, simulate

__all__ = ["compare", "render_text", "render_markdown", "write_plots", "write_all",
           "METRICS", "TITLES"]

TITLES = {"attenio": "AttenIO", "standard": "Standard", "flat": "FLAT",
          "flashattention2": "FA-2", "flashattention2_fair": "FA-2 fair"}
# one colour per dataflow in every plot
_COLORS = {"AttenIO": "black", "Standard": "tab:blue", "FLAT": "tab:orange", "FA-2": "tab:green",
           "FA-2 fair": "tab:red", "AttenIO split": "tab:purple", "AttenIO causal": "tab:brown"}
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


def compare_one(config, *, split="auto", params=None):
    """One (N, d): AttenIO, its split and causal variants, every baseline."""
    plan = make_plan(config)
    res = simulate(plan, params=params)
    assert res.bytes_read == plan.traffic.read_bytes and res.bytes_written == plan.traffic.write_bytes
    ours = _entry(res, plan.traffic.bytes)
    ours.update(a=plan.a, rows_per_mac=plan.rows_per_mac, q_blocks=plan.q_blocks,
                kv_depth=plan.kv_depth)
    if split == "auto":
        s, sres = best_split(plan, params=params)
    else:
        s, sres = split, simulate(plan, split=split, params=params)
    split_e = _entry(sres, sres.bytes_read + sres.bytes_written)
    split_e.update(s=s, rows_per_mac=sres.mapping.rows_per_mac, gain=res.cycles / sres.cycles)
    cres = simulate(plan, causal=True, params=params)
    causal_e = _entry(cres, cres.bytes_read + cres.bytes_written)
    causal_e.update(gain=res.cycles / cres.cycles,
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
    causal_e["speedup_over_fa2_causal"] = fc.cycles / cres.cycles
    return {"seq_len": config.workload.seq_len, "head_dim": config.workload.head_dim,
            "attenio": ours, "attenio_split": split_e, "attenio_causal": causal_e,
            "baselines": baselines}


def compare(config, seq_lens, head_dims, *, split="auto", params=None):
    """The whole comparison as one JSON-ready dict (with its own wall time)."""
    t0 = time.perf_counter()
    rows = [compare_one(_with(config, n, d), split=split, params=params)
            for d in head_dims for n in seq_lens]
    b = config.budget
    return {
        "name": config.name, "format": config.format.name, "heads": config.workload.heads,
        "hardware": {"mac_lines": b.mac_lines, "macs_per_line": b.macs_per_line,
                     "exp_units": b.exp_units, "cache_bytes": b.cache_bytes,
                     "kv_buffer_bytes": b.kv_buffer_bytes, "bw_bytes_per_cycle": b.bw_bytes_per_cycle,
                     "latency_cycles": b.latency_cycles, "clock_mhz": b.clock_mhz,
                     "axi_data_bits": b.axi_data_bits},
        # the latencies of the RTL generated for the config (per (N, d) they differ only
        # in the line skew, which the array fixes)
        "rtl_params": dataclasses.asdict(params or RtlParams.of(make_plan(config))),
        "seq_lens": list(seq_lens), "head_dims": list(head_dims), "split": split,
        "definitions": {
            "speedup": "cycles(X) / cycles(AttenIO): > 1 means AttenIO is faster",
            "traffic_ratio": "off-chip bytes(X) / off-chip bytes(AttenIO)",
            "pe_util": "cycles the array computes / cycles",
            "spatial_util": "useful MAC operations / (P x array-busy cycles)",
            "mac_efficiency": "useful MAC operations / (P x cycles) = pe_util x spatial_util",
            "exp_util": "cycles the softmax lanes are busy / cycles",
            "stall_fraction": "cycles waiting for memory with nothing computing / cycles",
            "gain": "cycles(AttenIO) / cycles(variant)",
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
                    ["N", "a", "AttenIO Mcycles", "AttenIO traffic"]
                    + [f"{TITLES[n]} speedup" for n in names]
                    + [f"{TITLES[n]} traffic" for n in names],
                    [[r["seq_len"], r["attenio"]["a"], _m(r["attenio"]["cycles"]),
                      human_bytes(r["attenio"]["offchip_bytes"])]
                     + [f"{r['baselines'][n]['speedup']:.2f}x" for n in names]
                     + [f"{r['baselines'][n]['traffic_ratio']:.2f}x" for n in names]
                     for r in rows]))
        util = []
        for r in rows:
            for key, e in [("attenio", r["attenio"])] + [(n, r["baselines"][n]) for n in names]:
                util.append([r["seq_len"], TITLES[key], _m(e["cycles"]),
                             f"{e.get('speedup', 1.0):.2f}x", f"{e.get('traffic_ratio', 1.0):.2f}x",
                             _pct(e["pe_util"]), _pct(e["spatial_util"]), _pct(e["mac_efficiency"]),
                             _pct(e["exp_util"]), _pct(e["stall_fraction"])])
        out.append((f"d = {d}: utilization per dataflow",
                    ["N", "dataflow", "Mcycles", "speedup", "traffic", "PE time", "spatial",
                     "MAC eff", "EXP", "stall"], util))
        ext = []
        for r in rows:
            s, c = r["attenio_split"], r["attenio_causal"]
            fa2 = r["baselines"]["flashattention2"]
            ext.append([r["seq_len"], _m(r["attenio"]["cycles"]), _pct(r["attenio"]["spatial_util"]),
                        s["s"], _m(s["cycles"]), f"{s['gain']:.2f}x", _pct(s["spatial_util"]),
                        f"{fa2['cycles'] / s['cycles']:.2f}x",
                        _m(c["cycles"]), f"{c['gain']:.2f}x", f"{c['traffic_ratio']:.2f}",
                        f"{c['speedup_over_fa2_causal']:.2f}x"])
        out.append((f"d = {d}: beyond the paper, rows split over s MACs and causal row skipping "
                    f"(gain = cycles(AttenIO) / cycles(variant))",
                    ["N", "plain Mcycles", "plain spatial", "s", "split Mcycles", "split gain",
                     "split spatial", "split vs FA-2", "causal Mcycles", "causal gain",
                     "causal traffic", "causal vs FA-2 causal"], ext))
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
         + [("AttenIO split (vs plain)", lambda r: 1 / r["attenio_split"]["gain"]),
            ("AttenIO causal (vs plain)", lambda r: 1 / r["attenio_causal"]["gain"])])])
    figure("traffic.png", "bytes(X) / bytes(AttenIO)", [
        ("off-chip traffic", [(TITLES[n], lambda r, n=n: r["baselines"][n]["traffic_ratio"])
                              for n in names]
         + [("AttenIO causal", lambda r: r["attenio_causal"]["traffic_ratio"])])])
    every = [("AttenIO", lambda r, k=None: r["attenio"])] + \
        [(TITLES[n], lambda r, n=n: r["baselines"][n]) for n in names] + \
        [("AttenIO split", lambda r: r["attenio_split"])]
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
