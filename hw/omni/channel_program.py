"""The programs of one LSTM FW cell and one BP cell on a channel (spec §1.1, §1.2).

A program is a list of :class:`Step`: a :class:`~.channel_config.ChannelInstruction` and
where in the scratchpad its operands come from and its results go. The scratchpad is a set
of named flat vectors (fp bit patterns); an :class:`Access` names one and gives, for every
operand word the instruction takes (or result word it gives), the element's index. The
channel never sees the addresses: the scratchpad (the top's, or the bench's model) streams
the beats in program order; the golden model (:mod:`nnrtl.sim.golden.omni.channel`) and
the bench read the same steps.

Layout (decisions, spec §3.3 [U])
---------------------------------
- *Vectors* are cut into beats of ``P`` = ``pes_per_channel`` words: element ``j`` of a
  vector of ``n`` sits in lane ``j mod P`` of beat ``j div P``. An element-wise operation
  is one instruction of length ``n div P`` on all ``P`` lanes plus, when ``P`` does not
  divide ``n``, one of length 1 on ``n mod P`` lanes (:func:`elementwise`).
- *MVM rows are spread over the lanes (SIMT)*: a round of ``P`` rows is one instruction,
  row ``start + l`` on lane ``l``; the row's words stream on ``i_input1`` (one beat per
  element, a word per lane), the vector on the broadcasting queue (the same word to every
  lane). A round's ``lanes`` results form one beat.
- *FW cell* (eq. 1), in PyTorch's gate order i, f, g (the paper's c), o: per gate and
  round, an MVM of ``[W_g U_g b_g]`` rows against ``z = [x_t; h_{t-1}; 1]`` (the bias is
  the last MAC, ``b * 1`` being exact: no separate add pass), through the sigmoid (i, f,
  o) or the tanh unit (g); then ``a = f * s_{t-1}``, ``b = i * c``, ``s_t = a + b``,
  ``tanh(s_t)`` (an EW multiply by a broadcast 1.0, exact, routed through the tanh
  unit: the channel applies activations to PE results only), ``h_t = o * tanh(s_t)``.
- *BP cell* (eqs. 2-3), from the saved gates i, f, c, o and s_t, s_{t-1}: ``tanh(s_t)``
  again through the tanh unit (baseline BP: FW saves gates and states, spec §1.1); the
  BP-EW-P1 vectors of :mod:`nnrtl.gen.omni.cell` with the derivatives ``x (1 - x)`` and
  ``1 - x^2`` formed on the PEs (``1 - x`` an EW add with ``subtract`` and a broadcast
  1.0: spec §3.3's [D]; the channel has exactly one sigmoid and one tanh unit and no
  derivative unit), products associated left to right as ``cell.py`` writes them; then
  BP-EW-P2; the gate gradients written into one vector ``dgates`` (4H, gate order i, f,
  g, o); eq. 2 as an MVM per round of columns of the same weight array (the scratchpad
  reads it transposed: lane ``l`` streams column ``k``), ``dgates`` broadcast; eq. 3 as
  outer products, ``dgates[r]`` once per lane and ``[x_t; h_{t-1}]`` broadcast, then
  the ``+=`` over timestamps as an EW add with the accumulated gradient (``dw``,
  ``db``: the bias gradient is ``dgates`` accumulated, [D]).
"""

import dataclasses

import numpy as np

from .channel_config import Activation, ChannelConfig, ChannelInstruction, Source
from .config import OmniJob, OmniMode

__all__ = ["Access", "Step", "GATES", "elementwise", "mvm_steps", "fw_program",
           "fw_ew_steps", "bp_program", "bp_p1_steps", "bp_p2_steps", "inner_steps",
           "outer_steps", "vector_sizes", "FW_INPUTS", "BP_INPUTS"]

#: The gates in PyTorch's order (``c`` is PyTorch's ``g``, the paper's cell gate).
GATES = ("i", "f", "c", "o")


@dataclasses.dataclass(frozen=True, eq=False)
class Access:
    """Scratchpad words of one operand or result of a step.

    Attributes
    ----------
    name : str
        The vector.
    index : ndarray of int
        Element indices: ``(beats, lanes)`` for a lane operand or a result (beat ``k``,
        lane ``l``), ``(words,)`` for a broadcast operand.
    """

    name: str
    index: np.ndarray


@dataclasses.dataclass(frozen=True, eq=False)
class Step:
    """One instruction with its scratchpad accesses (``operand1``/``operand2`` shaped
    by the instruction's sources; ``result`` ``(out_beats, lanes)``)."""

    instruction: ChannelInstruction
    operand1: Access
    operand2: Access
    result: Access


def _rounds(count, lanes):
    return [(start, min(lanes, count - start)) for start in range(0, count, lanes)]


def _lane_index(offset, beats, lanes, stride=1):
    """Indices ``offset + (k * lanes + l) * stride``: element ``k * lanes + l``."""
    grid = np.arange(beats)[:, None] * lanes + np.arange(lanes)[None, :]
    return offset + grid * stride


