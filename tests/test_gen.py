"""`attenio gen`: every artifact, lint-clean Verilog, and its error paths."""

import json
import re

from attenio.cli import main


def test_gen_writes_every_artifact_and_lints_clean(tmp_path, capsys):
    rc = main(["gen", "--macs", "2x2", "--exp-units", "2", "--head-dim", "8", "--seq-len", "16",
               "--clock-mhz", "125", "--lint", "-o", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "verilator --lint-only -Wall: clean" in out
    verilog = (tmp_path / "attenio_top.v").read_text()
    assert re.search(r"^module attenio_top\(", verilog, re.M)
    for port in ("m_axi__arvalid", "m_axi__wdata", "s_axil__awaddr", "s_axil__rdata", "irq"):
        assert port in verilog
    plan = json.loads((tmp_path / "plan.json").read_text())["plan"]
    regmap = json.loads((tmp_path / "regmap.json").read_text())
    consts = {r["name"]: r["value"] for r in regmap["registers"] if r["access"] == "const"}
    assert consts["BLOCK_ROWS"] == plan["a"] and consts["MAX_SEQ_LEN"] == 16
    assert "#define ATTENIO_CYCLES_LO_OFFSET" in (tmp_path / "attenio_regs.h").read_text()
    assert "create_clock -name clk -period 8 [get_ports clk]" in \
        (tmp_path / "attenio_top.sdc").read_text()                    # 125 MHz
    assert (tmp_path / "attenio_top.xdc").exists() and (tmp_path / "report.md").exists()


def test_gen_bf16_lints_clean(tmp_path, capsys):
    """The float datapath's Verilog (16-bit elements, fp32 scores and O) is lint-clean."""
    assert main(["gen", "--format", "bf16", "--macs", "2x2", "--exp-units", "2", "--head-dim",
                 "8", "--seq-len", "16", "--lint", "-o", str(tmp_path)]) == 0
    assert "verilator --lint-only -Wall: clean" in capsys.readouterr().out
    plan = json.loads((tmp_path / "plan.json").read_text())["plan"]
    assert plan["format"] == "bf16"
    regmap = json.loads((tmp_path / "regmap.json").read_text())
    consts = {r["name"]: r["value"] for r in regmap["registers"] if r["access"] == "const"}
    assert consts["FORMAT"] == 3


def test_gen_refuses_what_the_rtl_cannot_build(tmp_path, capsys):
    assert main(["gen", "--exp-units", "3", "-o", str(tmp_path)]) == 2
    assert "multiple of the MAC lines" in capsys.readouterr().err
    assert main(["gen", "--axi-width", "512", "-o", str(tmp_path)]) == 2
    assert "whole number of 512-bit AXI beats" in capsys.readouterr().err
