"""`attenio.gen.module_stat`: the per-unit tally of a flattened netlist, on a hand-made one.

The netlist is a harness (`attenio_fmax`, harness.v) around the accelerator (`dut`,
attenio_top.v lines 1-10) with a CSR block (lines 40-50) and two MACs that share one
Verilog module (lines 20-30), as the MAC lines do. The reconciliation with Yosys's own
`stat` on a real design is in tests/test_synth.py (`test_synth_tiny_both_targets`).
"""

from collections import Counter

import pytest

from attenio.gen.module_stat import main, render_units, signals, tally, units


def _scope(module, lines):
    return {"type": "$scopeinfo", "parameters": {"TYPE": "module"}, "connections": {},
            "attributes": {"module": module, "module_src": f"attenio_top.v:{lines}"}}


def _cell(kind, ins, outs, src=None, hidden=False):
    ports = {**{f"I{i}": [b] for i, b in enumerate(ins)}, **{f"O{i}": [b] for i, b in enumerate(outs)}}
    cell = {"type": kind, "hide_name": int(hidden), "connections": ports, "attributes": {},
            "port_directions": {p: "input" if p.startswith("I") else "output" for p in ports}}
    if src:
        cell["attributes"]["src"] = src
    return cell


MAC = "attenio_top.v:25.3-25.20|/share/lattice/cells_map_trellis.v:68.1-68.2"
NETLIST = {"modules": {"attenio_fmax": {
    "attributes": {"top": "1", "src": "harness.v:1.1-20.10"},
    "netnames": {"dut.core.array.line1.mac0.sum": {"hide_name": 0, "bits": [11]},
                 "$auto$7": {"hide_name": 1, "bits": [12]}},
    "cells": {
        "dut": _scope("attenio_top", "1.1-10.10"),
        "dut.core.array.line0.mac0": _scope("mac", "20.1-30.10"),
        "dut.core.array.line1.mac0": _scope("mac", "20.1-30.10"),
        "dut.csr$12": _scope("attenio_top.csr$12", "40.1-50.10"),
        # the MAC module's registers: the instance from the name, or the shared path
        "dut.core.array.line1.mac0.acc_TRELLIS_FF_Q": _cell("TRELLIS_FF", [1], [2], MAC),
        "dut.core.array.line0.lane0.scores_TRELLIS_FF_Q": _cell("TRELLIS_FF", [3], [4], MAC),
        # a hidden name: the instance from the public wire it drives
        "$auto$ff$9": _cell("TRELLIS_FF", [12], [11], MAC, hidden=True),
        # LUTs from ABC: no source line; the unit of the register they feed
        "dut.core.array.line1.mac0.acc_TRELLIS_FF_Q_DI_LUT4_Z": _cell("LUT4", [5, 6], [1]),
        "dut.core.array.line1.mac0.acc_TRELLIS_FF_Q_DI_LUT4_Z_A_LUT4_Z": _cell("LUT4", [7], [5]),
        "$abc$4": _cell("LUT4", [8], [12], hidden=True),
        # CSR: a carry cell by its source line, a LUT fed by it that feeds nothing
        "dut.csr$12.count_CCU2C_S0": _cell("CCU2C", [9], [10], "attenio_top.v:45.1-45.9"),
        "dut.csr$12.count_LUT4_Z": _cell("LUT4", [10], [13]),
        # the accelerator top's own register, the harness's, and a cell nothing reaches
        "dut.busy_TRELLIS_FF_Q": _cell("TRELLIS_FF", [14], [15], "attenio_top.v:5.3-5.9"),
        "outs_r_TRELLIS_FF_Q": _cell("TRELLIS_FF", [15], [16], "harness.v:12.3-12.40"),
        "orphan_LUT4_Z": _cell("LUT4", [], [17]),
    }}}}


