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


def _fake_emit(monkeypatch, body="module attenio_top();\nendmodule\n", error=None):
    """`emit` that writes `body` at once (or raises `error`), so the tests below hold how the
    files reach build/<name>/ without minutes of elaboration."""
    import attenio.gen.build as build

    def emit(top, path, *, name):
        top._MustUse__silence = True        # not elaborated, on purpose
        if error is not None:
            raise error
        path.write_text(body)
        return 0.0
    monkeypatch.setattr(build, "emit", emit)


def _snapshot(directory):
    return {p.name: p.read_bytes() for p in directory.iterdir()}


SMALL = ["gen", "--macs", "2x2", "--exp-units", "2", "--head-dim", "8", "--seq-len", "16"]


def test_gen_writes_a_new_directory_whole_and_leaves_no_temporary_one(tmp_path, monkeypatch,
                                                                    capsys):
    _fake_emit(monkeypatch)
    out = tmp_path / "design"
    assert main([*SMALL, "-o", str(out)]) == 0
    assert {"attenio_top.v", "plan.json", "regmap.json", "report.md"} <= set(_snapshot(out))
    assert [p.name for p in tmp_path.iterdir()] == ["design"]
    assert f"wrote {out / 'attenio_top.v'} " in capsys.readouterr().out


def test_a_failed_gen_leaves_the_earlier_design_untouched(tmp_path, monkeypatch, capsys):
    from attenio.errors import ConfigError

    _fake_emit(monkeypatch, body="module old();\nendmodule\n")
    out = tmp_path / "design"
    assert main([*SMALL, "-o", str(out)]) == 0
    before = _snapshot(out)
    _fake_emit(monkeypatch, error=ConfigError("the converter gave up"))
    assert main([*SMALL, "--seq-len", "32", "-o", str(out)]) == 2
    assert capsys.readouterr().err.endswith("error: the converter gave up\n")
    assert _snapshot(out) == before
    assert [p.name for p in tmp_path.iterdir()] == ["design"]


def test_gen_replaces_its_own_directory_whole_and_keeps_a_simulations_files(tmp_path,
                                                                          monkeypatch):
    _fake_emit(monkeypatch, body="module old();\nendmodule\n")
    out = tmp_path / "design"
    assert main([*SMALL, "-o", str(out)]) == 0
    (out / "lint.log").write_text("an earlier lint of the old Verilog\n")
    _fake_emit(monkeypatch, body="module new();\nendmodule\n")
    assert main([*SMALL, "-o", str(out)]) == 0
    assert "lint.log" not in _snapshot(out)        # the old design's, gone with it
    assert (out / "attenio_top.v").read_text() == "module new();\nendmodule\n"
    # a simulation's files beside the design stay: only the artifacts are replaced
    (out / ".attenio_top_stamp").write_text("{}")
    (out / "sim_verilator_axiram").mkdir()
    _fake_emit(monkeypatch, body="module newer();\nendmodule\n")
    assert main([*SMALL, "-o", str(out)]) == 0
    assert (out / ".attenio_top_stamp").read_text() == "{}"
    assert (out / "sim_verilator_axiram").is_dir()
    assert (out / "attenio_top.v").read_text() == "module newer();\nendmodule\n"
    assert [p.name for p in tmp_path.iterdir()] == ["design"]


def test_gen_removes_what_a_killed_gen_left_and_nothing_a_running_one_holds(tmp_path,
                                                                          monkeypatch):
    import os

    _fake_emit(monkeypatch)
    killed = tmp_path / ".design.999999999.x1.partial"      # past pid_max: no such process
    running = tmp_path / f".design.{os.getpid()}.x2.partial"
    for d in (killed, running):
        d.mkdir()
        (d / "attenio_top.v").write_text("half\n")
    assert main([*SMALL, "-o", str(tmp_path / "design")]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [running.name, "design"]


def test_gen_never_deletes_a_directory_that_bears_an_artifacts_name(tmp_path, monkeypatch,
                                                                    capsys):
    _fake_emit(monkeypatch)
    out = tmp_path / "design"
    (out / "attenio_top.v").mkdir(parents=True)
    (out / "attenio_top.v" / "notes.txt").write_text("mine\n")
    assert main([*SMALL, "-o", str(out)]) == 2
    last = capsys.readouterr().err.splitlines()[-1]     # after the planner's progress
    assert last == (f"attenio gen: error: cannot use {str(out / 'attenio_top.v')!r}: a "
                    f"directory bears an artifact's name")
    assert (out / "attenio_top.v" / "notes.txt").read_text() == "mine\n"
    assert [p.name for p in tmp_path.iterdir()] == ["design"]
