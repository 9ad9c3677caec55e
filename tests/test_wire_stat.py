"""`attenio.gen.wire_stat`: a placed netlist's wirelength by unit and signal, on a hand-made one.

Two MACs' copies of one signal fold into one row; a net on one pin, an unplaced cell and a
net of more than `GLOBAL_FANOUT` pins count for nothing; a bus's bits add up.
"""

import json

from attenio.gen import wire_stat
from attenio.gen.wire_stat import GLOBAL_FANOUT, hpwl_by_net, render, wire_report


def _cell(x, y, **ports):
    return {"type": "TRELLIS_COMB", "attributes": {"NEXTPNR_BEL": f"X{x}/Y{y}/SLICEA"},
            "connections": ports}


def _netlist():
    cells = {
        # mac0.sum[0]: (1, 1) -> (4, 3): 3 + 2; mac0.sum[1]: (1, 1) -> (2, 5): 1 + 4
        "a": _cell(1, 1, Z=[10, 11]), "b": _cell(4, 3, A=[10]), "c": _cell(2, 5, A=[11]),
        # mac1.sum[0]: three pins, box (0, 0) to (6, 1): 6 + 1
        "d": _cell(0, 0, Z=[20]), "e": _cell(6, 0, A=[20]), "f": _cell(3, 1, A=[20]),
        # the CSR's net: (10, 10) -> (10, 12): 2, and a pin on an unplaced cell
        "g": _cell(10, 10, Z=[30]), "h": _cell(10, 12, A=[30]),
        "unplaced": {"type": "TRELLIS_COMB", "attributes": {}, "connections": {"A": [30]}},
        # one pin only, and a constant
        "i": _cell(50, 50, Z=[40], B=["0"]),
        # the reset: more pins than GLOBAL_FANOUT
        **{f"ff{k}": _cell(k % 80, k // 80, LSR=[50]) for k in range(GLOBAL_FANOUT + 1)},
    }
    netnames = {
        "dut.core.array.line0.mac0.sum": {"bits": [10, 11]},
        "$abc$123": {"bits": [20]},                     # a tool's name loses to the design's
        "dut.core.array.line1.mac1.sum": {"bits": [20]},
        "dut.csr.value": {"bits": [30]},
        "dut.core.array.line0.mac0.idle": {"bits": [40]},
        "rst": {"bits": [50]},
    }
    return {"modules": {"attenio_fmax": {"cells": cells, "netnames": netnames}}}


def test_each_net_is_the_half_perimeter_of_its_placed_pins():
    assert hpwl_by_net(_netlist()) == {"dut.core.array.line0.mac0.sum": 5 + 5,
                                       "dut.core.array.line1.mac1.sum": 7,
                                       "dut.csr.value": 2}


def test_copies_of_a_signal_fold_into_one_row_by_unit_and_by_signal():
    r = wire_report(_netlist())
    assert r["total"] == 19
    assert r["units"] == {"dut.core.array.line#.mac#": 17, "dut.csr": 2}
    assert r["signals"] == {"dut.core.array.line#.mac#: sum": 17, "dut.csr: value": 2}
    text = render(r, top=5)
    assert text.splitlines()[0] == f"HPWL 19 tiles (nets of 2 to {GLOBAL_FANOUT} pins)"
    assert "       17  89.5%  dut.core.array.line#.mac#: sum" in text


def test_the_command_reads_a_placed_json(tmp_path, capsys):
    path = tmp_path / "placed.json"
    path.write_text(json.dumps(_netlist()))
    wire_stat.main([str(path), "--top", "1"])
    out = capsys.readouterr().out
    assert "HPWL 19 tiles" in out and "dut.csr" not in out     # --top 1: the MACs' row only
