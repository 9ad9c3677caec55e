"""`attenio compare`: its JSON contract, its tables and its files (its bad input: test_cli)."""

import json

import pytest

from attenio.cli import main

ENTRY_KEYS = {"cycles", "pe_busy", "exp_busy", "mem_stall", "bytes_read", "bytes_written",
              "offchip_bytes", "pe_util", "spatial_util", "mac_efficiency", "exp_util",
              "stall_fraction"}
BASELINES = {"standard", "flat", "flashattention2", "flashattention2_fair"}
FILES = {"compare.json", "compare.md", "speedup.png", "traffic.png", "utilization.png"}


def test_compare_json_contract_and_files(capsys, tmp_path):
    rc = main(["compare", "--preset", "small", "--seq-lens", "64,128,256", "--head-dims", "8,16",
               "--json", "-o", str(tmp_path)])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert FILES <= {p.name for p in tmp_path.iterdir()}
    assert json.loads((tmp_path / "compare.json").read_text())["rows"] == data["rows"]
    assert (tmp_path / "speedup.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert data["seq_lens"] == [64, 128, 256] and data["head_dims"] == [8, 16]
    assert len(data["rows"]) == 6
    for row in data["rows"]:
        ours = row["attenio"]
        assert ENTRY_KEYS <= set(ours)
        assert ours["bytes_read"] + ours["bytes_written"] == ours["offchip_bytes"]
        assert set(row["baselines"]) == BASELINES
        for b in row["baselines"].values():
            assert ENTRY_KEYS | {"speedup", "traffic_ratio", "tiling"} <= set(b)
            assert b["speedup"] == pytest.approx(b["cycles"] / ours["cycles"])
            assert b["traffic_ratio"] == pytest.approx(b["offchip_bytes"] / ours["offchip_bytes"])
        assert {"s", "gain", "cycles"} <= set(row["attenio_split"])
        causal = row["attenio_causal"]
        assert causal["offchip_bytes"] < ours["offchip_bytes"] or row["seq_len"] <= ours["a"]
        # one Q block (N <= a): row-granular causal masking skips nothing
        assert causal["cycles"] < ours["cycles"] or row["seq_len"] <= ours["a"]
    md = (tmp_path / "compare.md").read_text()
    assert "| N |" in md and "FA-2 fair" in md and "speedup" in md


def test_compare_paper_preset_tables(capsys, tmp_path):
    rc = main(["compare", "--preset", "paper", "--seq-lens", "8K,16K", "--head-dims", "64,128",
               "--split-rows", "2", "-o", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr().out
    for word in ("d = 64", "d = 128", "utilization per dataflow", "FLAT", "FA-2 fair",
                 "rows split over s MACs", "causal", "modelled 4 configurations"):
        assert word in out
    data = json.loads((tmp_path / "compare.json").read_text())
    assert {r["attenio_split"]["s"] for r in data["rows"]} == {2}
    d128 = [r for r in data["rows"] if r["head_dim"] == 128]
    assert all(r["attenio_split"]["gain"] > 1.9 for r in d128)


def test_compare_default_directory_is_build_name_compare(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["compare", "--preset", "small", "--name", "x"]) == 0
    assert FILES <= {p.name for p in (tmp_path / "build" / "x" / "compare").iterdir()}
