"""The stages of a sweep point, each through the Python entry point its command uses.

`run_task` is what a Ray worker runs: it rebuilds the point's `Config` from the
options as the commands parse them, runs one stage, and returns one results row.
It never raises: a failure is a row with its error, because in a design-space
sweep an impossible configuration is an answer, not a crash.

    plan   `attenio plan`:    model.planner.choose_plan and the baselines' traffic
    model  `attenio compare`: model.compare.compare_one (cycle model of AttenIO and baselines)
    synth  `attenio synth`:   gen.build.generate and gen.synth.synthesize
    sim    `attenio sim`:     sim.e2e.run_e2e (RTL end to end against the golden model)
"""

import dataclasses
import datetime
import platform
import resource
import time
import traceback
from pathlib import Path

__all__ = ["run_task", "RESOURCES", "error_line"]


def _resources(options):
    return {"num_cpus": 1, "memory": int(options["memory_gib"] * 2**30)}


#: What each stage's task asks of Ray; synthesis and simulation declare their memory.
RESOURCES = {"plan": lambda o: {"num_cpus": 1}, "model": lambda o: {"num_cpus": 1},
             "synth": _resources, "sim": _resources}


def _is_scalar(v):
    return v is None or isinstance(v, (bool, int, float, str))


def _flat(v):
    return (_is_scalar(v) or isinstance(v, (list, tuple)) and all(map(_is_scalar, v))
            or isinstance(v, dict) and all(map(_is_scalar, v.values())))


def _scalars(d, skip=()):
    """The entries of a report that fit one cell of a table: numbers, strings and flat
    lists or tables of them (a runner-up's s and r); deeper tables stay in the command's JSON."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in d.items()
            if k not in skip and _flat(v)}


def plan_figures(config, out, options):
    from attenio.report import plan_json
    from attenio.model.planner import choose_plan

    data = plan_json(choose_plan(config))
    figures = _scalars(data["plan"], skip=("name",))
    for name, b in data["baselines"].items():
        figures[f"{name}_offchip_bytes"] = b["offchip_bytes"]
    return figures


def model_figures(config, out, options):
    from attenio.model.compare import compare_one

    row = compare_one(config)
    figures = _scalars(row["attenio"])
    for name, b in row["baselines"].items():
        figures[f"{name}_cycles"] = b["cycles"]
        figures[f"speedup_over_{name}"] = b["speedup"]
    return figures


def _planned(config):
    """The config with the planner's mapping fixed, as `attenio synth` and `sim` build it."""
    from attenio.options import planned_config

    return planned_config(config)


def synth_figures(config, out, options):
    from attenio.gen.build import generate
    from attenio.gen.synth import synthesize

    config = _planned(config)
    verilog = generate(config, out, log=_quiet)["verilog"]
    r = synthesize(config, out, target=options["target"], verilog=verilog, seed=options["seed"],
                   pnr=options["pnr"], lut_mul_width=options["lut_mul_width"],
                   generic_level=options["level"], log=_quiet)
    figures = {"target": r["target"], "num_cells": r["yosys"]["num_cells"],
               "num_wire_bits": r["yosys"]["num_wire_bits"]}
    for key in ("fits", "why_not_placed", "fmax_mhz", "closes"):
        if key in r:
            figures[key] = r[key]
    figures.update(r.get("resources", {}))
    figures.update({f"placed_{k}": v for k, v in r.get("placed", {}).items()})
    return figures


def sim_figures(config, out, options):
    from attenio.sim.e2e import E2EOptions, run_e2e

    config = _planned(config)
    opts = E2EOptions(simulator=options["simulator"], seed=options["seed"],
                      input_kind=options["input_kind"], memory=options["memory"])
    report = run_e2e(config, out, opts, log=_quiet)
    run = report["runs"][0]
    figures = {k: run[k] for k in ("bit_exact", "mismatches", "bytes_match_plan")}
    figures["cycles"] = run["counters"]["CYCLES"]
    # the design's figures; the run's times are the row's wall_seconds and cpu_seconds
    figures.update(_scalars(report, skip=("config", "simulator", "memory", "seed", "wall_seconds",
                                          "golden_seconds", "sim_cycles_per_second")))
    if report.get("model"):
        figures["model_cycles"] = report["model"]["cycles"]
    return figures


_FIGURES = {"plan": plan_figures, "model": model_figures, "synth": synth_figures,
            "sim": sim_figures}


def _quiet(message):
    """Progress of the long steps: kept in the worker's own log, not the driver's screen."""
    print(message, flush=True)


def describe(config):
    """The resolved configuration of a row (after preset, config file and options)."""
    return {f.name: (dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v)
            for f in dataclasses.fields(config) if f.name != "name"
            for v in (getattr(config, f.name),)}


def _cpu_seconds():
    """CPU time of this worker and its finished tools (Yosys, nextpnr, Verilator): against
    wall_seconds it shows whether a slow task worked more or waited for a busy machine."""
    own, tools = (resource.getrusage(w) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + tools.ru_utime + tools.ru_stime


def error_line(exc):
    """A failure as the table records it: its type and the first line of its message."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def run_task(task, sweep, out_dir):
    """One stage of one point, as a results row: {sweep, point, stage, key, options,
    stage_options, command, config, figures, error, wall_seconds, cpu_seconds, node, finished}."""
    from .spec import config_of

    out = Path(out_dir) / "points" / task.point.id / task.stage
    row = {"sweep": sweep, "point": task.point.id, "stage": task.stage, "key": task.key,
           "options": task.point.options, "stage_options": task.options,
           "command": task.command, "config": None, "figures": None, "error": None}
    t0, cpu0 = time.perf_counter(), _cpu_seconds()
    try:
        config = config_of(task.point.argv)
        row["config"] = describe(config)
        row["figures"] = _FIGURES[task.stage](config, out, task.options)
    except Exception as exc:        # recorded, not raised: one point must not stop the sweep
        row["error"] = error_line(exc)
        if out.exists():
            (out / "error.txt").write_text(traceback.format_exc())
    row["wall_seconds"] = round(time.perf_counter() - t0, 3)
    row["cpu_seconds"] = round(_cpu_seconds() - cpu0, 3)
    row["node"] = platform.node()
    row["finished"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return row
