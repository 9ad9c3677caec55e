"""`attenio sweep` on a local Ray: its rows equal the commands run one by one, failures are
rows, and a rerun does no work.

One Ray session serves the module (its start takes 10-15 s). The sweep is the
1x2-MAC array of tests/test_synth.py (d = 8, N = 16) at two cache sizes and one
cache too small for a query row, through plan, model and synth; synthesis is Yosys's
word-level generic pass (`level = "word"`, about 10 s), the cheapest synthesis the
flow has (`attenio synth --target generic` runs the gate-level one, a minute even on
this array), so its one-by-one twin is the `synthesize` call `attenio synth` makes.
"""

import io
import json

import pytest

import ray

from attenio.cli import main
from attenio.errors import ConfigError
from attenio.gen.synth import synthesize
from attenio.options import planned_config
from attenio.sweep import load_spec, read_rows, run_sweep
from attenio.sweep.pareto import collect, front
from attenio.sweep.spec import config_of

TINY = {"macs": "1x2", "head_dim": 8, "seq_len": 16, "exp_units": 1}
SPEC = """
name = "tiny"
stages = ["plan", "model", "synth"]

[base]
macs = "1x2"
head_dim = 8
seq_len = 16
exp_units = 1

[grid]
cache_kib = [4, 0.25]

[[points]]
cache_kib = 0.0625

[synth]
target = "generic"
level = "word"
"""
TOO_SMALL = ("ConfigError: a cache of 64 bytes cannot hold one query row with its accumulators, "
             "softmax state and 4 staged K/V rows at d = 8 (needs 90 bytes)")


@pytest.fixture(scope="module")
def ray_session():
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def tiny(ray_session, tmp_path_factory):
    """The sweep run once: (spec, output directory, summary, progress output)."""
    root = tmp_path_factory.mktemp("sweep")
    (root / "tiny.toml").write_text(SPEC)
    spec = load_spec(root / "tiny.toml")
    progress = io.StringIO()
    summary = run_sweep(spec, root / "out", stream=progress)
    return spec, root / "out", summary, progress.getvalue()


def _rows(summary, stage):
    return {r["options"]["cache_kib"]: r for r in summary.rows if r["stage"] == stage}


def test_every_point_and_stage_is_one_row(tiny):
    spec, out, summary, progress = tiny
    assert len(spec.points) == 3 and len(summary.ran) == 9 and summary.reused == 0
    rows = read_rows(out / "results.jsonl")
    assert sorted((r["options"]["cache_kib"], r["stage"]) for r in rows.values()) == sorted(
        (c, s) for c in (4, 0.25, 0.0625) for s in ("plan", "model", "synth"))
    for r in rows.values():
        assert r["options"] == {**TINY, "cache_kib": r["options"]["cache_kib"]}
        assert r["wall_seconds"] >= 0 and r["cpu_seconds"] >= 0 and r["node"]
        assert r["sweep"] == "tiny"
    last = progress.strip().splitlines()[-1]
    assert "points 3/3 done, 1 failed, 0 remaining; tasks 9/9 (0 in flight)" in last


def test_plan_rows_equal_attenio_plan(tiny, tmp_path):
    _, _, summary, _ = tiny
    for cache, row in _rows(summary, "plan").items():
        if row["error"]:
            continue
        assert row["command"][0] == "plan"
        assert main([*row["command"], "--json", "-o", str(tmp_path / str(cache))]) == 0
        data = json.loads((tmp_path / str(cache) / "plan.json").read_text())
        one = {**data["plan"], **{f"{n}_offchip_bytes": b["offchip_bytes"]
                                   for n, b in data["baselines"].items()}}
        f = row["figures"]
        assert {k: one[k] for k in f} == f          # every figure is the command's own
        assert {"a", "split", "rows_per_mac", "offchip_bytes", "offchip_read_bytes",
                "flashattention2_offchip_bytes"} <= set(f)
        assert row["config"]["budget"]["cache_bytes"] == int(cache * 1024)
    plans = {c: r["figures"] for c, r in _rows(summary, "plan").items() if not r["error"]}
    assert plans[0.25]["a"] < plans[4]["a"]         # the cache sets the Q block, and with it
    assert plans[0.25]["offchip_bytes"] > plans[4]["offchip_bytes"]     # the traffic


