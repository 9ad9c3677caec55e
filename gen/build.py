"""`attenio gen`: from a configuration to the files a user takes away.

build/<name>/
    attenio_top.v       the accelerator (top module `attenio_top`)
    plan.json           the Plan and its baselines (the same JSON as `attenio plan --json`)
    regmap.json, attenio_regs.h, regmap.md   the register map
    attenio_top.{sdc,xdc,lpf}   clock constraints at the config's clock_mhz
    report.md           what was generated, for people
"""

import json
import resource
from pathlib import Path

from attenio.plan import make_plan
from attenio.regmap import register_map
from attenio.report import human_bytes, plan_json

from .constraints import write_constraints
from .regmap import write_regmap
from .verilog import LINT_WAIVERS, emit, lint

__all__ = ["generate", "TOP_NAME"]

TOP_NAME = "attenio_top"


def _peak_rss_mib():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def generate(config, out_dir, *, run_lint=False, verilator=None, log=print):
    """Write every artifact of `config` into `out_dir`; returns a summary dict."""
    from attenio.hdl.top import AttenIOTop, check_plan

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    plan = make_plan(config)
    check_plan(plan)
    (out / "plan.json").write_text(json.dumps(plan_json(plan), indent=2) + "\n")
    rmap = register_map(plan)
    paths = write_regmap(rmap, out)
    constraints = write_constraints(config, out, top=TOP_NAME)
    log(f"elaborating and converting attenio_top ({plan.budget.mac_lines}x"
        f"{plan.budget.macs_per_line} MACs, a = {plan.a}, d = {plan.workload.head_dim}) ...")
    seconds = emit(AttenIOTop(plan), out / f"{TOP_NAME}.v", name=TOP_NAME)
    verilog = out / f"{TOP_NAME}.v"
    summary = {
        "name": config.name, "out_dir": str(out), "verilog": str(verilog),
        "verilog_bytes": verilog.stat().st_size, "convert_seconds": round(seconds, 2),
        "peak_rss_mib": round(_peak_rss_mib(), 1),
        "plan": str(out / "plan.json"), **{f"regmap_{k}": str(v) for k, v in paths.items()},
        "constraints": [str(p) for p in constraints.values()],
    }
    if run_lint:
        log("linting with verilator --lint-only -Wall ...")
        ok, text = lint(verilog, top=TOP_NAME, verilator=verilator)
        summary["lint_ok"] = ok
        (out / "lint.log").write_text(text + "\n")
        if not ok:
            log(text)
    (out / "report.md").write_text(_report(plan, summary))
    summary["report"] = str(out / "report.md")
    return summary


def _report(plan, summary):
    w, b = plan.workload, plan.budget
    lines = [
        f"# AttenIO accelerator `{summary['name']}`", "",
        f"- Workload: N up to {w.seq_len}, d = {w.head_dim}, {plan.config.format.name}",
        f"- Array: {b.mac_lines} x {b.macs_per_line} MACs, {b.exp_units} EXP units; "
        f"Q block a = {plan.a} rows ({plan.rows_per_mac} per MAC)",
        f"- On-chip storage planned: {human_bytes(plan.cache_used_bytes)} of "
        f"{human_bytes(b.cache_bytes)} (see plan.json, `budget_use`)",
        f"- Off-chip traffic per run at N = {w.seq_len}, {w.heads} head(s): "
        f"{plan.traffic.read_bytes} bytes read, {plan.traffic.write_bytes} bytes written",
        f"- AXI4 master: {b.axi_data_bits}-bit data, 32-bit addresses; AXI4-Lite CSRs: see regmap.md",
        f"- Verilog: `{Path(summary['verilog']).name}`, {summary['verilog_bytes']} bytes, converted in "
        f"{summary['convert_seconds']} s (peak RSS {summary['peak_rss_mib']} MiB)",
    ]
    if "lint_ok" in summary:
        lines.append(f"- `verilator --lint-only -Wall`: {'clean' if summary['lint_ok'] else 'FAILED'}"
                     f" with these waivers:")
        lines += [f"  - `{k}`: {v}" for k, v in LINT_WAIVERS.items()]
    return "\n".join(lines) + "\n"
