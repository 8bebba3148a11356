"""The exact cycle model of the FPDeep node bench (:mod:`nnrtl.sim.tb.fpdeep.node`) under
backpressure ``none``: :func:`bench_cycles` is the bench's ``cycles`` for a
:class:`~nnrtl.hw.fpdeep.node.FpdeepConfig`, ``batches`` mini-batches and a ``lag``.

What the bench runs, per segment and at once for every segment (the segment units share
nothing but the ``lr`` register, so the node's count is the slowest segment's): the LPRAM
load (one beat a cycle, cycles ``1 … L``), then from cycle ``L + 2`` its upstream partials
and partial errors offered back to back and its input phases in order (``act 0 … act
lag−1``, then per image ``n`` its errors and ``act n+lag``), each phase's beats back to
back. The bench queues a stream in the cycle the previous one's last beat was taken and
its source offers it from the next cycle on, so after the load and between two phases one
cycle offers nothing: a phase's first beat is offered two cycles after the previous
phase's last was taken. Every output is always ready. The count is the cycle of the last
beat the bench waits for (the last output beat, or the last input beat taken where that
comes later); the last update runs on after it.

The model steps one segment unit (:class:`~nnrtl.hw.fpdeep.node.SegmentUnit`) one cycle at
a time through the registers that decide when a beat moves, with the RTL's rules
(:mod:`.node_parts`): the act fork (FP's line buffer, the Act-RAM, the update window's
gate); FP's line buffer, its feed (a window held ``G · passes`` cycles), the CE array's
stages (:func:`.node_parts.ce_stages`), the pass accumulator, the chain join and add, the
bias stages, the pool's line buffer and register, the output fork with the mask buffer;
the SFU's backward step (a register, or the pool's take / send alternation); the δ fork
(EB, PG, ``delta_out``, closed once the mini-batch's last δ passed); EB's dilation, line
buffer, feed (a window held ``passes`` cycles), CE array, group sum, partial-error join
and add and output register; PG's line buffer on the Act-RAM, its join (one window pass a
cycle), its pipeline in flight, the drain (settle, then read / send a row) and the weight
update (:func:`~nnrtl.hw.fpdeep.update.row_cycles` a row); the node's window (``ahead``,
``passed``, ``finishing``, the quiet condition). Data never changes a count here.
"""

from .node_parts import Fifo, LineBuffer, Pipe, Source, ce_stages

__all__ = ["bench_cycles", "bench_lag", "segment_cycles"]

#: The drain's states (:class:`~nnrtl.hw.fpdeep.pg.PgModule`).
_SETTLE, _READ, _SEND = 0, 1, 2


def _final(token):
    return token[1]


def bench_lag(config):
    """The ``lag`` of ``nnrtl sim fpdeep``'s bench: one mini-batch of images sent ahead of
    their errors, at most the Act-RAM's images less the one FP takes next, at least one."""
    return max(1, min(config.act_images - 1, config.batch))


def bench_cycles(config, batches, lag):
    """The node bench's ``cycles`` under backpressure ``none``: the slowest segment's
    (:func:`segment_cycles`).

    Parameters
    ----------
    config : FpdeepConfig
    batches : int
        Mini-batches the bench runs (``batches · batch`` images; none: the load alone).
    lag : int
        Images whose activations the bench sends ahead of their errors.

    Raises
    ------
    ValueError
        ``batches`` negative or ``lag`` below 1.
    """
    return max(segment_cycles(config, n, batches, lag) for n in range(len(config.segments)))


def segment_cycles(config, n, batches, lag):
    """The cycle at which the bench has every beat of segment ``n`` of ``config``
    (:func:`bench_cycles`' parameters and ``ValueError``)."""
    for name, value, least in (("batches", batches, 0), ("lag", lag, 1)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"{name} must be an integer of at least {least}, not {value!r}")
    return _Segment(config, n, batches * config.batch, lag).run()


