"""What the end-to-end tests share: their hardware, and the checks of a good run.

tests/test_e2e.py and tests/test_e2e_decoder.py run on the same Verilog and builds (the
causal mask, KV_LEN and HEAD_GROUP are run-time registers), so both take it from here,
and so does tests/test_fast_sim.py; `SHARED_BUILDS` keeps the three files on one worker of
`make test`, so each build is made once.
"""

import dataclasses

import pytest

from attenio import preset
from attenio.plan import make_plan
from attenio.sim.runner import simulator_available

# Hardware for N, N_kv <= 96: 4x4 MACs, a = 32 (r = 2), d = 16, 64-bit AXI.
HW = dataclasses.replace(preset("small"), name="e2e",
                         workload=dataclasses.replace(preset("small").workload, seq_len=96))

# A small array in a float format: 2x2 MACs, d = 8, N <= 48 (the float pipelines make a
# larger array's Verilator build take minutes).
FLOAT_HW = dataclasses.replace(
    preset("small"), name="e2e_float",
    workload=dataclasses.replace(preset("small").workload, seq_len=48, head_dim=8),
    budget=dataclasses.replace(preset("small").budget, mac_lines=2, macs_per_line=2,
                               exp_units=2, cache_bytes=1024))

#: `pytestmark` of every test file that builds HW or FLOAT_HW into getbasetemp() / "e2e_*"
SHARED_BUILDS = pytest.mark.xdist_group("e2e_builds")


def need(simulator):
    if not simulator_available(simulator):
        pytest.skip(f"{simulator} is not installed on this machine")


def workload(hw, **kw):
    """`hw` with workload fields `kw` (causal, kv_len, ...), on the same mapping: these are
    run-time registers, so the Verilog stays the same."""
    plan = make_plan(hw)
    return dataclasses.replace(hw, workload=dataclasses.replace(hw.workload, **kw),
                               split=plan.split, rows_per_mac=plan.rows_per_mac)


def check_run(run, report, *, exact, pe_floor):
    """One good run: it ended without error, bit-exact, bytes equal to the Plan and to the
    model, PE busy at least `pe_floor`, and the counters against the cycle model: equal when
    the memory is deterministic (`exact`), within 1 % of the cycles when it stalls at
    random (the model cannot know the draws)."""
    assert run["error_name"] == "NONE" and run["status"] & 2
    assert run["bit_exact"], f"{run['mismatches']} elements differ from the golden model"
    c = run["counters"]
    assert c["BYTES_READ"] == report["plan_bytes_read"]
    assert c["BYTES_WRITTEN"] == report["plan_bytes_written"]
    assert c["PE_BUSY"] >= pe_floor
    model = report["model"]
    assert report["model_agrees"] is not False
    assert (c["BYTES_READ"], c["BYTES_WRITTEN"]) == (model["bytes_read"], model["bytes_written"])
    for key in ("cycles", "pe_busy", "exp_busy", "mem_stall"):
        if exact:
            assert c[key.upper()] == model[key], (key, c, model)
        else:
            assert abs(c[key.upper()] - model[key]) <= 0.01 * c["CYCLES"], (key, c, model)
