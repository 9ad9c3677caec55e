"""attenio.model: performance models, no simulation of the Verilog.

The cycle model of the generated accelerator (its latencies asked of the hdl blocks),
the planner that weighs mappings with it, the baselines' models, the paper's timing
and the comparison `attenio compare` prints. `attenio.sim` runs the Verilog; this
package projects what it would do at sizes simulation cannot reach.
"""
