"""A run split by Q blocks (attenio.sim.shards): block specs, shard ranges, `attenio sim
--blocks` and `--shards` errors, ranges end to end, and a sharded run on local Ray against
the unsharded run bit for bit and counter for counter.

The end-to-end tests run on the hardware of tests/e2e_common.py (N <= 96, a = 32) and its
quick fast model, shared with tests/test_e2e.py and tests/test_fast_sim.py."""

import numpy as np
import pytest

from attenio.analysis import block_count, block_keys
from attenio.cli import main
from attenio.errors import ConfigError
from attenio.model.cyclemodel import model_counters
from attenio.plan import make_plan
from attenio.regmap import ErrorCode
from attenio.sim.e2e import E2EOptions, run_e2e, simulated_memory
from attenio.sim.shards import ADDITIVE, BlockSpec, contiguous, run_shards, shard_ranges

from e2e_common import HW, SHARED_BUILDS, need, workload

pytestmark = SHARED_BUILDS


@pytest.mark.parametrize("text, total, blocks", [
    ("first,last", 4096, [0, 4095]), ("0:4", 10, [0, 1, 2, 3]), ("every 8", 20, [0, 8, 16]),
    ("first, 3, 5:7, last", 9, [0, 3, 5, 6, 8]), ("last,last", 1, [0]), ("every 1", 3, [0, 1, 2]),
    ("LAST, 2:3", 5, [2, 4])])
def test_block_specs_name_their_blocks(text, total, blocks):
    assert BlockSpec.parse(text).select(total) == blocks


def test_random_blocks_are_drawn_with_the_seed(seed):
    print(f"seed {seed}")
    spec = BlockSpec.parse("random 5")
    got = spec.select(1000, seed)
    assert len(got) == 5 == len(set(got)) and got == sorted(got) and max(got) < 1000
    assert spec.select(1000, seed) == got
    assert spec.select(5, seed) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("text, total, message", [
    ("5:3", 10, "b must be above a"), ("4:4", 10, "b must be above a"),
    ("12", 10, "block 12 is past the last of the 10 Q blocks"),
    ("2:11", 10, "block 10 is past the last"), ("every 0", 10, "'0' must be a positive integer"),
    ("random 11", 10, "11 random blocks of only 10"), ("middle", 10, "'middle' is not a block"),
    ("1,,2", 10, "'' is not a block spec"), ("every -2", 10, "must be a positive integer")])
def test_bad_block_specs_are_refused_naming_what_is_wrong(text, total, message):
    with pytest.raises(ConfigError, match=message):
        BlockSpec.parse(text).select(total)


def test_blocks_run_in_one_launch_per_contiguous_range():
    assert contiguous([0, 1, 2, 5, 7, 8]) == [(0, 3), (5, 1), (7, 2)]
    assert contiguous([4095]) == [(4095, 1)] and contiguous([]) == []


@pytest.mark.parametrize("n, a, k, causal", [(512, 32, 2, False), (513, 32, 3, True),
                                             (96, 32, 3, True), (10_000, 7, 5, True),
                                             (64, 32, 1, False)])
def test_shards_cover_every_block_once_with_about_equal_work(n, a, k, causal):
    """Contiguous, each at least a block, and (the mask makes later blocks read more keys) each
    shard's K/V rows within one block's of an equal share."""
    ranges = shard_ranges(n, a, k, causal=causal)
    assert len(ranges) == k and ranges[0][0] == 0 and all(c >= 1 for _, c in ranges)
    assert sum(c for _, c in ranges) == block_count(n, a)
    assert all(f + c == g for (f, c), (g, _) in zip(ranges, ranges[1:]))
    keys = [kv for _, _, kv in block_keys(n, a, causal=causal)]
    work = [sum(keys[f:f + c]) for f, c in ranges]
    assert max(work) - sum(work) / k <= max(keys)


@pytest.mark.parametrize("k, message", [(0, "positive integer"), (4, "only 3 Q block")])
def test_shard_counts_outside_the_blocks_are_refused(k, message):
    with pytest.raises(ConfigError, match=message):
        shard_ranges(96, 32, k)


@pytest.mark.parametrize("args, message", [
    (["--shards", "0"], "argument --shards: '0' is not a positive integer"),
    (["--blocks", "5:3"], "b must be above a"),
    (["--blocks", "4"], "block 4 is past the last of the 4 Q blocks of a pass (0 .. 3)"),
    (["--blocks", "first", "--shards", "2"], "give one"),
    (["--address", "ray://x:1"], "--address is the Ray cluster of --shards"),
    (["--shards", "5"], "--shards 5: the run has only 4 Q block(s)"),
    (["--shards", "2", "--engine", "cocotb"], "--shards runs each shard on the fast engine"),
    (["--blocks", "0", "--kv-lens", "5,6", "--page-rows", "8"], "a batch (--kv-lens) runs"),
])
def test_sim_refuses_bad_splits_in_one_line(capsys, tmp_path, args, message):
    try:
        rc = main(["sim", "--preset", "small", "--seq-len", "96", *args, "-o", str(tmp_path)])
    except SystemExit as exc:   # argparse's own errors
        rc = exc.code
    assert rc == 2
    err = capsys.readouterr().err
    # one line (after the planner's progress lines, for errors found on its blocks)
    assert message in err.splitlines()[-1], err
    assert err.count("error:") == 1 and "Traceback" not in err


