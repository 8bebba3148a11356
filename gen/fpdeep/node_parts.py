"""Cycle models of the parts of an FPDeep segment unit (:mod:`nnrtl.hw.fpdeep.node`) that
:mod:`.node_cycles` composes: each holds the registers that decide *when* its beats move
(positions, valid bits, levels), not the data, and steps one clock cycle at a time with the
RTL's own valid/ready rules.

* :class:`LineBuffer`: :class:`nnrtl.hw.fpdeep.line_buffer.LineBuffer` (the take rule
  ``free``, the issue rule ``arrived``, the next image after both sides are done).
* :class:`Fifo`: Amaranth's ``SyncFIFOBuffered`` (the Act-RAM and the mask buffer): an
  inner FIFO of ``depth − 1`` entries and an output register; one entry a plain register.
* :class:`Pipe`: the elastic pipelines of :mod:`nnrtl.hw.fpdeep.pipe`: register stages
  (``register_stage``: a stage loads when ``~valid | ready``), ``hw/arith`` float units of
  ``n`` stages that move as a whole (``unit_stage``: ``i.ready = ~o.valid | o.ready``; a
  wire at 0 stages) and joins with a bench stream (``join``).
* :class:`Source`: a stream the bench offers continuously (every beat in the cycle after
  the previous one is taken).
"""

__all__ = ["LineBuffer", "Fifo", "Pipe", "Source", "ce_stages"]

from ...hw.fpdeep.conv import tree_levels


class Source:
    """``count`` beats offered back to back once :attr:`open` is set (the bench's free
    running sources, after the LPRAM load)."""

    __slots__ = ("count", "sent", "open")

    def __init__(self, count):
        self.count, self.sent, self.open = count, 0, False

    @property
    def valid(self):
        return self.open and self.sent < self.count

    @property
    def done(self):
        return self.sent == self.count


class LineBuffer:
    """The line buffer of a ``width``-wide map, ``k × k`` windows at ``stride`` with
    ``pad``, ``groups`` beats a pixel (:class:`nnrtl.hw.fpdeep.line_buffer.LineBuffer`'s
    registers: input position ``ry, rx, rg``, output position ``oy, ox, og``, ``in_done``,
    ``win_done``, the output register's ``valid`` and ``last``)."""

    __slots__ = ("width", "k", "stride", "pad", "groups", "w_out", "ry", "rx", "rg",
                 "oy", "ox", "og", "in_done", "win_done", "valid", "last")

    def __init__(self, width, k, *, stride=1, pad=0, groups=1):
        self.width, self.k, self.stride, self.pad, self.groups = width, k, stride, pad, groups
        self.w_out = (width + 2 * pad - k) // stride + 1
        self.ry = self.rx = self.rg = self.oy = self.ox = self.og = 0
        self.in_done = self.win_done = self.valid = self.last = False

    def ready(self):
        """``i.ready``: the slot of the next beat holds no pixel a window yet to leave
        needs."""
        if self.in_done:
            return False
        if self.win_done:
            return True
        s, p = self.stride, self.pad
        by, bx = self.oy * s - p, self.ox * s - p
        if p:
            y_min = max(by, 0)
            x_min = 0 if bx < 0 or (by + s <= 0 and self.oy != self.w_out - 1) else bx
        else:
            y_min, x_min = by, bx
        return (self.ry, self.rx) < (y_min + self.k, x_min)

    def _arrived(self):
        if self.in_done:
            return True
        s, p, last = self.stride, self.pad, self.width - 1
        by, bx = self.oy * s - p, self.ox * s - p
        return ((min(by + self.k - 1, last), min(bx + self.k - 1, last), self.og)
                < (self.ry, self.rx, self.rg))

    def tick(self, i_valid, o_ready):
        """One cycle with ``i.valid`` and ``o.ready``; returns whether a beat was taken."""
        take = i_valid and self.ready()
        advance = not self.valid or o_ready
        issue = advance and not self.win_done and self._arrived()
        restart = self.win_done and self.in_done
        last = (self.og == self.groups - 1 and self.ox == self.w_out - 1
                and self.oy == self.w_out - 1)
        if take:
            if self.rg == self.groups - 1:
                self.rg = 0
                if self.rx == self.width - 1:
                    self.rx = 0
                    self.in_done = self.ry == self.width - 1
                    self.ry += 1
                else:
                    self.rx += 1
            else:
                self.rg += 1
        if advance:
            self.valid, self.last = issue, last
        if issue:
            if self.og == self.groups - 1:
                self.og = 0
                if self.ox == self.w_out - 1:
                    self.ox = 0
                    if self.oy == self.w_out - 1:
                        self.oy, self.win_done = 0, True
                    else:
                        self.oy += 1
                else:
                    self.ox += 1
            else:
                self.og += 1
        if restart:
            self.win_done = self.in_done = False
            self.ry = 0
        return take


