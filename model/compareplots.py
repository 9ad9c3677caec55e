"""The files of `attenio compare` (`attenio.model.compare`'s data): JSON, Markdown and
PNG plots, with matplotlib.

`write_all(data, out)` writes compare.json, compare.md and the plots.

`write_plots(data, out)` picks what suits the data: the fair comparison's speedup,
traffic, utilization and roofline plots; the paper timing's speedups (beside the
fair ones and the paper's reported values) and where its time goes; a sweep's
speedups against the swept budget (with each baseline's ridge for the bandwidth),
and the roofline of a bandwidth sweep. `plot_sweeps` draws several sweeps of one
axis together (fair and paper timing of the cache sweep, for docs/paper.md).
"""

import json

from .baselinemodel import BASELINE_ORDER
from .compare import SWEEP_AXES, TITLES, render_markdown

__all__ = ["write_all", "write_plots", "plot_roofline", "plot_paper_speedup",
           "plot_paper_time", "plot_sweeps", "COLORS"]

#: One colour per dataflow in every plot.
COLORS = {"AttenIO": "black", "Standard": "tab:blue", "FLAT": "tab:orange", "FA-2": "tab:green",
          "FA-2 fair": "tab:red", "AttenIO s = 1": "tab:purple", "AttenIO causal": "tab:brown"}
_STYLE = {"fair": "-", "paper": "--"}
# PNGs without a Software tag, so a regenerated figure differs only where its data does
_META = {"Software": None}


def _plt():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def _save(fig, path):
    fig.tight_layout()
    fig.savefig(path, dpi=90, metadata=_META)
    _plt().close(fig)
    return path


def _largest_n(data, d):
    return max(r["seq_len"] for r in data["rows"] if r["head_dim"] == d)


def write_all(data, out):
    """compare.json, compare.md and the plots in directory `out`; returns the paths."""
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "compare.json", out / "compare.md"]
    paths[0].write_text(json.dumps(data, indent=2) + "\n")
    paths[1].write_text(render_markdown(data))
    return paths + write_plots(data, out)


def write_plots(data, out):
    """The plots that suit `data` in directory `out`; returns their paths."""
    if "sweep" in data:
        axis = data["sweep"]["axis"]
        paths = [plot_sweeps([data], out / f"sweep_{axis}.png")]
        if axis == "bw":
            paths.append(plot_roofline(data, out / "roofline.png"))
        return paths
    if data["timing"]["mode"] == "paper":
        return [plot_paper_speedup(data, out / "speedup.png"),
                plot_paper_time(data, out / "time.png")]
    return _fair_plots(data, out) + [plot_roofline(data, out / "roofline.png")]


def _fair_plots(data, out):
    """speedup.png, traffic.png, utilization.png of a fair comparison."""
    plt = _plt()
    dims = data["head_dims"]
    names = list(BASELINE_ORDER)
    paths = []

    def series(d, get):
        rows = [r for r in data["rows"] if r["head_dim"] == d]
        return [r["seq_len"] for r in rows], [get(r) for r in rows]

    def figure(fname, ylabel, curves, logy=True):
        nrows = len(curves)
        fig, axes = plt.subplots(nrows, len(dims), figsize=(5 * len(dims), 3.6 * nrows),
                                 squeeze=False)
        for i, (label, lines) in enumerate(curves):
            for j, d in enumerate(dims):
                ax = axes[i][j]
                for name, get in lines:
                    xs, ys = series(d, get)
                    ax.plot(xs, ys, marker="o", label=name,
                            color=COLORS.get(name.replace(" (vs plain)", "")))
                ax.set_xscale("log", base=2)
                if logy:
                    ax.set_yscale("log")
                ax.set_title(f"{label}, d = {d}")
                ax.set_xlabel("N")
                ax.set_ylabel(ylabel if nrows == 1 else label)
                ax.grid(True, which="both", alpha=0.3)
                ax.legend(fontsize=7)
        paths.append(_save(fig, out / fname))

    figure("speedup.png", "cycles(X) / cycles(AttenIO)", [
        ("AttenIO speedup", [(TITLES[n], lambda r, n=n: r["baselines"][n]["speedup"]) for n in names]
         + [("AttenIO s = 1", lambda r: r["attenio_unsplit"]["speedup"]),
            ("AttenIO causal (vs plain)", lambda r: 1 / r["attenio_causal"]["gain"])])])
    figure("traffic.png", "bytes(X) / bytes(AttenIO)", [
        ("off-chip traffic", [(TITLES[n], lambda r, n=n: r["baselines"][n]["traffic_ratio"])
                              for n in names]
         + [("AttenIO causal", lambda r: r["attenio_causal"]["traffic_ratio"])])])
    every = [("AttenIO", lambda r: r["attenio"])] + \
        [(TITLES[n], lambda r, n=n: r["baselines"][n]) for n in names] + \
        [("AttenIO s = 1", lambda r: r["attenio_unsplit"])]
    figure("utilization.png", "fraction", [
        (label, [(name, lambda r, get=get, key=key: get(r)[key]) for name, get in every])
        for label, key in (("PE time utilization", "pe_util"),
                           ("spatial utilization", "spatial_util"),
                           ("EXP utilization", "exp_util"))], logy=False)
    return paths


