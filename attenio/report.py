"""Plain-text tables of a Plan and its baselines, for people (JSON is for machines)."""

from .baselines import all_baselines

__all__ = ["table", "human_bytes", "plan_report", "plan_json"]


def human_bytes(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1024


def table(headers, rows, align=None):
    """Left-align text columns and right-align the rest."""
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h)
              for i, h in enumerate(headers)]
    align = align or ["<"] + [">"] * (len(headers) - 1)
    fmt = "  ".join(f"{{:{a}{w}}}" for a, w in zip(align, widths))
    lines = [fmt.format(*headers), "  ".join("-" * w for w in widths)]
    lines += [fmt.format(*r) for r in cells]
    return "\n".join(lines)


def _traffic_rows(plan, baselines):
    eb = plan.config.format.element_bytes
    bound_bytes = plan.bound_elements * eb
    ours = plan.traffic.bytes
    rows = [("AttenIO (this plan)", f"a={plan.a}", plan.traffic),
            ("AttenIO, no reservations", f"a={plan.a_ideal}", plan.traffic_ideal)]
    for b in baselines.values():
        tiling = ", ".join(f"{k}={v}" for k, v in b.tiling.items() if k not in ("spill", "row_fits"))
        rows.append((b.title, tiling, b.traffic))
    out = []
    for title, tiling, t in rows:
        out.append((title, tiling, human_bytes(t.read_bytes), human_bytes(t.write_bytes),
                    human_bytes(t.bytes), f"{t.bytes / ours:.2f}x", f"{t.bytes / bound_bytes:.2f}x"))
    return out


def _mapping_lines(plan):
    """The mapping the planner chose, every candidate it modelled, and what the choice costs."""
    lines = ["Mapping (each Q row over s MACs, r rows a group of s, B score and (P, alpha) "
             "banks)"]
    choice = plan.mapping_choice
    if choice is not None:
        at = f"the cycle model at N = {choice.seq_len}, {choice.heads} head(s)"
        s, r, banks = choice.chosen
        if choice.mode == "auto":
            lines.append(f"  chosen s = {s}, r = {r}, B = {banks} by {at}: of the mappings "
                         f"within {100 * choice.tolerance:g} % of the fewest cycles, the least "
                         f"traffic (then the fewer banks, the smaller s, the larger r)")
        else:
            lines.append(f"  forced s = {s}, r = {r}, B = {banks} (--split, --rows-per-mac and "
                         f"--banks, or [mapping]); {at}")
        mark = {choice.chosen: "chosen", choice.runner_up: "runner-up"}
        lines.append(table(
            ["s", "r", "B", "a", "groups", "MACs active", "K/V depth", "cycles", "PE time",
             "spatial", "traffic", ""],
            [(c.split, c.rows_per_mac, c.banks, c.a, c.groups, c.macs_active, c.kv_depth,
              c.cycles, f"{100 * c.pe_util:.1f}%", f"{100 * c.spatial_util:.1f}%",
              human_bytes(c.offchip_bytes), mark.get(c.mapping, ""))
             for c in choice.candidates], [">"] * 11 + ["<"]))
    if plan.split == 1:
        lines.append(f"  a = {plan.a} is the a of one MAC a row: the mapping costs no traffic")
    else:
        lines.append(f"  a = {plan.a} at s = {plan.split} instead of {plan.a_unsplit} at s = 1 "
                     f"costs {human_bytes(plan.split_cost_bytes)} of traffic "
                     f"({plan.traffic.bytes / plan.traffic_unsplit.bytes:.3f}x)")
    return lines


def _decoder_lines(plan):
    """For a decoder shape (N_kv != N or grouped heads): the bytes per query row against
    the bound of reading Q and O once and each K/V row once per K/V head."""
    w = plan.workload
    if w.n_kv == w.seq_len and w.group == 1:
        return []
    eb, ob = plan.config.format.element_bytes, plan.config.format.out_bytes
    bound = (w.heads * w.seq_len * (eb + ob) + 2 * w.n_kv_heads * w.n_kv * eb) * w.head_dim
    rows = w.heads * w.seq_len
    moved = plan.traffic.bytes
    return [f"  per query row (a generated token's, per head): {human_bytes(moved / rows)} "
            f"moved, {moved / bound:.2f}x the bound of {human_bytes(bound / rows)} (Q and O "
            f"once, each K/V row once per K/V head)"]


