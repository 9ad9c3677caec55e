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
