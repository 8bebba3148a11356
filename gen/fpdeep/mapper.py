"""The FPDeep mapping framework (spec §2.11 steps 1-6): a layer chain onto a 1-D chain of
FPGAs.

:func:`map_network` runs

1. the layer chain (:mod:`.network`) and its work per layer;
2. the coarse partition (:func:`~.partition.coarse_partition`, exact), its ``V`` (eq. 5);
3. the fine partition at channel units with local search (:func:`~.partition.fine_partition`),
   its ``V``; ICP/OCP per layer (:func:`~.partition.unit_mode`);
4. per node the shortest period its MAC-unit budget allows (:mod:`.cost`), the chain's
   period ``T`` the longest of them, then each segment's least ``(P, Q)`` meeting ``T``
   (DSPs a multiple of ``K²``); the idle share ``1 − Σ work / (Σ MAC units · T)``
   (spec §2.8);
5. storage per node (spec §2.9) against the board's block RAM; with ``act_ram``
   ``"overflow"`` or ``"ddr"``, Act-RAMs moved to the node's DDR (:mod:`.placement`, their
   traffic a period of its own); parameter balancing (spec §2.6: whole banks of the most
   over-full node to the upstream node with the most free memory) until every node fits,
   else :class:`UsageError` naming the node and the resource (or, with
   ``check_storage=False``, the mapping marked infeasible: for reports);
6. link traffic per boundary and direction (:mod:`.links`) and the period the links allow;
7. the pixels a cycle each convolution's FP and PG line buffers take (``line_pixels``,
   :func:`~.cost.line_pixels_for`): where ``W_in²`` input pixels exceed both its compute
   cycles at the fastest period's ``(P, Q)`` and that period, the least ``m`` whose
   :func:`~.cost.line_buffer_cycles`
   fit that period, at most one input row a cycle and, where the input comes over a link,
   what the link delivers; the widest that the node's block RAM holds
   (:func:`~.cost.line_buffer_words` in the storage check). A segment still input-paced
   at its ``m`` sets the period (``line``). A compute-bound segment's fill (``(K − 1 −
   pad)·(W_in + 1)/m + 1`` cycles a sample) is not charged (:mod:`.cluster_node`).

FC layers are mapped like convolutions (1 x 1 on a 1 x 1 map, input-channel units), which
puts them on the last node(s) as the paper does; their weights and gradients are off chip
(the paper: "off-chip memory only for FC layers"), which the FC stage reads once per
``fc_batch`` samples: the smallest batch whose weight traffic (weights read for FP and EB,
gradients read and written: 4 words per weight) the board's DDR bandwidth carries at the
chain's rate, unless given (:mod:`.search` chooses it for ``nnrtl map``). The batch adds
to every Act-RAM residency (spec §3.9).

The PAB of a segment holds one output row of partial sums (:func:`~.config.pab_pixels`):
the cluster simulator stalls a node's FP when it is full, so it never holds more.
"""

import dataclasses
import math

from ..errors import UsageError
from . import links
from .config import STORAGE_KINDS, NodePlan, SegmentConfig
from .storage import balance_banks, in_ddr, segment_storage, weight_banks
from .cost import (COST_MODELS, DSP_CAP, allocate, fastest_period, fp32_model_for,
                   line_buffer_cycles, line_buffer_words, line_pixels_for, unit_budget)
from .placement import ACT_RAM_PLACEMENTS, choose_spills, ddr_channels, ddr_cycles
from .partition import (OCP_MIN_IC, UnitLine, coarse_partition, fine_partition, node_works,
                        min_period_cuts, variance)

__all__ = ["map_network", "Mapping", "residencies", "FC_MODELS"]

#: How the mapper costs the FC layers (:func:`map_network`'s ``fc_model``).
FC_MODELS = ("segments", "engine")