def plan_report(plan, baselines=None):
    baselines = baselines if baselines is not None else all_baselines(plan.config)
    c, w, b = plan.config, plan.workload, plan.budget
    lines = [
        f"AttenIO plan '{c.name}': N={w.seq_len} d={w.head_dim} heads={w.heads} "
        f"format={c.format.name}" + (" causal" if w.causal else "")
        + (f" N_kv={w.n_kv}" if w.n_kv != w.seq_len else "")
        + (f" kv_heads={w.n_kv_heads} (g = {w.group}; " + (
            f"grouped blocks: a Q block holds {plan.a // w.group} row(s) of each of the "
            f"{w.group} query heads, so K/V is read once a group, MODE.GROUPED)"
            if plan.grouped else "blocks of one query head: each reads its K/V, since grouped "
            "blocks would move no less here)") if w.group > 1 else ""),
        f"  hardware: {b.mac_lines}x{b.macs_per_line} MACs, {b.exp_units} EXP units, "
        f"cache {human_bytes(b.cache_bytes)}, KV buffer {b.kv_buffer_bytes} B, "
        f"{b.bw_bytes_per_cycle} B/cycle, latency {b.latency_cycles} cycles, {b.clock_mhz} MHz",
        "",
        "Tiling",
        f"  Q block a = {plan.a} rows, K/V b = {plan.b} row at a time, {plan.q_blocks} Q blocks "
        + (f"per group of {plan.workload.group} heads" if plan.grouped else "per head"),
        f"  s = {plan.split} MAC(s) per row: {plan.groups} groups of {plan.split} MAC(s), "
        f"{plan.rows_per_mac} row(s) per group, {plan.macs_active} of {b.macs} MACs active",
        f"  a without reservations (M = {plan.m_elements} elements): {plan.a_ideal}; "
        f"largest a that fits the reservations: {plan.a_fit}; rounded for the array: "
        f"{plan.a_largest or plan.a}"
        + (f"; r = {plan.rows_per_mac} rows a group: {plan.a}"
           if plan.a_largest not in (None, plan.a) else ""),
        f"  K/V prefetch depth: {plan.kv_depth} rows",
        *_decoder_lines(plan),
        "",
        "Budget use",
        table(["item", "where", "values", "bits", "bytes", "why"],
              [(r.item, r.where, r.count, r.bits, r.bytes, r.why) for r in plan.reservations],
              ["<", "<", ">", ">", ">", "<"]),
        f"  cache: {plan.cache_used_bytes} of {b.cache_bytes} bytes "
        f"({100 * plan.cache_used_bytes / b.cache_bytes:.1f}%); KV buffer: "
        f"{plan.kv_buffer_used_bytes} of {b.kv_buffer_bytes} bytes",
        f"  rounding a from {plan.a_fit} to {plan.a} costs "
        f"{human_bytes(plan.traffic.bytes - plan.traffic_unrounded.bytes)} of traffic; "
        f"the reservations cost {human_bytes(plan.traffic_unrounded.bytes - plan.traffic_ideal.bytes)}",
        "",
        *_mapping_lines(plan),
        "",
        "Off-chip traffic (ratios to this plan and to the bound N^2 d^2 / M)",
        table(["dataflow", "tiling", "read", "written", "total", "vs AttenIO", "vs bound"],
              _traffic_rows(plan, baselines), ["<", "<", ">", ">", ">", ">", ">"]),
    ]
    for bl in baselines.values():
        for note in bl.notes:
            lines.append(f"  note: {bl.title}: {note}")
    if w.causal:
        lines.append("  note: causal: AttenIO's rows are masked (each Q block reads K/V up to "
                     "its last row); the baselines' traffic here is unmasked (`attenio compare` "
                     "times FlashAttention-2 causal beside causal AttenIO)")
    return "\n".join(lines)


def plan_json(plan, baselines=None):
    baselines = baselines if baselines is not None else all_baselines(plan.config)
    return {"plan": plan.to_dict(), "baselines": {k: v.to_dict() for k, v in baselines.items()}}
