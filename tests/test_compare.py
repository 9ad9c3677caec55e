"""`attenio compare`: its JSON contract, its tables and its files (its bad input: test_cli)."""

import json
import math

import pytest

from attenio.cli import main
from attenio.model.compare import geomeans

ENTRY_KEYS = {"cycles", "pe_busy", "exp_busy", "mem_stall", "bytes_read", "bytes_written",
              "offchip_bytes", "pe_util", "spatial_util", "mac_efficiency", "exp_util",
              "stall_fraction"}
BASELINES = {"standard", "flat", "flashattention2", "flashattention2_fair"}
FILES = {"compare.json", "compare.md", "speedup.png", "traffic.png", "utilization.png",
         "roofline.png"}


def test_compare_json_contract_and_files(capsys, tmp_path):
    rc = main(["compare", "--preset", "small", "--seq-lens", "64,128,256", "--head-dims", "8,16",
               "--json", "-o", str(tmp_path)])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    assert data["timing"]["mode"] == "fair"         # the default; the paper timing: test_paper_mode
    assert data["timing"]["parameters"]["bw_bytes_per_cycle"] == 8
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
        assert {"split", "rows_per_mac", "a", "groups", "macs_active", "runner_up",
                "split_cost_bytes"} <= set(ours)
        m = row["mapping"]
        assert m["mode"] == "auto" and m["chosen"] == {
            "split": ours["split"], "rows_per_mac": ours["rows_per_mac"], "banks": ours["banks"]}
        assert m["runner_up"] == ours["runner_up"] != m["chosen"]
        assert next(c for c in m["candidates"] if (c["split"], c["rows_per_mac"], c["banks"]) == (
            ours["split"], ours["rows_per_mac"], ours["banks"]))["cycles"] == ours["cycles"]
        one = row["attenio_unsplit"]
        assert one["split"] == 1 and one["speedup"] == pytest.approx(one["cycles"] / ours["cycles"])
        assert ours["split_cost_bytes"] == ours["offchip_bytes"] - one["offchip_bytes"]
        causal = row["attenio_causal"]
        assert causal["offchip_bytes"] < ours["offchip_bytes"] or row["seq_len"] <= ours["a"]
        # one Q block (N <= a): row-granular causal masking skips nothing
        assert causal["cycles"] < ours["cycles"] or row["seq_len"] <= ours["a"]
    md = (tmp_path / "compare.md").read_text()
    assert "| N |" in md and "FA-2 fair" in md and "speedup" in md


def test_compare_paper_preset_tables(capsys, tmp_path):
    rc = main(["compare", "--preset", "paper", "--seq-lens", "8K,16K", "--head-dims", "64,128",
               "--split", "2", "--rows-per-mac", "1", "--banks", "2", "-o", str(tmp_path)])
    assert rc == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].startswith("fair timing: the cycle models")
    for word in ("d = 64", "d = 128", "utilization per dataflow", "FLAT", "FA-2 fair",
                 "AttenIO s=2 r=1", "AttenIO s=1", "rows split over s MACs", "causal",
                 "modelled 4 configurations"):
        assert word in out
    data = json.loads((tmp_path / "compare.json").read_text())
    assert (data["split"], data["rows_per_mac"]) == (2, 1)
    # d = 64: a = 1024 at s = 2 against 1280 at s = 1; d = 128: 659 against 660 (at N = 8K
    # and 16K; at 64K, whose l is 2 bits wider, 1279 and 659)
    assert {(r["head_dim"], r["attenio"]["split"], r["attenio"]["a"], r["attenio_unsplit"]["a"])
            for r in data["rows"]} == {(64, 2, 1024, 1280), (128, 2, 659, 660)}
    assert all(r["mapping"]["mode"] == "forced" for r in data["rows"])
    means = geomeans(data)
    for d in (64, 128):
        s = [r["baselines"]["flashattention2"]["speedup"] for r in data["rows"]
             if r["head_dim"] == d]
        assert means[d]["flashattention2"]["speedup"] == pytest.approx(math.sqrt(s[0] * s[1]))


def test_compare_default_directory_is_build_name_compare(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert main(["compare", "--preset", "small", "--name", "x"]) == 0
    assert FILES <= {p.name for p in (tmp_path / "build" / "x" / "compare").iterdir()}


def test_every_format_side_by_side_in_compare_and_plan(capsys, tmp_path):
    """fp8 halves every K/V byte but keeps O at 16 bits: its a fits more rows than fp16's,
    its traffic is about half fp16's and a little above int8's (whose O is 8-bit)."""
    from attenio.formats import FORMATS
    assert main(["compare", "--preset", "paper", "--format", "fp8_e4m3", "--seq-lens", "32K",
                 "--head-dims", "64", "--json", "-o", str(tmp_path / "c")]) == 0
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    fmts = {r["format"]: r for r in row["formats"]}
    assert list(fmts) == list(FORMATS)
    fp8, fp16, int8 = fmts["fp8_e4m3"], fmts["fp16"], fmts["int8"]
    assert fp8["traffic_ratio"] == 1.0 and (fp8["element_bytes"], fp8["out_bytes"]) == (1, 2)
    assert fp8["a_fit"] > fp16["a_fit"] > 0
    assert 1.9 < fp16["traffic_ratio"] < 2.0 and int8["traffic_ratio"] < 1.0
    assert fmts["fp8_e5m2"]["offchip_bytes"] == fp8["offchip_bytes"]
    assert fmts["bf16"]["offchip_bytes"] == fp16["offchip_bytes"]
    for r in fmts.values():
        assert r["pe_util"] > 0.95       # every format keeps the paper array computing
    assert main(["plan", "--preset", "paper", "--format", "fp8_e4m3", "-o",
                 str(tmp_path / "p")]) == 0
    out = capsys.readouterr().out
    assert "Every number format on this budget" in out and "traffic against fp8_e4m3's" in out
    saved = json.loads((tmp_path / "p" / "plan.json").read_text())
    assert [r["format"] for r in saved["formats"]] == list(FORMATS)
