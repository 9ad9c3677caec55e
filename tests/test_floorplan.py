"""`attenio.gen.floorplan`: each unit's DSPs side by side, the lines in order, on hand-made cells."""

import json

import pytest

from attenio.gen.floorplan import (BLOCK_X, BOARD_TOP, ROWS, SITES_PER_BLOCK, assign, dsp_sites,
                                   dsp_units, lock_dsps)


def _cells(lines, macs, per_mac, per_lane, rest=()):
    cells = {}
    for line in range(lines):
        for mac in range(macs):
            for k in range(per_mac):
                cells[f"dut.core.array.line{line}.mac{mac}.fupd_mul.U${k}"] = {"type": "MULT18X18D"}
        for k in range(per_lane):
            cells[f"dut.core.array.line{line}.lane0.fscale.U${k}"] = {"type": "MULT18X18D"}
    for name, n in rest:
        for k in range(n):
            cells[f"dut.{name}.U${k}"] = {"type": "MULT18X18D"}
    cells["dut.core.array.line0.mac0.acc_TRELLIS_FF_Q"] = {"type": "TRELLIS_FF"}
    return cells


def _x(site):
    return int(site.split("/")[0][1:])


def _row(site):
    return int(site.split("/")[1][1:])


def test_a_row_is_thirteen_blocks_of_four_sites():
    sites = dsp_sites(34)
    assert len(sites) == len(BLOCK_X) * SITES_PER_BLOCK == 52
    assert sites[:5] == ["X4/Y34/MULT18_0", "X5/Y34/MULT18_1", "X8/Y34/MULT18_4",
                         "X9/Y34/MULT18_5", "X13/Y34/MULT18_0"]


def test_lines_run_with_their_lanes_at_the_ends_every_other_one_reversed():
    groups = dsp_units(_cells(2, 2, 4, 2, rest=[("core.normalizer.recip", 3)]))
    assert [[unit for unit, _ in g] for g in groups] == [
        ["line0.lane0", "line0.mac1", "line0.mac0"],
        ["line1.mac0", "line1.mac1", "line1.lane0"],
        ["core.normalizer"]]
    assert groups[0][1][1] == [f"dut.core.array.line0.mac1.fupd_mul.U${k}" for k in range(4)]


def test_the_board_netlist_groups_its_units_below_its_accelerator_instance():
    """On the board the accelerator is ``core.accel``: its lines and normalizer group as the
    harness's do, and taken as the harness's (``dut``) every DSP would be "other"."""
    cells = {name.replace("dut.", f"{BOARD_TOP}.", 1): cell
             for name, cell in _cells(2, 2, 3, 9, rest=[("core.normalizer.recip", 3)]).items()}
    groups = dsp_units(cells, BOARD_TOP)
    assert [[(unit, len(c)) for unit, c in g] for g in groups] == [
        [("line0.lane0", 9), ("line0.mac1", 3), ("line0.mac0", 3)],
        [("line1.mac0", 3), ("line1.mac1", 3), ("line1.lane0", 9)],
        [("core.normalizer", 3)]]
    assert [[unit for unit, _ in g] for g in dsp_units(cells)] == [["other"]]


def test_the_fp16_4x4_takes_the_rows_by_their_share():
    """Four lines of four 4-DSP MACs and a 10-DSP lane (26 sites a line) and a 24-DSP
    normalizer: the top row (half the fabric) two lines, the middle one a line and the
    normalizer (the row with the most room left), the bottom one a line."""
    groups = dsp_units(_cells(4, 4, 4, 10, rest=[("core.normalizer", 24)]))
    sites = assign(groups)
    assert len(set(sites.values())) == len(sites) == 4 * 26 + 24
    rows = {unit: {_row(s) for c, s in sites.items() if c.startswith(f"dut.{unit}.")}
            for unit in ("core.array.line0", "core.array.line1", "core.array.line2",
                         "core.array.line3", "core.normalizer")}
    assert rows == {"core.array.line0": {58}, "core.array.line1": {58},
                    "core.array.line2": {34}, "core.normalizer": {34},
                    "core.array.line3": {10}}
    # each MAC on four sites side by side
    for line in range(4):
        for mac in range(4):
            row = dsp_sites(58 if line < 2 else 34 if line == 2 else 10)
            at = sorted(row.index(s) for c, s in sites.items() if f"line{line}.mac{mac}." in c)
            assert at == list(range(at[0], at[0] + 4)), (line, mac, at)
    # the lanes at the ends of the top row, the first MACs in its middle
    assert sites["dut.core.array.line0.lane0.fscale.U$0"] == "X4/Y58/MULT18_0"
    assert sites["dut.core.array.line1.lane0.fscale.U$9"] == "X119/Y58/MULT18_5"
    top = dsp_sites(58)
    assert [top.index(sites[f"dut.core.array.line{k}.mac0.fupd_mul.U$0"]) for k in (0, 1)] == \
        [22, 26]                                     # sites 22-25 and 26-29 of 52
    # the bottom row's line centred: 26 of 52 sites, 12 to its left
    assert min(_x(s) for c, s in sites.items() if "line3." in c) == BLOCK_X[3]


