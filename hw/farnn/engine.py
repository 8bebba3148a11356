# amaranth: UnusedElaboratable=no
"""The FARNN engine top (Cho et al., TPDS 2022, Sec. 5, Fig. 3): ``units`` MVM units in
lockstep, the FW and BW activation units, the on-chip vector and state buffers, the
AXI4-Stream edges and the AXI4-Lite registers. One run is one layer pass, FW or BW.

Scope: LSTM and GRU, and LSTM with a recurrent projection (``proj_size = P > 0``,
``nn.LSTM(proj_size=P)``): the MVM units run the projection too, its rows cut over the
units in contiguous blocks of ``ceil(P / units)``; a PE holds its gate matrix from weight
address 0 and its projection rows from ``D_m`` (the gate matrix's words per PE,
:attr:`MatrixShape.weights_per_pe`; :class:`~nnrtl.hw.farnn.mvm.MVMUnit`'s ``base``). The
parts are the methods of :class:`~nnrtl.hw.farnn.datapath.EngineDatapath` and
:class:`~nnrtl.hw.farnn.sinks.CellSinks`.
"""

from amaranth.hdl import Module
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from ..bus import AXI4LiteSignature, AXI4StreamSignature
from .activation import BwActivation, FwActivation
from .config import FarnnConfig
from .datapath import EngineDatapath
from .registers import register_map, stream_bits

__all__ = ["FarnnEngine"]


def _check(config):
    if not isinstance(config, FarnnConfig):
        raise TypeError(f"config must be a FarnnConfig, not {config!r}")
    if not config.fits:
        raise ValueError(f"weights per PE ({config.max_weights_per_pe}) must fit "
                         f"weight_depth ({config.weight_depth})")