def residencies(chain, fc_batch):
    """Act-RAM residency (samples) of each layer's inputs (Notes).

    Notes
    -----
    Act-RAM residency of a layer's inputs, in samples: ``R = 1 + 2 · fill + max(1,
    max(1, fc_batch) − 1 + 2 · F)``, ``fill`` = ``Σ (K_j − 1) / W_out,j`` over the convolutions
    from this layer to the last (and ``(k − 1) / W_pooled`` per pool), the rows a sample's
    window needs before its first output, forward and again backward (spec §2.9); ``F`` the FC
    layers from this layer on, each of whose FP and EB takes up to a period a sample (the DDR
    period when it bounds the chain: the cluster simulator splits the DDR among the FC modules
    by their words), ``fc_batch − 1`` samples waiting for their weight pass.
    """
    found, total, fcs = [], 0.0, 0
    for layer in reversed(chain.layers):
        if layer.kind == "conv":
            total += (layer.k - 1) / layer.w_out
            if layer.pool is not None:
                total += (layer.pool[0] - 1) / layer.w_pooled
        else:
            fcs += 1
        found.append(1 + 2 * total + max(1, max(1, fc_batch) - 1 + 2 * fcs))
    found.reverse()
    return found


def _node_segments(chain, line, start, end):
    """The segments of a node holding units ``[start, end)``: ``[(layer index, mode, lo,
    hi, completes), ...]`` (a layer's units are its channels in order)."""
    segments = []
    for index in range(int(line.layer[start]), int(line.layer[end - 1]) + 1):
        layer = chain.layers[index]
        first = line.first[index]
        mode = line.modes[index]
        count = layer.oc if mode == "OCP" else layer.ic
        lo, hi = max(start, first) - first, min(end, first + count) - first
        if hi - lo == count:
            mode, lo, hi = "ICP", 0, layer.ic         # the whole layer: S_IC = IC
        completes = mode == "OCP" or hi == layer.ic
        segments.append((index, mode, lo, hi, completes))
    return segments