def test_model_rows_equal_attenio_compare(tiny, tmp_path, capsys):
    _, _, summary, _ = tiny
    for cache, row in _rows(summary, "model").items():
        if row["error"]:
            continue
        assert row["command"][0] == "compare"
        assert main([*row["command"], "--json", "-o", str(tmp_path / str(cache))]) == 0
        one = json.loads((tmp_path / str(cache) / "compare.json").read_text())["rows"][0]
        f = row["figures"]
        ours = {k: v for k, v in f.items() if not k.startswith(("speedup_over_", *(
            f"{n}_cycles" for n in one["baselines"])))}
        assert {k: one["attenio"][k] for k in ours} == ours
        assert {"cycles", "pe_util", "stall_fraction", "a", "split"} <= set(ours)
        for name, b in one["baselines"].items():
            assert (f[f"{name}_cycles"], f[f"speedup_over_{name}"]) == (b["cycles"], b["speedup"])
        assert f["cycles"] > 0
    capsys.readouterr()


def test_synth_row_equals_synthesize(tiny, tmp_path):
    """The smallest array's synthesis, run again one by one as `attenio synth` runs it."""
    _, _, summary, _ = tiny
    row = _rows(summary, "synth")[4]
    assert row["error"] is None and row["command"] is None     # no command has level = "word"
    config = planned_config(config_of(argv_of(summary, 4)))
    report = synthesize(config, tmp_path, target="generic", generic_level="word",
                        log=lambda s: None)
    assert row["figures"]["num_cells"] == report["yosys"]["num_cells"] > 100
    assert row["figures"]["num_wire_bits"] == report["yosys"]["num_wire_bits"]


def argv_of(summary, cache):
    """The shared options of a point, as its plan row's command gives them."""
    return _rows(summary, "plan")[cache]["command"][1:]


def test_an_impossible_point_is_recorded_not_fatal(tiny, capsys):
    _, out, summary, _ = tiny
    for stage in ("plan", "model", "synth"):
        row = _rows(summary, stage)[0.0625]
        assert row["error"] == TOO_SMALL and row["figures"] is None
    # the same point one by one: the command refuses it with the same words
    assert main(["plan", *argv_of(summary, 0.0625), "-o", str(out / "x")]) == 2
    assert capsys.readouterr().err.strip() == "attenio plan: error: " + TOO_SMALL.split(": ", 1)[1]
    assert "## Failed" in (out / "pareto.md").read_text()


def test_a_rerun_does_no_work(tiny, monkeypatch):
    spec, out, _, _ = tiny
    before = (out / "results.jsonl").read_bytes()

    def no_ray():
        raise AssertionError("a rerun with every row present must not start Ray")
    monkeypatch.setattr("attenio.sweep.runner.ray_module", no_ray)
    again = run_sweep(spec, out, stream=io.StringIO())
    assert again.ran == [] and again.reused == 9
    assert (out / "results.jsonl").read_bytes() == before


def test_resume_runs_only_the_missing_rows(tiny, tmp_path):
    spec, out, summary, _ = tiny
    part = tmp_path / "part"
    part.mkdir()
    kept = [r for r in summary.rows if r["stage"] != "model"]
    (part / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kept) + '{"cut')
    again = run_sweep(spec, part, stream=io.StringIO())
    assert sorted(r["key"] for r in again.ran) == sorted(
        r["key"] for r in summary.rows if r["stage"] == "model")
    old = {r["key"]: r["figures"] for r in summary.rows}
    assert all(old[r["key"]] == r["figures"] for r in again.ran)
    # the line cut short was cut off before the new rows: every line is a row again
    lines = (part / "results.jsonl").read_text().splitlines()
    assert len(lines) == len(summary.rows) and read_rows(part / "results.jsonl").keys() == {
        r["key"] for r in summary.rows}


def test_retry_failed_reruns_only_the_failures(tiny, tmp_path):
    spec, out, summary, _ = tiny
    (tmp_path / "results.jsonl").write_bytes((out / "results.jsonl").read_bytes())
    again = run_sweep(spec, tmp_path, retry_failed=True, stream=io.StringIO())
    assert sorted(r["key"] for r in again.ran) == sorted(r["key"] for r in summary.failed)
    assert [r["error"] for r in again.ran] == [TOO_SMALL] * 3      # still impossible


