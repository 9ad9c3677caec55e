"""The accelerator end to end: RTL on an AXI memory model against the golden model and the Plan.

One build per simulator serves every test here (the Verilog only changes with
the Plan); each test is one simulation with random memory latency and
back-pressure, seeded and printed.
"""

import dataclasses

import pytest

from attenio.analysis import q_blocks
from attenio.plan import make_plan
from attenio.regmap import ErrorCode
from attenio.sim.e2e import E2EOptions, run_e2e
from e2e_common import FLOAT_HW, HW, SHARED_BUILDS, check_run, need, workload

pytestmark = SHARED_BUILDS


def causal(hw):
    """`hw` with the causal mask on, on the same mapping (the same Verilog)."""
    return workload(hw, causal=True)


def check_good(report, n, heads, *, exact):
    """Every good run: bit-exact, bytes equal to the Plan, counters against the cycle model:
    equal when the memory is deterministic (`exact`), within 1 % of the cycles when it
    stalls at random (the model cannot know the draws). A causal run's blocks read their
    keys up to their last row, the short block first."""
    keys = sum(min(n, r0 + rows) if report["causal"] else n
               for r0, rows in q_blocks(n, report["a"], causal=report["causal"]))
    for run in report["runs"]:
        if run["bad"]:
            continue
        # 2 r d / s array cycles per K/V row of each block
        check_run(run, report, exact=exact, pe_floor=(heads * keys * 2 * report["rows_per_mac"]
                                                      * report["head_dim"] // report["split"]))
        assert run["counters"]["CYCLES"] > run["counters"]["PE_BUSY"]
    assert (report["seq_len"], report["heads"]) == (n, heads)


# Icarus runs the same protocol mix (two heads, latency, back-pressure, a partial block) in
# the s = 4 test below; this one's Icarus run only in the slow suite.
@pytest.mark.parametrize("simulator", ["verilator",
                                       pytest.param("icarus", marks=pytest.mark.slow)])
def test_two_heads_with_latency_and_backpressure_twice_without_reset(tmp_path_factory, simulator,
                                                                     seed):
    need(simulator)
    out = tmp_path_factory.getbasetemp() / f"e2e_{simulator}"
    opts = E2EOptions(simulator=simulator, seed=seed, quick_build=True, seq_len=45, heads=2, runs=2,
                      latency=(0.2, 8), backpressure=0.3, random_layout=True)
    report = run_e2e(HW, out, opts)
    check_good(report, 45, 2, exact=False)     # 45 = 32 + 13: the last block is partial
    assert len(report["runs"]) == 2


# Icarus's refusals are in the slow suite (the causal test below keeps Icarus end to end)
@pytest.mark.parametrize("simulator", ["verilator",
                                       pytest.param("icarus", marks=pytest.mark.slow)])
def test_bad_runs_set_an_error_write_nothing_and_leave_the_machine_usable(tmp_path_factory,
                                                                          simulator, seed):
    need(simulator)
    out = tmp_path_factory.getbasetemp() / f"e2e_{simulator}"
    bad = ({"SEQ_LEN": 0}, {"SEQ_LEN": 97}, {"HEADS": 0}, {"K_BASE": 0x1004},
           {"O_ROW_STRIDE": 20})
    codes = [ErrorCode.SEQ_LEN_ZERO, ErrorCode.SEQ_LEN_TOO_LARGE, ErrorCode.HEADS_ZERO,
             ErrorCode.MISALIGNED, ErrorCode.MISALIGNED]
    opts = E2EOptions(simulator=simulator, seed=seed, quick_build=True, seq_len=20, heads=1, runs=1, bad_runs=bad)
    report = run_e2e(HW, out, opts)
    for run, code in zip(report["runs"], codes):
        assert run["bad"] and run["error"] == code, run
        assert run["status"] == 2                       # done, not busy
        assert run["o_untouched"]
        assert run["counters"]["BYTES_WRITTEN"] == 0 and run["counters"]["BYTES_READ"] == 0
    check_good(report, 20, 1, exact=True)


@pytest.mark.parametrize("n", [1, 32, 96])
@pytest.mark.parametrize("masked", [False, True], ids=["full", "causal"])
def test_sequence_lengths_at_the_edges(tmp_path_factory, n, masked, seed):
    need("verilator")
    out = tmp_path_factory.getbasetemp() / "e2e_verilator"
    report = run_e2e(causal(HW) if masked else HW, out,
                     E2EOptions(simulator="verilator", seed=seed, quick_build=True, seq_len=n,
                                heads=1, input_kind="spread"))
    assert report["causal"] == masked
    check_good(report, n, 1, exact=True)


@pytest.mark.parametrize("simulator", ["verilator", "icarus"])
def test_causal_two_heads_with_latency_and_backpressure(tmp_path_factory, simulator, seed):
    """The causal mask on the int8 design: the short block (13 rows) first, each block's K/V
    up to its last row, the diagonal rows masked in the lanes; input kind "ascending"
    moves every row's max at every key, so a masked key that moved it would show."""
    need(simulator)
    out = tmp_path_factory.getbasetemp() / f"e2e_{simulator}"
    opts = E2EOptions(simulator=simulator, seed=seed, quick_build=True, seq_len=45, heads=2,
                      latency=(0.2, 8), backpressure=0.3, random_layout=True,
                      input_kind="ascending")
    report = run_e2e(causal(HW), out, opts)
    assert report["causal"] and report["a"] == 32
    check_good(report, 45, 2, exact=False)
    full = make_plan(HW).traffic_at(seq_len=45, heads=2)
    # K/V rows: 13 + 45 a head against 2 * 45 unmasked
    assert report["plan_bytes_read"] == full.read_bytes - 2 * 2 * 32 * 16


@pytest.mark.parametrize("simulator", ["verilator",
                                       pytest.param("icarus", marks=pytest.mark.slow)])
def test_rows_split_over_four_macs_with_latency_and_backpressure(tmp_path_factory, simulator,
                                                                 seed):
    """s = 4: chunks of 4 elements from the unpacker to the packer, two groups a line."""
    need(simulator)
    hw = dataclasses.replace(HW, name="e2e_s4", split=4)
    out = tmp_path_factory.getbasetemp() / f"e2e_s4_{simulator}"
    opts = E2EOptions(simulator=simulator, seed=seed, quick_build=True, seq_len=45, heads=2,
                      latency=(0.2, 8), backpressure=0.3, random_layout=True)
    report = run_e2e(hw, out, opts)
    assert (report["split"], report["rows_per_mac"], report["a"]) == (4, 10, 40)
    check_good(report, 45, 2, exact=False)     # 45 = 40 + 5: the last block is partial


def test_causal_rows_split_over_four_macs(tmp_path_factory, seed):
    """s = 4 with the mask: a lane's rows are slot * G + its groups, G = 8 groups, r = 10."""
    need("verilator")
    hw = causal(dataclasses.replace(HW, name="e2e_s4", split=4))
    out = tmp_path_factory.getbasetemp() / "e2e_s4_verilator"
    report = run_e2e(hw, out, E2EOptions(simulator="verilator", seed=seed, quick_build=True,
                                         seq_len=93, heads=1, input_kind="ascending"))
    assert report["causal"] and (report["split"], report["a"]) == (4, 40)
    check_good(report, 93, 1, exact=True)      # blocks of 13, 40, 40 rows


def test_memory_model_inside_the_design(tmp_path_factory, seed):
    """The long-run path: attenio_sim_top carries the AXI memory, loaded through its backdoor."""
    need("verilator")
    out = tmp_path_factory.getbasetemp() / "e2e_verilator"
    report = run_e2e(HW, out, E2EOptions(simulator="verilator", engine="fast", seed=seed,
                                         quick_build=True, seq_len=70, heads=1, memory="model"))
    assert report["memory"] == "model"
    check_good(report, 70, 1, exact=True)


# Every float pair is in the slow suite: a float design's Verilator build takes minutes and
# Icarus's run about a minute, and the default suite (whose float coverage is the core
# benches on Icarus) measured 18:05 on a fresh clone here with bf16-icarus-causal in it.
@pytest.mark.parametrize("fmt,split,simulator,masked", [
    pytest.param("bf16", 1, "icarus", True, marks=pytest.mark.slow, id="bf16-icarus-causal"),
    pytest.param("bf16", 1, "icarus", False, marks=pytest.mark.slow, id="bf16-icarus"),
    pytest.param("fp16", 2, "verilator", False, marks=pytest.mark.slow, id="fp16-verilator"),
    pytest.param("fp16", 2, "verilator", True, marks=pytest.mark.slow,
                 id="fp16-verilator-causal"),
    pytest.param("bf16", 1, "verilator", False, marks=pytest.mark.slow, id="bf16-verilator"),
    pytest.param("fp16", 2, "icarus", False, marks=pytest.mark.slow, id="fp16-icarus"),
    # fp8: 8-bit Q, K, V in, 16-bit (bf16) O out through the same DMA
    pytest.param("fp8_e4m3", 2, "icarus", True, marks=pytest.mark.slow, id="e4m3-icarus-causal"),
    pytest.param("fp8_e5m2", 1, "icarus", False, marks=pytest.mark.slow, id="e5m2-icarus"),
    pytest.param("fp8_e4m3", 1, "verilator", False, marks=pytest.mark.slow, id="e4m3-verilator"),
    pytest.param("fp8_e5m2", 2, "verilator", True, marks=pytest.mark.slow,
                 id="e5m2-verilator-causal"),
])
def test_float_formats_two_heads_with_latency_and_backpressure(tmp_path_factory, fmt, split,
                                                               simulator, masked, seed):
    """Every float format through the DMA (8- and 16-bit elements in 64-bit beats, fp8's O
    in bf16), a partial block, two heads, random latency and back-pressure, with and
    without the causal mask; sim_outputs.npz holds O in real units (fp8's times scale_v)."""
    import numpy as np

    from attenio.formats import format_by_name
    need(simulator)
    hw = dataclasses.replace(FLOAT_HW, name=f"e2e_{fmt}", format=format_by_name(fmt),
                             split=split)
    out = tmp_path_factory.getbasetemp() / f"e2e_{fmt}_{simulator}"
    opts = E2EOptions(simulator=simulator, seed=seed, quick_build=True, seq_len=37, heads=2,
                      latency=(0.2, 8), backpressure=0.3, random_layout=True)
    report = run_e2e(causal(hw) if masked else hw, out, opts)
    assert report["split"] == split and 37 % report["a"]     # a partial block
    assert report["causal"] == masked
    check_good(report, 37, 2, exact=False)
    saved = np.load(out / "sim_outputs.npz")
    assert str(saved["format"]) == fmt and saved["rtl"].dtype == np.uint16
    assert saved["q"].dtype == (np.uint8 if fmt.startswith("fp8") else np.uint16)
    err = np.linalg.norm(saved["o"] - saved["reference"]) / np.linalg.norm(saved["reference"])
    assert err < (0.005 if fmt == "fp16" else 0.02), err


def _heads_apart(path, rng, *, heads, kv_heads, n, d):
    """An npz of float Q, K, V whose K/V heads lie binades apart (K/V head j's K times 2^-j,
    V times 8^j): one scale a tensor would cost the small heads their bits."""
    import numpy as np
    j = np.arange(kv_heads)[:, None, None]
    x = {"q": rng.standard_normal((heads, n, d)),
         "k": rng.standard_normal((kv_heads, n, d)) * 0.5 ** j,
         "v": rng.standard_normal((kv_heads, n, d)) * 8.0 ** j}
    np.savez(path, **x)
    return x


@pytest.mark.parametrize("grouped", [True, False])
def test_a_scale_a_head_in_one_launch(tmp_path_factory, rng, seed, grouped):
    """MODE.HEAD_SCALES: int8 quantized a tensor and K/V head, each query head's c in
    SCALE_C_TABLE, one launch of four heads on two K/V heads; grouped blocks take their
    group's c, ungrouped passes a head's. Bit-exact with each head's c, where one c for all
    would differ."""
    import numpy as np

    from attenio.sim.run_data import RunData, load_inputs
    need("verilator")
    path = tmp_path_factory.mktemp("heads_apart") / "inputs.npz"
    _heads_apart(path, rng, heads=4, kv_heads=2, n=40, d=16)
    out = tmp_path_factory.getbasetemp() / "e2e_verilator"
    opts = E2EOptions(simulator="verilator", seed=seed, quick_build=True, inputs=str(path),
                      grouped=grouped, head_scales=True)
    report = run_e2e(HW, out, opts)
    assert report["grouped"] == grouped and report["heads"] == 4
    # grouped: two passes of blocks that hold both heads of a group
    check_run(report["runs"][0], report, exact=True, pe_floor=report["compute_bound_cycles"])
    data = RunData.make(HW.format, head_dim=16, inputs=load_inputs(path, head_dim=16),
                        head_scales=True)
    assert len(set(data.head_c)) == 2 and data.head_c[0] == data.head_c[1]
    one_c = dataclasses.replace(data, head_c=None)
    plan = make_plan(HW)
    assert (one_c.golden(plan) != data.golden(plan)).any()


@pytest.mark.slow
def test_bf16_at_the_bottom_of_its_range_is_exact(tmp_path_factory, rng, seed):
    """bf16 Q subnormal (its products' first operand promised a widened bf16's lead,
    `fp.staged_mul`) and V near the smallest normal, so that O's fp32 accumulators and
    alpha * O run subnormal: bit-exact, and most of O comes out subnormal."""
    import numpy as np

    from attenio.formats import format_by_name
    need("verilator")
    n, d = 48, 8
    path = tmp_path_factory.mktemp("bf16_tiny") / "inputs.npz"
    np.savez(path, q=rng.standard_normal((1, n, d)) * 3e-39,
             k=rng.standard_normal((1, n, d)) * 3e37, v=rng.standard_normal((1, n, d)) * 2e-38)
    hw = dataclasses.replace(FLOAT_HW, name="e2e_bf16", format=format_by_name("bf16"), split=1)
    out = tmp_path_factory.getbasetemp() / "e2e_bf16_verilator"
    report = run_e2e(hw, out, E2EOptions(simulator="verilator", seed=seed, quick_build=True,
                                         inputs=str(path)))
    check_run(report["runs"][0], report, exact=True, pe_floor=report["compute_bound_cycles"])
    saved = np.load(out / "sim_outputs.npz")
    q, o = saved["q"], saved["rtl"]
    subnormal = lambda x: ((x >> 7) & 0xFF == 0) & (x & 0x7F != 0)    # noqa: E731
    assert subnormal(q).mean() > 0.9 and subnormal(o).mean() > 0.5
