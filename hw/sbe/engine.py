"""The SBE engine (Fig. 7): loaders, double buffers, PE groups with BB-FIFOs, the LSTM
interconnection, post-processing units, the h store and the AXI edges.

Data path of a column step issued by the :class:`~.controller.Controller` at cycle ``I``:
``I`` weight, x and h memories read; ``I + 1`` the vector element(s) selected (x, h or the
zero of a fresh state); ``I + 2`` weights and vector registered in the PEs; ``I + 3``
product, accumulate, BB-FIFO write; ``I + 4`` a hand-over's sums captured by the
interconnection (summed over the column lanes when ``pes > 4 * hidden_size``); from
``I + 5`` drained to the post-processing units ``post_units`` hidden units per cycle. A
hidden value is written to the h store (two banks by step parity: a step reads the
previous step's h while its own is written) and pushed to the output FIFO in the same
cycle; the controller may use it from the next cycle.
"""

import math

from amaranth.hdl import Cat, Module, Mux, Signal, unsigned
from amaranth.lib import wiring
from amaranth.lib.fifo import SyncFIFOBuffered
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out, connect, flipped

from ..bus import (AXI4LiteSignature, AXI4StreamSignature, AXI4StreamToStream, PerfCounter,
                   RegisterFile, StreamToAXI4Stream)
from ..hierarchy import shared
from .config import SbeConfig
from .controller import Controller
from .loaders import InputLoader, WeightLoader
from .pe import PEGroup
from .post import PostProcessingUnit

__all__ = ["SbeEngine"]