def _achieved(e, macs):
    """(operational intensity in MACs a byte, achieved MACs a cycle) of a fair entry."""
    useful = e["useful_macs"] if "useful_macs" in e else e["mac_efficiency"] * macs * e["cycles"]
    return useful / e["offchip_bytes"], useful / e["cycles"]


def plot_roofline(data, path):
    """Achieved MAC throughput against operational intensity, one point per dataflow (per
    bandwidth of a sweep) at the largest N, under the roofs min(P, bw x intensity)."""
    plt = _plt()
    hw = data["hardware"]
    macs = hw["mac_lines"] * hw["macs_per_line"]
    dims = data["head_dims"]
    bws = data["sweep"]["values"] if "sweep" in data else [hw["bw_bytes_per_cycle"]]
    fig, axes = plt.subplots(1, len(dims), figsize=(5.5 * len(dims), 4.2), squeeze=False)
    for ax, d in zip(axes[0], dims):
        n = _largest_n(data, d)
        rows = [r for r in data["rows"] if (r["seq_len"], r["head_dim"]) == (n, d)]
        points = {}
        for r in rows:
            for name, e in [("AttenIO", r["attenio"])] + [(TITLES[x], r["baselines"][x])
                                                          for x in BASELINE_ORDER]:
                points.setdefault(name, []).append(_achieved(e, macs))
        xs = [x for pts in points.values() for x, _ in pts]
        lo, hi = min(xs) / 2, max(xs) * 2
        for bw in bws:
            knee = macs / bw
            ax.plot([lo, min(knee, hi), hi], [bw * lo, macs if knee <= hi else bw * hi, macs
                                              if knee <= hi else bw * hi],
                    color="grey", lw=0.8, alpha=0.6)
            ax.annotate(f"{bw:g} B/cycle", (lo, bw * lo), fontsize=6, color="grey",
                        xytext=(2, 2), textcoords="offset points")
        for name, pts in points.items():
            ax.scatter([x for x, _ in pts], [y for _, y in pts], label=name, s=22,
                       color=COLORS.get(name), zorder=3)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("operational intensity (useful MACs / off-chip byte)")
        ax.set_ylabel("achieved useful MACs / cycle")
        ax.set_title(f"roofline, fair timing, N = {n}, d = {d}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    return _save(fig, path)


def plot_paper_speedup(data, path):
    """Speedup against N: paper timing (dashed), fair (solid), the paper's reports (dotted)."""
    plt = _plt()
    dims = data["head_dims"]
    reported = data["timing"]["reported"]
    fig, axes = plt.subplots(1, len(dims), figsize=(5.5 * len(dims), 4.2), squeeze=False)
    for ax, d in zip(axes[0], dims):
        rows = [r for r in data["rows"] if r["head_dim"] == d]
        ns = [r["seq_len"] for r in rows]
        for x in BASELINE_ORDER:
            c = COLORS[TITLES[x]]
            ax.plot(ns, [r["baselines"][x]["speedup"] for r in rows], _STYLE["paper"],
                    marker="o", color=c, label=f"{TITLES[x]}, paper timing")
            ax.plot(ns, [r["fair"]["speedup"][x] for r in rows], _STYLE["fair"], marker="s",
                    color=c, alpha=0.6, label=f"{TITLES[x]}, fair timing")
            if x in reported.get(str(d), {}):
                ax.axhline(reported[str(d)][x], color=c, ls=":", lw=1.2,
                           label=f"{TITLES[x]}, the paper reports")
        ax.axhline(1.0, color="black", lw=0.6)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("N")
        ax.set_ylabel("cycles(X) / cycles(AttenIO)")
        ax.set_title(f"AttenIO's speedup, d = {d}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=6, ncol=2)
    return _save(fig, path)


def plot_paper_time(data, path):
    """Each dataflow's cycles at the smallest N in paper timing (FLAT's spills grow with N and
    would dwarf the rest), split into compute, AttenIO's softmax and memory not hidden, with
    its fair-timing cycles marked."""
    plt = _plt()
    dims = data["head_dims"]
    fig, axes = plt.subplots(1, len(dims), figsize=(5.5 * len(dims), 4.2), squeeze=False)
    for ax, d in zip(axes[0], dims):
        n = min(r["seq_len"] for r in data["rows"] if r["head_dim"] == d)
        r = next(r for r in data["rows"] if (r["seq_len"], r["head_dim"]) == (n, d))
        names = ["AttenIO"] + [TITLES[x] for x in BASELINE_ORDER]
        entries = [r["attenio"]] + [r["baselines"][x] for x in BASELINE_ORDER]
        fair = [r["fair"]["cycles"]] + [r["fair"]["cycles"] * r["fair"]["speedup"][x]
                                        for x in BASELINE_ORDER]
        bottom = [0.0] * len(entries)
        for key, label, color in (("compute_cycles", "compute (2 d / P a pair)", "tab:gray"),
                                  ("exposed_exp_cycles", "AttenIO's softmax", "tab:purple"),
                                  ("exposed_memory_cycles", "memory not hidden", "tab:cyan")):
            h = [e[key] / 1e6 for e in entries]
            ax.bar(names, h, bottom=bottom, color=color, label=label)
            bottom = [b + v for b, v in zip(bottom, h)]
        ax.scatter(names, [f / 1e6 for f in fair], marker="_", s=400, color="black", zorder=3,
                   label="fair timing (cycle models)")
        ax.set_ylabel("Mcycles")
        ax.set_title(f"paper timing, N = {n}, d = {d}")
        ax.tick_params(axis="x", labelsize=7)
        ax.legend(fontsize=7)
    return _save(fig, path)


def plot_sweeps(sweeps, path):
    """Speedup of AttenIO over each baseline against the swept budget field, one panel per
    (N, d), one line style per timing; a fair bandwidth sweep marks each baseline's ridge."""
    plt = _plt()
    first = sweeps[0]
    axis = first["sweep"]["axis"]
    _, unit, scale = SWEEP_AXES[axis]
    dims, ns = first["head_dims"], first["seq_lens"]
    fig, axes = plt.subplots(len(ns), len(dims), figsize=(5.5 * len(dims), 4.2 * len(ns)),
                             squeeze=False)
    for i, n in enumerate(ns):
        for j, d in enumerate(dims):
            ax = axes[i][j]
            for data in sweeps:
                mode = data["timing"]["mode"]
                pts = sorted((r for r in data["rows"] if (r["seq_len"], r["head_dim"]) == (n, d)),
                             key=lambda r: r["value"])
                xs = [r["value"] / scale for r in pts]
                for x in BASELINE_ORDER:
                    ax.plot(xs, [r["baselines"][x]["speedup"] for r in pts], _STYLE[mode],
                            marker="o", ms=3, color=COLORS[TITLES[x]],
                            label=f"{TITLES[x]}, {mode} timing")
                for c in data.get("crossovers", []):
                    if (c["seq_len"], c["head_dim"]) == (n, d):
                        ax.axvline(c["ridge_bw"], color=COLORS[TITLES[c["baseline"]]], ls=":",
                                   lw=1)
            ax.axhline(1.0, color="black", lw=0.6)
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel(unit if axis == "bw" else f"cache ({unit})")
            ax.set_ylabel("cycles(X) / cycles(AttenIO)")
            what = "bandwidth" if axis == "bw" else "cache"
            ridge = ", dotted: each baseline's ridge" if any(s.get("crossovers") for s in sweeps) \
                else ""
            ax.set_title(f"{what} sweep, N = {n}, d = {d}{ridge}", fontsize=9)
            ax.grid(True, which="both", alpha=0.3)
            ax.legend(fontsize=6, ncol=2 if len(sweeps) > 1 else 1)
    return _save(fig, path)
