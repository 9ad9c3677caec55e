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

import pytest

from attenio.gen.synth import tool_path
from attenio.hdl.formats.dsp import ECP5Target
from attenio.sim.benches import bench_dsp_dut
from attenio.sim.runner import primitive_models, run_bench, simulator_available

ROOT = Path(__file__).resolve().parent.parent
BUILD = ROOT / "build" / "tests" / "dsp_primitive"


def _equivalence_verilog():
    path = BUILD / "dsp_equivalence.v"
    path.parent.mkdir(parents=True, exist_ok=True)
    return bench_dsp_dut.emit(path)


# The default suite runs the equivalence on Icarus (the same Verilog; the Verilator build
# of its 20-odd primitives takes a minute), the slow suite on Verilator too.
@pytest.mark.parametrize("simulator", [pytest.param("verilator", marks=pytest.mark.slow),
                                       "icarus"])
def test_primitive_path_equals_generic_path(simulator, seed):
    if not simulator_available(simulator):
        pytest.skip(f"{simulator} is not installed (the slow suite runs the bench on both)")
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


#: the products Yosys maps, output -> ((a, width, signed), (b, width, signed), width, signed)
_YOSYS_PRODUCTS = {
    "y_ss": (("a_s", 18, True), ("b_s", 18, True), 36, True),
    "y_uu": (("a_u", 17, False), ("b_u", 17, False), 34, False),
    "y_su": (("a_s", 18, True), ("b_u", 17, False), 36, True),
    "y_cd": (("c_u", 12, False), ("d_u", 10, False), 22, False),
}


def _products_verilog():
    ins, outs, body = {}, [], []
    for y, ((a, wa, sa), (b, wb, sb), wy, sy) in _YOSYS_PRODUCTS.items():
        ins[a] = f"input {'signed ' if sa else ''}[{wa - 1}:0] {a}"
        ins[b] = f"input {'signed ' if sb else ''}[{wb - 1}:0] {b}"
        outs.append(f"output {'signed ' if sy else ''}[{wy - 1}:0] {y}")
        # a signed x unsigned product: the unsigned operand zero-extended, as signed
        bv = f"$signed({{1'b0, {b}}})" if sa and not sb else b
        body.append(f"  assign {y} = {a} * {bv};")
    return ("module prods(" + ", ".join([*ins.values(), *outs]) + ");\n" + "\n".join(body)
            + "\nendmodule\n")


def test_model_matches_yosys_mapping(seed):
    """synth_ecp5 maps plain products to its own MULT18X18D instances; simulated with the
    model, its netlist multiplies."""
    work = BUILD / "yosys"
    work.mkdir(parents=True, exist_ok=True)
    (work / "prods.v").write_text(_products_verilog())
    (work / "map.ys").write_text("read_verilog prods.v\nsynth_ecp5 -top prods\n"
                                 "write_verilog -noattr netlist.v\n"
                                 "tee -q -o stat.json stat -json\n")
    subprocess.run([tool_path("yosys"), "-q", "map.ys"], cwd=work, check=True,
                   capture_output=True)
    stat = json.loads((work / "stat.json").read_text())
    cells = (stat.get("design") or stat["modules"]["\\prods"])["num_cells_by_type"]
    assert cells == {"MULT18X18D": len(_YOSYS_PRODUCTS)}, cells
    simulator = "icarus" if simulator_available("icarus") else "verilator"
    run_bench(simulator=simulator, verilog_sources=[work / "netlist.v", *primitive_models()],
              toplevel="prods", module="attenio.sim.benches.bench_dsp_yosys",
              build_dir=work / simulator, always=True,
              params={"seed": seed, "count": 2000,
                      "ports": {y: [list(a), list(b), wy, sy]
                                for y, (a, b, wy, sy) in _YOSYS_PRODUCTS.items()}})


def _one_dsp(param, value):
    return (f'module top(input clk, input [17:0] a, output [35:0] p);\n'
            f'  MULT18X18D #(.{param}("{value}")) dsp(.CLK0(clk), .CE0(1\'b1), .RST0(1\'b0),\n    '
            + ", ".join(f".A{k}(a[{k}]), .B{k}(a[{k}])" for k in range(18)) + ",\n    "
            + ", ".join(f".P{k}(p[{k}])" for k in range(36)) + ");\nendmodule\n")


@pytest.mark.parametrize("param, value", [("REG_PIPELINE_CLK", "CLK0"), ("REG_OUTPUT_CLK", "CLK1"),
                                          ("RESETMODE", "ASYNC"), ("REG_INPUTA_RST", "RST1"),
                                          ("MULT_BYPASS", "ENABLED")])
def test_model_refuses_what_it_does_not_model(tmp_path, param, value):
    from attenio.gen.verilog import verilator_path
    model = [str(p) for p in primitive_models()]
    for name, text, refused in (("ok.v", _one_dsp("REG_OUTPUT_CLK", "CLK0"), False),
                                ("bad.v", _one_dsp(param, value), True)):
        top = tmp_path / name
        top.write_text(text)
        runs = [[verilator_path(), "--lint-only", "-Wno-fatal", "-Wno-lint", "--top-module",
                 "top", str(top), *model]]
        if simulator_available("icarus"):
            runs.append(["iverilog", "-g2005", "-o", str(tmp_path / "a.out"), "-s", "top",
                         str(top), *model])
        for args in runs:
            r = subprocess.run(args, capture_output=True, text=True)
            said = "MULT18X18D_UNMODELLED_PARAMETER_VALUE" in r.stdout + r.stderr
            assert (r.returncode != 0 and said) == refused, (args[0], r.stdout + r.stderr)


