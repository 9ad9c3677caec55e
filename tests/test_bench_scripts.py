"""The `make bench` scripts still load and still call the project as it is: a bench is run
by hand or by `make bench`, rarely, so an API it uses can change under it unseen (the
accuracy bench once passed a golden-model argument that no longer existed). Their figures
are `make bench`'s; here only that they run, on sizes that take a second."""

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted((ROOT / "bench").glob("bench_*.py"))


def _load(path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_there_are_bench_scripts():
    assert len(SCRIPTS) >= 10, SCRIPTS


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.stem)
def test_each_bench_script_imports_and_has_a_main(path):
    assert callable(_load(path).main)


@pytest.mark.parametrize("spec_name", ["FP16", "BF16"])
def test_the_float_accuracy_bench_measures_at_a_small_n(spec_name):
    from attenio.hdl.formats import fp

    bench = _load(ROOT / "bench" / "bench_accuracy_fp.py")
    got = bench.measure(getattr(fp, spec_name), "gaussian_float", 256)
    assert 0 < got["floor"] < got["rel_l2"] < bench.TARGET_REL_L2, got
    assert 0 < got["datapath"] < got["rel_l2"], got


def test_the_fp_cost_bench_counts_an_op_without_its_harness(tmp_path, monkeypatch):
    bench = _load(ROOT / "bench" / "bench_fp_cost.py")
    monkeypatch.setattr(bench, "OUT", tmp_path)
    row = bench.measure("cvt_fp8_e4m3_fp32", pnr=False, timeout=300)
    # the one-stage widening: its output register (fp32 bits that are never constant: at
    # most 32) and its LUTs; the harness's 8-bit input shift register and its output
    # registers and fold (about 50 FF) are not counted
    assert row["latency"] == 1
    assert 0 < row["FF"] <= 32 and 0 < row["LUT"] < 100 and row["DSP"] == 0, row


def test_the_shards_bench_projects_n_131072_from_a_rate():
    bench = _load(ROOT / "bench" / "bench_shards.py")
    rows, cycles, _ = bench.projection(300_000)
    assert len(rows) == len(bench.MACHINES) and cycles > 3 * 10 ** 10
    assert rows[0][2] == f"{cycles / 300_000 / 3600:,.1f} h"
