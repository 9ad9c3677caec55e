"""The testbench library the cocotb benches share, one module per idea.

* `rng`: one seeded generator per test, its seed logged and printed for replay.
* `clock`: the clock period, starting the clock, the reset sequence.
* `streams`: valid/ready sources and sinks for Amaranth `stream.Signature` ports,
  and packing of their `StructLayout` payloads.
* `axi_memory`: cocotbext-axi's AxiRam with random latency, a pipelined read
  latency, back-pressure and SLVERR injection.
* `axi_monitor`: the AXI4 protocol rules a master must keep, checked on every
  handshake.
* `lite`: CSRs by name over AXI4-Lite.
* `counters`: the performance counters, as the register map defines them.
* `backdoor`: the in-design memory model (`attenio.hdl.sim_memory`) through its
  backdoor.
* `uart`: a UART peer on a design's `rx`/`tx` pins.

Nothing is imported here: `counters` serves the board's host script, which runs
without cocotb.
"""