def _coarse_dsp_cells(work, verilog, *, primitives):
    """MULT18X18D cells after synth_ecp5's coarse step (products mapped to DSPs, nothing
    else mapped yet) of `verilog`, with attenio synth's preparation (narrow products to
    LUTs): {cell type: count} of the DSP and multiplier cells."""
    from attenio.gen.synth import LUT_MUL_WIDTH, prepare_script
    work.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(verilog, work / "top.v")
    (work / "coarse.ys").write_text(
        "read_verilog -sv top.v\n" + prepare_script("attenio_top", LUT_MUL_WIDTH, check=False)
        + "synth_ecp5 -top attenio_top -run begin:map_ram\n"
        + "tee -q -o stat.json stat -json\n")
    subprocess.run([tool_path("yosys"), "-q", "coarse.ys"], cwd=work, check=True,
                   capture_output=True)
    stat = json.loads((work / "stat.json").read_text())
    cells = (stat.get("design") or stat["modules"]["\\attenio_top"])["num_cells_by_type"]
    return {k: v for k, v in cells.items() if k in ("MULT18X18D", "$mul", "$__MUL18X18")}


@pytest.mark.slow
def test_primitives_take_as_many_dsps_as_yosys_would(tmp_path):
    """The small design's DSP count is the same whether its wide products are MULT18X18D
    instances (attenio synth --target ecp5) or ``a * b`` that Yosys maps itself, but for
    the pieces the design puts in DSPs whatever the LUT width (``lut_pieces=False``,
    marked ``attenio_forced_dsp``) of products that Yosys's preparation leaves to LUTs:
    the reciprocal's. The scale's forced piece (diff's top piece times c's) is part of a
    product too wide for the LUT rule, which Yosys maps to as many DSPs itself."""
    from attenio.config import resolve
    from attenio.gen.verilog import emit
    from attenio.hdl.top import AttenIOTop
    from attenio.plan import make_plan

    config = resolve(workload={"seq_len": 16, "head_dim": 8},
                     budget={"mac_lines": 1, "macs_per_line": 2, "exp_units": 1})
    plan = make_plan(config)
    emit(AttenIOTop(plan), tmp_path / "generic.v", name="attenio_top")
    emit(AttenIOTop(plan), tmp_path / "ecp5.v", name="attenio_top", platform=ECP5Target())
    text = (tmp_path / "ecp5.v").read_text()
    instances = text.count("MULT18X18D #(")
    forced = text.count("(* attenio_forced_dsp = ")
    assert instances > 0 and '.REG_INPUTA_CLK("CLK0")' in text
    # the forced pieces, by their A operand: the reciprocal's, and the scale's (diff x c)
    blocks = text.split("MULT18X18D #(")
    forced_a = [re.search(r"\.A0\((\w+)", body).group(1)
                for head, body in zip(blocks, blocks[1:])
                if "attenio_forced_dsp" in head[-80:]]
    assert len(forced_a) == forced
    forced_recip = sum(a.startswith("recip_") for a in forced_a)
    assert forced_recip > 0 and forced - forced_recip == 1, forced_a
    generic = _coarse_dsp_cells(tmp_path / "g", tmp_path / "generic.v", primitives=False)
    ecp5 = _coarse_dsp_cells(tmp_path / "e", tmp_path / "ecp5.v", primitives=True)
    print(f"generic: {generic}, with primitives: {ecp5} ({instances} instances, "
          f"{forced} forced, {forced_recip} of them the reciprocal's)")
    assert generic.get("MULT18X18D", 0) > 0
    assert ecp5.get("MULT18X18D", 0) == generic["MULT18X18D"] + forced_recip
    assert ecp5.get("MULT18X18D", 0) >= instances


@pytest.mark.slow
def test_core_with_primitives_is_bit_exact(seed):
    """A small int8 core elaborated for ECP5 with every partial product in a MULT18X18D,
    simulated with the model: the core bench holds it to the golden model."""
    from attenio.formats import Int8Format
    from attenio.gen.verilog import emit
    from attenio.hdl.core import AttentionCore

    if not simulator_available("icarus"):
        pytest.skip("icarus is not installed")
    params = dict(mac_lines=1, macs_per_line=8, rows_per_mac=1, head_dim=4, exp_units=1,
                  max_seq_len=32)
    build = BUILD / "core_icarus"
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir(parents=True)
    core = AttentionCore(**params, fmt=Int8Format())
    src = build / "core.v"
    emit(core, src, name="attention_core", platform=ECP5Target(lut_mul_width=0))
    assert src.read_text().count("MULT18X18D #(") > 0
    report = build / "report.json"
    run_bench(simulator="icarus", verilog_sources=[src, *primitive_models()],
              toplevel="attention_core", module="attenio.sim.benches.bench_core",
              build_dir=build, seed=seed,
              params=dict(params, blocks=[[8, 16], [5, 4]], seed=seed, report=str(report),
                          random_blocks=2))
    assert json.loads(report.read_text())["blocks"]
