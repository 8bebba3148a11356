"""The FARNN engine's cocotb benches: :mod:`.engine` (the engine top end to end, one
layer's FW then BW pass, every output checked against the golden model), :mod:`.io` (that
bench's data: the arrays, their streams and shapes, shared with the trainer's ``rtl``
backend), :mod:`.mvm` (one MVM unit against the golden MVM) and :mod:`.tops` (the MVM
unit's AXI4-Stream test top)."""
