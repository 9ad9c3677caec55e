"""`attenio gen`: from a configuration to the files a user takes away.

build/<name>/
    attenio_top.v       the accelerator (top module `attenio_top`)
    plan.json           the Plan and its baselines (the same JSON as `attenio plan --json`)
    regmap.json, attenio_regs.h, regmap.md   the register map
    attenio_top.{sdc,xdc,lpf}   clock constraints at the config's clock_mhz
    report.md           what was generated, for people
    lint.log            verilator's lint output (with --lint)

`generate_complete` writes them into a temporary sibling of build/<name>/ and moves them
into place only once every file is written, so a failed or interrupted `attenio gen`
leaves the directory as it was, never half of a new design beside half of an old one.
"""

import errno
import glob
import json
import os
import resource
import shutil
import tempfile
from pathlib import Path

from attenio.plan import make_plan
from attenio.regmap import register_map
from attenio.report import human_bytes, plan_json

from .constraints import write_constraints
from .regmap import write_regmap
from .verilog import LINT_WAIVERS, emit, lint

__all__ = ["generate", "generate_complete", "TOP_NAME", "LINT_LOG"]

TOP_NAME = "attenio_top"
#: verilator's lint output, written only with run_lint
LINT_LOG = "lint.log"


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
        (out / LINT_LOG).write_text(text + "\n")
        if not ok:
            log(text)
    (out / "report.md").write_text(_report(plan, summary))
    summary["report"] = str(out / "report.md")
    return summary


def generate_complete(config, out_dir, **options):
    """`generate` (with `options`) into a temporary directory beside `out_dir`, moved into
    place once every artifact is written; returns the summary with the final paths.

    A new `out_dir` is the temporary directory renamed. An existing one that holds only
    what `generate` writes is swapped for the new one (two renames, never a directory of
    mixed designs). One that also holds other files (a simulation's builds beside the
    Verilog: `attenio sim` shares build/<name>) keeps them, and each artifact replaces its
    old copy by a rename, after all are written. On any failure the temporary directory
    is removed and `out_dir` is untouched; one left by a killed process is removed by the
    next call (`_remove_abandoned`)."""
    out = Path(out_dir)
    out.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(out)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.{os.getpid()}.", suffix=".partial",
                                dir=out.parent))
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o777 & ~umask)      # mkdtemp's 0700 would become the build's mode
        summary = generate(config, tmp, **options)
        _move_into_place(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise

    def final(value):
        if isinstance(value, list):
            return [final(v) for v in value]
        if isinstance(value, str) and (value == str(tmp) or value.startswith(f"{tmp}/")):
            return str(out) + value[len(str(tmp)):]
        return value
    return {k: final(v) for k, v in summary.items()}


def _remove_abandoned(out):
    """Remove the temporary siblings of `out` whose process is gone: a `gen` killed outright
    (SIGKILL, or SIGTERM while Python is not running) has no chance to remove its own. Each
    name carries its process id, so a `gen` running now keeps its directory."""
    for tmp in out.parent.glob(f".{glob.escape(out.name)}.*.partial"):
        pid = tmp.name[len(out.name) + 2:].split(".")[0]
        if not pid.isdigit():
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(tmp, ignore_errors=True)
        except OSError:         # alive, owned by another user
            pass


def _move_into_place(tmp, out):
    """The finished artifacts in `tmp` into `out` (see `generate_complete`)."""
    if not out.exists():
        os.rename(tmp, out)
        return
    made = {p.name for p in tmp.iterdir()}
    if all(p.name in made | {LINT_LOG} and p.is_file() and not p.is_symlink()
           for p in out.iterdir()):
        old = tmp.with_suffix(".old.partial")      # removed as abandoned if we die here
        os.rename(out, old)
        os.rename(tmp, out)
        shutil.rmtree(old, ignore_errors=True)
        return
    for name in sorted(made):       # checked before the first rename: all or none
        if (out / name).is_dir() and not (out / name).is_symlink():
            raise IsADirectoryError(errno.EISDIR, "a directory bears an artifact's name",
                                    str(out / name))
    for name in sorted(made):
        os.replace(tmp / name, out / name)
    if LINT_LOG not in made:        # an earlier --lint's log speaks of the old Verilog
        (out / LINT_LOG).unlink(missing_ok=True)
    tmp.rmdir()


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