def test_a_line_that_does_not_fit_a_rows_share_goes_to_the_next_row():
    """Three lines of 21 sites (63): the top row's share is 33, so it takes one line; the
    middle row's 16, one line; the bottom row the third."""
    sites = assign(dsp_units(_cells(3, 4, 3, 9)))
    for line, row in enumerate(ROWS):
        assert {_row(s) for c, s in sites.items() if f"line{line}." in c} == {row}


def test_running_out_of_sites_names_the_units():
    """Lines of 32 sites: one a row (two would be 64 of 52), so the fourth finds none."""
    with pytest.raises(ValueError, match=r"no row of 52 sites has room left for line3\.mac0"):
        assign(dsp_units(_cells(6, 4, 8, 0)))


def test_lock_dsps_writes_the_bel_attributes(tmp_path):
    cells = _cells(1, 2, 4, 0)
    path = tmp_path / "netlist.json"
    path.write_text(json.dumps({"modules": {"attenio_fmax": {"cells": cells}}}))
    units = lock_dsps(path, tmp_path / "fp.json")
    out = json.loads((tmp_path / "fp.json").read_text())["modules"]["attenio_fmax"]["cells"]
    bels = {n: c.get("attributes", {}).get("BEL") for n, c in out.items()}
    assert units[0] == ("line0.mac1", [bels[f"dut.core.array.line0.mac1.fupd_mul.U${k}"]
                                       for k in range(4)])
    assert bels["dut.core.array.line0.mac0.acc_TRELLIS_FF_Q"] is None
    assert len({b for b in bels.values() if b}) == 8


_TWO_MACS = r"""module mac(input clk, input [17:0] a, input [17:0] b, output reg [35:0] p);
  always @(posedge clk) p <= a * b;
endmodule
module attenio_fmax(input clk, input rst, input sin, output reg sout);
  reg [71:0] sr;
  wire [35:0] p0, p1;
  always @(posedge clk) sr <= {sr[70:0], sin};
  mac \dut.core.array.line0.mac0 (.clk(clk), .a(sr[17:0]), .b(sr[35:18]), .p(p0));
  mac \dut.core.array.line1.mac0 (.clk(clk), .a(sr[53:36]), .b(sr[71:54]), .p(p1));
  always @(posedge clk) sout <= ^{p0, p1};
endmodule
"""


def test_nextpnr_places_the_dsps_where_the_floorplan_pins_them(tmp_path):
    """The real Yosys and nextpnr-ecp5 (seconds): two MACs' products, pinned through the
    BEL attribute, are where the placement written back says (a line a row, each the
    first site of the middle block)."""
    from attenio.gen.synth import DEVICE, HARNESS_LPF, run_tool

    quiet = {"log": lambda *a: None}
    (tmp_path / "two.v").write_text(_TWO_MACS)
    run_tool("yosys", ["-q", "-p", "synth_ecp5 -top attenio_fmax -json netlist.json", "two.v"],
             cwd=tmp_path, log_path=tmp_path / "yosys.log", **quiet)
    units = lock_dsps(tmp_path / "netlist.json")
    assert units == [("line0.mac0", ["X58/Y58/MULT18_0"]), ("line1.mac0", ["X58/Y34/MULT18_0"])]
    (tmp_path / "harness.lpf").write_text(HARNESS_LPF.format(mhz=100))
    run_tool("nextpnr-ecp5", [*DEVICE["nextpnr"], "--json", "netlist.json", "--lpf",
                              "harness.lpf", "--lpf-allow-unconstrained", "--no-route",
                              "--write", "placed.json"],
             cwd=tmp_path, log_path=tmp_path / "nextpnr.log", **quiet)
    modules = json.loads((tmp_path / "placed.json").read_text())["modules"]
    placed = max(modules.values(), key=lambda m: len(m.get("cells", {})))
    bels = {name.split(".")[3]: cell["attributes"]["NEXTPNR_BEL"]
            for name, cell in placed["cells"].items() if cell["type"] == "MULT18X18D"}
    assert bels == {"line0": "X58/Y58/MULT18_0", "line1": "X58/Y34/MULT18_0"}
