"""The `attenio` command: `plan`'s table and JSON contract, and for every command one-line
errors with exit status 2."""

import json
import subprocess
import sys

import pytest

from attenio.cli import main

TRAFFIC_KEYS = {"offchip_read_bytes", "offchip_write_bytes", "offchip_bytes"}


def test_plan_json_contract(capsys, tmp_path):
    rc = main(["plan", "--preset", "paper", "--seq-len", "65536", "--head-dim", "128", "--json",
               "-o", str(tmp_path)])
    assert rc == 0
    data = json.loads(capsys.readouterr().out)
    plan = data["plan"]
    assert {"a", "b"} | TRAFFIC_KEYS <= set(plan)
    assert plan["b"] == 1 and plan["a_ideal"] == 1007
    assert plan["offchip_bytes"] == plan["offchip_read_bytes"] + plan["offchip_write_bytes"]
    # Q once, K and V once per Q block, O once; fp16
    n, d, blocks = 65536, 128, -(-65536 // plan["a"])
    assert plan["offchip_read_bytes"] == 2 * (n * d + 2 * n * d * blocks)
    assert plan["offchip_write_bytes"] == 2 * n * d
    assert set(data["baselines"]) == {"standard", "flat", "flashattention2", "flashattention2_fair"}
    for b in data["baselines"].values():
        assert TRAFFIC_KEYS <= set(b)
        assert b["offchip_bytes"] > plan["offchip_bytes"]
    assert json.loads((tmp_path / "plan.json").read_text()) == data


def test_plan_table_names_every_dataflow(capsys, tmp_path):
    assert main(["plan", "--preset", "small", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    for word in ("Budget use", "Q block", "O accumulators", "Standard", "FLAT",
                 "FlashAttention-2", "vs bound", "rounding a from"):
        assert word in out


def test_options_override_preset_and_config(capsys, tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('preset = "paper"\n[workload]\nseq_len = 8192\n')
    main(["plan", "--config", str(f), "--head-dim", "128", "--macs", "32x32", "--cache-kib", "256",
          "--json", "-o", str(tmp_path)])
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert (plan["seq_len"], plan["head_dim"], plan["mac_lines"]) == (8192, 128, 32)
    assert plan["cache_bytes"] == 256 * 1024


@pytest.mark.parametrize("command, args, message", [
    ("plan", ["--seq-len", "0"], "argument --seq-len: '0' is not a positive integer"),
    ("plan", ["--head-dim", "x"], "argument --head-dim: 'x' is not an integer"),
    ("plan", ["--preset", "huge"], "invalid choice: 'huge'"),
    ("plan", ["--format", "bf16"], "invalid choice: 'bf16'"),
    ("plan", ["--macs", "8"], "is not of the form PxQ"),
    ("plan", ["--cache-kib", "0.25", "--head-dim", "64"], "cannot hold one query row"),
    ("plan", ["--config", "/nonexistent.toml"], "does not exist"),
    ("compare", ["--seq-lens", "8192,abc"],
     "argument --seq-lens: '8192,abc' is not a comma-separated list"),
    ("compare", ["--seq-lens", "64,,128"], "is not a comma-separated list"),
    ("compare", ["--seq-lens", "0"], "'0' is not a positive integer"),
    ("compare", ["--head-dims", "x"], "argument --head-dims"),
    ("compare", ["--split-rows", "wide"], "neither 'auto' nor an integer"),
    ("compare", ["--split-rows", "3"], "--split-rows 3 must divide the 4 MACs of a line"),
    ("compare", ["--head-dims", "4096"], "cannot hold one query row"),
    ("compare", ["--preset", "huge"], "invalid choice: 'huge'"),
])
def test_bad_input_is_one_line_and_status_2(capsys, tmp_path, command, args, message):
    try:
        rc = main([command, *args, "-o", str(tmp_path)])
    except SystemExit as exc:   # argparse's own errors
        rc = exc.code
    assert rc == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


@pytest.mark.parametrize("argv, start, fragment", [
    (["plan", "--config", "bad.toml"], "attenio plan: error: config file", "not valid TOML"),
    (["compare", "--seq-lens", "8K,x"], "attenio compare: error: argument --seq-lens", ""),
])
def test_bad_input_through_the_installed_command(tmp_path, argv, start, fragment):
    (tmp_path / "bad.toml").write_text("[workload\nseq_len = 3\n")
    r = subprocess.run([sys.executable, "-m", "attenio.cli", *argv],
                       capture_output=True, text=True, cwd=tmp_path)
    assert r.returncode == 2
    assert r.stderr.startswith(start) and fragment in r.stderr
    assert r.stderr.count("\n") == 1
