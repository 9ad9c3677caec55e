"""Whether a simulation fits this machine's memory, known before anything is elaborated.

A long run's host memory goes to the golden model (its chunk of scores per Q row),
the float64 reference, the inputs and the memory image (held as arrays, as the
in-design memory's initial contents through elaboration and Verilation, and, on
the cocotb path, byte by byte in the backdoor loader). All of them grow with N
and the heads, so a sequence length too large for the machine is refused at once
with the size it would need, instead of failing after minutes of elaboration.
"""

import os

from attenio.errors import ConfigError

from . import golden

__all__ = ["need_bytes", "available_bytes", "check_fits"]

#: host bytes per word of the in-design memory model while it is elaborated, converted,
#: Verilated and simulated: its word array is a Verilog module of its own, with no initial
#: contents (`attenio.hdl.sim_memory.STORAGE_VERILOG`); at N = 131,072 (1,051,136 words) no
#: process of `attenio sim --blocks first,last` took more than 300 MB, so this is a margin
ELABORATION_BYTES_PER_WORD = 256
#: host bytes per image byte in the cocotb bench's backdoor loader (a dict entry a byte)
BACKDOOR_BYTES_PER_BYTE = 160


def need_bytes(plan, *, seq_len, heads, engine, memory, kv_len=None, kv_heads=None,
               golden_rows=None):
    """{part: bytes} of host memory a run of `seq_len` query rows of `heads` heads needs,
    against `kv_len` K/V rows (default seq_len) of `kv_heads` K/V heads (default heads), the
    golden model and the reference computing `golden_rows` of them (default all: block
    ranges compute their own rows only)."""
    d = plan.workload.head_dim
    kv_len = seq_len if kv_len is None else kv_len
    kv_heads = heads if kv_heads is None else kv_heads
    golden_rows = seq_len if golden_rows is None else golden_rows
    rows = -(-golden_rows // plan.a) * plan.a
    q_tensor, kv_tensor = heads * seq_len * d, kv_heads * kv_len * d
    fmt = plan.config.format
    tensors = 2 * q_tensor + 2 * kv_tensor                 # Q, O and K, V
    image = (q_tensor + 2 * kv_tensor) * fmt.element_bytes + q_tensor * fmt.out_bytes
    parts = {
        "golden model": golden.attention_peak_bytes(heads=heads, rows=rows, head_dim=d),
        "float64 reference": golden.reference_peak_bytes(heads=heads, rows=golden_rows,
                                                          seq_len=kv_len, head_dim=d),
        # float64 draws, int8 copies, the segments, the npz and the flat image
        "inputs and memory image": 6 * tensors + 4 * image,
    }
    if memory == "model":
        beat = plan.budget.axi_data_bits // 8
        parts["memory model elaboration"] = ELABORATION_BYTES_PER_WORD * (image // beat)
    if engine == "cocotb" and memory == "model":
        parts["cocotb backdoor loader"] = BACKDOOR_BYTES_PER_BYTE * image
    return parts


def available_bytes():
    """Memory available to a new process (MemAvailable), or the physical memory."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _gib(n):
    return f"{n / 2 ** 30:.1f} GiB"


def check_fits(plan, *, seq_len, heads, engine, memory, available=None, kv_len=None,
               kv_heads=None, golden_rows=None):
    """Raise ConfigError naming the size needed if the run would not fit in memory."""
    parts = need_bytes(plan, seq_len=seq_len, heads=heads, engine=engine, memory=memory,
                       kv_len=kv_len, kv_heads=kv_heads, golden_rows=golden_rows)
    total = sum(parts.values())
    available = available_bytes() if available is None else available
    if total > available:
        biggest = ", ".join(f"{name} {_gib(b)}" for name, b in
                            sorted(parts.items(), key=lambda kv: -kv[1])[:2])
        raise ConfigError(f"N = {seq_len} with {heads} head(s) needs about {_gib(total)} of host "
                          f"memory ({biggest}), more than the {_gib(available)} available here")
    return total