def test_each_cell_counts_toward_its_source_module_or_the_register_it_feeds():
    counts, how = tally(NETLIST, "attenio_fmax")
    assert counts == {
        "dut.core.array.line1.mac0": Counter({"TRELLIS_FF": 2, "LUT4": 3}),
        "dut.core.array.line0.mac0": Counter({"TRELLIS_FF": 1}),
        "dut.csr$12": Counter({"CCU2C": 1, "LUT4": 1}),
        "dut": Counter({"TRELLIS_FF": 1}),
        "": Counter({"TRELLIS_FF": 1}),
        "(unattributed)": Counter({"LUT4": 1}),
    }
    assert how == {"src": 6, "walk": 4, "unattributed": 1}


def test_units_group_the_numbered_instances_and_name_the_top_and_the_harness():
    rows = units(tally(NETLIST, "attenio_fmax")[0], "dut")
    assert [(r["unit"], r["instances"], r["own"], r["cells_by_type"]) for r in rows] == [
        ("core.array.line*.mac*", 2, False, {"LUT4": 3, "TRELLIS_FF": 3}),
        ("csr", 1, False, {"CCU2C": 1, "LUT4": 1}),        # 3 LUTs: a CCU2C holds two
        ("(unattributed)", 1, False, {"LUT4": 1}),
        ("(harness)", 1, False, {"TRELLIS_FF": 1}),         # no LUTs: by cells, then name
        ("(top)", 1, False, {"TRELLIS_FF": 1}),
    ]


def test_the_table_sums_the_rows_it_leaves_out():
    rows = units(tally(NETLIST, "attenio_fmax")[0], "dut")
    text = render_units(rows, target="ecp5", limit=2).splitlines()
    assert text[0].split() == ["unit", "n", "LUT", "LUT/inst", "%", "LUT4", "CCU2C", "FF",
                               "LUTRAM", "DSP", "BRAM"]
    assert text[2].split() == ["core.array.line*.mac*", "2", "3", "2", "42.9", "3", "0", "3",
                               "0", "0", "0"]
    assert text[4].split() == ["(3", "more", "rows)", "1", "14.3", "1", "0", "2", "0", "0", "0"]
    assert text[-1].split() == ["total", "7", "100.0", "5", "1", "5", "0", "0", "0"]
    generic = render_units(rows, target="generic", limit=None).splitlines()
    assert generic[0].split() == ["unit", "n", "cells", "cells/inst", "%", "FF"]
    assert generic[-1].split() == ["total", "11", "100.0", "5"]


def test_an_instance_s_cells_by_signal_keep_as_many_words_of_its_name_as_asked():
    scope = {"dut": _scope("attenio_top", "1.1-10.10"), "dut.add": _scope("fp_unit", "20.1-30.10")}
    src = "attenio_top.v:25.3-25.20"
    netlist = {"modules": {"attenio_fmax": {"netnames": {}, "cells": {
        **scope,
        "dut.add.add_sig3_TRELLIS_FF_Q": _cell("TRELLIS_FF", [1], [2], src),
        "dut.add.add_sig3_TRELLIS_FF_Q_DI_LUT4_Z": _cell("LUT4", [3], [1]),
        "dut.add.add_small3_TRELLIS_FF_Q": _cell("TRELLIS_FF", [4], [5], src),
    }}}}
    assert signals(netlist, "attenio_fmax", "dut.add") == {
        "add": Counter({"TRELLIS_FF": 2, "LUT4": 1})}
    assert signals(netlist, "attenio_fmax", "dut.add", words=2) == {
        "add_sig3": Counter({"TRELLIS_FF": 1, "LUT4": 1}),
        "add_small3": Counter({"TRELLIS_FF": 1})}


def test_the_command_refuses_fewer_than_one_word(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["netlist.json", "attenio_fmax", "dut.add", "--words", "0"])
    assert exc.value.code == 2
    assert "--words must be at least 1, not 0" in capsys.readouterr().err
