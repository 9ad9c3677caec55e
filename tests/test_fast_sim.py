"""The fast simulation path (attenio.sim.fast) against the cocotb bench, and what `attenio sim`
decides before it simulates: the engine, the memory it would need, the progress it shows.

The equivalence test runs one tiny configuration on both engines, same Verilog, same
inputs, the same runs back to back (a bad one first), and holds them equal bit for bit
and counter for counter; both builds are at -O0 (quick) and the fast one is shared
with tests/test_e2e.py's memory-model test.
"""

import dataclasses
import io

import numpy as np
import pytest

from attenio.errors import ConfigError
from attenio.plan import make_plan
from attenio.regmap import ErrorCode
from attenio.sim.capacity import check_fits, need_bytes
from attenio.sim.e2e import (BUILD_COSTS, E2EOptions, choose_engine, expected_seconds,
                             fast_cxx_opt, run_e2e)
from attenio.sim.progress import ProgressBar, follow
from attenio.sim.runner import simulator_available

from e2e_common import SHARED_BUILDS
from test_e2e import HW, check_good

pytestmark = SHARED_BUILDS


def test_fast_and_cocotb_agree_bit_for_bit_and_counter_for_counter(tmp_path_factory, seed):
    if not simulator_available("verilator"):
        pytest.skip("verilator is not installed on this machine")
    out = tmp_path_factory.getbasetemp() / "e2e_verilator"
    reports = {}
    for engine in ("fast", "cocotb"):
        opts = E2EOptions(simulator="verilator", engine=engine, memory="model", seed=seed,
                          quick_build=True, seq_len=45, heads=1, runs=2,
                          bad_runs=({"SEQ_LEN": 97},))
        reports[engine] = run_e2e(HW, out, opts)
        outputs = np.load(out / "sim_outputs.npz")
        reports[engine]["o"] = outputs["rtl"]
    fast, slow = reports["fast"], reports["cocotb"]
    assert (fast["engine"], slow["engine"]) == ("fast", "cocotb")
    np.testing.assert_array_equal(fast["o"], slow["o"])
    assert len(fast["runs"]) == len(slow["runs"]) == 3
    for f, c in zip(fast["runs"], slow["runs"]):
        assert (f["status"], f["error"], f["counters"]) == (c["status"], c["error"], c["counters"])
        assert f.get("bit_exact") == c.get("bit_exact")
        assert f.get("o_untouched") == c.get("o_untouched")
    assert fast["runs"][0]["error"] == ErrorCode.SEQ_LEN_TOO_LARGE
    check_good(fast, 45, 1, exact=True)      # 45 = 32 + 13: the last block is partial


def test_auto_engine_is_fast_unless_an_option_needs_cocotb():
    """The fast model builds and runs in less time than cocotb's at any length, so "auto"
    takes it whenever nothing asked for needs the cocotb bench."""
    plan = make_plan(HW)
    short = choose_engine(plan, seq_len=16, heads=1)
    assert short[:2] == ("fast", "model") and "with its build" in short[2]
    long_plan = make_plan(dataclasses.replace(
        HW, workload=dataclasses.replace(HW.workload, seq_len=1024)))
    assert choose_engine(long_plan, seq_len=1024, heads=1)[:2] == ("fast", "model")
    got = choose_engine(long_plan, seq_len=1024, heads=1, protocol=True)
    assert got[:2] == ("cocotb", "axiram") and "back-pressure need(s) cocotb" in got[2]
    assert choose_engine(long_plan, seq_len=1024, heads=1, simulator="icarus")[0] == "cocotb"
    assert choose_engine(plan, seq_len=16, heads=1, memory="axiram")[:2] == ("cocotb", "axiram")
    assert choose_engine(long_plan, seq_len=1024, heads=1, memory="model",
                         engine="cocotb")[:2] == ("cocotb", "model")
    with pytest.raises(ConfigError, match="--memory axiram need"):
        choose_engine(plan, seq_len=16, heads=1, engine="fast", memory="axiram")