class _Segment:
    """One segment unit and its bench streams (module docstring)."""

    def __init__(self, config, n, images, lag):
        cfg = self.cfg = config.segments[n]
        self.images = images
        self.batch, self.eb, self.delta_out = config.batch, config.eb[n], config.deltas[n]
        takes, sends = config.partials[n]
        fp32 = cfg.precision == "fp32"
        pixels_in = cfg.w_in ** 2
        self.loads = cfg.banks * cfg.rows + (cfg.groups if cfg.completes else 0)
        phases = [("act", pixels_in)] * min(lag, images)
        for k in range(images):
            phases.append(("err", cfg.out_beats))
            if k + lag < images:
                phases.append(("act", pixels_in))
        self.phases, self.phase, self.phase_sent = phases, 0, 0
        self.between = False                # the cycle after a phase's last beat
        self.part_in = Source(images * cfg.pixels * cfg.groups if cfg.partial_in else 0)
        self.err_part_in = Source(images * pixels_in if self.eb and takes else 0)
        self.want = {"out": images * cfg.out_beats, "err": images * pixels_in * self.eb,
                     "delta": images * cfg.pixels * cfg.groups * config.deltas[n]}
        self.got = dict.fromkeys(self.want, 0)

        # FP: line buffer, feed, CE array, accumulator, chain add, bias; pool; outputs
        self.fp_lb = LineBuffer(cfg.w_in, cfg.k, stride=cfg.stride, pad=cfg.pad)
        self.fp_feed = None                 # the feed register's item: (last, final)
        self.fp_row = self.fp_pass = 0
        stages = ce_stages(cfg, cfg.q)
        if cfg.passes > 1:
            stages.append(("reg", _final))
        add = ("unit", cfg.adder_stages) if fp32 else ("reg", None)
        if cfg.partial_in:
            stages += [("join", self.part_in), add]
        if cfg.completes:
            stages += [add] if fp32 else [("reg", None)] * 2
        self.fp_pipe = Pipe(stages)
        self.pool_lb = self.pool_out = None
        if cfg.completes and cfg.pool is not None:
            kp, sp, _ = cfg.pool
            self.pool_lb = LineBuffer(cfg.w_out, kp, stride=sp, groups=cfg.groups)
        self.act_ram = Fifo(config.act_images * pixels_in)
        self.masks = Fifo(config.act_images * cfg.out_beats) if cfg.completes else None

        # SFU backward (completing): the register, or the pool's take / send alternation
        self.sfu_valid, self.taking = False, True
        self.t_pos = self.py = self.block = self.r = self.y = self.x = self.g = 0

        # EB: dilation, line buffer, feed, CE array, group sum, partial add, output
        side = cfg.w_in + 2 * cfg.pad - cfg.k + 1
        self.eb_lb = LineBuffer(side, cfg.k, pad=cfg.k - 1 - cfg.pad, groups=cfg.groups)
        self.dilate = cfg.stride > 1
        self.d_y = self.d_x = self.d_g = self.d_yp = self.d_xp = 0
        self.eb_feed = None
        self.eb_row = self.eb_pass = 0
        stages = ce_stages(cfg, cfg.p) + [("reg", _final)]
        if takes:
            stages += [("join", self.err_part_in), add]
        if not sends:
            stages.append(("reg", None))
        self.eb_pipe = Pipe(stages)

        # PG: line buffer on the Act-RAM, join, pipeline, drain; the update
        self.pg_lb = LineBuffer(cfg.w_in, cfg.k, stride=cfg.stride, pad=cfg.pad)
        self.pg_row = self.pg_pass = self.pg_images = 0
        self.draining = False
        self.in_flight = [False] * ((cfg.multiplier_stages if fp32 else 1) + 1)
        self.inflight = 0
        self.d_state, self.d_valid, self.d_bank, self.d_row = _SETTLE, False, 0, 0
        self.lgb_banks = cfg.banks + int(cfg.completes)
        self.update_steps = 3 if fp32 else 2     # read, (multiply), send; then idle
        self.update = 0                          # 0 idle, else steps left

        # the node's window and counts
        self.ahead, self.passed, self.finishing = 0, False, False
        self.act_count = self.delta_count = self.delta_images = 0
        self.err_count = self.err_images = 0
        self.fp_in = self.fp_out = self.eb_in = self.eb_out = 0

    # -- the bench ---------------------------------------------------------------------
    def _offered(self, port, between):
        return (not between and self.phase < len(self.phases)
                and self.phases[self.phase][0] == port)

    def _sent(self):
        self.phase_sent += 1
        if self.phase_sent == self.phases[self.phase][1]:
            self.phase, self.phase_sent = self.phase + 1, 0
            self.between = True

    @property
    def finished(self):
        return (self.phase == len(self.phases) and self.part_in.done
                and self.err_part_in.done and self.got == self.want)

    def run(self):
        """Step from the cycle after the load's last until the bench has every beat; the
        cycle."""
        cycle = self.loads                  # nothing else moves while the load runs
        if not self.finished:
            cycle += 1                      # nor in the next, where nothing is offered
        self.part_in.open = self.err_part_in.open = True
        cfg, images = self.cfg, self.images
        side = max(cfg.w_in, self.eb_lb.width)
        limit = 10 * (cycle + images * (4 * side * side * cfg.rows * cfg.groups + 100)
                      + (images // self.batch + 1) * 4 * self.lgb_banks * cfg.rows)
        while not self.finished:
            cycle += 1
            assert cycle <= limit, f"the cycle model of {cfg} ran past {limit} cycles"
            self.step()
        return cycle

    # -- one cycle ---------------------------------------------------------------------
    def step(self):
        """One clock cycle: every valid and ready from the registers, then the registers
        (each part reads the others' registers as they were)."""
        cfg, rows, passes = self.cfg, self.cfg.rows, self.cfg.passes
        between, self.between = self.between, False
        act_valid, err_valid = self._offered("act", between), self._offered("err", between)

        # FP, from its outputs back to the act fork
        out_ready = self.got["out"] < self.want["out"]
        fp_out_ready = out_ready and (self.masks is None or self.masks.w_rdy())
        pool = self.pool_lb
        if pool is not None:
            pool_enable = self.pool_out is None or fp_out_ready
            pipe_ready = pool.ready()
        else:
            pipe_ready = fp_out_ready
        fp_outs = self.fp_pipe.outputs(self.fp_feed)
        fp_ready, fp_into, fp_from = self.fp_pipe.readies(pipe_ready)
        fp_out = self.pool_out if pool is not None else fp_outs[-1]
        fp_fire = fp_out is not None and fp_out_ready
        fp_advance = self.fp_feed is None or fp_ready
        fp_lb_ready = self.fp_lb.ready()
        gate = not (self.ahead and self.act_count == 0)
        act_to_lb = act_valid and gate and self.act_ram.w_rdy()     # the fork's valids
        act_to_ram = act_valid and gate and fp_lb_ready
        took = act_to_lb and fp_lb_ready

        # EB's pipeline back to its input
        if self.eb:
            eb_outs = self.eb_pipe.outputs(self.eb_feed)
            eb_sink = self.got["err"] < self.want["err"]
            eb_ready, eb_into, eb_from = self.eb_pipe.readies(eb_sink)
            eb_fire = eb_outs[-1] is not None and eb_sink
            eb_advance = self.eb_feed is None or eb_ready
            real = self._real()
            eb_in_ready = real and self.eb_lb.ready()
        else:
            eb_in_ready = True
        delta_ready = not self.delta_out or self.got["delta"] < self.want["delta"]

        # the δ fork into PG, delta_out and EB, closed while the mini-batch's δ passed
        pg_open = not self.draining
        pg_lb_valid, pg_lb_last = self.pg_lb.valid, self.pg_lb.last
        pg_ready = pg_open and pg_lb_valid and self.pg_pass == passes - 1
        source_valid = self.sfu_valid if cfg.completes else err_valid
        gate_delta = not self.passed
        moved = source_valid and gate_delta and pg_ready and eb_in_ready and delta_ready
        pg_valid = source_valid and gate_delta and eb_in_ready and delta_ready
        eb_valid = source_valid and gate_delta and pg_ready and delta_ready
        pg_take = pg_open and pg_lb_valid and pg_valid
        pg_lb_in = self.act_ram.r_rdy, pg_open and pg_valid and self.pg_row == rows - 1
        pg_lb_ready = self.pg_lb.ready()
        all_ready = gate_delta and pg_ready and eb_in_ready and delta_ready

        # the SFU's backward step: errors joined with the mask buffer
        if not cfg.completes:
            err_fire, mask_read = moved, False
        else:
            mask_valid = self.masks.r_rdy
            enable = self.taking if cfg.pool is not None else (not self.sfu_valid
                                                                or all_ready)
            err_fire = err_valid and mask_valid and enable
            mask_read = enable and err_valid

        # the drain into the update, and the window
        quiet = (self.ahead and self.passed and self.act_count == 0
                 and self.fp_in == self.fp_out and self.eb_in == self.eb_out)
        idle = self.update == 0
        handed = self.d_valid and quiet and idle
        final_row = self.d_bank == self.lgb_banks - 1 and self.d_row == rows - 1
        done = self.finishing and idle

        # -- registers: FP --------------------------------------------------------------
        if pool is not None:
            if pool_enable:
                self.pool_out = (pool.last,) if pool.valid else None
            pool.tick(fp_outs[-1] is not None, pool_enable)
        self.fp_pipe.tick(self.fp_feed, fp_outs, fp_into, fp_from)
        fp_row_end = self.fp_row == rows - 1
        if fp_advance:
            self.fp_feed = None
            if self.fp_lb.valid:
                self.fp_feed = (self.fp_lb.last and fp_row_end, self.fp_pass == passes - 1)
                self.fp_row = 0 if fp_row_end else self.fp_row + 1
                self.fp_pass = 0 if self.fp_pass == passes - 1 else self.fp_pass + 1
        self.fp_lb.tick(act_to_lb, fp_advance and fp_row_end)
        if took:
            self._sent()
            self.act_count += 1
            if self.act_count == cfg.w_in ** 2:
                self.act_count, self.fp_in = 0, self.fp_in + 1
        if fp_fire:
            self.got["out"] += 1
            self.fp_out += fp_out[0]
        if self.masks is not None:
            self.masks.tick(fp_out is not None and out_ready, mask_read)
        self.act_ram.tick(act_to_ram, pg_lb_ready)

        # EB
        if self.eb:
            eb_lb_valid, eb_lb_last = self.eb_lb.valid, self.eb_lb.last
            eb_pass_end = self.eb_pass == passes - 1
            self.eb_pipe.tick(self.eb_feed, eb_outs, eb_into, eb_from)
            if eb_advance:
                self.eb_feed = None
                if eb_lb_valid:
                    self.eb_feed = (eb_lb_last, self.eb_row == rows - 1)
                    self.eb_row = 0 if self.eb_row == rows - 1 else self.eb_row + 1
                    self.eb_pass = 0 if eb_pass_end else self.eb_pass + 1
            if self.eb_lb.tick(not real or eb_valid, eb_advance and eb_pass_end):
                self._dilated()
            if eb_fire:
                self.got["err"] += 1
                self.eb_out += eb_outs[-1][0]

        # the δ fork's and the errors' counts
        delta_batch = err_batch = False
        if moved:
            self.got["delta"] += self.delta_out
            self.delta_count += 1
            if self.delta_count == cfg.pixels * cfg.groups:
                self.delta_count, self.delta_images = 0, self.delta_images + 1
                self.eb_in += self.eb
                if self.delta_images == self.batch:
                    self.delta_images, delta_batch = 0, True
        if err_fire:
            self._sent()
            self.err_count += 1
            if self.err_count == cfg.out_beats:
                self.err_count, self.err_images = 0, self.err_images + 1
                if self.err_images == self.batch:
                    self.err_images, err_batch = 0, True
        if cfg.completes:
            self._sfu(err_fire, enable, all_ready)

        # PG: the join, the pipeline in flight, the drain; the update; the window
        self._drain(pg_take, handed, final_row)
        if pg_take:
            pg_row_end = self.pg_row == rows - 1
            self.pg_row = 0 if pg_row_end else self.pg_row + 1
            self.pg_pass = 0 if self.pg_pass == passes - 1 else self.pg_pass + 1
            if pg_lb_last and pg_row_end:
                self.pg_images += 1
                if self.pg_images == self.batch:
                    self.pg_images, self.draining = 0, True
        self.pg_lb.tick(*pg_lb_in)
        if self.update:
            self.update -= 1
        elif handed:
            self.update = self.update_steps
        if handed and final_row:
            self.finishing = True
        if delta_batch:
            self.passed = True
        self.ahead += err_batch - done
        if done:
            self.finishing = self.passed = False

    def _real(self):
        """EB's dilation: the next beat is a δ pixel (else a zero beat, no input taken)."""
        if not self.dilate:
            return True
        cfg = self.cfg
        span, side = (cfg.w_out - 1) * cfg.stride, self.eb_lb.width
        inside = self.d_yp == 0 and self.d_xp == 0
        if span < side - 1:
            inside = inside and self.d_y <= span and self.d_x <= span
        return inside

    def _dilated(self):
        """EB's dilation counters after a beat into the line buffer."""
        s, side = self.cfg.stride, self.eb_lb.width
        if self.d_g == self.cfg.groups - 1:
            self.d_g = 0
            x_end = self.d_x == side - 1
            self.d_x = 0 if x_end else self.d_x + 1
            self.d_xp = 0 if x_end or self.d_xp == s - 1 else self.d_xp + 1
            if x_end:
                y_end = self.d_y == side - 1
                self.d_y = 0 if y_end else self.d_y + 1
                self.d_yp = 0 if y_end or self.d_yp == s - 1 else self.d_yp + 1
        else:
            self.d_g += 1

    def _sfu(self, taken, enable, all_ready):
        """The SFU's backward step after a cycle: the ReLU' register, or with a pool the
        pooled row taken (``pool_out · G`` beats) and then its map rows sent (``w_out · G``
        beats each, one a cycle; after the last pooled row every remaining row)."""
        cfg = self.cfg
        if cfg.pool is None:
            if enable:
                self.sfu_valid = taken
            return
        sp = cfg.pool[1]
        po, side, groups = cfg.pool_out, cfg.w_out, cfg.groups
        advance = not self.sfu_valid or all_ready
        send = advance and not self.taking
        if taken:
            if self.t_pos == po * groups - 1:
                self.block = side - (po - 1) * sp if self.py == po - 1 else sp
                self.t_pos, self.py, self.taking, self.r = 0, self.py + 1, False, 0
            else:
                self.t_pos += 1
        if advance:
            self.sfu_valid = send
        if send:
            if self.g == groups - 1:
                self.g = 0
                if self.x == side - 1:
                    self.x, row = 0, self.r
                    self.r += 1
                    if self.y == side - 1:
                        self.y = self.py = 0
                    else:
                        self.y += 1
                    if row == self.block - 1:
                        self.taking = True
                else:
                    self.x += 1
            else:
                self.g += 1

    def _drain(self, take, handed, final_row):
        """PG's pipeline in flight and its drain after a cycle: settle until no item is in
        flight, then read a row and send it, a row handed to the update at a time."""
        align = self.in_flight[-1]
        empty = self.inflight == 0
        self.in_flight = [take] + self.in_flight[:-1]
        self.inflight += take - align
        if not self.draining:
            return
        if self.d_state == _SETTLE:
            if empty:
                self.d_state = _READ
        elif self.d_state == _READ:
            self.d_state, self.d_valid = _SEND, True
        elif handed:
            self.d_valid, self.d_state = False, _READ
            if self.d_row == self.cfg.rows - 1:
                self.d_row, self.d_bank = 0, self.d_bank + 1
            else:
                self.d_row += 1
            if final_row:
                self.draining, self.d_state, self.d_bank = False, _SETTLE, 0