def elementwise(config, mode, result, operand1, operand2, length, *, subtract=False,
                activation=Activation.NONE):
    """Steps of an element-wise operation over ``length`` elements.

    ``result``, ``operand1``, ``operand2`` are ``(name, offset)``: elements
    ``offset .. offset + length - 1`` of the vector; an operand given as ``(name, word,
    "broadcast")`` is the single word ``word`` of ``name`` from the broadcasting queue.
    """
    lanes = config.pes_per_channel
    steps = []
    full, tail = divmod(length, lanes)
    for beats, width, first in ((full, lanes, 0), (1 if tail else 0, tail, full * lanes)):
        if not beats:
            continue
        job = OmniJob(mode, beats, subtract)

        def access(spec):
            if len(spec) == 3:
                return Source.BROADCAST, Access(spec[0], np.full(beats, spec[1]))
            return Source.LANES, Access(spec[0], _lane_index(spec[1] + first, beats, width)
                                        if width == lanes else
                                        spec[1] + first + np.arange(width)[None, :])

        source1, access1 = access(operand1)
        source2, access2 = access(operand2)
        out = access((result[0], result[1]))[1]
        steps.append(Step(ChannelInstruction(job, width, source1, source2, activation),
                          access1, access2, out))
    return steps


def mvm_steps(config, result, rows, row_length, row_index, vector, activation):
    """One MVM step per round of ``rows`` rows (``rows`` = ``(first, count)``): lane
    ``l`` takes row ``first + start + l``, its element ``k`` at ``row_index(row, k)`` of
    ``weights``; ``vector`` (name) broadcast, elements ``0 .. row_length - 1``."""
    first, count = rows
    steps = []
    for start, lanes in _rounds(count, config.pes_per_channel):
        row = first + start + np.arange(lanes)[None, :]
        k = np.arange(row_length)[:, None]
        steps.append(Step(
            ChannelInstruction(OmniJob(OmniMode.MVM, row_length), lanes, Source.LANES,
                               Source.BROADCAST, activation),
            Access("weights", row_index(row, k)),
            Access(vector, np.arange(row_length)),
            Access(result[0], result[1] + start + np.arange(lanes)[None, :])))
    return steps


#: Vectors a FW program reads: ``weights`` (4H x (I+H+1), row ``r`` = ``[W_ih[r]
#: W_hh[r] b[r]]``), ``z`` (``[x; h_prev; 1]``), ``s_prev``, ``one`` (1.0).
FW_INPUTS = ("weights", "z", "s_prev", "one")
#: Vectors a BP program reads (the FW ones, the saved gates and states, the gradients
#: from above and from t+1, and the gradients accumulated so far).
BP_INPUTS = ("weights", "z", "one", "i", "f", "c", "o", "s", "s_prev", "dy", "dh_next",
             "ds_next", "dw_acc", "db_acc")


def fw_program(config):
    """The FW cell (module docstring): a list of :class:`Step`."""
    if not isinstance(config, ChannelConfig):
        raise TypeError(f"config must be a ChannelConfig, not {config!r}")
    h, k = config.hidden_size, config.fw_row_length
    steps = []
    for g, gate in enumerate(GATES):
        activation = Activation.TANH if gate == "c" else Activation.SIGMOID
        steps += mvm_steps(config, (gate, 0), (g * h, h), k, lambda row, col: row * k + col,
                      "z", activation)
    return steps + fw_ew_steps(config, h)


def fw_ew_steps(config, length):
    """The FW cell's element-wise tail over ``length`` hidden units: ``a = f s_{t-1}``,
    ``b = i c``, ``s_t = a + b``, ``tanh(s_t)``, ``h_t = o tanh(s_t)``."""
    mul, add = OmniMode.EW_MUL, OmniMode.EW_ADD
    steps = elementwise(config, mul, ("a", 0), ("f", 0), ("s_prev", 0), length)
    steps += elementwise(config, mul, ("b", 0), ("i", 0), ("c", 0), length)
    steps += elementwise(config, add, ("s", 0), ("a", 0), ("b", 0), length)
    steps += elementwise(config, mul, ("tanh_s", 0), ("s", 0), ("one", 0, "broadcast"),
                         length, activation=Activation.TANH)
    steps += elementwise(config, mul, ("h", 0), ("o", 0), ("tanh_s", 0), length)
    return steps


def _ew(config, steps, length):
    """An ``ew(mode, out, a, b, **kw)`` that appends the steps of an element-wise
    operation over ``length`` elements (a name is element 0 of that vector)."""
    def ew(mode, out, a, b, **kw):
        steps.extend(elementwise(config, mode, *(v if isinstance(v, tuple) else (v, 0)
                                                 for v in (out, a, b)), length, **kw))
    return ew


