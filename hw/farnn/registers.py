"""The FARNN engine's AXI4-Lite register map and its stream layouts, from its
configuration (the C header and the manifest are emitted from the same objects)."""

from ..bus import Access, Field, Register, RegisterMap
from .activation import SAVED
from .config import FP32_BITS

__all__ = ["PHASES", "register_map", "stream_words"]

#: Values of the ``phase`` register.
PHASES = {"fw": 0, "bw": 1}

#: The 64-bit counters, in register order.
COUNTERS = {
    "cycles": "Cycles of the last run, start to its last output cell written",
    "mac_cycles": "Cycles in which unit 0 fed an element to its chains (all units "
                  "run in lockstep)",
    "load_cycles": "Cycles unit 0 spent loading weights (its RESTART cycles included), "
                   "since the last clear",
    "activation_wait_cycles": "Cycles the next step's feed waited for its element of "
                              "the previous step's output (the recurrence; with a "
                              "projection also the W_hr job's wait for h)",
    "useful_macs": "Multiply-accumulates of real rows (padding rows excluded): units * "
                   "n_in per cell of a gate matrix's job that ran the MVM units, n_in "
                   "per cell of a projection job",
}


def stream_words(config):
    """fp32 words per beat of each AXI4-Stream port: ``weights`` (``chains``), ``imvm``
    (``units``: the host's input MVM of one cell, gate order), ``h`` (1), ``saved`` (FW save
    stream: :data:`~nnrtl.hw.farnn.activation.SAVED` then the state before the step, LSTM
    ``c_{t-1}``, GRU ``h_{t-1}``), ``bw_in`` (``saved`` read back plus ``dy``; with a
    projection without ``dy``, which then comes on ``dy``) and ``deltas`` (BW: the ``units``
    W-side gate deltas, plus GRU's ``dhn``; LSTM 4, GRU 4). With a projection also ``dy``
    (BW in, 1: the output's delta, ``P`` per vector) and ``proj`` (out, 1: FW ``r = W_hr
    h``, BW ``dr^ = fa(dv, dy)``)."""
    saved = len(SAVED[config.cell]) + 1
    words = {"weights": config.chains, "imvm": config.units, "h": 1, "saved": saved,
             "bw_in": saved + (not config.proj_size),
             "deltas": config.units + (config.cell == "gru")}
    if config.proj_size:
        words.update(dy=1, proj=1)
    return words


def stream_bits(config):
    """``{port: tdata bits}``: :func:`stream_words` times 32."""
    return {name: words * FP32_BITS for name, words in stream_words(config).items()}


def register_map(config):
    """The AXI4-Lite :class:`~nnrtl.hw.bus.RegisterMap` of a FARNN engine: control, status,
    the run's registers, configuration constants and the 64-bit counters."""
    return RegisterMap([
        Register("control", Access.PULSE, doc="Write 1 to LOAD to accept a pass's weight "
                 "stream, to START to run; CLEAR zeroes the counters (a start does too, "
                 "but for load_cycles)",
                 fields=[Field("start", 0, doc="run `steps` steps of pass `phase`"),
                         Field("load", 1, doc="accept the weights of pass `phase` on "
                               "s_weights: the units one after another, tlast closing "
                               "each unit's load (with a projection: its gate matrix's "
                               "and its projection block's; GRU FW: then the bR_n "
                               "beats)"),
                         Field("clear", 2, doc="zero the performance counters")]),
        Register("status", Access.RO, doc="Engine state and sticky errors",
                 fields=[Field("busy", 0, doc="a run is in progress"),
                         Field("done", 1, doc="the last run finished"),
                         Field("loading", 2, doc="a weight load is in progress"),
                         Field("load_error", 3, doc="a unit's weight load had the wrong "
                               "length (tlast misplaced); sticky"),
                         Field("vector_error", 4, doc="a unit saw a misplaced vector "
                               "last; sticky"),
                         Field("run_error", 5, doc="start refused: batch 0 or above "
                               "max_batch, or steps 0; sticky until the next start")]),
        Register("phase", Access.RW, doc="Pass of the next load and run: 0 FW (R_k), "
                 "1 BW (R_k^T)"),
        Register("steps", Access.RW, doc="Time steps T of the next run"),
        Register("batch", Access.RW, reset=config.batch, doc="Sequences B of the next "
                 "run, 1 to max_batch"),
        *(Register(name, Access.RO, doc=f"Configuration: {name}")
          for name in CONSTANTS),
        *(Register(name, Access.RO, width=64, doc=doc) for name, doc in COUNTERS.items()),
    ])


#: Read-only configuration registers.
CONSTANTS = ("units", "hidden_size", "chains", "chain_length", "max_batch", "split")


def register_constants(config):
    """``{register: value}`` of the configuration registers."""
    return {"units": config.units, "hidden_size": config.hidden_size,
            "chains": config.chains, "chain_length": config.chain_length,
            "max_batch": config.batch, "split": config.split_factor}