def test_the_fast_models_optimisation_pays_its_build_back_within_the_run():
    """A short run takes the level that builds fastest, a long one the level that runs
    fastest, and a level built already costs only its run."""
    quick = min(BUILD_COSTS[k][0] for k in BUILD_COSTS if k[0] == "fast")
    fastest = max(BUILD_COSTS[k][1] for k in BUILD_COSTS if k[0] == "fast")
    short, long = fast_cxx_opt(10_000), fast_cxx_opt(10 ** 10)
    assert BUILD_COSTS["fast", short][0] == quick and BUILD_COSTS["fast", long][1] == fastest
    assert short != long
    assert fast_cxx_opt(10 ** 10, built=[short]) == long      # still worth building
    assert fast_cxx_opt(10_000, built=[long]) == long         # no build beats a quick one
    assert expected_seconds("fast", long, 10_000, built=True) < expected_seconds(
        "fast", short, 10_000)


def test_a_run_too_large_for_the_machine_is_refused_with_the_size_it_needs():
    plan = make_plan(HW)
    parts = need_bytes(plan, seq_len=96, heads=2, engine="fast", memory="model")
    total = sum(parts.values())
    assert check_fits(plan, seq_len=96, heads=2, engine="fast", memory="model",
                      available=total) == total
    with pytest.raises(ConfigError) as exc:
        check_fits(plan, seq_len=96, heads=2, engine="fast", memory="model", available=total - 1)
    msg = str(exc.value)
    assert msg.startswith(f"N = 96 with 2 head(s) needs about {total / 2 ** 30:.1f} GiB of host "
                          f"memory (")
    assert msg.endswith(f"more than the {(total - 1) / 2 ** 30:.1f} GiB available here")
    # the golden model grows with the rows: twice N, at least twice its bytes
    big = need_bytes(plan, seq_len=192, heads=2, engine="fast", memory="model")
    assert big["golden model"] >= 2 * parts["golden model"]
    # a decode step: one query row against 96 keys still holds the whole K/V cache; K and V
    # shared by both heads (one K/V head) hold half of it
    step = need_bytes(plan, seq_len=1, kv_len=96, heads=2, engine="fast", memory="model")
    shared = need_bytes(plan, seq_len=1, kv_len=96, heads=2, kv_heads=1, engine="fast",
                        memory="model")
    kv_image = 2 * 2 * 96 * 16                  # K and V, two heads, int8
    assert step["inputs and memory image"] >= 4 * kv_image
    assert shared["inputs and memory image"] < step["inputs and memory image"]
    # block ranges: the golden model and the reference compute the sampled rows only
    sample = need_bytes(plan, seq_len=96, heads=2, engine="fast", memory="model",
                        golden_rows=32)
    assert sample["golden model"] * 3 == parts["golden model"]
    assert sample["memory model elaboration"] == parts["memory model elaboration"]


def test_progress_bar_shows_percent_rate_and_time_left(tmp_path):
    stream = io.StringIO()
    bar = ProgressBar(1000, stream=stream, after=1.0)
    path = tmp_path / "progress.txt"
    with follow(path, bar, interval=0.01):
        with open(path, "a") as f:
            f.write("100000 10 0.5\n")          # before `after`: nothing drawn
            f.write("2000000 250 4.0\n")
            f.write("2500")                     # a line still being written is left alone
    bar.close()
    assert stream.getvalue() == ("[######                  ]  25.0% of O written, 2.0M cycles, "
                                 "500k cycles/s, 12s left\n")


@pytest.mark.slow
def test_small_preset_at_4096_rows_on_the_fast_path(tmp_path_factory, seed):
    """N = 4096, d = 16 (about 34M cycles): bit-exact, bytes equal to the Plan, cycles within
    1 % of the cycle model (on this deterministic memory they are equal)."""
    if not simulator_available("verilator"):
        pytest.skip("verilator is not installed on this machine")
    from attenio import preset
    from attenio.model.planner import choose_plan

    base = preset("small")
    config = dataclasses.replace(base, name="small_n4096",
                                 workload=dataclasses.replace(base.workload, seq_len=4096))
    plan = choose_plan(config)
    config = dataclasses.replace(config, split=plan.split, rows_per_mac=plan.rows_per_mac)
    report = run_e2e(config, tmp_path_factory.mktemp("fast4096"),
                     E2EOptions(engine="fast", memory="model", seed=seed))
    run = report["runs"][0]
    assert (report["seq_len"], report["head_dim"], report["engine"]) == (4096, 16, "fast")
    assert run["bit_exact"], f"{run['mismatches']} elements differ from the golden model"
    c = run["counters"]
    assert (c["BYTES_READ"], c["BYTES_WRITTEN"]) == (report["plan_bytes_read"],
                                                     report["plan_bytes_written"])
    assert abs(c["CYCLES"] - report["model"]["cycles"]) <= 0.01 * report["model"]["cycles"]