def _shape(layer, mode, lo, hi):
    """``(pixels, n_out, n_in, k, modules)`` of a segment."""
    n_out, n_in = ((layer.oc // layer.groups, hi - lo) if mode == "ICP"
                   else (hi - lo, layer.fan_in))
    return layer.w_out ** 2, n_out, n_in, layer.k, layer.modules


@dataclasses.dataclass(frozen=True)
class Mapping:
    """The result of :func:`map_network`: the per-node configurations and the cluster's
    figures (see :meth:`as_json` for the fields, :func:`~.table.format_table` for the
    table)."""

    chain: object
    board: str
    fpgas: int
    model: object
    link_gbps: float | None
    convention: str
    dsp_cap: float
    nodes: tuple
    period: int
    compute_period: int
    link_period: int
    ddr_period: int
    fc_batch: int
    unit_budget: int
    budget_resource: str
    bram36: int
    dsp: int
    lut: int
    boundaries: tuple
    coarse_groups: tuple
    coarse_works: tuple
    fine_works: tuple
    v_coarse: float
    v_fine: float
    moves: int
    infeasible: tuple
    offchip_gbps: float
    """DDR traffic of the busiest node's FC weights in GB/s."""
    line_period: int = 0
    """The period the FP line buffers allow (module docstring, step 7)."""
    balance: bool = True
    """Parameter balancing was on."""
    act_ddr_period: int = 0
    """The period the Act-RAMs held in DDR allow (their channel's traffic, :mod:`.placement`)."""
    act_ram: str = "chip"
    """The Act-RAM placement (:data:`~.placement.ACT_RAM_PLACEMENTS`)."""
    fc_model: str = "segments"
    """How the FC layers are costed (:data:`FC_MODELS`)."""
    fc_period: int = 0
    """The period the FC engines allow (``fc_model`` ``"engine"``; 0 otherwise)."""
    chosen: tuple = ()
    """``((option, why), ...)``: the options :func:`~.search.choose_mapping` chose (the
    others were given)."""
    storage_limit: str | None = None
    """The buffer that holds ``fc_batch`` back when the FC weights' DDR bounds the period
    (the next batch's overflow, :func:`~.search.choose_mapping`), if any."""

    @property
    def bound(self):
        """What sets the period: ``"compute"``, ``"link"``, ``"ddr"`` (the FC weights),
        ``"act_ddr"`` (the Act-RAMs held in DDR), ``"line"`` (an FP line buffer's input,
        one pixel a cycle) or ``"fc"`` (the FC engines, ``fc_model`` ``"engine"``)."""
        return max((self.compute_period, "compute"), (self.link_period, "link"),
                   (self.ddr_period, "ddr"), (self.act_ddr_period, "act_ddr"),
                   (self.line_period, "line"), (self.fc_period, "fc"))[1] \
            if self.period > self.compute_period else "compute"

    @property
    def v_mapped(self):
        """Eq. 5 over the mapped nodes' work (after the period search moved the cuts)."""
        return variance([sum(s.work for s in node.segments) for node in self.nodes])

    @property
    def images_per_second(self):
        return self.model.clock_hz / self.period

    @property
    def work(self):
        return self.chain.work

    @property
    def gops_per_fpga(self):
        return 2 * self.work * self.images_per_second / self.fpgas / 1e9

    @property
    def idle(self):
        """Idle share of the allocated MAC units (spec §2.8)."""
        units = sum(node.mac_units for node in self.nodes)
        return 1 - self.work / (units * self.period)

    def node_idle(self, node):
        work = sum(s.work for s in node.segments)
        return 1 - work / (node.mac_units * self.period)

    def dsp_use(self, node):
        return node.dsp / self.dsp

    def boundary_gbps(self):
        return links.link_gbps(self.boundaries, self.model.word_bits, self.model.clock_hz,
                               self.period)

    def table(self):
        """The per-node table (:func:`~.table.format_table`)."""
        from .table import format_table
        return format_table(self)

    def as_json(self):
        """``mapping.json``: network, board, cost model, per node (segments, storage, hosted
        banks, idle, DSP use), per boundary (bits per sample and Gb/s each way) and the
        summary."""
        gbps = self.boundary_gbps()
        bits = self.model.word_bits
        return {
            "network": {"name": self.chain.name, "layers": self.chain.as_json(),
                        "work_macs_per_sample": self.work},
            "board": {"name": self.board, "dsp": self.dsp, "bram36": self.bram36,
                      "lut": self.lut, "fpgas": self.fpgas},
            "cost_model": dataclasses.asdict(self.model),
            "options": {"link_gbps": self.link_gbps, "link_convention": self.convention,
                        "dsp_cap": self.dsp_cap, "fc_batch": self.fc_batch,
                        "balance": self.balance, "act_ram": self.act_ram,
                        "chosen": {name: why for name, why in self.chosen},
                        "mac_unit_budget": self.unit_budget,
                        "budget_limited_by": self.budget_resource},
            "nodes": [dict(node.as_json(), idle=self.node_idle(node),
                           dsp_use=self.dsp_use(node)) for node in self.nodes],
            "boundaries": [
                {"between": [b + 1, b + 2], "where": where,
                 "forward_bits_per_sample": fwd * bits, "backward_bits_per_sample": bwd * bits,
                 "forward_gbps": g[0], "backward_gbps": g[1]}
                for b, ((fwd, bwd, where), g) in enumerate(zip(self.boundaries, gbps))],
            "summary": {
                "period_cycles": self.period, "compute_period_cycles": self.compute_period,
                "link_period_cycles": self.link_period,
                "ddr_period_cycles": self.ddr_period,
                "act_ddr_period_cycles": self.act_ddr_period,
                "act_ram_ddr_words": sum(node.act_ram_ddr_words for node in self.nodes),
                "line_period_cycles": self.line_period, "bound": self.bound,
                "fc_model": self.fc_model, "fc_period_cycles": self.fc_period,
                "storage_limit": self.storage_limit,
                "clock_mhz": self.model.clock_hz / 1e6,
                "images_per_second": self.images_per_second,
                "gops_per_fpga": self.gops_per_fpga, "idle_share": self.idle,
                "v_coarse": _finite(self.v_coarse), "v_fine": _finite(self.v_fine),
                "v_mapped": _finite(self.v_mapped),
                "coarse_groups": [list(g) for g in self.coarse_groups],
                "local_search_moves": self.moves,
                "max_link_gbps": max((max(g) for g in gbps), default=0.0),
                "fc_offchip_gbytes_per_s": self.offchip_gbps,
                "feasible": not self.infeasible, "infeasible": list(self.infeasible)},
        }


def _finite(value):
    return None if math.isinf(value) else value


def _check_int(name, value, least=1):
    if not isinstance(value, int) or isinstance(value, bool) or value < least:
        raise UsageError(f"{name} must be an integer of at least {least}, not {value!r}")


def map_network(chain, fpgas, board, *, precision="fixed16", link_gbps=None,
                convention="link", dsp_cap=DSP_CAP, ocp_min_ic=OCP_MIN_IC, fc_batch=None,
                balance=True, check_storage=True, word_bits=None, multiplier_shifts=None,
                adder_shifts=None, act_ram="chip", fc_model="segments"):
    """Map ``chain`` (a :class:`~.network.Chain`) onto ``fpgas`` boards ``board`` (a
    platform class of :mod:`nnrtl.boards`).

    Parameters
    ----------
    precision : str
        ``"fixed16"`` (the paper's cost model) or ``"fp32"`` (:mod:`.cost`).
    link_gbps : float, optional
        Link budget in Gb/s (``None``: unlimited); ``convention`` ``"link"`` or ``"fpga"``.
    dsp_cap : float
        Share of the DSP slices the MAC units may take.
    ocp_min_ic : int
        Layers with fewer input channels are cut by output channels.
    fc_batch : int, optional
        Samples per FC weight pass (default: the least the DDR bandwidth allows).
    balance : bool
        Parameter balancing when a node overflows.
    act_ram : str
        Where Act-RAMs wait (:data:`~.placement.ACT_RAM_PLACEMENTS`): ``"chip"``,
        ``"overflow"`` (in DDR on the nodes whose block RAM cannot hold them) or ``"ddr"``.
    fc_model : str
        :data:`FC_MODELS`: ``"segments"`` (the FC layers costed as the conv segments, FP, EB
        and PG concurrent, 4 DDR words per weight) or ``"engine"`` (the FC engine's cycle
        model, :func:`.fc_cycles.per_sample_cycles` of :func:`.fc_cycles.segment_engine`, a
        period bound ``"fc"``, and its DDR traffic, 3 words per weight).
    check_storage : bool
        Raise on a node whose storage does not fit; else mark the mapping infeasible.
    word_bits : int, optional
        16 or 32: the word width in buffers and on links instead of the cost model's (e.g.
        the paper's cost model with the paper's fp32 words, whose links give its 18.6 Gb/s).
    multiplier_shifts, adder_shifts : str, optional
        fp32: the MAC variant's shifts (``"lut"`` or ``"dsp"``, :data:`.cost.FP32_VARIANTS`);
        one not given is chosen, the variant with the most MAC units on the board
        (:func:`.cost.fp32_model_for`).

    Raises
    ------
    UsageError
        Bad parameters; a node whose segments cannot fit its DSP/LUT budget; with
        ``check_storage``, a node whose storage does not fit after balancing (naming the
        node, the resource, the need and the budget).
    """
    _check_int("--fpgas", fpgas)
    if precision not in COST_MODELS:
        raise UsageError(f"--precision must be one of {', '.join(COST_MODELS)}, not "
                         f"{precision!r}")
    if convention not in links.CONVENTIONS:
        raise UsageError(f"link convention must be one of {', '.join(links.CONVENTIONS)}, "
                         f"not {convention!r}")
    if link_gbps is not None and (not isinstance(link_gbps, (int, float))
                                  or isinstance(link_gbps, bool) or not link_gbps > 0):
        raise UsageError(f"--link-gbps must be a positive number, not {link_gbps!r}")
    if fc_batch is not None:
        _check_int("fc_batch", fc_batch)
    if fc_model not in FC_MODELS:
        raise UsageError(f"fc_model must be one of {', '.join(FC_MODELS)}, not {fc_model!r}")
    if act_ram not in ACT_RAM_PLACEMENTS:
        raise UsageError(f"act_ram must be one of {', '.join(ACT_RAM_PLACEMENTS)}, not "
                         f"{act_ram!r}")
    model = COST_MODELS[precision]
    shifts = {"multiplier_shifts": multiplier_shifts, "adder_shifts": adder_shifts}
    for name, value in shifts.items():
        if value is not None and value not in ("lut", "dsp"):
            raise UsageError(f"{name} must be lut or dsp, not {value!r}")
    if precision == "fp32":
        model = fp32_model_for(board.capacity, dsp_cap, pinned=shifts)
    elif any(value is not None for value in shifts.values()):
        raise UsageError(f"multiplier_shifts and adder_shifts are fp32's, not {precision}'s")
    if word_bits is not None:
        if word_bits not in (16, 32):
            raise UsageError(f"word_bits must be 16 or 32, not {word_bits!r}")
        model = dataclasses.replace(model, word_bits=word_bits)
    capacity = board.capacity
    budget, resource = unit_budget(model, capacity, dsp_cap)

    # steps 2-3: coarse and fine partitions
    works = [layer.work for layer in chain.layers]
    groups = coarse_partition(works, fpgas)
    coarse = [sum(works[a:b]) for a, b in groups]
    line = UnitLine.of(chain, ocp_min_ic)
    cuts, moves = fine_partition(line, fpgas)
    fine = node_works(line, cuts)

    def shapes_of(segments):
        return [_shape(chain.layers[s[0]], *s[1:4]) for s in segments]

    def period_of(start, end):
        found = fastest_period(shapes_of(_node_segments(chain, line, start, end)), budget)
        return math.inf if found is None else found

    def fits(start, end, period, units=budget):
        found = allocate(shapes_of(_node_segments(chain, line, start, end)), period)
        return found is not None and sum(u for u, _, _ in found) <= units

    # step 4: the period and the allocation. The work-balanced cuts give an upper bound;
    # the least period over all cuts (the MAC units are integers: P, Q, K²) is searched
    # below it and the cuts kept as near the work-balanced ones as it allows.
    bounds = [0, *map(int, cuts), len(line)]
    periods = [period_of(a, b) for a, b in zip(bounds, bounds[1:])]
    # without a finite period for every node, other cuts may still fit: the slowest
    # conceivable period is every segment on one CE of one tile
    high = max(periods) if not any(math.isinf(p) for p in periods) else sum(
        l.w_out ** 2 * l.oc * l.ic for l in chain.layers)
    found = min_period_cuts(len(line), fpgas, fits, math.ceil(max(fine) / budget) - 1, high,
                            cuts)
    if found is not None:
        best, cuts = found
        # at that period, the least per-node MAC units: the slack spread over the nodes
        _, cuts = min_period_cuts(len(line), fpgas, lambda a, b, u: fits(a, b, best, u),
                                  math.ceil(sum(fine) / best / fpgas) - 1, budget, cuts)
        bounds = [0, *cuts, len(line)]
        periods = [period_of(a, b) for a, b in zip(bounds, bounds[1:])]
    per_node = [_node_segments(chain, line, a, b) for a, b in zip(bounds, bounds[1:])]
    shapes = [shapes_of(segs) for segs in per_node]
    for n, period in enumerate(periods):
        if math.isinf(period):
            node_shapes = shapes[n]
            least = sum(m * k * k for _, _, _, k, m in node_shapes)
            names = ", ".join(chain.layers[s[0]].name for s in per_node[n])
            raise UsageError(
                f"node {n + 1} ({names}): one K x K tile per module needs {least} MAC units "
                f"= {least * model.dsp_per_mac:,} DSP and {least * model.lut_per_mac:,} LUT, but "
                f"{board.name} allows {budget} MAC units ({resource}-limited: "
                f"{_budget_text(model, capacity, dsp_cap, resource)}) in {precision}")
    compute_period = max(periods)

    # FC batch from the DDR bandwidth at the compute rate
    fc_words = sum(2 * layer.params for layer in chain.layers if layer.kind == "fc")
    fc_weight_words = 1.5 if fc_model == "engine" else 2           # 3 or 4 words per weight
    ddr_bytes_per_sample = fc_weight_words * fc_words * model.word_bits / 8
    rate = model.clock_hz / compute_period
    if fc_batch is None:
        fc_batch = max(1, math.ceil(ddr_bytes_per_sample * rate
                                    / (capacity.offchip_gbps * 1e9)))
    resid = residencies(chain, fc_batch if fc_words else 0)

    # step 5: storage and parameter balancing
    words_per_bram = model.words_per_bram36()
    capacity_words = capacity.bram36 * words_per_bram
    stores, offchip, banks, acts = [], [], [], []
    for n, segs in enumerate(per_node):
        total, off = dict.fromkeys(STORAGE_KINDS, 0), 0
        node_banks, node_acts = [], []
        for seg, shape in zip(segs, shapes[n]):
            words, o = segment_storage(chain, seg, shape, resid[seg[0]], model.word_bits)
            for kind, value in words.items():
                total[kind] += value
            off += o
            node_banks.append([chain.layers[seg[0]].name, *weight_banks(chain, seg, shape)])
            node_acts.append(in_ddr(chain.layers[seg[0]], shape[2], words,
                                     resid[seg[0]]))
        stores.append(total)
        offchip.append(off)
        banks.append(node_banks)
        acts.append(node_acts)
    spilled = [[] for _ in per_node]
    if act_ram != "chip":
        for n, node_acts in enumerate(acts):
            over = sum(stores[n].values()) - capacity_words
            everything = act_ram == "ddr" and not offchip[n]     # FC weights: overflow only
            if everything or over > 0:
                spilled[n] = choose_spills([(sum(a["saving"].values()), a["traffic"])
                                            for a in node_acts], over, everything)
                for i in spilled[n]:
                    for kind, saved in node_acts[i]["saving"].items():
                        stores[n][kind] -= saved
    hosted = balance_banks(stores, banks, capacity_words) if balance else []

    # step 6: links and the period
    words = links.boundary_words(chain, line, cuts, hosted)
    link_period = links.link_period(words, model.word_bits, model.clock_hz, link_gbps,
                                    convention)
    channels, channel_bytes = ddr_channels(board.name)
    ddr = [ddr_cycles(fc_weight_words * off * model.word_bits / 8 / fc_batch,
                      sum(acts[n][i]["traffic"] for i in spilled[n]) * model.word_bits / 8,
                      capacity.offchip_gbps, channels, model.clock_hz)
           for n, off in enumerate(offchip)]
    ddr_period = max(f for f, _ in ddr)
    act_ddr_period = max(a for _, a in ddr)
    fastest = max(compute_period, link_period, ddr_period, act_ddr_period)
    # step 7: each convolution's line-buffer pixels a cycle, at the fastest period's units
    lines = _line_pixels(chain, per_node, shapes, stores, fastest, capacity_words,
                         math.inf if link_gbps is None else
                         link_gbps * 1e9 / model.clock_hz / model.word_bits)
    paced = [[cycles > fastest for _, cycles in node] for node in lines]
    period = max([fastest] + [cycles for node in lines for _, cycles in node])
    nodes, infeasible = [], []
    for n, segs in enumerate(per_node):
        # a segment whose line buffer paces it keeps the units of the fastest period (the
        # windows queued behind its last pixel the fewest), the others are sized for the
        # period; the node fits at the fastest, so at this mix too
        alloc = [allocate([shape], fastest if slow else period)[0]
                 for shape, slow in zip(shapes[n], paced[n])]
        configs = []
        for seg, shape, (units, p, q) in zip(segs, shapes[n], alloc):
            index, mode, lo, hi, completes = seg
            layer = chain.layers[index]
            pixels, n_out, n_in, k, modules = shape
            configs.append(SegmentConfig(layer=layer.name, index=index, kind=layer.kind, mode=mode,
                                         lo=lo, hi=hi, n_in=n_in, n_out=n_out, k=k, pixels=pixels,
                                         p=p, q=q, modules=modules, mac_units=units,
                                         dsp=units * model.dsp_per_mac,
                                         lut=units * model.lut_per_mac,
                                         cycles=pixels * -(-n_out // p) * -(-n_in // q),
                                         work=modules * pixels * n_out * n_in * k * k,
                                         completes=completes, residency=resid[index],
                                         stride=layer.stride, pad=layer.pad, w_in=layer.w_in,
                                         pool=layer.pool, relu=layer.relu,
                                         act_ram_in_ddr=len(configs) in spilled[n],
                                         line_pixels=lines[n][len(configs)][0]))
        units = sum(c.mac_units for c in configs)
        need = sum(stores[n].values())
        bram = math.ceil(need / words_per_bram)
        ddr_words = sum(acts[n][i]["act"] for i in spilled[n])
        ddr_bytes = sum(acts[n][i]["words"] for i in spilled[n]) * model.word_bits // 8
        if channels < 2:
            ddr_bytes += offchip[n] * model.word_bits // 8
        if ddr_bytes > channel_bytes:
            message = (f"node {n + 1}: DDR needs {ddr_bytes:,} bytes (Act-RAMs and SFU masks "
                       f"in DDR), but {board.name}'s channel has {channel_bytes:,}")
            if check_storage:
                raise UsageError(message + f"; precision {precision}, {fpgas} FPGAs")
            infeasible.append(message)
        if bram > capacity.bram36:
            big = sorted(stores[n].items(), key=lambda kv: -kv[1])[:3]
            message = (f"node {n + 1}: storage needs {need:,} words of {model.word_bits} bits "
                       f"= {bram} BRAM36, but {board.name} has {capacity.bram36} BRAM36 "
                       f"({capacity_words:,} words); largest: "
                       + ", ".join(f"{kind} {value:,}" for kind, value in big)
                       + (" (after parameter balancing)" if balance else "")
                       + (f"; {len(spilled[n])} Act-RAM(s) in DDR" if spilled[n] else "")
                       + f"; Act-RAM residency up to {max(c.residency for c in configs):.1f} "
                       f"samples, fc_batch {fc_batch} of them")
            if check_storage:
                raise UsageError(message + f"; precision {precision}, {fpgas} FPGAs")
            infeasible.append(message)
        nodes.append(NodePlan(node=n + 1, segments=tuple(configs), mac_units=units,
                                      dsp=units * model.dsp_per_mac, lut=units * model.lut_per_mac,
                                      storage=tuple(stores[n].items()), bram36=bram,
                                      hosted=tuple(h for h in hosted if h.host == n + 1),
                                      offchip_words=offchip[n], word_bits=model.word_bits,
                                      act_ram_ddr_words=ddr_words, act_ddr_cycles=ddr[n][1]))
    # step 7: the segments their line buffer's input paces (W_in² / m at least their compute)
    line_period = max([0] + [
        line_buffer_cycles(c.w_in, c.k, c.stride, c.pad, c.cycles // c.pixels, c.line_pixels)
        for node in nodes for c in node.segments
        if c.kind == "conv" and c.w_in ** 2 >= c.cycles * c.line_pixels])
    period = max(period, line_period)
    fc_period = 0
    if fc_model == "engine":
        from .fc_cycles import per_sample_cycles, segment_engine
        fc_period = max([0] + [math.ceil(per_sample_cycles(segment_engine(c, precision,
                                                                          fc_batch)))
                               for node in nodes for c in node.segments if c.kind == "fc"])
        period = max(period, fc_period)
    return Mapping(
        chain, board.name, fpgas, model, link_gbps, convention, dsp_cap, tuple(nodes), period,
        compute_period, link_period, ddr_period, fc_batch, budget, resource, capacity.bram36,
        capacity.dsp, capacity.lut, tuple(words), tuple(groups), tuple(coarse),
        tuple(float(w) for w in fine), variance(coarse), variance(fine), moves,
        tuple(infeasible), fc_weight_words * max(offchip) * model.word_bits / 8 / fc_batch
        * model.clock_hz / period / 1e9, line_period, act_ddr_period=act_ddr_period,
        act_ram=act_ram, fc_model=fc_model, fc_period=fc_period)


def _line_pixels(chain, per_node, shapes, stores, period, capacity_words, link_words):
    """Per node and segment ``(line_pixels, line-buffer cycles a sample)`` at ``period``'s
    units (:func:`~.cost.line_pixels_for`): at most one input row a cycle, and what a link
    of ``link_words`` words a cycle delivers of ``n_in``-word pixels where the input comes
    over one; the widest that the node's block RAM still holds, its line buffers' words
    added to ``stores`` (a node already over it keeps its widths: refused anyway)."""
    first = {}
    for n, segs in enumerate(per_node):
        for seg in segs:
            first.setdefault(seg[0], n)
    found = []
    for n, segs in enumerate(per_node):
        node = []
        for seg, shape in zip(segs, shapes[n]):
            layer = chain.layers[seg[0]]
            if layer.kind != "conv":
                node.append((1, 0))
                continue
            _, p, q = allocate([shape], period)[0]
            per_window = -(-shape[1] // p) * -(-shape[2] // q)
            local = n == 0 or (first[seg[0]] == n and seg[0] > 0 and any(
                s[0] == seg[0] - 1 and s[4] for s in segs))
            most = layer.w_in if local or link_words >= layer.w_in * shape[2] else max(
                1, int(link_words // shape[2]))
            m = line_pixels_for(layer.w_in, layer.k, layer.stride, layer.pad, per_window,
                                period, most)
            before = sum(stores[n].values())
            while m > 1:
                extra = 2 * (line_buffer_words(shape[2], layer.k, layer.w_in, m)
                             - line_buffer_words(shape[2], layer.k, layer.w_in))
                if before + extra <= capacity_words or before > capacity_words:
                    stores[n]["line_buffers"] += extra
                    break
                m -= 1
            cycles = (line_buffer_cycles(layer.w_in, layer.k, layer.stride, layer.pad,
                                         per_window, m)
                      if layer.w_in ** 2 >= per_window * shape[0] * m else 0)
            node.append((m, cycles))
        found.append(node)
    return found


def _budget_text(model, capacity, dsp_cap, resource):
    if resource == "dsp":
        return (f"{dsp_cap:g} of {capacity.dsp} DSP / {model.dsp_per_mac} DSP per MAC")
    from ..engines import LUT_SHARE
    return f"{LUT_SHARE:g} of {capacity.lut:,} LUT / {model.lut_per_mac:,} LUT per MAC"