class FarnnEngine(wiring.Component):
    """The FARNN engine: one layer pass (FW or BW) per run (ports, data flow and
    schedule: Notes below).

    Parameters
    ----------
    config : FarnnConfig
        Its weights must fit the PEs (:attr:`FarnnConfig.fits`).

    Attributes
    ----------
    s_axil : In(AXI4LiteSignature)
        :attr:`registers`.
    s_weights, s_imvm, s_bw : In(AXI4StreamSignature)
    m_h, m_saved, m_deltas : Out(AXI4StreamSignature)
        Notes below; widths :func:`~nnrtl.hw.farnn.registers.stream_bits`.
    s_dy : In(AXI4StreamSignature), m_proj : Out(AXI4StreamSignature)
        With a projection only (Notes below).
    registers : RegisterMap
    fw_latency, bw_latency : int
        The activation units' latencies.

    Raises
    ------
    TypeError
        If ``config`` is not a FarnnConfig.
    ValueError
        If the weights do not fit the PEs.

    Notes
    -----
    **Ports** (AXI4-Stream, fp32 words little-endian in ``tdata``, word ``i`` in bits
    ``32 i .. 32 i + 31``; :func:`~nnrtl.hw.farnn.registers.stream_words`)

    ``s_weights`` (``chains`` words): after a LOAD, the pass's weights in
    :func:`nnrtl.gen.farnn.host.pack_weights` order, units one after another, ``tlast`` on the
    last beat of each unit's load (with a projection: of each unit's gate matrix and of its
    projection block, :func:`~nnrtl.hw.farnn.schedule.weight_loads`); for GRU FW then
    :func:`~nnrtl.hw.farnn.schedule.bias_beats`
    (``bR_n``, ``chains`` cells a beat, ``tlast`` on the last). ``s_imvm`` (FW, ``units``
    words): the host's input MVM of one cell, gate order. ``m_h`` (FW, 1 word): ``h_t`` of one
    cell. ``m_saved`` (FW): the saved values of one cell and the state before the step (LSTM
    ``i, f, g, o, c, c_{t-1}``; GRU ``r, z, n, hn, h_{t-1}``). ``s_bw`` (BW): a ``m_saved``
    beat read back with ``dy`` appended (with a projection without ``dy``). ``m_deltas`` (BW):
    the W side's gate deltas of one cell in gate order (GRU: then ``dhn``, the R side's delta
    of n). With a projection also ``m_proj`` (1 word): FW ``r_t = W_hr h_t``, the layer's
    output, BW ``dr^_t = fa(dv, dy)`` (for the host's ``dW_hr``), and ``s_dy`` (BW, 1 word):
    the output's delta ``dy_t`` (``P`` cells). Every cell stream of a step is in
    :func:`~nnrtl.hw.farnn.schedule.cell_order` of the matrix whose results make it (the order
    the units' results come out: round, vector, PE, lane; the projection's unit by unit):
    ``recurrent`` for ``s_imvm``, ``m_h``, ``m_saved`` and (no projection) ``s_bw`` and
    ``m_deltas``; with a projection ``projection`` for FW ``m_proj``, ``projection_t`` for
    ``s_bw`` and ``m_deltas``, ``recurrent_t`` for ``s_dy`` and BW ``m_proj``. FW steps ``0 ..
    T-1``, BW ``T-1 .. 0``; ``tlast`` closes each step on the output streams and is ignored
    on the inputs.

    **Data flow of a step**

    FW step ``t``: the units' ``x`` is ``h_{t-1}`` of each vector of the batch, read from the
    vector buffer (``batch * hidden_size`` words; zeros at ``t = 0``: the run starts from ``h =
    c = +0``, no ``h0`` is taken). The units' result beats (``chains`` rows each) are
    serialized to one cell per cycle (padding rows dropped), joined with ``s_imvm`` and the
    state (LSTM ``c_{t-1}`` from the c buffer; GRU ``h_{t-1}`` from the vector buffer and
    ``bR_n``) into :class:`FwActivation`; its ``h`` goes to ``m_h`` and into the vector buffer,
    ``c`` into the c buffer, the saved values to ``m_saved``. BW step ``t``: unit ``k`` is fed
    its own delta ``d_k*_{t+1}`` (the R side's: GRU's unit n takes ``dhn``), from the vector
    buffer; its ``R_k^T`` products are folded per cell in gate order, ``((u_0 + u_1) + u_2) +
    u_3`` (GRU: ``fa(((u_0 + u_1) + u_2), direct_{t+1})``, ``direct`` kept in the state
    buffer), giving ``dh``; step ``T - 1`` runs no MVM (``dh = +0``, as the golden model's
    initial ``dv``). :class:`BwActivation` takes ``dh``, the ``s_bw`` beat and ``dc`` (LSTM,
    state buffer, ``+0`` at ``T - 1``); ``d*`` goes to ``m_deltas`` and the R side's deltas into
    the vector buffer, ``dc_{t-1}`` / ``direct`` into the state buffer.

    With a projection a step is two *jobs* of the units (the golden model's order,
    :mod:`nnrtl.sim.golden.farnn.layer`). FW: job 0 runs ``R_k`` on ``r_{t-1}`` (from the
    ``projected`` buffer, zeros at ``t = 0``) into :class:`FwActivation` as above; job 1 runs
    ``W_hr`` on ``h_t`` (vector buffer), each unit its block of rows, and its cells (no
    activation) go to ``m_proj`` and into the ``projected`` buffer. BW: job 0 runs ``R_k^T`` on
    ``d_k*_{t+1}`` (none at ``T - 1``: ``dv = +0``), folded as above into ``dv``; ``dr^ =
    fa(dv, dy)`` with ``s_dy`` goes to ``m_proj`` and into the ``projected`` buffer; job 1 runs
    ``W_hr^T`` on ``dr^``, and its cells are the ``dh`` of :class:`BwActivation`, whose ``dy``
    is then ``-0`` (``fa(dh, -0) = dh``: ``dy`` entered at ``dr^``).

    **Schedule (the rule the cycle model follows)**

    * Feed: the units take one element per cycle (their issue rules permitting: the
      accumulators' reduction gap, two streams outstanding, :class:`MVMUnit`). Element ``e``
      of vector ``b`` of run step ``j + 1`` is offered from the cycle after row ``e`` of vector
      ``b`` of run step ``j`` was written by the activation unit: a per-vector count of the
      rows written (``avail[b]``), compared with ``e``, reset when the feed of vector ``b``
      ends. Rows of a vector are written in increasing order (round by round), so this is
      the per-slice rule at row granularity: with ``S >= 2`` rounds the next step's round 0
      starts as soon as its unit is free and its elements of the earlier slices are long
      written, overlapping the activation of the last slice (the paper's latency hiding);
      only elements of the last slice can wait (``activation_wait_cycles``). The first FW
      step is fed zeros at once; the first BW step runs no MVM.
    * An MVM unit starts a run (one step: ``batch`` vectors, ``S`` rounds) from Idle, two
      cycles after the last result beat of its previous run was taken.
    * Serializer: a result beat (every unit's, joined) is taken when the previous beat's last
      real row has gone; its real rows (``min(width, hidden_size - first row)``, ``width`` =
      ``chains``, or ``chains / split`` in a split round) leave one per cycle from the next
      cycle; a beat of padding rows only takes one cycle. The activation units take one cell
      per cycle, so a stream of ``chains * chain_length`` rows takes at least that many cycles
      out of the units (a head hands out a beat every two cycles: no stall for ``chains <=
      2``).
    * BW: the fold adds ``3 A`` cycles before :class:`BwActivation`.
    * With a projection (two jobs a step): the units' configuration (``n_in``, rounds, split,
      weight ``base``) is the job of the beats the serializer takes next; it switches in the
      cycle after the previous job's last beat was taken, and the feed offers a job's
      elements only once the configuration has been its job's for a cycle. The ``R_k`` /
      ``R_k^T`` job's elements of vector ``b`` wait for the whole vector of their source
      (``avail[b]`` equal to its length): the projection writes its rows unit by unit, not in
      row order; the other job's, row by row as above. A projection beat carries up to
      ``units * chains`` cells, so the serializer holds the units' result streams (the chain
      head then hands out the next beat two cycles after a beat is taken at the earliest).
      FW ``r`` cells go to ``m_proj`` with no latency; BW ``dr^`` after the fold and one more
      adder (``4 A`` with LSTM's four units).
    * ``cycles`` counts from the cycle after the START write's pulse to the cycle the last
      cell of the last step leaves its sink (the activation unit; FW with a projection
      ``m_proj``), inclusive, or to the cycle after the serializer took the units' last
      beat, if that is later (a projection job can end with padding beats).
    Without gaps and backpressure (and ``chains <= 2``) the ``cycles`` of a run are
    :func:`~nnrtl.hw.farnn.schedule.run_cycles`, exactly.

    Weight load: LOAD (control) with ``phase`` set routes ``s_weights`` to unit 0 until a
    ``tlast``, then (with a projection: unit 0's projection block until the next ``tlast``)
    unit 1, ...; a unit takes one RESTART cycle then one beat per cycle
    (:class:`~nnrtl.hw.farnn.mvm.MVMUnit`), the units configured for the matrix they load.
    """

    def __init__(self, config):
        _check(config)
        self._config = config
        self._registers = register_map(config)
        bits = stream_bits(config)
        ports = {
            "s_axil": In(AXI4LiteSignature(self._registers.addr_width)),
            "s_weights": In(AXI4StreamSignature(bits["weights"])),
            "s_imvm": In(AXI4StreamSignature(bits["imvm"])),
            "s_bw": In(AXI4StreamSignature(bits["bw_in"])),
            "m_h": Out(AXI4StreamSignature(bits["h"])),
            "m_saved": Out(AXI4StreamSignature(bits["saved"])),
            "m_deltas": Out(AXI4StreamSignature(bits["deltas"])),
        }
        if config.proj_size:
            ports["s_dy"] = In(AXI4StreamSignature(bits["dy"]))
            ports["m_proj"] = Out(AXI4StreamSignature(bits["proj"]))
        super().__init__(ports)
        stages = dict(adder_stages=config.adder_stages,
                      multiplier_stages=config.multiplier_stages)
        self._fw = FwActivation(config.cell, **stages)
        self._bw = BwActivation(config.cell, **stages)

    config = property(lambda self: self._config)
    registers = property(lambda self: self._registers)
    fw_latency = property(lambda self: self._fw.latency)
    bw_latency = property(lambda self: self._bw.latency)

    def elaborate(self, platform):
        m = Module()
        EngineDatapath(self, m).build()
        return m
