"""One FPDeep node (spec §3, paper Sec. 5, Fig. 12): per layer segment a
:class:`SegmentUnit` (FP, EB, PG, the weight update, the shared LPRAM, the Act-RAM FIFO and
the SFU mask buffer), and the node top :class:`FpdeepNode` with the AXI4-Lite registers and
every segment's neighbour streams.

A segment unit's streams (plain ``amaranth.lib.stream`` valid/ready; the link module, not
built here, serializes them onto the physical links, spec §3.2):

``act_in`` (DP1, from upstream): the segment's input pixels, ``S_IC`` words, raster order.
``part_in`` / ``part_out`` (DP2): the chained partials (:func:`~.fp.partial_layout`).
``act_out`` (completing node, downstream): the SFU's activations (:func:`act_layout`).
``err_in`` (DP3, from downstream): on the completing node the error of the SFU's output
(``P`` words per output beat, the order of ``act_out``), turned into δ by
:class:`~.eb.SfuBackward` with the mask buffer's ReLU mask and argmax; on another node δ
itself (``P`` words per output pixel and group).
``err_out`` (DP4, upstream; not on the first layer, spec §2.8): EB's error of the input
map (:func:`~.eb.error_layout`).
``err_part_in`` / ``err_part_out`` (a layer split by output channels over several
segments, spec §2.10's "EB partial-error reduction"): EB's partial errors
(:func:`~.eb.partial_error_layout`, EB's ``i_partial`` / ``o_partial``) from the
downstream segment of the layer and to the upstream one; a segment with ``err_part_out``
has no ``err_out`` (the most upstream segment of the layer rounds and sends the errors).
``delta_out`` (DP3, upstream; a completing segment of a layer split by input channels,
:attr:`FpdeepConfig.delta_out`): the δ its :class:`~.eb.SfuBackward` makes, as its EB and PG
take it (``P`` words per output pixel and group), for the layer's upstream (ICP)
segments, whose ``err_in`` is δ.
``load``: the host's LPRAM rows (initial weights, :func:`~.lpram.load_layout`).

Latency: the modules' (:mod:`.fp`, :mod:`.eb`, :mod:`.pg`, :mod:`.update`) plus one FIFO
cycle on the Act-RAM and mask paths; throughput one pixel-group per cycle in each module.
"""

import dataclasses
import math

from amaranth.hdl import Cat, Module, Mux, Shape, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from ..bus import Access, Register, RegisterFile, RegisterMap
from ..bus.axi import AXI4LiteSignature
from .config import FpConfig
from .eb import EbModule, SfuBackward, check_eb, error_layout, partial_error_layout
from .fp import FpModule, out_layout, partial_layout
from .line_buffer import pixel_layout
from .lpram import Lpram, load_layout
from .pg import PgModule
from .update import WeightUpdate

__all__ = ["FpdeepConfig", "SegmentUnit", "FpdeepNode", "act_layout", "register_map",
           "check_segment", "module_cycles", "segment_ports", "COUNTERS", "SMALL"]

#: The 64-bit counters of the register map.
COUNTERS = {
    "cycles": "Cycles since reset or the last clear",
    "fp_busy": "Cycles a segment's FP module held an image (any segment)",
    "eb_busy": "Cycles a segment's EB module held an image (any segment)",
    "pg_busy": "Cycles a segment's PG module held an image, drained or updated",
    "images": "Images the first segment's FP module completed",
    "updates": "Weight updates of the first segment (mini-batches)",
}


#: A segment unit's status outputs.
STATUS = ("fp_busy", "eb_busy", "pg_busy", "image_done", "update_done")


def act_layout(cfg):
    """An activation beat downstream: ``data`` (``P`` words) and ``last``."""
    return data.StructLayout({"data": data.ArrayLayout(cfg.word_bits, cfg.p), "last": 1})


#: The default (test) node's segment: fixed16, 3×3 conv (pad 1) over 4×4 maps, 2 → 3
#: channels on P = 2, ReLU and a 2×2 pool, completing.
SMALL = FpConfig(precision="fixed16", k=3, stride=1, pad=1, w_in=4, n_in=2, n_out=3, p=2,
                 pool=(2, 2, 0))