class Fifo:
    """Amaranth's ``SyncFIFOBuffered`` of ``depth`` entries: ``w_rdy`` while the inner FIFO
    (``depth − 1`` entries) has room, ``r_rdy`` the output register's valid bit (one entry:
    a register that is full or empty)."""

    __slots__ = ("depth", "inner", "r_rdy")

    def __init__(self, depth):
        self.depth, self.inner, self.r_rdy = depth, 0, False

    def w_rdy(self):
        if self.depth == 1:
            return not self.r_rdy
        return self.inner != self.depth - 1

    def tick(self, w_en, r_en):
        """One cycle with ``w_en`` and ``r_en``; returns ``(written, read)``."""
        write = w_en and self.w_rdy()
        read = r_en and self.r_rdy
        if self.depth == 1:
            if write:
                self.r_rdy = True
            if read:
                self.r_rdy = False
            return write, read
        inner_read = self.inner != 0 and (not self.r_rdy or r_en)
        self.inner += write - inner_read
        if inner_read:
            self.r_rdy = True
        elif r_en:
            self.r_rdy = False
        return write, read


def ce_stages(cfg, tiles):
    """The stages of :func:`nnrtl.hw.fpdeep.conv.ce_array` with ``tiles`` tiles a CE of
    ``K²`` taps: fixed16 ``1 + tree_levels(K²)`` registers (the :class:`MacTile`'s) and
    ``tree_levels(tiles)`` (the CE tree); fp32 the FloatMul unit, then one FloatAdd unit a
    level of both trees."""
    levels = tree_levels(cfg.taps) + tree_levels(tiles)
    if cfg.precision == "fp32":
        return [("unit", cfg.multiplier_stages)] + [("unit", cfg.adder_stages)] * levels
    return [("reg", None)] * (1 + levels)


class Pipe:
    """An elastic pipeline of ``stages``: ``("reg", keep)`` a register stage (``keep``: a
    token predicate, the item registered only where it holds, as the pass accumulator's and
    EB's group sum's output valid), ``("unit", n)`` a float unit of ``n`` stages moving as a
    whole, ``("join", source)`` a join with the :class:`Source` ``source``. Tokens are any
    values but ``None`` (no item)."""

    __slots__ = ("stages", "slots")

    def __init__(self, stages):
        self.stages = [tuple(stage) for stage in stages]
        self.slots = [[None] * (1 if kind == "reg" else arg if kind == "unit" else 0)
                      for kind, arg in self.stages]

    def outputs(self, head):
        """Per stage the item at its output (``None``: not valid), ``head`` at the input."""
        found, token = [], head
        for (kind, arg), slots in zip(self.stages, self.slots):
            if slots:
                token = slots[-1]
            elif kind == "join" and not arg.valid:
                token = None
            found.append(token)
        return found

    def readies(self, ready_out):
        """Per stage the ready at its input, the pipeline's ``ready`` first: ``(ready_in,
        [ready into stage n], [ready out of stage n])``."""
        into, out, ready = [], [], ready_out
        for (kind, arg), slots in zip(reversed(self.stages), reversed(self.slots)):
            out.append(ready)
            if slots:
                ready = slots[-1] is None or ready
            elif kind == "join":
                ready = ready and arg.valid
            into.append(ready)
        into.reverse()
        out.reverse()
        return into[0] if into else ready_out, into, out

    def tick(self, head, outputs, into, out):
        """Move the items of one cycle (``outputs`` and the readies of this cycle)."""
        token = head
        for n, ((kind, arg), slots) in enumerate(zip(self.stages, self.slots)):
            if kind == "join":
                if token is not None and arg.valid and out[n]:
                    arg.sent += 1
            elif into[n]:
                if kind == "reg":
                    slots[0] = token if arg is None or token is None or arg(token) else None
                elif slots:
                    slots.insert(0, token)
                    slots.pop()
            token = outputs[n]
