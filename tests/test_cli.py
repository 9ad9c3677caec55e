"""The `attenio` command: `plan`'s table and JSON contract, and for every command one-line
errors with exit status 2."""

import json
import subprocess
import sys

import pytest

from attenio.cli import main
from attenio.formats import FLOAT_FORMATS
from attenio.model import planner

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


def test_plan_causal_counts_each_blocks_keys_up_to_its_last_row(capsys, tmp_path):
    """--causal: the short block first, K and V read up to each block's last row; int8."""
    assert main(["plan", "--preset", "small", "--causal", "--split", "4", "--rows-per-mac",
                 "8", "--json", "-o", str(tmp_path)]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    n, d, a = 256, 16, plan["a"]
    assert a == 32 and n % a == 0
    keys = sum(range(a, n + 1, a))               # blocks end at rows 32, 64, ..., 256
    assert plan["offchip_read_bytes"] == n * d + 2 * keys * d
    assert plan["offchip_write_bytes"] == n * d
    assert main(["plan", "--preset", "small", "--causal", "--seq-len", "45", "-o",
                 str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "format=int8 causal" in out and "the baselines' traffic here is unmasked" in out


def test_plan_kv_len_and_kv_heads(capsys, tmp_path):
    """--kv-len: every block reads N_kv K/V rows; --kv-heads: a decode step's blocks serve the
    whole group (one row of each of g = 2 heads), so K/V is read once a group, and the header
    says which blocks the Plan took; a bad group is one line, status 2."""
    assert main(["plan", "--preset", "small", "--seq-len", "1", "--kv-len", "200", "--heads",
                 "4", "--kv-heads", "2", "--split", "4", "--json", "-o", str(tmp_path)]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert (plan["kv_len"], plan["kv_heads"], plan["max_keys"]) == (200, 2, 200)
    assert plan["grouped"] and plan["a"] == 2
    assert plan["offchip_read_bytes"] == 4 * 16 + 2 * (2 * 200 * 16)
    assert main(["plan", "--preset", "small", "--heads", "4", "--kv-heads", "1", "-o",
                 str(tmp_path)]) == 0
    assert "kv_heads=1 (g = 4; blocks of one query head" in capsys.readouterr().out   # a tie
    # a decode step's bytes per query row: grouped blocks read the cache once a group
    assert main(["plan", "--preset", "small", "--seq-len", "1", "--kv-len", "200", "--heads",
                 "4", "--kv-heads", "2", "--split", "4", "-o", str(tmp_path)]) == 0
    bound = (2 * 4 * 1 + 2 * 2 * 200) * 16 / 4        # bytes per query row: int8, d = 16
    assert (f"per query row (a generated token's, per head): {bound / 1024:.2f} KiB moved, "
            f"1.00x the bound") in capsys.readouterr().out
    assert main(["plan", "--heads", "4", "--kv-heads", "3", "-o", str(tmp_path)]) == 2
    assert "must be a multiple of kv_heads = 3" in capsys.readouterr().err


def test_compare_sets_a_decoder_shape_against_flashattention2_alone(capsys, tmp_path):
    """A decode step of 4 heads on 1 K/V head against 200 keys: AttenIO's grouped blocks read
    the cache once (the bound), FA-2 once per query head; other budgets are refused."""
    args = ["compare", "--preset", "small", "--seq-len", "1", "--kv-len", "200", "--heads", "4",
            "--kv-heads", "1", "-o", str(tmp_path)]
    assert main([*args, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["decoder"]
    assert row["mapping"]["grouped"] and row["attenio"]["bytes"] == row["bound_bytes"]
    d = 16
    assert row["flashattention2"]["bytes"] == 4 * (d + 2 * 200 * d) + 4 * d
    assert row["attenio"]["cycles"] < row["flashattention2"]["cycles"]
    assert main([*args, "--bw", "4,8"]) == 2
    assert "compared at one budget" in capsys.readouterr().err


def test_plan_json_carries_the_mapping_choice(capsys, tmp_path):
    assert main(["plan", "--preset", "small", "--json", "-o", str(tmp_path)]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    m = plan["mapping"]
    assert (m["mode"], m["seq_len"], m["heads"], m["tolerance"]) == ("auto", 256, 1, 0.001)
    # two banks first, every (s, r); then a bank more where the lanes held the array up
    two = [(c["split"], c["rows_per_mac"], c["a"], c["groups"]) for c in m["candidates"]
           if c["banks"] == 2]
    assert two == [
        (1, 2, 32, 16), (1, 1, 16, 16), (2, 4, 32, 8), (2, 3, 24, 8), (2, 2, 16, 8),
        (4, 8, 32, 4), (4, 7, 28, 4), (4, 6, 24, 4), (4, 5, 20, 4), (4, 4, 16, 4)]
    assert [c["banks"] for c in m["candidates"]] == sorted(c["banks"] for c in m["candidates"])
    assert m["chosen"] == {"split": plan["split"], "rows_per_mac": plan["rows_per_mac"],
                           "banks": plan["banks"]}
    assert m["runner_up"] != m["chosen"] and set(m["runner_up"]) == {"split", "rows_per_mac",
                                                                     "banks"}
    assert {"cycles", "pe_util", "spatial_util", "offchip_bytes", "macs_active"} <= set(
        m["candidates"][0])
    assert plan["split_cost_bytes"] == plan["offchip_bytes"] - m["candidates"][0]["offchip_bytes"]
    assert json.loads((tmp_path / "plan.json").read_text())["plan"] == plan


def test_plan_split_2_is_forced_and_its_rows_chosen(capsys, tmp_path):
    assert main(["plan", "--preset", "small", "--split", "2", "--json", "-o", str(tmp_path)]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert (plan["split"], plan["groups"], plan["macs_active"], plan["kv_prefetch_depth"]) == (
        2, 8, 16, 4)
    m = plan["mapping"]
    assert m["mode"] == "auto" and [c["rows_per_mac"] for c in m["candidates"]
                                    if c["banks"] == 2] == [4, 3, 2]


def test_plan_split_and_rows_forced(capsys, tmp_path):
    assert main(["plan", "--preset", "small", "--split", "2", "--rows-per-mac", "3", "--banks",
                 "2", "--json", "-o", str(tmp_path)]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert (plan["split"], plan["rows_per_mac"], plan["a"], plan["q_blocks"]) == (2, 3, 24, 11)
    m = plan["mapping"]
    assert (m["mode"], m["chosen"], m["runner_up"], len(m["candidates"])) == (
        "forced", {"split": 2, "rows_per_mac": 3, "banks": 2}, None, 1)


def test_plan_table_shows_the_mapping(capsys, tmp_path):
    assert main(["plan", "--preset", "small", "--split", "4", "--rows-per-mac", "9",
                 "--banks", "2", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "s = 4 MAC(s) per row: 4 groups of 4 MAC(s), 9 row(s) per group, 16 of 16 MACs" in out
    assert "forced s = 4, r = 9, B = 2" in out and "a = 36 at s = 4 instead of 32 at s = 1 costs" in out
    assert main(["plan", "--preset", "small", "--split", "4", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "rounded for the array: 36; r = 8 rows a group: 32" in out
    assert main(["plan", "--preset", "small", "-o", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "by the cycle model at N = 256, 1 head(s): of the mappings within 0.1 % of the fewest " \
           "cycles, the least traffic" in out
    assert "chosen" in out and "runner-up" in out


def test_options_override_preset_and_config(capsys, tmp_path):
    f = tmp_path / "c.toml"
    f.write_text('preset = "paper"\n[workload]\nseq_len = 8192\n')
    main(["plan", "--config", str(f), "--head-dim", "128", "--macs", "32x32", "--cache-kib", "256",
          "--json", "-o", str(tmp_path)])
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert (plan["seq_len"], plan["head_dim"], plan["mac_lines"]) == (8192, 128, 32)
    assert plan["cache_bytes"] == 256 * 1024


def test_plan_bf16_prints_the_widths_it_counted(capsys, tmp_path):
    argv = ["plan", "--preset", "paper", "--format", "bf16", "--split", "1", "-o", str(tmp_path)]
    assert main([*argv, "--json"]) == 0
    plan = json.loads(capsys.readouterr().out)["plan"]
    assert (plan["format"], plan["a"], plan["a_fit"]) == ("bf16", 1279, 1279)
    assert plan["widths"] == {"element": 16, "score": 32, "m": 32, "l": 41, "p": 32, "alpha": 32,
                              "o_acc": 32, "up_e": 33}
    # 16-bit storage, fp32 O, scores and m; l in p_frac + bits(N) = 24 + 17 bits; two
    # (up, e) pairs a row, e in fp32
    assert {r["item"]: (r["count"], r["bits"]) for r in plan["budget_use"]} == {
        "Q block": (1279 * 64, 16), "O accumulators": (1279 * 64, 32),
        "score registers": (2 * 1279, 32), "running max m": (1279, 32),
        "running sum l": (1279, 41), "P, alpha as (up, e)": (2 * 1279, 33),
        "K/V staging": (3 * 64, 16), "KV buffer": (2 * 64, 16)}
    assert main(argv) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "format=bf16" in lines[0]
    for item, count, bits in (("running sum l", 1279, 41), ("P, alpha as (up, e)", 2558, 33),
                              ("O accumulators", 81856, 32)):
        (row,) = [line for line in lines if line.startswith(item)]
        assert row.split()[len(item.split()) + 1:len(item.split()) + 3] == [str(count), str(bits)]


def test_compare_takes_bf16(capsys, tmp_path):
    assert main(["compare", "--format", "bf16", "--seq-len", "64", "--json",
                 "-o", str(tmp_path)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["format"] == "bf16"
    assert json.loads((tmp_path / "compare.json").read_text())["format"] == "bf16"


@pytest.mark.parametrize("command", ["gen", "sim", "synth"])
@pytest.mark.parametrize("fmt", FLOAT_FORMATS)
def test_rtl_commands_refuse_the_papers_16_bit_o(capsys, tmp_path, command, fmt):
    """o_acc_bits = 16 is the paper's accounting: plan and compare take it, the RTL
    (fp32 O) refuses it in one line, writing nothing."""
    config = tmp_path / "narrow.toml"
    config.write_text(f'[format]\nname = "{fmt}"\no_acc_bits = 16\n')
    out = tmp_path / "out"
    assert main(["plan", "--config", str(config), "-o", str(out)]) == 0
    capsys.readouterr()
    for f in out.iterdir():
        f.unlink()
    assert main([command, "--config", str(config), "-o", str(out)]) == 2
    assert capsys.readouterr().err == (
        f"attenio {command}: error: the {fmt} RTL accumulates O in fp32; o_acc_bits = 16 is "
        f"the paper's accounting, for analysis only\n")
    assert not any(out.iterdir())


@pytest.mark.parametrize("command, args, message", [
    ("plan", ["--seq-len", "0"], "argument --seq-len: '0' is not a positive integer"),
    ("plan", ["--head-dim", "x"], "argument --head-dim: 'x' is not an integer"),
    ("plan", ["--preset", "huge"], "invalid choice: 'huge'"),
    ("plan", ["--format", "fp8"], "invalid choice: 'fp8'"),
    ("plan", ["--format", "bf16", "--config", "x_frac.toml"],
     "attenio plan: error: bf16 format: x_frac must be at most 29, not 40: "),
    ("plan", ["--macs", "8"], "is not of the form PxQ"),
    ("plan", ["--cache-kib", "0.25", "--head-dim", "64"], "cannot hold one query row"),
    ("plan", ["--config", "/nonexistent.toml"], "does not exist"),
    ("compare", ["--seq-lens", "8192,abc"],
     "argument --seq-lens: '8192,abc' is not a comma-separated list"),
    ("compare", ["--seq-lens", "64,,128"], "is not a comma-separated list"),
    ("compare", ["--seq-lens", "0"], "'0' is not a positive integer"),
    ("compare", ["--head-dims", "x"], "argument --head-dims"),
    ("plan", ["--split", "wide"], "argument --split: 'wide' is neither 'auto' nor an integer"),
    ("plan", ["--split", "0"], "argument --split: '0' is not a positive integer"),
    ("plan", ["--split", "3"], "attenio plan: error: mapping: split 3 must divide the head "
                               "dimension d = 16"),
    ("plan", ["--split", "8"], "mapping: split 8 must divide the 4 MACs of one EXP lane"),
    ("plan", ["--split", "4", "--format", "fp16", "--axi-width", "32"],
     "mapping: split 4 feeds chunks of 8 bytes of fp16 a cycle, which must divide the "
     "32-bit AXI beat"),
    ("plan", ["--rows-per-mac", "0"], "argument --rows-per-mac: '0' is not a positive integer"),
    ("plan", ["--split", "4", "--rows-per-mac", "10"],
     "attenio plan: error: mapping: 10 rows per group of 4 MAC(s) do not fit the cache (at most "
     "9 at s = 4)"),
    ("gen", ["--split", "4", "--rows-per-mac", "10"], "attenio gen: error: mapping: 10 rows per "
                                                      "group of 4 MAC(s) do not fit the cache"),
    ("gen", ["--split", "3"], "attenio gen: error: mapping: split 3 must divide"),
    ("sim", ["--split", "3"], "attenio sim: error: mapping: split 3 must divide"),
    ("synth", ["--split", "3"], "attenio synth: error: mapping: split 3 must divide"),
    ("compare", ["--split", "3"], "attenio compare: error: mapping: split 3 must divide"),
    ("compare", ["--macs", "4x8", "--head-dims", "16,12", "--split", "8"],
     "mapping: split 8 must divide the head dimension d = 12"),
    ("compare", ["--head-dims", "4096"], "cannot hold one query row"),
    ("compare", ["--preset", "huge"], "invalid choice: 'huge'"),
    ("sim", ["--inputs", "/nonexistent.npz"], "cannot read inputs '/nonexistent.npz': no such "
                                              "file"),
    ("sim", ["--inputs", __file__], f"inputs {__file__!r} is not an .npz archive (numpy.savez) "
                                    f"with arrays q, k and v"),
    # what the simulation cannot run, refused before anything is elaborated
    ("sim", ["--seq-len", "16777216"], "attenio sim: error: N = 16777216 with 1 head(s) needs "
                                       "about "),
    ("sim", ["--engine", "fast", "--backpressure", "0.3"],
     "attenio sim: error: the fast engine runs Verilator on the in-design memory model; random "
     "latency or back-pressure need(s) --engine cocotb"),
    ("sim", ["--engine", "fast", "--memory", "axiram"], "--memory axiram need(s) --engine cocotb"),
    ("sim", ["--engine", "fast", "--simulator", "icarus"],
     "--simulator icarus need(s) --engine cocotb"),
    ("sim", ["--engine", "warp"], "argument --engine: invalid choice: 'warp'"),
    # the paper timing's options (tests/test_paper_mode.py holds the rules themselves)
    ("compare", ["--preset", "small", "--timing", "slow"],
     "argument --timing: invalid choice: 'slow'"),
    ("compare", ["--preset", "small", "--bw-eff", "0", "--timing", "paper"],
     "argument --bw-eff: '0' is not a positive"),
    ("compare", ["--preset", "small", "--bw-eff", "x"],
     "argument --bw-eff: 'x' is not a number"),
    ("compare", ["--preset", "small", "--bw-eff", "4"],
     "--bw-eff is the paper timing's effective bandwidth; add --timing paper"),
    ("compare", ["--preset", "small", "--timing", "paper", "--bw", "4,8"],
     "the bandwidth sweep is of the fair timing"),
    ("compare", ["--preset", "small", "--bw", "4,8", "--cache-kib", "2,4"],
     "sweep one budget at a time"),
    ("compare", ["--preset", "small", "--timing", "paper", "--bw-eff", "9"],
     "bw_eff = 9 bytes a cycle exceeds the peak"),
    ("compare", ["--preset", "small", "--cache-kib", "2,x"],
     "argument --cache-kib: 'x' is not a number of KiB"),
    ("compare", ["--preset", "small", "--bw", "4,0"],
     "argument --bw: '4,0': '0' is not a positive integer"),
    # numbers that are not what they name, names that would leave build/
    ("sim", ["--backpressure", "1"], "argument --backpressure: '1' is not a probability in [0, 1)"),
    ("sim", ["--latency-prob", "nan"], "argument --latency-prob: 'nan' is not a probability"),
    ("sim", ["--latency-prob", "-0.5"], "argument --latency-prob: '-0.5' is not a probability"),
    ("plan", ["--cache-kib", "inf"], "argument --cache-kib: 'inf' must be a positive whole number"),
    ("plan", ["--cache-kib", "nan"], "argument --cache-kib: 'nan' must be a positive whole number"),
    ("plan", ["--name", "../../x"], "config: name must be a directory name under build/"),
    ("gen", ["--name", "a/b"], "config: name must be a directory name under build/"),
    ("plan", ["--config", "name5.toml"], "config: name must be a directory name under build/ "),
    # sizes past the hardware's registers, refused before any work that grows with them
    ("plan", ["--seq-len", "1000000000000"], "workload: seq_len = 1000000000000 is more than "
                                             "its 32-bit run-time register holds (4294967295)"),
    ("sim", ["--seq-len", "999999999999"], "workload: seq_len = 999999999999 is more than"),
    ("gen", ["--kv-len", "1000000000000"], "workload: kv_len = 1000000000000 is more than"),
    ("compare", ["--seq-lens", "8K,1000000000000"], "workload: seq_len = 1000000000000 is more"),
    ("plan", ["--heads", "512", "--kv-heads", "1"],
     "workload: heads / kv_heads = 512 query heads a K/V head is more than the hardware's "
     "HEAD_GROUP holds (255)"),
])
def test_bad_input_is_one_line_and_status_2(capsys, tmp_path, monkeypatch, command, args,
                                            message):
    (tmp_path / "x_frac.toml").write_text("[format]\nx_frac = 40\n")      # for --config
    (tmp_path / "name5.toml").write_text("name = 5\n")
    monkeypatch.chdir(tmp_path)
    try:
        rc = main([command, *args, "-o", str(tmp_path)])
    except SystemExit as exc:   # argparse's own errors
        rc = exc.code
    assert rc == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def _choices(command, option):
    from attenio.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command").choices[command]
    return tuple(next(a for a in sub._actions if option in a.option_strings).choices)


def test_sim_offers_what_the_simulation_knows_and_nothing_else():
    from attenio.gen.synth import TARGETS
    from attenio.sim.e2e import ENGINES
    from attenio.sim.golden import INPUT_KINDS
    from attenio.sim.runner import SIMULATORS

    assert _choices("sim", "--simulator") == SIMULATORS == ("verilator", "icarus")
    assert _choices("sim", "--input-kind") == INPUT_KINDS and "dominant_far" in INPUT_KINDS
    assert set(_choices("sim", "--engine")) == {"auto", *ENGINES} == {"auto", "fast", "cocotb"}
    assert _choices("synth", "--target") == (*TARGETS, "all")


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


@pytest.mark.parametrize("agrees, status", [(True, 0), (None, 0), (False, 1)])
def test_sim_fails_a_run_whose_cycles_the_model_does_not_predict(capsys, tmp_path, monkeypatch,
                                                                 agrees, status):
    """Bit-exact output is not enough: RTL cycles more than `MODEL_TOLERANCE` from the cycle
    model's on a deterministic memory (a stale design, a broken model) fail the run; a run
    on random memory latency is not compared."""
    import attenio.sim.e2e as e2e

    def fake_run(config, out, opts, log=print):
        cycles = 1000 if agrees is not False else 1200
        return {"engine": "cocotb", "memory": "model", "seq_len": 64, "kv_len": 64, "heads": 1,
                "kv_heads": 1, "head_dim": 16, "a": 32, "causal": False, "grouped": False,
                "head_scales": False,
                "simulator": "verilator", "seed": 1, "pe_busy_fraction": 0.9,
                "exp_busy_fraction": 0.5, "mem_stall_fraction": 0.0, "plan_bytes_read": 10,
                "plan_bytes_written": 2, "compute_bound_cycles": 900, "memory_bound_cycles": 5,
                "cycles_over_bound": cycles / 900, "model": {"cycles": 1000},
                "cycles_vs_model": cycles / 1000, "model_agrees": agrees, "wall_seconds": 1,
                "sim_cycles_per_second": 1000,
                "runs": [{"counters": {"CYCLES": cycles, "BYTES_READ": 10, "BYTES_WRITTEN": 2},
                          "bit_exact": True, "mismatches": 0, "bytes_match_plan": True}]}
    monkeypatch.setattr(e2e, "run_e2e", fake_run)
    rc = main(["sim", "--preset", "small", "--seq-len", "64", "-o", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == status
    assert ("MORE THAN 1% APART" in out) == (agrees is False)
    assert ("not compared" in out) == (agrees is None)


def test_an_output_that_cannot_be_a_directory_is_one_line_and_status_2(capsys, tmp_path):
    taken = tmp_path / "a_file"
    taken.write_text("not a directory\n")
    assert main(["plan", "--preset", "small", "-o", str(taken)]) == 2
    err = capsys.readouterr().err
    assert err == f"attenio plan: error: output directory {str(taken)!r} is not a directory\n"
    assert err.count("\n") == 1 and "Traceback" not in err


def test_a_bug_is_one_line_naming_it_and_status_1_and_debug_shows_it(capsys, tmp_path,
                                                                      monkeypatch):
    import attenio.report

    def broken(plan):
        raise RuntimeError("the plan report broke\nsecond line")
    monkeypatch.setattr(attenio.report, "plan_json", broken)
    monkeypatch.setattr(planner, "QUIET_SECONDS", float("inf"))    # no progress, whatever the load
    assert main(["plan", "--preset", "small", "-o", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err == ("attenio plan: internal error: RuntimeError: the plan report broke (a bug in "
                   "attenio; rerun with --debug for the traceback)\n")
    with pytest.raises(RuntimeError, match="the plan report broke"):
        main(["--debug", "plan", "--preset", "small", "-o", str(tmp_path)])


def test_an_error_of_several_lines_is_printed_on_one(capsys, tmp_path, monkeypatch):
    import attenio.report
    from attenio.errors import ConfigError

    def refuses(plan):
        raise ConfigError("a message quoting a file's text\nits second line")
    monkeypatch.setattr(attenio.report, "plan_json", refuses)
    monkeypatch.setattr(planner, "QUIET_SECONDS", float("inf"))
    assert main(["plan", "--preset", "small", "-o", str(tmp_path)]) == 2
    assert capsys.readouterr().err == ("attenio plan: error: a message quoting a file's text "
                                       "its second line\n")