def test_the_command_reports_what_it_did(tiny, capsys):
    spec, out, _, _ = tiny
    assert main(["sweep", str(spec.path), "-o", str(out)]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.startswith("3 points x 3 stages: 0 run now, 9 from earlier runs; 3 rows failed")


def test_a_task_no_node_can_hold_is_a_failed_row(ray_session, tmp_path):
    (tmp_path / "big.toml").write_text('stages = ["synth"]\n[base]\nmacs = "1x2"\nhead_dim = 8\n'
                                       'exp_units = 1\n[synth]\nmemory_gib = 100000\n')
    summary = run_sweep(load_spec(tmp_path / "big.toml"), tmp_path / "out", stream=io.StringIO())
    (row,) = summary.rows
    assert row["error"].startswith("ConfigError: no Ray node has 1 CPU and 100000.0 GiB of memory "
                                   "for tasks (the largest has ")


def test_the_front_is_the_undominated_points():
    class S:
        varied, points = [], []
    objs = collect(S, [])
    objs.update({
        "a": {"cycles": 10, "area": 4, "traffic": 9, "group": "g", "errors": {}},
        "b": {"cycles": 20, "area": 2, "traffic": 9, "group": "g", "errors": {}},
        "c": {"cycles": 20, "area": 4, "traffic": 9, "group": "g", "errors": {}},   # a beats it
        "d": {"cycles": 30, "area": 1, "traffic": 1, "group": "h", "errors": {}},   # alone
        "e": {"cycles": None, "area": 1, "traffic": 1, "group": "g", "errors": {}},
    })
    assert front(objs) == {"g": ["a", "b"], "h": ["d"]}


@pytest.mark.parametrize("body, words", [
    ('[grid]\nmacs = ["4y4"]\n', "'4y4' is not of the form PxQ"),
    ('[base]\nmacz = "4x4"\n', "unknown option 'macz'"),
    ('stages = ["plan", "place"]\n', "stages must be a non-empty list of plan, model, synth, sim"),
    ('[synth]\ntarget = "ice40"\n', "[synth] target must be 'generic' or 'ecp5', not 'ice40'"),
    ('[sim]\ninput_kind = "uniform"\n', "[sim] input_kind must be 'gaussian' or 'spread' or "
                                         "'equal' or 'dominant' or 'dominant_far' or "
                                         "'ascending', not 'uniform'"),
    ('[sim]\nsimulator = "xcelium"\n', "[sim] simulator must be 'verilator' or 'icarus'"),
])
def test_a_bad_spec_is_one_line_before_any_work(tmp_path, capsys, body, words):
    (tmp_path / "bad.toml").write_text(body)
    assert main(["sweep", str(tmp_path / "bad.toml"), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and words in err
    assert not (tmp_path / "out").exists()


def test_without_ray_the_command_says_so_in_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "s.toml").write_text('[base]\nmacs = "2x2"\n')
    monkeypatch.setitem(__import__("sys").modules, "ray", None)
    assert main(["sweep", str(tmp_path / "s.toml"), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err == ("attenio sweep: error: attenio sweep runs its points on Ray, which is not "
                   "installed: pip install 'attenio[sweep]' (or 'ray')")


ROW = ('{"key": "k0", "point": "p", "stage": "plan", "error": null, "config": null, '
       '"figures": null}')


@pytest.mark.parametrize("line", ["not json", "[1, 2]", '{"key": 5}',
                                  '{"key": "k", "point": "p", "error": null}', ""])
def test_a_line_that_is_not_a_row_is_refused_with_its_number(tmp_path, line):
    table = tmp_path / "results.jsonl"
    table.write_text(f"{ROW}\n{line}\n{ROW}\n")
    with pytest.raises(ConfigError, match=f"results table '{table}', line 2: not a results row"):
        read_rows(table)


def test_a_last_line_without_its_newline_is_skipped(tmp_path):
    table = tmp_path / "results.jsonl"
    table.write_text(f"{ROW}\n{ROW[:20]}")
    assert list(read_rows(table)) == ["k0"]


def test_a_spec_past_the_point_cap_is_refused_before_its_grid_is_expanded(tmp_path,
                                                                           monkeypatch):
    from attenio.sweep.spec import MAX_POINTS

    side = 101          # 101 x 101 > MAX_POINTS
    assert side * side > MAX_POINTS
    values = ", ".join(str(n) for n in range(1, side + 1))
    (tmp_path / "big.toml").write_text(f"[grid]\nseq_len = [{values}]\nheads = [{values}]\n"
                                       f"[[points]]\nmacs = \"2x2\"\n")

    def no_expansion(*axes):
        raise AssertionError("the grid was expanded before its size was checked")
    monkeypatch.setattr("attenio.sweep.spec.itertools.product", no_expansion)
    with pytest.raises(ConfigError, match=f"{side * side + 1} points, more than the "
                                          f"{MAX_POINTS} a sweep may hold"):
        load_spec(tmp_path / "big.toml")
