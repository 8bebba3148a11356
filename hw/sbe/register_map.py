"""The SBE's AXI4-Lite register map, from its configuration (the C header and the
manifest are emitted from it)."""

from ..bus import Access, Field, Register, RegisterMap

__all__ = ["register_map"]


def register_map(config):
    """The AXI4-Lite :class:`~nnrtl.hw.bus.RegisterMap` of an SBE of ``config``: control,
    status, the run's registers, the configuration constants and the 64-bit counters."""
    batch_norm = Field("batch_norm", 1, doc="apply the batch normalisation "
                       "(configurations with batch_norm)")
    counters = {
        "cycles": "Cycles of the last run, start to last hidden value",
        "stall_cycles": "Cycles the array waited for h (the data dependency)",
        "weight_wait_cycles": "Cycles the array waited for a weight block",
        "input_wait_cycles": "Cycles the array waited for x vectors",
        "handover_wait_cycles": "Cycles a hand-over waited for the post-processing "
                                "drain or for room in the output FIFO",
        "column_steps": "Column steps issued",
        "useful_macs": "Multiply-accumulates issued (pes per column step), the "
                       "zero rows and columns of padded sizes included",
        "weight_words": "Weights received (header excluded)",
    }
    return RegisterMap([
        Register("control", Access.PULSE, doc="Write 1 to START to run; CLEAR zeroes "
                 "the counters (a start does too)",
                 fields=[Field("start", 0, doc="run `steps` steps of layer `layer`"),
                         Field("clear", 1, doc="zero the performance counters")]),
        Register("status", Access.RO, doc="Engine state",
                 fields=[Field("busy", 0, doc="a run is in progress"),
                         Field("done", 1, doc="the last run finished")]),
        Register("steps", Access.RW, doc="Time steps of the next run"),
        Register("layer", Access.RW, doc="Layer of the next run (0 first); layers "
                 "after the first read hidden_size inputs"),
        Register("flags", Access.RW, reset=int(config.batch_norm) << batch_norm.offset,
                 doc="Run options",
                 fields=[Field("keep_state", 0, doc="continue from the h and c of the "
                               "previous run instead of zero"),
                         batch_norm]),
        *(Register(name, Access.RO, doc=f"Configuration: {name}")
          for name in config._CONSTANTS),
        *(Register(name, Access.RO, width=64, doc=doc) for name, doc in counters.items()),
    ])
