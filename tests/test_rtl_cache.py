"""The key under which `attenio sim` reuses generated Verilog: every RTL source is in it.

`attenio.sim.e2e.rtl_digest` hashes the generator's RTL at any depth (the formats'
builders in hdl/formats/ too) and the ECP5 primitives' models, under their relative
paths; `cached_verilog` generates again when the digest or the Plan differs. The trees
edited here are copies of hdl/ in a temporary folder.
"""

import shutil
from functools import partial
from pathlib import Path

import pytest

import attenio.gen.build as build
import attenio.hdl
import attenio.sim.e2e as e2e
from attenio import preset

HDL = Path(attenio.hdl.__file__).parent


@pytest.fixture
def tree(tmp_path):
    """A copy of the RTL's sources (hdl/), to edit."""
    copy = tmp_path / "hdl"
    shutil.copytree(HDL, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_an_unchanged_tree_keeps_its_key_wherever_it_is(tree):
    assert e2e.rtl_digest() == e2e.rtl_digest()
    assert e2e.rtl_digest(tree) == e2e.rtl_digest()


def test_a_change_to_a_format_builder_changes_the_key(tree):
    before = e2e.rtl_digest(tree)
    fp = tree / "formats" / "fp.py"
    fp.write_text(fp.read_text() + "\n# a changed builder\n")
    assert e2e.rtl_digest(tree) != before


def test_a_new_or_moved_source_at_any_depth_changes_the_key(tree):
    before = e2e.rtl_digest(tree)
    (tree / "formats" / "extra.py").write_text("")
    added = e2e.rtl_digest(tree)
    assert added != before
    (tree / "formats" / "extra.py").rename(tree / "extra.py")    # same bytes, elsewhere
    assert e2e.rtl_digest(tree) not in (before, added)


def test_a_change_to_a_primitive_model_changes_the_key(tmp_path, monkeypatch):
    before = e2e.rtl_digest()
    models = []
    for f in e2e.primitive_models():
        copy = tmp_path / f.name
        copy.write_text(f.read_text() + "// changed\n")
        models.append(copy)
    assert models, "the ECP5 flavour simulates primitive models beside the RTL"
    monkeypatch.setattr(e2e, "primitive_models", lambda: models)
    assert e2e.rtl_digest() != before


def test_generated_verilog_is_reused_only_for_the_same_plan_and_rtl(tmp_path, tree,
                                                                    monkeypatch):
    """A change to a format builder must not simulate Verilog generated before it."""
    calls = []

    def fake_generate(config, out, log=print):
        calls.append(out)
        (out / f"{build.TOP_NAME}.v").write_text("module attenio_top; endmodule\n")
    monkeypatch.setattr(build, "generate", fake_generate)
    monkeypatch.setattr(e2e, "rtl_digest", partial(e2e.rtl_digest, tree))
    out = tmp_path / "build"
    out.mkdir()
    quiet = dict(log=lambda s: None)
    e2e.cached_verilog(preset("small"), out, "axiram", **quiet)
    e2e.cached_verilog(preset("small"), out, "axiram", **quiet)
    assert len(calls) == 1                       # same Plan, same RTL: reused
    fp = tree / "formats" / "fp.py"
    fp.write_text(fp.read_text() + "\n# a changed builder\n")
    e2e.cached_verilog(preset("small"), out, "axiram", **quiet)
    assert len(calls) == 2                       # the RTL changed: generated again
    e2e.cached_verilog(preset("small"), out, "axiram", **quiet)
    assert len(calls) == 2
    e2e.cached_verilog(preset("paper"), out, "axiram", **quiet)
    assert len(calls) == 3                       # another Plan: generated again


def test_verilog_written_over_since_its_stamp_is_generated_again(tmp_path, monkeypatch):
    """`attenio sim`, then `attenio gen` of another design into the same directory, then the
    same `sim`: the stamp still names the first Plan, but the Verilog is another design's,
    so it is generated again rather than simulated (and reported bit-exact) as the first."""
    calls = []

    def fake_generate(config, out, log=print):
        calls.append(out)
        (out / f"{build.TOP_NAME}.v").write_text(f"// {config.budget.macs} MACs\n")
    monkeypatch.setattr(build, "generate", fake_generate)
    out = tmp_path / "build"
    out.mkdir()
    quiet = dict(log=lambda s: None)
    _, v, _ = e2e.cached_verilog(preset("small"), out, "axiram", **quiet)
    mine = v.read_text()
    v.write_text("// the 2x2 that `attenio gen --macs 2x2` wrote here\n")
    e2e.cached_verilog(preset("small"), out, "axiram", **quiet)
    assert len(calls) == 2 and v.read_text() == mine
    e2e.cached_verilog(preset("small"), out, "axiram", **quiet)
    assert len(calls) == 2                       # the stamp now names this Verilog again


def _fake_verilator(monkeypatch, builds):
    """`attenio.sim.fast.build` with the Verilator call replaced by one that writes an empty
    executable where the real one would, counting the calls in `builds`."""
    import subprocess

    import attenio.sim.fast as fast

    def run(args, **kwargs):
        obj = Path(args[args.index("-Mdir") + 1])
        obj.mkdir(parents=True)
        (obj / "fastsim").write_text("")
        builds.append(args)
        return subprocess.CompletedProcess(args, 0)
    monkeypatch.setattr(fast.subprocess, "run", run)
    return fast


def test_a_simulator_is_built_once_per_verilog_whatever_ran_between(tmp_path, monkeypatch):
    """The fast model is keyed by the Verilog's bytes: the same design written again (another
    N of the same hardware, after another format's run in the same folder) reuses its model,
    and only the most recently used models are kept."""
    builds = []
    fast = _fake_verilator(monkeypatch, builds)
    models = tmp_path / "models"
    args = dict(toplevel="attenio_sim_top", beat=8, depth=64, addr_width=8,
                log=lambda s: None)

    def design(text):
        v = tmp_path / "attenio_sim_top.v"
        v.write_text(text)
        return v
    int8 = fast.build(design("// int8\n"), cache_dir=models, **args)
    fp16 = fast.build(design("// fp16\n"), cache_dir=models, **args)
    assert int8 != fp16 and len(builds) == 2
    assert fast.build(design("// int8\n"), cache_dir=models, **args) == int8
    assert len(builds) == 2                      # written again, same bytes: reused
    assert fast.build(design("// int8\n"), cache_dir=models, cxx_opt="-O0", **args) != int8
    assert len(builds) == 3                      # another optimisation: another model
    for i in range(fast.KEEP_BUILDS):
        fast.build(design(f"// design {i}\n"), cache_dir=models, **args)
    kept = [d for d in models.iterdir() if not d.name.startswith(".")]
    assert len(kept) == fast.KEEP_BUILDS and not any(d.name.startswith(".") for d in
                                                     models.iterdir())
    assert not int8.exists()                     # the least recently used went first


def test_a_cocotb_build_is_made_from_its_own_copy_of_the_verilog(tmp_path):
    """cocotb's runner rebuilds when its source is newer than the model: the build folder
    holds its own copy of the Verilog, named by its digest, so rewriting the design in the
    output folder with the same bytes leaves the model current."""
    v = tmp_path / "attenio_top.v"
    v.write_text("// int8\n")
    first, copy = e2e.cocotb_build_dir(tmp_path / "sim", v)
    assert copy.read_text() == "// int8\n" and copy.parent == first
    mtime = copy.stat().st_mtime_ns
    v.write_text("// fp16\n")
    other, _ = e2e.cocotb_build_dir(tmp_path / "sim", v)
    v.write_text("// int8\n")
    again, copy = e2e.cocotb_build_dir(tmp_path / "sim", v)
    assert again == first != other and copy.stat().st_mtime_ns == mtime
