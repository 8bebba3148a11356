"""The FPDeep neighbour-link module of one node side (spec §3.1, §3.2): the typed datapaths of
the node toward one neighbour, multiplexed onto one outgoing and demultiplexed from one
incoming AXI4-Stream physical link (an Aurora 64B/66B user interface of ``link_bits``), in
packets of typed flits with credit-based flow control per path. The flit format, the paths
of each side and the widths are :mod:`.link_config`'s.

Outgoing: each transmit path ``tx_<name>`` (a ``stream.Signature`` of ``P`` words) fills a
FIFO of ``tx_depth`` beats; a round-robin arbiter over the paths and the credit-return
source of each slot grants one packet (a header flit, then ``min(waiting, credits,
max_beats)`` beats of ``⌈P · word / slot_bits⌉`` words each) or one credit flit at a time
onto the slot's part of ``link_out`` (one slot, the whole word, by default).
Incoming: ``link_in`` is always ready; headers route the beats that follow into the
receive FIFO (``rx_depth`` beats) of their path, read on ``rx_<name>``; credit flits give
the sender credits back for its transmit paths.

Slots and throughput (:func:`nnrtl.sim.tb.fpdeep.link.efficiency` measures them): one slot carries one beat per
cycle at most (one packet at a time, a beat per slot word or more), the rate of one
producer. With ``slots`` = 1 all paths share that, so a wide link is wasted; striped into
slots, a forward path each, the link carries nearly its whole payload rate with every
path busy (headers of full packets the rest). Slots are independent flit streams side by side in the link word
(a slot with nothing to send sends an ``IDLE`` word while another slot sends); a slot
joins the word only when no word is held on the wire (AXI4-Stream: a presented word does
not change until taken); without slots ``tlast`` ends each packet, with slots it is high
on every word (the receiver needs only the header's length).

Latency and throughput: a packet's header leaves the cycle after the grant (the grant is
made in the cycle the previous packet's last word is taken, so back-to-back packets have
no idle cycle between them); one link word per cycle when ``link_out.tready`` is high; a
beat reaches ``rx_<path>`` after its last word arrives plus the receive FIFO's write and
buffered-read latency. A transfer of ``N`` beats of one path, waiting in full, takes
``transfer_words(path, N)`` cycles on the wire, plus one for the first grant (measured).
"""

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import data, stream, wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.wiring import In, Out

from ..bus.axi import AXI4StreamSignature
from .link_config import CREDIT, IDLE, KIND_BITS, PATHS, LinkConfig

__all__ = ["LinkModule", "beat_layout"]


def beat_layout(cfg, path):
    """A beat of ``path``: ``P`` words of ``cfg.bits(path)``."""
    return data.ArrayLayout(cfg.bits(path), cfg.p)


def _round_robin(m, last, eligible, chosen, name):
    """``chosen`` ← the first index with ``eligible`` after ``last`` (cyclic); returns
    whether any is eligible."""
    count = len(eligible)
    go = Signal(name=f"{name}_go")
    with m.Switch(last):
        for previous in range(count):
            with m.Case(previous):
                for step in range(1, count + 1):
                    index = (previous + step) % count
                    cond = m.If if step == 1 else m.Elif
                    with cond(eligible[index]):
                        m.d.comb += [chosen.eq(index), go.eq(1)]
    return go