@dataclasses.dataclass(frozen=True)
class FpdeepConfig:
    """One node's RTL: its layer segments (:class:`FpConfig` each) and the training setup.
    The defaults are a small test node (:data:`SMALL`, mini-batch 2).

    Attributes
    ----------
    segments : tuple of FpConfig
        One :class:`SegmentUnit` each, all of one precision.
    eb : tuple of bool
        Per segment: it has an EB module (not on the network's first layer).
    batch : int
        Mini-batch size ``B`` (the LGB's drain period).
    act_images : int
        Act-RAM and mask-buffer depth in images.
    lr : int
        Reset value of the ``lr`` register (``η/B``: fixed16 Q0.16, fp32 bits; the
        default, 655, is 0.01 in fixed16, set it for fp32).
    node : int
        The node's number in the chain (1 upstream), for names and reports.
    eb_partial : tuple of (bool, bool), optional
        Per segment with EB: whether its EB takes the partial errors of the downstream
        segment of its layer (``err_part_in``) and whether it sends its own upstream
        (``err_part_out``, instead of ``err_out``); default (None) ``(False, False)``
        each (the layer's only segment; :attr:`partials`).
        :class:`~.chain_link.ChainConfig` sets them from the chain.
    delta_out : tuple of bool, optional
        Per segment: it sends its δ on ``delta_out`` (a completing segment of an ICP
        split); default (None) none. :class:`~.chain_link.ChainConfig` sets it.
    """

    segments: tuple = (SMALL,)
    eb: tuple = (True,)
    batch: int = 2
    act_images: int = 3
    lr: int = 655
    node: int = 1
    eb_partial: tuple = None
    delta_out: tuple = None

    def __post_init__(self):
        object.__setattr__(self, "segments", tuple(self.segments))
        object.__setattr__(self, "eb", tuple(bool(e) for e in self.eb))
        partial = self.eb_partial
        if partial is None:
            partial = ((False, False),) * len(self.segments)
        if (not isinstance(partial, (tuple, list)) or len(partial) != len(self.segments)
                or not all(isinstance(p, (tuple, list)) and len(p) == 2 for p in partial)):
            raise ValueError(f"eb_partial must have one (takes, sends) pair per segment "
                             f"({len(self.segments)}), not {self.eb_partial!r}")
        if self.eb_partial is not None:
            object.__setattr__(self, "eb_partial", tuple((bool(a), bool(b))
                                                         for a, b in partial))
        if not self.segments or not all(isinstance(s, FpConfig) for s in self.segments):
            raise TypeError(f"segments must be a non-empty tuple of FpConfig, not "
                            f"{self.segments!r}")
        if len(self.eb) != len(self.segments):
            raise ValueError(f"eb must have one entry per segment ({len(self.segments)}), "
                             f"not {len(self.eb)}")
        if len({s.precision for s in self.segments}) != 1:
            raise ValueError("segments must share one precision")
        for name in ("batch", "act_images", "node"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise TypeError(f"{name} must be a positive integer, not {value!r}")
        if not isinstance(self.lr, int) or not 0 <= self.lr < 1 << self.word_bits:
            raise ValueError(f"lr must be a {self.word_bits}-bit word, not {self.lr!r}")
        if self.delta_out is not None:
            if len(self.delta_out) != len(self.segments):
                raise ValueError(f"delta_out must have one entry per segment "
                                 f"({len(self.segments)}), not {len(self.delta_out)}")
            object.__setattr__(self, "delta_out", tuple(bool(d) for d in self.delta_out))
        for n, (segment, eb) in enumerate(zip(self.segments, self.eb)):
            check_segment(segment, eb)
            if self.deltas[n] and not segment.completes:
                raise ValueError(f"delta_out: segment {n + 1} does not complete its layer "
                                 f"(no SFU to make δ)")
            if any(self.partials[n]) and not eb:
                raise ValueError(f"eb_partial: segment {n + 1} has no EB to chain partial "
                                 f"errors")

    @classmethod
    def from_node(cls, node, precision, *, batch=1, lr=655, reshape=None, **options):
        """The RTL of the mapper's :class:`~nnrtl.gen.fpdeep.config.NodePlan`
        ``node`` at ``precision``: its conv segments (:meth:`FpConfig.from_segment`;
        ``options`` set ``frac_bits`` and the fp32 stages; ``reshape``, if given, maps each
        FpConfig to the one to build, e.g. another ``P``/``Q``), EB where the mapper placed
        three modules, ``act_images`` the largest Act-RAM residency rounded up plus one
        (the image FP takes while PG pops the oldest)."""
        convs = [s for s in node.segments if s.kind == "conv"]
        if not convs:
            raise ValueError(f"node {node.node} has no conv segment (FC runs off the "
                             f"node's RTL)")
        reshape = reshape or (lambda cfg: cfg)
        return cls(tuple(reshape(FpConfig.from_segment(s, precision, **options))
                         for s in convs),
                   tuple(s.modules == 3 for s in convs), batch=batch,
                   act_images=max(2, math.ceil(max(s.residency for s in convs)) + 1),
                   lr=lr, node=node.node)

    @property
    def partials(self):
        """Per segment its EB's (takes, sends) partial errors (:attr:`eb_partial`, its
        default spelled out)."""
        return self.eb_partial or ((False, False),) * len(self.segments)

    @property
    def deltas(self):
        """Per segment: it has ``delta_out`` (:attr:`delta_out`, its default spelled out)."""
        return self.delta_out or (False,) * len(self.segments)

    @property
    def precision(self):
        return self.segments[0].precision

    @property
    def word_bits(self):
        return self.segments[0].word_bits

    @property
    def macs(self):
        """MAC units of the node: FP, PG and (where built) EB of every segment."""
        return sum(s.macs * (2 + e) for s, e in zip(self.segments, self.eb))

    @property
    def cycles(self):
        """Cycles per image in steady state: the slowest module of any segment
        (:func:`module_cycles`; the modules of a node run concurrently)."""
        return max(max(module_cycles(s, e).values())
                   for s, e in zip(self.segments, self.eb))


def module_cycles(cfg, eb=True):
    """Steady-state cycles per image of a segment's modules: FP
    :attr:`FpConfig.cycles` (``pixels · G · passes``), EB ``w_in² · G · passes`` (an
    input-map pixel per ``G · passes`` δ windows, :mod:`.eb`), PG ``pixels · G · passes``
    (:mod:`.pg`)."""
    found = {"fp": cfg.cycles, "pg": cfg.cycles}
    if eb:
        found["eb"] = cfg.w_in ** 2 * cfg.rows
    return found


def check_segment(cfg, eb):
    """Refuse (``ValueError``) a segment the modules do not build: EB's limits
    (:func:`~.eb.check_eb`). Passes (``Q < S_IC``) and overlapping pools are built (PG's
    LGB in the LPRAM's layout, :mod:`.pg`; :class:`~.eb.SfuBackward`)."""
    if eb:
        check_eb(cfg)


def _count(m, taken, count, beats, batch=1):
    """Count ``taken`` beats in ``count`` modulo ``beats`` (an image) and the images of a
    mini-batch of ``batch``; returns the image's and the batch's last-beat conditions."""
    end = taken & (count == beats - 1)
    with m.If(taken):
        m.d.sync += count.eq(Mux(end, 0, count + 1))
    if batch == 1:
        return end, end
    images = Signal(range(batch))
    with m.If(end):
        m.d.sync += images.eq(Mux(images == batch - 1, 0, images + 1))
    return end, end & (images == batch - 1)


def _fork(m, source_valid, source_ready, sinks, gate=1):
    """One stream into several: a beat goes when every sink is ready (and ``gate``)."""
    for n, (valid, _) in enumerate(sinks):
        others = [r for k, (_, r) in enumerate(sinks) if k != n]
        ready_others = 1
        for r in others:
            ready_others = ready_others & r
        m.d.comb += valid.eq(source_valid & gate & ready_others)
    all_ready = gate
    for _, r in sinks:
        all_ready = all_ready & r
    m.d.comb += source_ready.eq(all_ready)
    return source_valid & all_ready


def segment_ports(cfg, eb, partial=(False, False), delta=False):
    """The streams of a segment unit (module docstring): ``{name: In/Out(stream)}``;
    ``partial`` its EB's (takes, sends) partial errors (:attr:`FpdeepConfig.partials`),
    ``delta`` its ``delta_out`` (:attr:`FpdeepConfig.deltas`)."""
    word = cfg.word_bits
    ports = {"act_in": In(stream.Signature(pixel_layout(word, cfg.n_in))),
             "err_in": In(stream.Signature(pixel_layout(word, cfg.p))),
             "load": In(stream.Signature(load_layout(cfg)))}
    if cfg.partial_in:
        ports["part_in"] = In(stream.Signature(partial_layout(cfg)))
    if cfg.completes:
        ports["act_out"] = Out(stream.Signature(act_layout(cfg)))
    else:
        ports["part_out"] = Out(stream.Signature(partial_layout(cfg)))
    takes, sends = partial
    if eb and takes:
        ports["err_part_in"] = In(stream.Signature(partial_error_layout(cfg)))
    if eb and sends:
        ports["err_part_out"] = Out(stream.Signature(partial_error_layout(cfg)))
    elif eb:
        ports["err_out"] = Out(stream.Signature(error_layout(cfg)))
    if delta:
        ports["delta_out"] = Out(stream.Signature(pixel_layout(word, cfg.p)))
    return ports


class SegmentUnit(wiring.Component):
    """One layer segment of a node: FP, EB (``eb``), PG, the update and their memories.

    Parameters
    ----------
    cfg : FpConfig
    batch : int
    eb : bool
    act_images : int

    partial : (bool, bool)
        EB's (takes, sends) partial errors (:attr:`FpdeepConfig.partials`).
    delta : bool
        Send δ on ``delta_out`` (:attr:`FpdeepConfig.deltas`; a completing segment).

    Attributes
    ----------
    act_in, part_in, act_out, part_out, err_in, err_out, err_part_in, err_part_out,
    delta_out, load
        Streams (module docstring).
    lr : In(word_bits)
    fp_busy, eb_busy, pg_busy, image_done, update_done : Out(1)
        Status for the counters (``*_done`` one-cycle pulses).
    """

    def __init__(self, cfg, *, batch=1, eb=True, act_images=2, partial=(False, False),
                 delta=False):
        self._cfg, self._batch, self._eb, self._depth = cfg, batch, bool(eb), act_images
        self._partial, self._delta = tuple(bool(p) for p in partial), bool(delta)
        ports = segment_ports(cfg, eb, self._partial, self._delta)
        ports.update({"lr": In(cfg.word_bits)} | {name: Out(1) for name in STATUS})
        super().__init__(ports)

    @property
    def cfg(self):
        return self._cfg

    def elaborate(self, platform):
        m = Module()
        cfg, B = self._cfg, self._batch
        m.submodules.lpram = lpram = Lpram(cfg, eb_port=self._eb)
        m.submodules.fp = fp = FpModule(cfg, shared_lpram=True)
        m.submodules.pg = pg = PgModule(cfg, batch=B)
        m.submodules.update = upd = WeightUpdate(cfg, batch=B)
        pixels_in = cfg.w_in ** 2
        m.submodules.act_ram = act_ram = SyncFIFOBuffered(
            width=cfg.word_bits * cfg.n_in, depth=self._depth * pixels_in)

        # mini-batches whose last error came in (FP closes at a boundary while any), and
        # the flag of the batch's last δ having passed the fork (the fork closes)
        ahead = Signal(range(4))
        hold = ahead != 0
        passed = Signal()
        finishing = Signal()        # the update took the drain's last row
        delta_beats = cfg.pixels * cfg.groups
        fp_in, fp_out = Signal(8), Signal(8)
        eb_in, eb_out = Signal(8), Signal(8)

        # LPRAM: FP's read port, lent to the update; the update's rows before the host's
        updating = Signal()
        m.d.comb += [
            lpram.fp_addr.eq(Mux(updating, upd.rd_addr, fp.fp_addr)),
            lpram.fp_en.eq(Mux(updating, upd.rd_en, fp.fp_en)),
            fp.fp_data.eq(lpram.fp_data), upd.rd_data.eq(lpram.fp_data),
            upd.lr.eq(self.lr),
        ]
        with m.If(upd.load.valid):
            m.d.comb += [lpram.load.payload.eq(upd.load.payload), lpram.load.valid.eq(1),
                         upd.load.ready.eq(lpram.load.ready)]
        with m.Else():
            m.d.comb += [lpram.load.payload.eq(self.load.payload),
                         lpram.load.valid.eq(self.load.valid),
                         self.load.ready.eq(lpram.load.ready)]

        # FP input, forked into the Act-RAM; closed at an image boundary during the window
        act_count = Signal(range(pixels_in))
        fp_gate = ~(hold & (act_count == 0))
        took = _fork(m, self.act_in.valid, self.act_in.ready,
                     [(fp.act_in.valid, fp.act_in.ready), (act_ram.w_en, act_ram.w_rdy)],
                     fp_gate)
        m.d.comb += [fp.act_in.payload.eq(self.act_in.payload),
                     act_ram.w_data.eq(self.act_in.payload)]
        fp_image_in, _ = _count(m, took, act_count, pixels_in)
        if cfg.partial_in:
            wiring.connect(m, wiring.flipped(self.part_in), fp.part_in)

        # FP output: downstream, and (completing node) the masks into their buffer
        if cfg.completes:
            mask = out_layout(cfg)["argmax"].shape.size + cfg.p
            m.submodules.masks = masks = SyncFIFOBuffered(
                width=mask, depth=self._depth * cfg.out_beats)
            _fork(m, fp.out.valid, fp.out.ready,
                  [(self.act_out.valid, self.act_out.ready), (masks.w_en, masks.w_rdy)])
            m.d.comb += [self.act_out.payload.data.eq(fp.out.payload.data),
                         self.act_out.payload.last.eq(fp.out.payload.last),
                         masks.w_data.eq(Cat(fp.out.payload.relu, fp.out.payload.argmax))]
            fp_image_out = fp.out.valid & fp.out.ready & fp.out.payload.last
            m.submodules.sfu = sfu = SfuBackward(cfg)
            wiring.connect(m, wiring.flipped(self.err_in), sfu.i_error)
            m.d.comb += [sfu.i_mask.valid.eq(masks.r_rdy), masks.r_en.eq(sfu.i_mask.ready),
                         sfu.i_mask.payload.relu.eq(masks.r_data[:cfg.p]),
                         sfu.i_mask.payload.argmax.eq(masks.r_data[cfg.p:])]
            delta = sfu.o
        else:
            wiring.connect(m, fp.part_out, wiring.flipped(self.part_out))
            fp_image_out = fp.part_out.valid & fp.part_out.ready & fp.part_out.payload.last
            delta = self.err_in
        m.d.sync += [fp_in.eq(fp_in + fp_image_in), fp_out.eq(fp_out + fp_image_out)]

        # δ, forked into EB and PG; closed at an image boundary during the window
        delta_count = Signal(range(delta_beats))
        delta_gate = ~passed
        sinks = [(pg.i_delta.valid, pg.i_delta.ready)]
        if self._delta:
            sinks.append((self.delta_out.valid, self.delta_out.ready))
            m.d.comb += self.delta_out.payload.eq(delta.payload)
        if self._eb:
            takes, sends = self._partial
            m.submodules.eb = eb = EbModule(cfg, shared_lpram=True, partial_in=takes,
                                            partial_out=sends)
            sinks.append((eb.i.valid, eb.i.ready))
            m.d.comb += [lpram.eb_addr.eq(eb.eb_addr), lpram.eb_en.eq(eb.eb_en),
                         eb.eb_data.eq(lpram.eb_data), eb.i.payload.eq(delta.payload)]
            if takes:
                wiring.connect(m, wiring.flipped(self.err_part_in), eb.i_partial)
            out = eb.o_partial if sends else eb.o
            wiring.connect(m, out, wiring.flipped(self.err_part_out if sends
                                                  else self.err_out))
            eb_image_out = out.valid & out.ready & out.payload.last
        else:
            eb_image_out = 0
        moved = _fork(m, delta.valid, delta.ready, sinks, delta_gate)
        m.d.comb += pg.i_delta.payload.eq(delta.payload)
        delta_image, delta_batch = _count(m, moved, delta_count, delta_beats, B)
        with m.If(delta_batch):
            m.d.sync += passed.eq(1)
        _, err_batch = _count(m, self.err_in.valid & self.err_in.ready,
                              Signal(range(cfg.out_beats)), cfg.out_beats, B)
        if self._eb:
            m.d.sync += [eb_in.eq(eb_in + delta_image), eb_out.eq(eb_out + eb_image_out)]

        # PG: activations from the Act-RAM; its drain through the update once FP/EB are out
        m.d.comb += [pg.i_act.valid.eq(act_ram.r_rdy), act_ram.r_en.eq(pg.i_act.ready),
                     pg.i_act.payload.eq(act_ram.r_data)]
        quiet = Signal()
        m.d.comb += [
            quiet.eq(hold & passed & (act_count == 0) & (fp_in == fp_out)
                     & (eb_in == eb_out)),
            updating.eq(quiet & (pg.o.valid | upd.busy | finishing)),
            upd.i.valid.eq(pg.o.valid & quiet), pg.o.ready.eq(upd.i.ready & quiet),
            upd.i.payload.eq(pg.o.payload),
        ]
        with m.If(upd.i.valid & upd.i.ready & pg.o.payload.last):
            m.d.sync += finishing.eq(1)
        done = finishing & ~upd.busy
        m.d.sync += ahead.eq(ahead + err_batch - done)
        with m.If(done):
            m.d.sync += [finishing.eq(0), passed.eq(0)]

        m.d.comb += [
            self.fp_busy.eq((act_count != 0) | (fp_in != fp_out)),
            self.eb_busy.eq((eb_in != eb_out) | ((delta_count != 0) & self._eb)),
            self.pg_busy.eq((delta_count != 0) | pg.o.valid | upd.busy | finishing),
            self.image_done.eq(fp_image_out), self.update_done.eq(done),
        ]
        return m


def register_map(config):
    """The node's AXI4-Lite :class:`~nnrtl.hw.bus.RegisterMap`: ``control`` (clear),
    ``lr``, the configuration constants and the 64-bit counters (:data:`COUNTERS`)."""
    return RegisterMap([
        Register("control", Access.PULSE, doc="Write 1 to bit 0 to zero the counters"),
        Register("lr", Access.RW, reset=config.lr,
                 doc="eta/B, the step per summed gradient (fixed16 Q0.16, fp32 bits)"),
        Register("batch", Access.RO, doc="Configuration: mini-batch size B"),
        Register("segments", Access.RO, doc="Configuration: layer segments"),
        *(Register(name, Access.RO, width=64, doc=doc) for name, doc in COUNTERS.items()),
    ])


class FpdeepNode(wiring.Component):
    """The node top: every segment's :class:`SegmentUnit` and the registers.

    Parameters
    ----------
    config : FpdeepConfig

    Attributes
    ----------
    s_axil : In(AXI4LiteSignature)
        :attr:`registers`.
    s{n}_act_in, s{n}_err_in, s{n}_load, s{n}_part_in : In(stream.Signature)
    s{n}_err_part_in : In(stream.Signature)
    s{n}_act_out, s{n}_part_out, s{n}_err_out, s{n}_err_part_out, s{n}_delta_out
        : Out(stream.Signature)
        Segment ``n``'s streams (the :class:`SegmentUnit` ports present for it), their
        payloads plain bit vectors of the unit's layouts (packed alike), the AXI4-Stream
        ``tdata`` a link module or a board wrapper takes.
    registers : RegisterMap

    Raises
    ------
    TypeError
        ``config`` not a FpdeepConfig.

    Notes
    -----
    **Decisions ([U] in the spec)**

    * **Update window** (spec §3.8's rule, made exact): the mini-batch ends at the node when
      the last ``err_in`` beat of its ``batch``-th image comes in. From then on the FP input
      closes at its next image boundary, and the δ fork (EB and PG) once that image's last δ
      has passed it; once every image FP and EB took has left them, the PG drain runs through
      the weight update into the LPRAM (FP's read port lent to the update), then both reopen.
      So a sample uses the weights current when its first pixel enters FP here; FP of samples
      whose first pixel came in before the mini-batch's last error beat used the old weights
      (the "slightly unaligned" samples), and EB/PG of every sample after the mini-batch the
      new ones. The trigger is the node's input, not the SFU's output, so the rule depends on
      the order of the streams at the node's ports alone. The golden model (:mod:`nnrtl.sim.tb.fpdeep.node`) follows
      the same rule from the order of the streams alone.
    * **Act-RAM**: a FIFO of ``act_images`` images of input pixels, written as FP takes them,
      popped by PG (same raster order, spec §3.3); the mask buffer a FIFO of the SFU's
      ``relu``/``argmax`` fields for the same number of images. The residency (spec §2.9) sets
      ``act_images``; a chain sized below it stalls FP, it does not lose data.
    * **Busy counters**: FP busy = a pixel of an image is in FP or an image taken has not left;
      EB likewise; PG busy = a δ image is in progress, or the drain / update runs.
    """

    def __init__(self, config):
        if not isinstance(config, FpdeepConfig):
            raise TypeError(f"config must be a FpdeepConfig, not {config!r}")
        self._config = config
        self._registers = register_map(config)
        ports = {"s_axil": In(AXI4LiteSignature(self._registers.addr_width))}
        for n, (cfg, eb) in enumerate(zip(config.segments, config.eb)):
            for name, member in segment_ports(cfg, eb, config.partials[n],
                                              config.deltas[n]).items():
                shape = member.signature.members["payload"].shape
                payload = stream.Signature(Shape.cast(shape).width)
                ports[f"s{n}_{name}"] = (In if member.flow == In else Out)(payload)
        super().__init__(ports)

    config = property(lambda self: self._config)
    registers = property(lambda self: self._registers)

    def elaborate(self, platform):
        m = Module()
        m.submodules.regs = regs = RegisterFile(self._registers)
        wiring.connect(m, wiring.flipped(self.s_axil), regs.s_axil)
        counts = {name: Signal(64, name=f"count_{name}") for name in COUNTERS}
        busy = {"fp_busy": 0, "eb_busy": 0, "pg_busy": 0}
        config = self._config
        units = [SegmentUnit(cfg, batch=config.batch, eb=eb, act_images=config.act_images,
                             partial=partial, delta=delta)
                 for cfg, eb, partial, delta in zip(config.segments, config.eb,
                                                    config.partials, config.deltas)]
        for n, unit in enumerate(units):
            m.submodules[f"segment_{n}"] = unit
            m.d.comb += unit.lr.eq(regs.regs.lr)
            for name in unit.signature.members:
                if f"s{n}_{name}" in self.signature.members:
                    outer, inner = getattr(self, f"s{n}_{name}"), getattr(unit, name)
                    source, sink = ((outer, inner) if unit.signature.members[name].flow == In
                                    else (inner, outer))
                    m.d.comb += [sink.valid.eq(source.valid), source.ready.eq(sink.ready),
                                 sink.payload.eq(source.payload)]
            for name in busy:
                busy[name] = busy[name] | getattr(unit, name)
        first = units[0]
        steps = dict(busy, cycles=1, images=first.image_done, updates=first.update_done)
        with m.If(regs.regs.control[0]):
            m.d.sync += [c.eq(0) for c in counts.values()]
        with m.Else():
            m.d.sync += [counts[name].eq(counts[name] + steps[name]) for name in counts]
        m.d.comb += [getattr(regs.regs, name).eq(c) for name, c in counts.items()]
        m.d.comb += [regs.regs.batch.eq(self._config.batch),
                     regs.regs.segments.eq(len(units))]
        return m
