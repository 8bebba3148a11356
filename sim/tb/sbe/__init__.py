"""The SBE engine's cocotb bench: :mod:`.engine` (the engine end to end under Verilator on
the generic :class:`~nnrtl.sim.tb.engine_bench.EngineBench`, every layer's h vectors
checked in order against the bit-accurate golden model; run by ``nnrtl sim sbe``)."""