def _check_range(run, plan, n, shape):
    blocks = (run["first"], run["count"])
    assert run["error_name"] == "NONE" and run["bit_exact"] and run["only_its_rows_written"]
    t = plan.traffic_at(seq_len=n, blocks=blocks, **shape)
    c = run["counters"]
    assert (c["BYTES_READ"], c["BYTES_WRITTEN"]) == (t.read_bytes, t.write_bytes)
    assert {k.lower(): v for k, v in c.items()} == run["model"]
    assert run["cycles_match_model"] is True


@pytest.mark.parametrize("causal", [False, True])
def test_block_ranges_end_to_end_each_exact_and_no_other_row_written(tmp_path_factory, seed,
                                                                     causal):
    """Three launches of one output region: a first block, a last one and a middle pair
    (N = 90: the causal short block first, else last), each bit-exact on its rows with every
    other row left poisoned, bytes equal to the Plan's for the range and every counter to the
    model's; then a range past the last block ends with BLOCK_RANGE and writes nothing."""
    need("verilator")
    print(f"seed {seed}")
    out = tmp_path_factory.getbasetemp() / "e2e_verilator"
    config = workload(HW, causal=causal)
    n = 90
    r = run_e2e(config, out, E2EOptions(engine="fast", memory="model", quick_build=True,
                                        seed=seed, seq_len=n, heads=1,
                                        blocks=((0, 1), (2, 1), (0, 2)),
                                        bad_runs=({"Q_BLOCK_FIRST": 3},
                                                  {"Q_BLOCK_FIRST": 1, "Q_BLOCK_COUNT": 3})))
    plan = make_plan(config)
    shape = dict(heads=1, kv_len=n, grouped=False, group=1)
    bad, good = r["runs"][:2], r["runs"][2:]
    for run in bad:
        assert run["error"] == ErrorCode.BLOCK_RANGE and run["o_untouched"]
        assert run["counters"]["BYTES_READ"] == run["counters"]["BYTES_WRITTEN"] == 0
    assert [(g["row0"], g["rows"]) for g in good] == (
        [(0, 26), (58, 32), (0, 58)] if causal else [(0, 32), (64, 26), (0, 64)])
    for run in good:
        _check_range(run, plan, n, shape)
    assert r["all_bit_exact"] and r["all_bytes_match_plan"] and r["all_cycles_match_model"]
    assert r["whole_run_model"] == model_counters(plan, seq_len=n, causal=causal,
                                                  memory=simulated_memory(plan, "model"),
                                                  **shape)


@pytest.fixture(scope="module")
def ray_session():
    ray = pytest.importorskip("ray")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_three_shards_on_ray_equal_the_unsharded_run(ray_session, tmp_path_factory, seed):
    """A causal run of N = 90 (blocks of 26, 32 and 32 rows) in three shards on local Ray, each
    a process of its own on the one quick model built first, against the same run in one
    launch: the same O bit for bit, and counter for counter: bytes, PE- and EXP-busy cycles
    sum to the unsharded run's, each shard's cycles and memory stall are the model's for its
    range and the unsharded run's the model's for the whole."""
    need("verilator")
    print(f"seed {seed}")
    out = tmp_path_factory.getbasetemp() / "e2e_verilator"
    config = workload(HW, causal=True)
    plan = make_plan(config)
    opts = E2EOptions(engine="fast", memory="model", quick_build=True, seed=seed, seq_len=90,
                      heads=1)
    sharded = run_shards(config, out, opts, 3, seed_cmd="attenio sim", log=lambda _: None)
    whole = run_e2e(config, out, opts)
    assert whole["runs"][0]["bit_exact"] and whole["model_agrees"]
    assert sharded["all_ok"] and not sharded["failed"] and sharded["bytes_equal_plan"]
    assert [(s["first"], s["count"]) for s in sharded["shards"]] == [(0, 1), (1, 1), (2, 1)]
    np.testing.assert_array_equal(sharded["o"], np.load(out / "sim_outputs.npz")["rtl"])
    counters = whole["runs"][0]["counters"]
    for key in ADDITIVE:
        assert sharded["counters"][key] == counters[key.upper()], key
    assert {k.lower(): v for k, v in counters.items()} == sharded["whole_run_model"]
    for s in sharded["shards"]:
        assert {k.lower(): v for k, v in s["counters"].items()} == s["model"]
        assert s["rerun"] == f"attenio sim --blocks {s['first']}:{s['first'] + 1}"
    assert sharded["counters"]["cycles"] > counters["CYCLES"]
