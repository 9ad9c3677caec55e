"""`attenio synth`: constraints kept in step with the generator, the harness, and real runs.

The end-to-end test synthesizes a tiny accelerator (1x2 MACs, d = 8, N = 16)
for both targets, side by side, and reads the numbers back from the reports
the tools wrote; its place and route (nextpnr, ~10 CPU minutes) is marked slow;
the scaling runs live in bench/bench_synth.py.
"""

import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from attenio.cli import main
from attenio.config import preset
from attenio.gen.constraints import preset_files, write_constraints
from attenio.gen.synth import DEVICE, harness_verilog, top_ports

ROOT = Path(__file__).resolve().parent.parent
TINY = ["--macs", "1x2", "--head-dim", "8", "--seq-len", "16", "--exp-units", "1"]


def test_committed_constraints_match_the_generator():
    files = preset_files()
    assert files, "no presets"
    for name, text in files.items():
        path = ROOT / "constraints" / name
        assert path.exists(), f"constraints/{name} is missing (python -m attenio.gen.constraints)"
        assert path.read_text() == text, f"constraints/{name} is stale (python -m attenio.gen.constraints)"
    small = files["attenio_top_small.sdc"]
    mhz = preset("small").budget.clock_mhz
    period = float(re.search(r"-period ([\d.]+)", small).group(1))
    assert period == pytest.approx(1000 / mhz)


def test_constraints_follow_the_clock(tmp_path):
    import dataclasses
    base = preset("small")
    config = dataclasses.replace(base, budget=dataclasses.replace(base.budget, clock_mhz=125))
    paths = write_constraints(config, tmp_path)
    assert "-period 8 " in paths["sdc"].read_text()
    assert "-period 8 -waveform {0 4}" in paths["xdc"].read_text()
    assert 'FREQUENCY PORT "clk" 125 MHZ;' in paths["lpf"].read_text()


def test_harness_keeps_every_port():
    verilog = ("module attenio_top(clk, rst, a, b, y, z);\n  input clk;\n  input rst;\n"
               "  input [4:0] a;\n  input b;\n  output [39:0] y;\n  output z;\nendmodule\n")
    ports = top_ports(verilog, "attenio_top")
    assert ports == [("input", "clk", 1), ("input", "rst", 1), ("input", "a", 5),
                     ("input", "b", 1), ("output", "y", 40), ("output", "z", 1)]
    h = harness_verilog(ports, top="attenio_top")
    assert "reg [5:0] in_sr;" in h and ".a(in_sr[4:0])" in h and ".b(in_sr[5:5])" in h
    assert ".y(outs[39:0])" in h and ".z(outs[40:40])" in h
    assert h.count("] <= ^outs_r[") == 3 and "sout <= ^fold;" in h    # ceil(41 / 16) groups