def bp_p1_steps(config, length):
    """BP-EW-P1 over ``length`` hidden units (gen/omni/cell.py's formulas, left to
    right): ``tanh(s_t)`` and the ``p_*`` vectors."""
    mul, add = OmniMode.EW_MUL, OmniMode.EW_ADD
    one = ("one", 0, "broadcast")
    steps = []
    ew = _ew(config, steps, length)
    ew(mul, "tanh_s", "s", one, activation=Activation.TANH)
    ew(add, "u_o", one, "o", subtract=True)                 # 1 - o
    ew(mul, "v_o", "tanh_s", "o")
    ew(mul, "p_o", "v_o", "u_o")                            # tanh(s) o (1 - o)
    ew(mul, "q_s", "tanh_s", "tanh_s")
    ew(add, "r_s", one, "q_s", subtract=True)               # 1 - tanh(s)^2
    ew(mul, "p_s", "o", "r_s")
    ew(mul, "ci", "c", "i")
    ew(add, "u_i", one, "i", subtract=True)
    ew(mul, "p_i", "ci", "u_i")                             # c i (1 - i)
    ew(mul, "sf", "s_prev", "f")
    ew(add, "u_f", one, "f", subtract=True)
    ew(mul, "p_f", "sf", "u_f")                             # s_{t-1} f (1 - f)
    ew(mul, "cc", "c", "c")
    ew(add, "r_c", one, "cc", subtract=True)
    ew(mul, "p_c", "i", "r_c")                              # i (1 - c^2)
    return steps


def bp_p2_steps(config, length, gates=None):
    """BP-EW-P2 over ``length`` hidden units: the gate gradients, written at offsets
    ``gates`` (i, f, c, o) of ``dgates`` (default ``k * length``), and ``dS_{t-1}``."""
    mul, add = OmniMode.EW_MUL, OmniMode.EW_ADD
    gates = gates or [g * length for g in range(4)]
    steps = []
    ew = _ew(config, steps, length)
    ew(add, "dh", "dy", "dh_next")                          # dY_t + dH_t
    ew(mul, ("dgates", gates[3]), "dh", "p_o")              # do^
    ew(mul, "e", "dh", "p_s")
    ew(add, "ds", "ds_next", "e")                           # dS_t + dh p_s
    ew(mul, ("dgates", gates[0]), "ds", "p_i")              # di^
    ew(mul, ("dgates", gates[1]), "ds", "p_f")              # df^
    ew(mul, ("dgates", gates[2]), "ds", "p_c")              # dc^
    ew(mul, "ds_prev", "ds", "f")                           # dS_{t-1} = ds p_S
    return steps


def inner_steps(config, columns, first=0):
    """Eq. 2 over ``columns`` columns of the weight array from ``first``:
    ``dz[col] = weights[:, col] . dgates``, a round of columns per step."""
    k = config.fw_row_length
    return mvm_steps(config, ("dz", first), (first, columns), 4 * config.hidden_size,
                lambda col, r: r * k + col, "dgates", Activation.NONE)


def outer_steps(config, rows, first=0):
    """Eq. 3 over ``rows`` rows of ``dgates`` from row ``first``: ``dw_cell = dgates (x)
    z[:I+H]``, a round of rows per step, then ``dw = dw_acc + dw_cell``."""
    z_size = config.input_size + config.hidden_size
    add = OmniMode.EW_ADD
    steps = []
    for start, lanes in _rounds(rows, config.pes_per_channel):
        row = first + start + np.arange(lanes)[None, :]
        col = np.arange(z_size)[:, None]
        steps.append(Step(
            ChannelInstruction(OmniJob(OmniMode.OUTER, z_size), lanes, Source.LANES,
                               Source.BROADCAST),
            Access("dgates", row), Access("z", np.arange(z_size)),
            Access("dw_cell", row * z_size + col)))
        steps.append(Step(
            ChannelInstruction(OmniJob(add, z_size), lanes),
            Access("dw_acc", row * z_size + col), Access("dw_cell", row * z_size + col),
            Access("dw", row * z_size + col)))
    return steps


def bp_program(config):
    """The BP cell (module docstring): a list of :class:`Step`."""
    if not isinstance(config, ChannelConfig):
        raise TypeError(f"config must be a ChannelConfig, not {config!r}")
    h = config.hidden_size
    steps = bp_p1_steps(config, h) + bp_p2_steps(config, h)
    # eq. 2: dz = [dx; dh_prev] = weights[:, :I+H]^T dgates
    steps += inner_steps(config, config.input_size + h)
    # eq. 3: dw_cell = dgates (x) z[:I+H], then dw += dw_cell; db += dgates
    steps += outer_steps(config, 4 * h)
    steps += elementwise(config, OmniMode.EW_ADD, ("db", 0), ("db_acc", 0), ("dgates", 0),
                         4 * h)
    return steps


def vector_sizes(config):
    """The length of every scratchpad vector the programs touch, by name."""
    h, i_size = config.hidden_size, config.input_size
    sizes = {"weights": 4 * h * config.fw_row_length, "z": config.fw_row_length, "one": 1,
             "dgates": 4 * h, "dz": i_size + h, "dw_acc": 4 * h * (i_size + h),
             "dw_cell": 4 * h * (i_size + h), "dw": 4 * h * (i_size + h), "db_acc": 4 * h,
             "db": 4 * h}
    for program in (fw_program(config), bp_program(config)):
        for step in program:
            for access in (step.operand1, step.operand2, step.result):
                sizes.setdefault(access.name, h)
    return sizes
