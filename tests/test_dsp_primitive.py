"""The ECP5 multiplier primitive (MULT18X18D) path of `dsp.PartialProducts` against the
generic path, and the primitive's behavioural model (sim/models/MULT18X18D.v) against
Yosys's own mapping of a product to MULT18X18D.

* The equivalence bench (cocotb, `bench_dsp`) runs every builder with wide products on
  both paths side by side, cycle by cycle, with random stalls and resets.
* The model is held to Yosys: synth_ecp5 maps plain products to its own MULT18X18D
  instances (no registers); their netlist, simulated with the model, must multiply.
"""

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from amaranth.hdl import Module, Signal, signed, unsigned

from attenio.gen.synth import tool_path
from attenio.hdl.formats.dsp import ECP5Target, PartialProducts, Stages, dsp_lut_width
from attenio.sim.benches import bench_dsp_dut
from attenio.sim.runner import SIMULATORS, primitive_models, run_bench, simulator_available

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "tests" / "dsp_primitive"


def _equivalence_verilog():
    path = BUILD / "dsp_equivalence.v"
    path.parent.mkdir(parents=True, exist_ok=True)
    return bench_dsp_dut.emit(path)


@pytest.mark.parametrize("simulator", SIMULATORS)
def test_primitive_path_equals_generic_path(simulator, seed):
    if not simulator_available(simulator):
        pytest.skip(f"{simulator} is not installed (the bench runs on the other simulator)")
    verilog = _equivalence_verilog()
    text = verilog.read_text()
    assert text.count("MULT18X18D #(") > 20
    assert '.REG_INPUTA_CLK("CLK0")' in text and '.REG_OUTPUT_CLK("CLK0")' in text
    inputs, outputs = bench_dsp_dut.ports()
    assert set(outputs) == set(bench_dsp_dut.CASES)
    run_bench(simulator=simulator, verilog_sources=[verilog, *primitive_models()],
              toplevel="dsp_equivalence", module="attenio.sim.benches.bench_dsp",
              build_dir=BUILD / simulator, quick_build=True,
              params={"seed": seed, "cycles": 3000, "inputs": inputs, "outputs": outputs,
                      "flavours": list(bench_dsp_dut.TARGETS)})