class SbeEngine(wiring.Component):
    """The stall-free blocking-batching LSTM engine.

    Parameters
    ----------
    config : SbeConfig

    Attributes
    ----------
    s_axil : In(AXI4LiteSignature)
        :attr:`SbeConfig.registers`.
    s_weights : In(AXI4StreamSignature)
        A run's header and weight blocks, ``bus_weights`` words per beat.
    s_inputs : In(AXI4StreamSignature)
        x vectors, ``columns_per_cycle`` words per beat.
    m_axis : Out(AXI4StreamSignature)
        Hidden vectors, ``post_units`` words per beat, ``tlast`` closing each step.
    """

    def __init__(self, config):
        if not isinstance(config, SbeConfig):
            raise TypeError(f"config must be an SbeConfig, not {config!r}")
        config = config.padded          # the RTL runs the padded problem
        self._config = config
        bits = config.stream_bits
        super().__init__({
            "s_axil": In(AXI4LiteSignature(config.registers.addr_width)),
            "s_weights": In(AXI4StreamSignature(bits.weights)),
            "s_inputs": In(AXI4StreamSignature(bits.inputs)),
            "m_axis": Out(AXI4StreamSignature(bits.outputs)),
        })

    @property
    def config(self):
        return self._config

    @property
    def registers(self):
        return self._config.registers

    #: Cycles an entry of the output FIFO stays counted beyond ``pipeline_latency``: the
    #: hand-over's issue cycle, the buffered FIFO's two-cycle read latency and the cycle
    #: its level drops, rounded up with margin.
    FIFO_SLACK = 8

    @staticmethod
    def output_fifo_depth(config):
        """Beats of the output FIFO. A hand-over books ``drain_cycles`` entries when it is
        issued (the controller waits until ``level + reserved + drain_cycles`` fit); each
        stays counted, reserved then stored, for about ``pipeline_latency + drain_cycles
        + FIFO_SLACK`` cycles when the output stream keeps up. Hand-overs come at most
        every ``drain_cycles`` cycles, so the passes in flight are ``ceil((pipeline_latency
        + FIFO_SLACK) / drain_cycles)`` plus the one draining and the one booking: with
        that many passes of room an output stream that keeps up never holds the array
        back (``handover_wait_cycles`` stays 0 without backpressure)."""
        drain = config.drain_cycles
        return drain * (math.ceil((config.pipeline_latency + SbeEngine.FIFO_SLACK) / drain)
                        + 2)

    @staticmethod
    def h_store_shape(config):
        """``(banks, words)`` of the h store: ``max(columns_per_cycle, post_units)`` banks
        (both powers of two: ``k`` lanes read and ``PP`` units write in one cycle), each of
        two power-of-two halves (by step parity) of ``hidden_size / banks`` words, padded to a
        power of two so that the parity is the top address bit."""
        banks = max(config.columns_per_cycle, config.post_units)
        index_bits = (config.hidden_size // banks - 1).bit_length()
        return banks, 2 << index_bits

    def elaborate(self, platform):
        m = Module()
        config = self._config
        k, ow, aw = config.columns_per_cycle, config.operand_width, config.acc_width
        PP, H, Nt = config.post_units, config.hidden_size, config.bus_weights
        rpp, drain = config.rows_per_pass, config.drain_cycles

        # -- Edges and registers -------------------------------------------------------
        m.submodules.regfile = regfile = RegisterFile(config.registers)
        connect(m, flipped(self.s_axil), regfile.s_axil)
        regs = regfile.regs
        bits = config.stream_bits
        m.submodules.rx_weights = rx_w = AXI4StreamToStream(bits.weights)
        m.submodules.rx_inputs = rx_x = AXI4StreamToStream(bits.inputs)
        m.submodules.tx = tx = StreamToAXI4Stream(bits.outputs)
        connect(m, flipped(self.s_weights), rx_w.s_axis)
        connect(m, flipped(self.s_inputs), rx_x.s_axis)
        connect(m, tx.m_axis, flipped(self.m_axis))

        control = config.registers["control"]
        start_bit = control.field("start").offset
        clear_bit = control.field("clear").offset
        flags = config.registers["flags"]

        # -- Run state -----------------------------------------------------------------
        running = Signal()
        done = Signal()
        go = Signal()                       # start of the run, one cycle after the write
        steps = Signal(config.step_bits)
        later_layer = Signal()
        keep = Signal()
        bn_enable = Signal()
        h_base = Signal()                   # h store bank holding the state h
        out_beats = Signal(range((1 << config.step_bits) * (H // PP)))   # of the run
        start = Signal()
        m.d.comb += start.eq(regs.control[start_bit] & ~running)
        m.d.sync += go.eq(start)
        with m.If(start):
            m.d.sync += [running.eq(regs.steps != 0), done.eq(regs.steps == 0),
                         steps.eq(regs.steps), later_layer.eq(regs.layer != 0),
                         keep.eq(regs.flags[flags.field("keep_state").offset]),
                         out_beats.eq(0)]
            if config.batch_norm:
                m.d.sync += bn_enable.eq(regs.flags[flags.field("batch_norm").offset])

        w_half = Controller.weight_half_depth(config)
        x_half = Controller.vector_half_depth(config)
        m.submodules.controller = ctrl = Controller(config)
        m.submodules.weight_loader = wl = WeightLoader(config, half_depth=w_half)
        m.submodules.input_loader = il = InputLoader(config, half_depth=x_half)
        for unit in (ctrl, wl, il):
            m.d.comb += [unit.start.eq(go), unit.steps.eq(steps),
                         unit.later_layer.eq(later_layer)]

        w_loaded = Signal(2)
        x_loaded = Signal(2)
        with m.If(go):
            m.d.sync += [w_loaded.eq(0), x_loaded.eq(0)]
        with m.Else():
            m.d.sync += [w_loaded.eq((w_loaded | wl.done) & ~ctrl.w_release),
                         x_loaded.eq((x_loaded | il.done) & ~ctrl.x_release)]
        m.d.comb += [wl.loaded.eq(w_loaded), il.loaded.eq(x_loaded),
                     ctrl.w_loaded.eq(w_loaded), ctrl.x_loaded.eq(x_loaded)]
        m.d.comb += [wl.i.valid.eq(rx_w.o.valid), rx_w.o.ready.eq(wl.i.ready),
                     wl.i.payload.eq(rx_w.o.p.data),
                     il.i.valid.eq(rx_x.o.valid), rx_x.o.ready.eq(il.i.ready),
                     il.i.payload.eq(rx_x.o.p.data)]

        # -- Vector buffer and h store ---------------------------------------------------
        m.submodules.vectors = vectors = Memory(
            shape=unsigned(k * ow), depth=2 * x_half, init=[])
        x_write = vectors.write_port()
        x_read = vectors.read_port(domain="sync")
        m.d.comb += [x_write.en.eq(il.x_en), x_write.addr.eq(il.x_addr),
                     x_write.data.eq(il.x_data), x_read.addr.eq(ctrl.x_addr)]

        banks, bank_words = self.h_store_shape(config)
        bank_bits = banks.bit_length() - 1
        bank_depth = H // banks
        h_produced = Signal(config.step_bits)
        h_count = Signal(range(H + 1))
        h_read = []
        h_writes = []
        read_parity = h_base ^ ctrl.step[0]
        write_parity = h_base ^ h_produced[0] ^ 1
        index_bits = (bank_depth - 1).bit_length()
        for bank in range(banks):
            # Address = (step parity, unit index within the bank): two power-of-two halves.
            mem = Memory(shape=unsigned(ow), depth=bank_words, init=[])
            m.submodules[f"h_bank{bank}"] = mem
            write = mem.write_port()
            read = mem.read_port(domain="sync", transparent_for=(write,))
            m.d.comb += [
                read.addr.eq(Cat(ctrl.h_addr[bank_bits:bank_bits + index_bits], read_parity)),
                write.addr.eq(Cat(h_count[bank_bits:bank_bits + index_bits], write_parity)),
            ]
            h_read.append(read.data)
            h_writes.append(write)

        # -- Control pipeline: issue (I) -> I + 4 --------------------------------------
        fields = ("issue", "is_h", "first", "last", "init_zero", "bb_write", "handover",
                  "bb_addr", "pass_index", "step")
        stages = [{name: getattr(ctrl, name) for name in fields}]
        stages[0]["fresh"] = (ctrl.step == 0) & ~keep
        stages[0]["select"] = ctrl.h_addr[:bank_bits] >> (k.bit_length() - 1) \
            if banks > k else ctrl.h_addr[:1] & 0
        for index in range(1, 5):
            stage = {}
            for name, value in stages[-1].items():
                reg = Signal(value.shape(), name=f"{name}_{index}")
                m.d.sync += reg.eq(value)
                stage[name] = reg
            stages.append(stage)

        # I + 1: select the vector element of each column lane; I + 2: register it.
        s1 = stages[1]
        vec = []
        for lane in range(k):
            if banks > k:
                choices = [h_read[group * k + lane] for group in range(banks // k)]
                h_value = Signal(ow, name=f"h_lane{lane}")
                with m.Switch(s1["select"]):
                    for group, value in enumerate(choices):
                        with m.Case(group):
                            m.d.comb += h_value.eq(value)
            else:
                h_value = h_read[lane]
            element = Mux(s1["is_h"], Mux(s1["fresh"], 0, h_value),
                          x_read.data[lane * ow:(lane + 1) * ow])
            reg = Signal(unsigned(ow), name=f"vector{lane}")
            m.d.sync += reg.eq(element)
            vec.append(reg)

        # -- PE groups ------------------------------------------------------------------
        groups = config.pes // Nt
        s2, s3, s4 = stages[2], stages[3], stages[4]
        pe_acc = []
        for g in range(groups):        # the last PEs multiply in LUTs
            lut_pes = min(Nt, max(0, (g + 1) * Nt - config.dsp))
            group = PEGroup(config, lut_pes=lut_pes)
            m.submodules[f"pe_group{g}"] = shared(group, key=(config, lut_pes))
            lane = g * Nt // rpp
            m.d.comb += [
                group.w_en.eq(wl.w_en & (wl.w_group == g)), group.w_addr.eq(wl.w_addr),
                group.w_data.eq(wl.w_data[:Nt * ow]), group.r_addr.eq(ctrl.w_addr),
                group.x.eq(vec[lane]),
                group.bb_read_addr.eq(s2["bb_addr"]),
                group.valid.eq(s3["issue"]), group.first.eq(s3["first"]),
                group.init_zero.eq(s3["init_zero"]), group.last.eq(s3["last"]),
                group.bb_write.eq(s3["bb_write"]), group.bb_write_addr.eq(s3["bb_addr"]),
            ]
            pe_acc.extend(group.acc[n] for n in range(Nt))

        # -- LSTM interconnection: capture a pass's sums, drain them to the PPs ----------
        capture = s4["issue"] & s4["handover"]
        row_sums = []
        for row in range(rpp):
            total = pe_acc[row]
            for lane in range(1, k):
                total = (total + pe_acc[lane * rpp + row])[:aw]
            row_sums.append(total)
        slice_rows = 4 * PP
        slices = [Signal(slice_rows * aw, name=f"drain_slice{i}") for i in range(drain)]
        drain_left = Signal(range(drain + 1))
        drain_addr = Signal(range(H // PP))
        drain_fresh = Signal()
        with m.If(capture):
            for i, reg in enumerate(slices):
                m.d.sync += reg.eq(Cat(*row_sums[i * slice_rows:(i + 1) * slice_rows]))
            m.d.sync += [drain_left.eq(drain), drain_fresh.eq(s4["fresh"]),
                         drain_addr.eq(s4["pass_index"] * drain)]
        with m.Elif(drain_left != 0):
            for i in range(drain - 1):
                m.d.sync += slices[i].eq(slices[i + 1])
            m.d.sync += [drain_left.eq(drain_left - 1), drain_addr.eq(drain_addr + 1)]

        # -- Post-processing units --------------------------------------------------------
        units = []
        for lane in range(PP):
            pp = PostProcessingUnit(config)
            m.submodules[f"pp{lane}"] = shared(pp, key=config)
            m.d.comb += [
                pp.valid.eq(drain_left != 0),
                pp.acc.eq(slices[0][lane * 4 * aw:(lane + 1) * 4 * aw]),
                pp.addr.eq(drain_addr), pp.fresh.eq(drain_fresh), pp.bn_enable.eq(bn_enable),
                pp.hdr_en.eq(wl.hdr_en & (wl.hdr_lane == lane)), pp.hdr_addr.eq(wl.hdr_addr),
                pp.hdr_field.eq(wl.hdr_field), pp.hdr_data.eq(wl.hdr_data),
            ]
            units.append(pp)
        h_valid = units[0].h_valid
        h_values = [pp.h for pp in units]
        for bank, write in enumerate(h_writes):
            # Bank b takes unit h_count + (b mod PP) when its PP-group is the one written.
            mine = (h_count[:bank_bits] >> (PP.bit_length() - 1)) == bank // PP \
                if banks > PP else 1
            m.d.comb += [write.en.eq(h_valid & mine), write.data.eq(h_values[bank % PP])]
        step_done = h_count + PP == H
        with m.If(go):
            m.d.sync += [h_produced.eq(0), h_count.eq(0)]
        with m.Elif(h_valid):
            m.d.sync += [h_count.eq(Mux(step_done, 0, h_count + PP)),
                         h_produced.eq(h_produced + step_done)]
        m.d.comb += [ctrl.h_produced.eq(h_produced), ctrl.h_count.eq(h_count)]

        # -- Output FIFO with reserved room ---------------------------------------------
        depth = self.output_fifo_depth(config)
        m.submodules.out_fifo = fifo = SyncFIFOBuffered(width=PP * ow + 1, depth=depth)
        reserved = Signal(range(depth + drain + 1))
        booked = ctrl.issue & ctrl.handover
        m.d.comb += [
            fifo.w_en.eq(h_valid), fifo.w_data.eq(Cat(*h_values, step_done)),
            ctrl.out_room.eq(fifo.level + reserved + drain <= depth),
            tx.i.valid.eq(fifo.r_rdy), fifo.r_en.eq(tx.i.ready),
            tx.i.p.data.eq(fifo.r_data[:PP * ow]), tx.i.p.last.eq(fifo.r_data[-1]),
        ]
        m.d.sync += reserved.eq(reserved + Mux(booked, drain, 0) - h_valid)
        cooldown = Signal(range(drain))
        m.d.comb += ctrl.drain_free.eq(cooldown == 0)
        with m.If(booked):
            m.d.sync += cooldown.eq(drain - 1)
        with m.Elif(cooldown != 0):
            m.d.sync += cooldown.eq(cooldown - 1)

        # End of the run: every hidden value of every step pushed.
        with m.If(running & h_valid):
            m.d.sync += out_beats.eq(out_beats + 1)
            with m.If(out_beats + 1 == steps * (H // PP)):
                m.d.sync += [running.eq(0), done.eq(1), h_base.eq(h_base ^ steps[0])]

        # -- Registers and counters -----------------------------------------------------
        status = config.registers["status"]
        m.d.comb += [regs.status[status.field("busy").offset].eq(running),
                     regs.status[status.field("done").offset].eq(done)]
        for name, value in config.register_constants.items():
            m.d.comb += getattr(regs, name).eq(value)
        waiting = ctrl.waiting
        counters = {
            "cycles": (running, None),
            "stall_cycles": (running & waiting.hidden, None),
            "weight_wait_cycles": (running & waiting.weights, None),
            "input_wait_cycles": (running & waiting.inputs, None),
            "handover_wait_cycles": (running & waiting.handover, None),
            "column_steps": (ctrl.issue, None),
            "useful_macs": (ctrl.issue, config.pes),
            "weight_words": (wl.words, Nt),
        }
        clear = start | regs.control[clear_bit]
        for name, (enable, increment) in counters.items():
            width = 0 if increment is None else increment.bit_length()
            counter = PerfCounter(64, increment_width=width)
            m.submodules[f"{name}_counter"] = counter
            m.d.comb += [counter.enable.eq(enable), counter.clear.eq(clear),
                         getattr(regs, name).eq(counter.count)]
            if increment is not None:
                m.d.comb += counter.increment.eq(increment)
        return m
