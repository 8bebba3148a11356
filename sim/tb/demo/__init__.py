"""The demo engine's cocotb bench: :mod:`.engine` (the engine end to end under Verilator on
the generic :class:`~nnrtl.sim.tb.engine_bench.EngineBench`, every result checked in
order against the golden dot products; run by ``nnrtl sim demo``)."""