def test_missing_tool_is_one_line(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("YOSYS", str(tmp_path / "no-such-yosys"))
    assert main(["synth", *TINY, "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) >= 1 and "YOSYS=" in err[-1] and "Traceback" not in "".join(err)


def test_synth_tiny_both_targets(tmp_path, capsys):
    """Generic and ECP5 synthesis side by side (about 2 minutes of Yosys on 2 cores)."""
    assert main(["synth", *TINY, "--target", "all", "--no-pnr", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "generic" in out and "ecp5" in out
    both = json.loads((tmp_path / "synth_report.json").read_text())
    assert [r["target"] for r in both] == ["generic", "ecp5"]
    for kind in ("sdc", "xdc", "lpf"):
        assert (tmp_path / f"attenio_top.{kind}").exists()

    generic = json.loads((tmp_path / "synth_generic.json").read_text())
    cells = generic["yosys"]["cells_by_type"]
    assert generic["yosys"]["num_cells"] == sum(cells.values()) > 2000
    assert sum(v for k, v in cells.items() if "DFF" in k) > 500      # the state is there
    assert any(k in cells for k in ("$_AND_", "$_XOR_", "$_MUX_"))

    ecp5 = json.loads((tmp_path / "synth_ecp5.json").read_text())
    res = ecp5["resources"]
    assert ecp5["fits"] and 1000 < res["LUT"] < DEVICE["LUT"] and 1000 < res["FF"] < DEVICE["FF"]
    assert 0 < res["DSP"] <= DEVICE["DSP"] and res["BRAM"] >= 1
    assert "nextpnr" not in ecp5
    # the wide partial products are MULT18X18D instances holding their pipeline registers
    assert ecp5["dsp_primitives"]
    netlist = json.loads((tmp_path / "synth_ecp5" / "netlist.json").read_text())
    dsps = [c["parameters"] for c in netlist["modules"]["attenio_fmax"]["cells"].values()
            if c["type"] == "MULT18X18D"]
    assert len(dsps) == res["DSP"]
    regs = [tuple(p.get(f"REG_{r}_CLK", "NONE") for r in ("INPUTA", "INPUTB", "OUTPUT"))
            for p in dsps]
    # every int8 product registers its operands too; all NONE: a piece Yosys mapped itself
    assert ("CLK0", "CLK0", "CLK0") in regs
    assert set(regs) <= {("CLK0", "CLK0", "CLK0"), ("NONE", "NONE", "NONE")}
    assert all(p.get("RESETMODE", "SYNC") == "SYNC" for p in dsps)
    # the state machines re-encoded one-hot, the controller's among them (prepare_script)
    log = (tmp_path / "synth_ecp5" / "yosys.log").read_text()
    recoded = re.findall(r"Recoding FSM `\$fsm\$\\dut\.(\S+)\.fsm_state\S*' from module "
                         r"\S+ using `one-hot' encoding", log)
    assert any(name.startswith("ctrl") for name in recoded), recoded

    # the cells per unit (attenio.gen.module_stat) add up to Yosys's stat, type by type
    assert "where the cells go" in out and "core.array.line*.mac*" in out
    for report in (generic, ecp5):
        for rows in (report["modules"], report["module_instances"]):
            assert sum((Counter(r["cells_by_type"]) for r in rows), Counter()) == \
                report["yosys"]["cells_by_type"]
        macs = next(r for r in report["modules"] if r["unit"] == "core.array.line*.mac*")
        assert macs["instances"] == 2 and sum(macs["cells_by_type"].values()) > 500
        assert "unattributed" not in report["module_attribution"]


_FOUR_PRODUCTS = """module attenio_top(clk, rst, a8, b8, a4, b16, b18, c18, d18, p88, p416, p418, p1818);
  input clk;
  input rst;
  input [7:0] a8;
  input [7:0] b8;
  input [3:0] a4;
  input [15:0] b16;
  input [17:0] b18;
  input [17:0] c18;
  input [17:0] d18;
  output reg [15:0] p88;
  output reg [19:0] p416;
  output reg [21:0] p418;
  output reg [35:0] p1818;
  always @(posedge clk) begin
    p88 <= $signed(a8) * $signed(b8); p416 <= a4 * b16; p418 <= a4 * b18; p1818 <= c18 * d18;
  end
endmodule
"""


def test_lut_mul_width_moves_the_narrow_products_out_of_the_dsps(tmp_path):
    """--lut-mul-width 8 builds the 8x8 and 4x16 products from LUTs and leaves 4x18 (its
    long operand over twice the width) and 18x18 to DSPs; with 0 all four are MULT18X18D
    (Yosys synth_ecp5 on a four-product module, the selection of `narrow_products`)."""
    from attenio.gen.synth import synthesize
    from attenio.errors import ConfigError
    config = preset("small")
    with pytest.raises(ConfigError, match="lut_mul_width must be an integer >= 0"):
        synthesize(config, tmp_path, target="ecp5", lut_mul_width=-1)
    verilog = tmp_path / "attenio_top.v"
    verilog.write_text(_FOUR_PRODUCTS)
    dsps, bare = {}, {}
    for bits in (0, 8):
        report = synthesize(config, tmp_path / f"w{bits}", target="ecp5", verilog=verilog,
                            pnr=False, lut_mul_width=bits, log=lambda *a: None)
        script = (tmp_path / f"w{bits}" / "synth_ecp5" / "synth.ys").read_text()
        assert ("booth" in script) == bool(bits)
        dsps[bits] = report["resources"]["DSP"]
        bare[bits] = report["dsp_unregistered"]
    assert dsps == {0: 4, 8: 2}
    assert bare == dsps         # Yosys's own DSPs: no output register (the RTL registers it)

def test_the_default_lut_mul_width_is_the_formats(tmp_path):
    """Without --lut-mul-width int8 builds at 8 and a float format at 6, where the 8x8 and
    4x16 products take DSPs too (the four-product module: 2 DSPs at 8, 4 at 6)."""
    from attenio.config import resolve
    from attenio.gen.synth import synthesize
    from attenio.hdl.formats.dsp import FLOAT_LUT_MUL_WIDTH, LUT_MUL_WIDTH
    verilog = tmp_path / "attenio_top.v"
    verilog.write_text(_FOUR_PRODUCTS)
    seen = {}
    for fmt in ("int8", "fp16"):
        config = resolve(preset_name="small", format_name=fmt)
        report = synthesize(config, tmp_path / fmt, target="ecp5", verilog=verilog, pnr=False,
                            log=lambda *a: None)
        seen[fmt] = (report["config"]["lut_mul_width"], report["resources"]["DSP"])
    assert seen == {"int8": (LUT_MUL_WIDTH, 2), "fp16": (FLOAT_LUT_MUL_WIDTH, 4)}


def test_the_dsp_floorplan_pins_the_dsps_before_place_and_route(tmp_path, monkeypatch):
    """By default the DSPs are left to the placer; `floorplan="dsp"` pins them
    (`attenio.gen.floorplan`) in the netlist nextpnr reads and the report lists their
    sites (a stand-in nextpnr)."""
    from attenio.config import resolve
    from attenio.errors import ConfigError
    from attenio.gen.synth import synthesize

    fake = tmp_path / "nextpnr"
    fake.write_text(_FAKE_NEXTPNR.format(python=sys.executable))
    fake.chmod(0o755)
    monkeypatch.setenv("NEXTPNR_ECP5", str(fake))
    verilog = tmp_path / "attenio_top.v"
    verilog.write_text(_FOUR_PRODUCTS)
    config = resolve(preset_name="small", format_name="fp16")
    seen = {}
    for plan in (None, "dsp"):
        kwargs = {} if plan is None else {"floorplan": plan}
        report = synthesize(config, tmp_path / str(plan), target="ecp5", verilog=verilog,
                            lut_mul_width=0, log=lambda *a: None, **kwargs)
        netlist = json.loads((tmp_path / str(plan) / "synth_ecp5" / "netlist.json").read_text())
        bels = [c["attributes"].get("BEL") for m in netlist["modules"].values()
                for c in m.get("cells", {}).values() if c["type"] == "MULT18X18D"]
        seen[plan] = (report["config"]["floorplan"], report.get("floorplan"), bels)
    assert seen[None] == ("none", None, [None] * 4)
    plan, units, bels = seen["dsp"]
    assert plan == "dsp" and list(units) == ["other"] and sorted(bels) == sorted(units["other"])
    with pytest.raises(ConfigError, match="floorplan"):
        synthesize(config, tmp_path, target="ecp5", floorplan="rows")


@pytest.mark.slow
def test_synth_tiny_place_and_route(tmp_path, capsys):
    """nextpnr-ecp5 on the tiny design: about 10 minutes of CPU with the YoWASP build."""
    assert main(["synth", *TINY, "--target", "ecp5", "-o", str(tmp_path)]) == 0
    assert "Fmax" in capsys.readouterr().out
    ecp5 = json.loads((tmp_path / "synth_report.json").read_text())
    res = ecp5["resources"]
    placed = ecp5["placed"]
    assert placed["FF"] >= res["FF"] and placed["DSP"] == res["DSP"] and placed["LUT"] >= res["LUT4"]
    fmax = ecp5["fmax_mhz"]
    assert 10 < fmax < 500 and ecp5["closes"] == (fmax >= ecp5["config"]["clock_mhz"])
    cp = ecp5["nextpnr"]["critical_paths"][0]
    # the worst path's delay is the clock period the achieved Fmax stands for
    assert cp["delay_ns"] == pytest.approx(1000 / fmax, rel=0.15)
    assert cp["logic_ns"] > 0 and cp["routing_ns"] > 0 and cp["start"] and cp["end"]


_FAKE_NEXTPNR = """#!{python}
import json, sys
args = sys.argv[1:]
seed = int(args[args.index("--seed") + 1])
report = args[args.index("--report") + 1]
print("Info: Program finished normally.")
json.dump({{"fmax": {{"$glbnet$clk": {{"achieved": 60.0 + 7 * (seed % 3), "constraint": 100.0}}}},
           "utilization": {{"TRELLIS_COMB": {{"used": 10 + seed, "available": 100}}}},
           "critical_paths": []}}, open(report, "w"))
"""


def test_place_and_route_over_seeds_reports_the_best_and_the_spread(tmp_path, monkeypatch):
    """One netlist, one nextpnr run per seed (a stand-in nextpnr that answers 60 + 7 (seed mod
    3) MHz): the best seed's summary is the report's, every seed's Fmax and the worst kept."""
    from attenio.gen.synth import fmax_cell, place_and_route

    fake = tmp_path / "nextpnr"
    fake.write_text(_FAKE_NEXTPNR.format(python=sys.executable))
    fake.chmod(0o755)
    monkeypatch.setenv("NEXTPNR_ECP5", str(fake))
    runs = place_and_route(tmp_path, 100, [1, 2, 3], log=lambda *a: None)
    assert [(r["seed"], r["fmax_mhz"]) for r in runs] == [(1, 67.0), (2, 74.0), (3, 60.0)]
    for seed in (1, 2, 3):
        assert (tmp_path / f"nextpnr_seed{seed}.log").exists()
    assert runs[1]["utilization"]["TRELLIS_COMB"]["used"] == 12   # each seed its own report
    assert fmax_cell({"fmax_mhz": 74.0, "fmax_worst_mhz": 60.0}) == "60.0-74.0"
    assert fmax_cell({"fmax_mhz": 74.0}) == "74.0"


_FAILING_NEXTPNR = """#!{python}
import sys, time
seed = int(sys.argv[sys.argv.index("--seed") + 1])
print("Info: Running router2...", flush=True)
if seed == 2:
    sys.exit("ERROR: failed to route")
time.sleep(60)                           # a router that does not converge
"""


def test_place_and_route_reports_seeds_that_do_not_route(tmp_path, monkeypatch):
    """A seed whose nextpnr fails, or runs past the time limit, is reported with its error
    (and killed) rather than losing the other seeds' results."""
    from attenio.gen.synth import place_and_route

    fake = tmp_path / "nextpnr"
    fake.write_text(_FAILING_NEXTPNR.format(python=sys.executable))
    fake.chmod(0o755)
    monkeypatch.setenv("NEXTPNR_ECP5", str(fake))
    t0 = time.monotonic()
    runs = place_and_route(tmp_path, 100, [2, 3], log=lambda *a: None, timeout=1)
    assert time.monotonic() - t0 < 30
    assert [(r["seed"], r["fmax_mhz"]) for r in runs] == [(2, None), (3, None)]
    assert "failed with status 1" in runs[0]["error"]
    assert "time limit of 1 s" in runs[1]["error"] and "Running router2" in runs[1]["error"]


@pytest.mark.parametrize("argv, seconds", [([], None), (["--pnr-timeout", "2"], 120)])
def test_synth_pnr_timeout_reaches_the_flow(argv, seconds, tmp_path, monkeypatch):
    """--pnr-timeout is minutes; its default 0 is no limit (None), not a zero-second one."""
    import attenio.gen.build
    import attenio.gen.synth
    from attenio.errors import ConfigError

    real_synthesize, seen = attenio.gen.synth.synthesize, {}
    def fake_synthesize(config, out, **kwargs):
        seen.update(kwargs)
        return {"target": kwargs["target"], "config": {"macs": "1x2", "head_dim": 8,
                                                        "exp_units": 2, "clock_mhz": 100},
                "yosys": {"num_cells": 0, "seconds": 0.0}}
    monkeypatch.setattr(attenio.gen.build, "generate", lambda *a, **k: {"verilog": "x.v"})
    monkeypatch.setattr(attenio.gen.synth, "synthesize", fake_synthesize)
    assert main(["synth", *TINY, "--target", "ecp5", "-o", str(tmp_path), *argv]) == 0
    assert seen["pnr_timeout"] == seconds
    assert seen["modules"] is True                     # the per-unit breakdown by default
    with pytest.raises(ConfigError, match="pnr_timeout must be None"):
        real_synthesize(preset("small"), tmp_path, target="ecp5", pnr_timeout=0)


@pytest.mark.parametrize("text, message", [("1,x", "'x' is not an integer"),
                                           ("2,2", "names a seed twice"),
                                           ("-1", "not a non-negative integer")])
def test_synth_seed_list_refusals(text, message, capsys):
    with pytest.raises(SystemExit) as exc:
        main(["synth", *TINY, "--seed", text])
    assert exc.value.code == 2 and message in capsys.readouterr().err


_COUNTER = """module attenio_fmax(input clk, input rst, input sin, output reg sout);
  reg [3:0] c;
  always @(posedge clk) begin c <= rst ? 4'd0 : c + sin; sout <= ^c; end
endmodule
"""


def test_the_harness_clock_is_on_a_clock_pin_and_routes(tmp_path):
    """The real nextpnr-ecp5 on a four-bit counter in the harness's ports (a few seconds):
    `HARNESS_LPF` puts clk on the oscillator's pin G2, whose route to the global clock
    network exists on every placement (a pin the placer chooses may have none, and
    nextpnr then fails on the clock's first arc)."""
    from attenio.gen.synth import HARNESS_LPF, place_and_route, run_tool

    assert 'LOCATE COMP "clk" SITE "G2"' in HARNESS_LPF
    (tmp_path / "counter.v").write_text(_COUNTER)
    run_tool("yosys", ["-q", "-p", "synth_ecp5 -top attenio_fmax -json netlist.json",
                       "counter.v"], cwd=tmp_path, log_path=tmp_path / "yosys.log",
             log=lambda *a: None)
    runs = place_and_route(tmp_path, 100, [1, 2], log=lambda *a: None)
    assert [r.get("error") for r in runs] == [None, None]
    assert all(r["fmax_mhz"] > 100 for r in runs)
    for seed in (1, 2):
        text = (tmp_path / f"nextpnr_seed{seed}.log").read_text()
        assert "pin 'clk$tr_io' constrained to Bel 'X0/Y47/PIOA'" in text   # G2
        assert "IO 'clk' is unconstrained" not in text
