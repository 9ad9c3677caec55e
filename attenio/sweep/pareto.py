"""The Pareto front of a sweep: the points no other point beats on cycles, area and traffic.

Every objective is minimized: cycles (the model stage: `attenio compare`'s cycle
model), off-chip traffic (bytes, the plan or the model stage), and area: LUTs when the sweep
synthesized for ECP5, Yosys cells for the generic target, else the number of MACs
(a proxy that does not count the cache; the cache's cost shows only through
synthesis). Points are compared only with points of the same workload and format:
cycles of different N are not rivals. Written as `pareto.md` and one PNG per workload.
"""

from pathlib import Path

__all__ = ["Objectives", "collect", "front", "write_front"]


class Objectives(dict):
    """{point id: {"cycles", "traffic", "area", "group", "label", "errors"}} and the area's name."""

    area_name = "MACs"


def _area_kind(rows):
    synth = [r["figures"] for r in rows if r["stage"] == "synth" and r["figures"]]
    if any("LUT" in f for f in synth):
        return "LUT", "LUT (synth_ecp5)"
    if synth:
        return "num_cells", "Yosys cells (generic)"
    return None, "MACs (no synth stage)"


def _group(config):
    w = config["workload"]
    return f"N={w['seq_len']} d={w['head_dim']} heads={w['heads']} {config['format']['name']}"


def collect(spec, rows):
    """The objectives of every point of `spec` from its rows (None where a stage is
    missing or failed)."""
    key, name = _area_kind(rows)
    objs = Objectives()
    objs.area_name = name
    varied = spec.varied
    for p in spec.points:
        objs[p.id] = {"cycles": None, "traffic": None, "area": None, "group": None,
                      "label": p.label(varied), "options": p.options, "errors": {}}
    for r in rows:
        o = objs.get(r["point"])
        if o is None:
            continue
        if r["config"]:
            o["group"] = _group(r["config"])
            if key is None:
                b = r["config"]["budget"]
                o["area"] = b["mac_lines"] * b["macs_per_line"]
        if r["error"]:
            o["errors"][r["stage"]] = r["error"]
            continue
        f = r["figures"]
        if r["stage"] == "model":      # its traffic is the Plan's (compare checks it), so a
            o["cycles"] = f["cycles"]   # sweep of the model stage alone has a front too
            o["traffic"] = f["offchip_bytes"]
        elif r["stage"] == "plan":
            o["traffic"] = f["offchip_bytes"]
        elif r["stage"] == "synth" and key is not None:
            o["area"] = f.get(key)
    return objs


def _dominates(a, b):
    keys = ("cycles", "area", "traffic")
    return all(a[k] <= b[k] for k in keys) and any(a[k] < b[k] for k in keys)


def front(objs):
    """{group: [point ids on the front]}: of the points with all three objectives, those
    that no point of the same group dominates."""
    complete = {pid: o for pid, o in objs.items()
                if all(o[k] is not None for k in ("cycles", "area", "traffic"))}
    groups = {}
    for pid, o in complete.items():
        groups.setdefault(o["group"], []).append(pid)
    return {g: sorted((p for p in ids if not any(_dominates(complete[q], complete[p])
                                                 for q in ids if q != p)),
                      key=lambda p: complete[p]["cycles"])
            for g, ids in groups.items()}


def _slug(text):
    return "".join(c if c.isalnum() else "_" for c in text).strip("_")


def _plot(path, group, objs, ids, on_front, area_name):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, key, xlabel in ((axes[0], "area", area_name), (axes[1], "traffic", "off-chip bytes")):
        rest = [p for p in ids if p not in on_front]
        ax.scatter([objs[p][key] for p in rest], [objs[p]["cycles"] for p in rest],
                   c="0.6", label="dominated")
        ax.scatter([objs[p][key] for p in on_front], [objs[p]["cycles"] for p in on_front],
                   c="tab:red", label="Pareto front")
        for p in on_front:
            ax.annotate(objs[p]["label"], (objs[p][key], objs[p]["cycles"]), fontsize=7,
                        xytext=(4, 4), textcoords="offset points")
        for values, scale in (([objs[p][key] for p in ids], ax.set_xscale),
                              ([objs[p]["cycles"] for p in ids], ax.set_yscale)):
            if min(values) > 0 and max(values) / min(values) > 20:
                scale("log")
        ax.set_xlabel(xlabel)
        ax.set_ylabel("cycles (cycle model)")
        ax.grid(True, alpha=0.3)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{group}: cycles against area and traffic (front over all three)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_front(spec, rows, out):
    """Write pareto.md and the PNGs for `rows` of `spec` into `out`; returns the paths."""
    out = Path(out)
    objs = collect(spec, rows)
    fronts = front(objs)
    paths, varied = [out / "pareto.md"], spec.varied
    lines = [f"# Sweep `{spec.name}`: Pareto front", "",
             f"Minimized: cycles (cycle model), area ({objs.area_name}), off-chip traffic "
             "(bytes). The front is over all three, within each workload; the results table "
             "is `results.jsonl`.", ""]
    if not fronts:
        lines += ["No point has all three objectives yet (the front needs the model stage).", ""]
    for group, on_front in fronts.items():
        ids = sorted((p for p, o in objs.items() if o["group"] == group
                      and all(o[k] is not None for k in ("cycles", "area", "traffic"))),
                     key=lambda p: (p not in on_front, objs[p]["cycles"]))
        png = out / f"pareto-{_slug(group)}.png"
        _plot(png, group, objs, ids, set(on_front), objs.area_name)
        paths.append(png)
        head = ["front", "point", *varied, "cycles", objs.area_name, "off-chip bytes"]
        lines += [f"## {group}", "", f"{len(on_front)} of {len(ids)} points on the front.", "",
                  "| " + " | ".join(head) + " |",
                  "|" + "---|" * (len(head) - 3) + "---:|---:|---:|"]
        for p in ids:
            o = objs[p]
            cells = ["*" if p in on_front else "", p,
                     *(str(o["options"].get(k, "")) for k in varied),
                     str(o["cycles"]), str(o["area"]), str(o["traffic"])]
            lines.append("| " + " | ".join(cells) + " |")
        lines += ["", f"![{group}]({png.name})", ""]
    failed = [(p, o) for p, o in objs.items() if o["errors"]]
    if failed:
        lines += ["## Failed", "", "| point | options | stage | error |", "|---|---|---|---|"]
        for p, o in failed:
            for stage, err in o["errors"].items():
                opts = ", ".join(f"{k}={v}" for k, v in o["options"].items())
                lines.append(f"| {p} | {opts} | {stage} | {err.replace('|', '/')} |")
        lines.append("")
    (out / "pareto.md").write_text("\n".join(lines))
    return paths