class LinkModule(wiring.Component):
    """One node side's link module.

    Parameters
    ----------
    config : LinkConfig

    Members
    -------
    tx_<path> : In(stream.Signature(beat_layout(config, path))), per ``config.tx_paths``
    rx_<path> : Out(stream.Signature(beat_layout(config, path))), per ``config.rx_paths``
    link_out : Out(AXI4StreamSignature(config.link_bits))
    link_in : In(AXI4StreamSignature(config.link_bits))
    link_up : In(1)
        The physical link is up (Aurora ``channel_up``): no grant is made while it is low
        (the transmit FIFOs fill; the benches use it to preload traffic).
    fault : Out(1)

    Raises
    ------
    TypeError
        If ``config`` is not a :class:`LinkConfig`.

    Notes
    -----
    **Decisions ([U] in the spec)**

    * **Credits, not ready/valid, per path.** The sender holds, per path, the free beats of
      the receiver's FIFO of that path (initially ``rx_depth``) and sends only beats it has
      credit for, so the receiver never stalls the wire: a slow consumer of one path fills its
      own receive FIFO, then its sender's credits run out, then the path's transmit FIFO
      fills and its producer sees ``ready`` low, and no other path is held. Each beat the
      consumer takes becomes a pending credit, returned in a credit flit (all of the path's
      pending credits in one flit) on the link the other way.
    * **Round robin**, per slot over its ``tx_paths`` and its credit source, starting after
      the last grant;
      the credit flits take turns among the receive paths the same way. A source that is
      eligible stays so until granted (waiting beats, credits and pending credits only grow
      until then), and each grant is at most ``1 + max_beats · ⌈P · word / slot_bits⌉``
      words, so an eligible source waits at most 3 grants: **no starvation**, provided the
      physical link moves. **No deadlock**: the receiver takes every word as it arrives
      (payload has reserved room, credit flits need none), so the wire only stalls for the
      physical link itself; a path blocked by its consumer holds nothing but its own FIFOs.
    * **Head-of-line blocking that remains**: on the wire, a packet delays the other sources
      by up to ``max_beats`` beats (bounded); credit flits share the wire with data, so a
      credit returns up to one packet late (a path keeps its full rate only if ``rx_depth``
      covers the credit round trip, the link's flight latency included: a parameter to size
      per board, not checked here); and what the node does with the
      paths (e.g. FP needing both ``act`` and ``partial``) is the node's dependency, not the
      link's.
    * **Packet length known at the header**: the header goes out only with the beats already
      in the transmit FIFO (``length = min(level, credits, max_beats)``), so a packet never
      stalls mid-way on its producer. The price: an idle link sends short packets (one
      header per beat at worst) — it has the bandwidth to spare then; a saturated link sends
      full packets (:meth:`~.link_config.LinkConfig.transfer_words`).
    * ``fault`` (sticky) flags a malformed flit or a receive FIFO overflow (a partner with
      another configuration); it never rises between two modules of one configuration.
    """

    def __init__(self, config):
        if not isinstance(config, LinkConfig):
            raise TypeError(f"config must be a LinkConfig, not {config!r}")
        self._cfg = config
        ports = {f"tx_{p}": In(stream.Signature(beat_layout(config, p)))
                 for p in config.tx_paths}
        ports.update({f"rx_{p}": Out(stream.Signature(beat_layout(config, p)))
                      for p in config.rx_paths})
        ports["link_out"] = Out(AXI4StreamSignature(config.link_bits))
        ports["link_in"] = In(AXI4StreamSignature(config.link_bits))
        ports["link_up"] = In(1)
        ports["fault"] = Out(1)
        super().__init__(ports)

    @property
    def config(self):
        return self._cfg

    def elaborate(self, platform):
        m = Module()
        cfg = self._cfg
        faults = []
        fifos = {}
        for side, paths, depth in (("tx", cfg.tx_paths, cfg.tx_depth),
                                   ("rx", cfg.rx_paths, cfg.rx_depth)):
            for path in paths:     # a tx port fills its FIFO, an rx port drains its FIFO
                fifo = fifos[path] = m.submodules[f"{side}_fifo_{path}"] = SyncFIFOBuffered(
                    width=cfg.beat_bits(path), depth=depth)
                port, inner = getattr(self, f"{side}_{path}"), (
                    fifo.w_stream if side == "tx" else fifo.r_stream)
                source, sink = (port, inner) if side == "tx" else (inner, port)
                m.d.comb += [sink.payload.eq(source.payload), sink.valid.eq(source.valid),
                             source.ready.eq(sink.ready)]
        width = cfg.slot_bits
        words, valids, lasts, gaps = [], [], [], []
        m.d.comb += self.link_in.tready.eq(1)
        # A slot may start presenting a word only if no word is held on the wire.
        held = self.link_out.tvalid & ~self.link_out.tready
        taken = self.link_out.tvalid & self.link_out.tready
        for slot in range(cfg.slots):
            tx = [p for p in cfg.tx_paths if cfg.slot(p) == slot]
            rx = [p for p in cfg.rx_paths if cfg.slot(p) == slot]
            fault = Signal(name=f"fault{slot}")
            faults.append(fault)
            incoming = self.link_in.tdata[slot * width:(slot + 1) * width]
            credit_inc = self._receive(m, slot, rx, tx, fifos, incoming, fault)
            word, valid, last, gap = Signal(width, name=f"tx_word{slot}"), \
                Signal(name=f"tx_valid{slot}"), Signal(name=f"tx_last{slot}"), \
                Signal(name=f"tx_gap{slot}")
            self._transmit(m, slot, tx, rx, fifos, credit_inc, (word, valid, last, gap),
                           held, taken)
            words.append(Mux(valid, word, IDLE))
            valids.append(valid)
            lasts.append(last)
            gaps.append(gap)
        # No word while a slot is inside a packet without its next word (an IDLE there
        # would be read as payload); the FIFO holds the packet, so this never lasts.
        m.d.comb += [self.link_out.tdata.eq(Cat(*words)), self.link_out.tvalid.eq(
            Cat(*valids).any() & ~Cat(*gaps).any()),
            self.link_out.tlast.eq(lasts[0] if cfg.slots == 1 else 1),
            self.link_out.tkeep.eq(-1)]
        m.d.sync += self.fault.eq(self.fault | Cat(*faults).any())
        return m

    # -- receive side --------------------------------------------------------------------
    def _receive(self, m, slot, rx, tx, fifos, tdata, fault):
        """Slot ``slot``'s deserializer of the receive paths ``rx``; returns the credits
        of the transmit paths ``tx`` arriving this cycle."""
        cfg = self._cfg
        link, width = self.link_in, cfg.slot_bits
        # Without slots a packet's words carry tlast on its last word only.
        tlast = link.tlast if cfg.slots == 1 else None
        per = [cfg.words_per_beat(p) for p in rx]
        most = max(per)
        kind = tdata[:KIND_BITS]
        name = f"rx{slot}"
        body = Signal(name=f"{name}_body")
        path = Signal(range(len(rx)), name=f"{name}_path")
        remaining = Signal(range(cfg.max_beats + 1), name=f"{name}_remaining")
        sub = Signal(range(most), name=f"{name}_sub")
        assembly = Signal(max(1, (most - 1) * width), name=f"{name}_assembly")
        credit_inc = [Signal(range(cfg.rx_depth + 1), name=f"credit_in_{p}") for p in tx]
        with m.If(link.tvalid & ~body & (kind != IDLE)):
            with m.If(kind == CREDIT):
                target = tdata[KIND_BITS:2 * KIND_BITS]
                count = tdata[2 * KIND_BITS:2 * KIND_BITS + cfg.count_bits]
                known = Signal(name=f"{name}_credit_known")
                for i, p in enumerate(tx):
                    with m.If(target == PATHS.index(p)):
                        m.d.comb += [credit_inc[i].eq(count), known.eq(1)]
                m.d.comb += fault.eq(~known | (0 if tlast is None else ~tlast))
            with m.Else():
                length = tdata[KIND_BITS:KIND_BITS + cfg.length_bits]
                known = Signal(name=f"{name}_header_known")
                for j, p in enumerate(rx):
                    with m.If(kind == PATHS.index(p)):
                        m.d.comb += known.eq(1)
                        m.d.sync += path.eq(j)
                m.d.sync += [remaining.eq(length), sub.eq(0), body.eq(known & (length != 0))]
                m.d.comb += fault.eq(~known | (length == 0) | (length > cfg.max_beats)
                                     | (0 if tlast is None else tlast))
        with m.If(link.tvalid & body):
            for j, p in enumerate(rx):
                fifo = fifos[p]
                top = Cat(assembly[(most - per[j]) * width:], tdata) if per[j] > 1 else tdata
                m.d.comb += fifo.w_data.eq(top[:cfg.beat_bits(p)])
                with m.If((path == j) & (sub == per[j] - 1)):
                    m.d.comb += [fifo.w_en.eq(1), fault.eq(
                        ~fifo.w_rdy | (0 if tlast is None else tlast != (remaining == 1)))]
                    m.d.sync += [sub.eq(0), remaining.eq(remaining - 1)]
                    with m.If(remaining == 1):
                        m.d.sync += body.eq(0)
                with m.Elif(path == j):
                    m.d.sync += sub.eq(sub + 1)
                    m.d.comb += fault.eq(0 if tlast is None else tlast)
            if most > 1:
                m.d.sync += assembly.eq(Cat(assembly[width:], tdata))
        return credit_inc

    # -- transmit side -------------------------------------------------------------------
    def _transmit(self, m, slot, tx, rx, fifos, credit_inc, out, held, taken):
        """Slot ``slot``'s arbiter and serializer of the transmit paths ``tx`` and of the
        credit return of the receive paths ``rx``, onto ``out`` = (word, valid, last, gap:
        inside a packet without a word); ``taken``: the link word is taken."""
        cfg = self._cfg
        width = cfg.slot_bits
        word_out, valid_out, last_out, gap_out = out
        per = [cfg.words_per_beat(p) for p in tx]
        name = f"tx{slot}"
        state = Signal(range(3), name=f"{name}_state")        # 0 idle, 1 header, 2 payload
        grant = Signal(range(len(tx)), name=f"{name}_grant")
        remaining = Signal(range(cfg.max_beats + 1), name=f"{name}_remaining")
        sub = Signal(range(max(per)), name=f"{name}_sub")
        word = Signal(width, name=f"{name}_header")
        credit_flit = Signal(name=f"{name}_credit_flit")
        last_source = Signal(range(len(tx) + 1), init=len(tx), name=f"{name}_last_source")
        last_credit = Signal(range(len(rx)), init=len(rx) - 1, name=f"{name}_last_credit")
        pop = [Signal(name=f"tx_pop_{p}") for p in tx]
        credits = [Signal(range(cfg.rx_depth + 1), init=cfg.rx_depth, name=f"credit_{p}")
                   for p in tx]
        pending = []
        for path in rx:
            fifo, port = fifos[path], getattr(self, f"rx_{path}")
            count = Signal(range(cfg.rx_depth + 1), name=f"pending_{path}")
            returned = Signal(range(cfg.rx_depth + 1), name=f"returned_{path}")
            m.d.sync += count.eq(count + (fifo.r_rdy & port.ready) - returned)
            pending.append((count, returned))
        for i, path in enumerate(tx):
            m.d.comb += fifos[path].r_en.eq(pop[i])

        # The word of the current header / credit flit or of the granted path's beat.
        accepted = valid_out & taken
        last_word = Signal(name=f"{name}_last_word")
        with m.Switch(state):
            with m.Case(1):
                m.d.comb += [word_out.eq(word), valid_out.eq(1), last_out.eq(credit_flit)]
            with m.Case(2):
                for i, path in enumerate(tx):
                    with m.If(grant == i):
                        fifo = fifos[path]
                        padded = Cat(fifo.r_data, Const(0, per[i] * width - cfg.beat_bits(path)))
                        end = sub == per[i] - 1
                        m.d.comb += [word_out.eq(padded.word_select(sub, width)
                                                 if per[i] > 1 else padded),
                                     valid_out.eq(fifo.r_rdy), gap_out.eq(~fifo.r_rdy),
                                     pop[i].eq(accepted & end),
                                     last_word.eq(end & (remaining == 1)),
                                     last_out.eq(end & (remaining == 1))]
                with m.If(accepted):
                    m.d.sync += sub.eq(Mux(Cat(*pop).any(), 0, sub + 1))
                    with m.If(Cat(*pop).any()):
                        m.d.sync += remaining.eq(remaining - 1)

        # The next grant: when idle (and no word held on the wire), or as the current
        # header (credit flit) or packet ends.
        free = ((state == 0) & ~held) | (accepted & (((state == 1) & credit_flit) | last_word))
        with m.If(accepted & (state == 1) & ~credit_flit):
            m.d.sync += state.eq(2)
        lengths = []
        level = [Signal(range(cfg.tx_depth + 1), name=f"tx_level_{p}") for p in tx]
        for i, path in enumerate(tx):
            m.d.comb += level[i].eq(fifos[path].r_level - pop[i])
            n = Signal(range(cfg.max_beats + 1), name=f"tx_length_{path}")
            smaller = Mux(level[i] < credits[i], level[i], credits[i])
            m.d.comb += n.eq(Mux(smaller < cfg.max_beats, smaller, cfg.max_beats))
            lengths.append(n)
        eligible = [(level[i] != 0) & (credits[i] != 0) for i in range(len(tx))]
        eligible.append(Cat(*(c for c, _ in pending)).any())
        source = Signal(range(len(tx) + 1), name=f"{name}_source")
        go = _round_robin(m, last_source, eligible, source, name) & self.link_up
        back = Signal(range(len(rx)), name=f"{name}_credit_path")
        _round_robin(m, last_credit, [c != 0 for c, _ in pending], back, f"{name}_credit")
        decrement = [Signal(range(cfg.max_beats + 1), name=f"credit_dec_{p}") for p in tx]
        with m.If(free):
            m.d.sync += state.eq(Mux(go, 1, 0))
            with m.If(go):
                m.d.sync += [last_source.eq(source), sub.eq(0)]
                for i, path in enumerate(tx):
                    with m.If(source == i):
                        m.d.sync += [word.eq(Cat(Const(PATHS.index(path), KIND_BITS),
                                                 lengths[i])),
                                     credit_flit.eq(0), grant.eq(i), remaining.eq(lengths[i])]
                        m.d.comb += decrement[i].eq(lengths[i])
                with m.If(source == len(tx)):
                    m.d.sync += [credit_flit.eq(1), last_credit.eq(back)]
                    for j, path in enumerate(rx):
                        with m.If(back == j):
                            count, returned = pending[j]
                            m.d.sync += word.eq(Cat(Const(CREDIT, KIND_BITS),
                                                    Const(PATHS.index(path), KIND_BITS),
                                                    count))
                            m.d.comb += returned.eq(count)
        for i in range(len(tx)):
            m.d.sync += credits[i].eq(credits[i] - decrement[i] + credit_inc[i])
