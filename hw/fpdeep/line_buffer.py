"""The multi-bank line buffer (spec §3.3-3.4): a raster stream of pixels in, K×K windows out,
with the zero padding injected and the stride applied.

Streams
-------
``i``: one beat per pixel and group: ``C`` words (all ``C`` channels of the pixel at once;
decision: the Act-RAM word is a pixel of the segment's S_IC channels, which the LB broadcasts
to the CEs as K×K×S_IC words per cycle). With ``groups`` = ``G`` > 1 a pixel is ``G``
consecutive beats (the SFU's pool reads the conv output this way: ``G`` groups of ``P``
channels). Beats arrive in raster order, images back to back.

``o``: one window per beat, :func:`window_layout`: ``taps[t][c]``, ``t = ky·K + kx``, and
``last`` (the image's last window). Windows leave in raster order of the output pixels
(``W_out = (W + 2·pad − K) // stride + 1``), each pixel's ``G`` groups in turn; a tap outside
the map is 0 (zero padding; +0.0 in fp32).

Storage and schedule
--------------------
``K × K`` banks, bank ``(r mod K, c mod K)`` holding pixel ``(r, c)`` (group ``g``) at
address ``(c div K)·G + g``: a window's K² pixels lie in K² different banks, so every bank
is read once per window, one window per cycle. The banks hold K rows (``depth_beats`` =
``K²·⌈W/K⌉·G``), one row more than a shift-register line buffer's ``(K−1)·W + K`` pixels
(:attr:`LineBuffer.min_depth`): the price of one read per bank per cycle with any stride and
padding. A beat is taken when the pixel it overwrites (K rows back) is older than every
pixel the next window still needs; a window leaves when its last pixel in the map has
arrived. Bottom and right padding need no input: those windows leave after the image's last
pixel. Decision: the next image's pixels are taken once the current image's windows have
all left (one bubble of the fill, ``(K−1−pad)`` rows, per image; the steady state within an
image is one window per cycle).

Latency: a window leaves one cycle after the beat completing it is taken (synchronous bank
reads, one output register).
"""

from amaranth.hdl import Const, Module, Mux, Signal, Value
from amaranth.lib import data, stream, wiring
from amaranth.lib.memory import Memory
from amaranth.lib.wiring import In, Out


__all__ = ["LineBuffer", "pixel_layout", "window_layout"]


def pixel_layout(word_bits, channels):
    """An input beat: ``channels`` words."""
    return data.ArrayLayout(word_bits, channels)


def window_layout(word_bits, channels, k):
    """An output beat: ``taps`` (K² pixels of ``channels`` words) and ``last``."""
    return data.StructLayout({
        "taps": data.ArrayLayout(pixel_layout(word_bits, channels), k * k),
        "last": 1,
    })


def _lex_less(a, b):
    """``a < b`` for tuples of values compared lexicographically."""
    result = Const(0)
    for x, y in reversed(list(zip(a, b))):
        result = (x < y) | ((x == y) & result)
    return result


class LineBuffer(wiring.Component):
    """K×K windows of a ``width × width`` map of ``channels``-word pixels.

    Parameters
    ----------
    width : int
        Side of the input map.
    k, stride, pad : int
    channels : int
        Words per beat.
    word_bits : int
    groups : int
        Beats per pixel (default 1).

    Raises
    ------
    TypeError
        A size that is no integer or below its least value (1; 0 for ``pad``).
    ValueError
        ``k``, ``pad`` and ``stride`` giving no window inside the padded map.

    Attributes
    ----------
    i : In(stream.Signature(pixel_layout))
    o : Out(stream.Signature(window_layout))
    w_out : int
    depth_beats : int
        Beats the banks hold.
    min_depth : int
        ``(K−1)·W + K`` pixels (× groups): what a shift-register line buffer holds.
    latency : int
        Cycles from the beat completing a window to the window on ``o`` (1).
    """

    def __init__(self, width, k, *, stride=1, pad=0, channels=1, word_bits=32, groups=1):
        for name, value, least in (("width", width, 1), ("k", k, 1), ("stride", stride, 1),
                                   ("pad", pad, 0), ("channels", channels, 1),
                                   ("word_bits", word_bits, 1), ("groups", groups, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or value < least:
                raise TypeError(f"{name} must be an integer of at least {least}, "
                                f"not {value!r}")
        if pad >= k or (width + 2 * pad - k) // stride + 1 < 1 or k > width + 2 * pad:
            raise ValueError(f"k {k}, pad {pad} must give a window inside the padded "
                             f"{width}-wide map with pad < k")
        self._width, self._k, self._stride, self._pad = width, k, stride, pad
        self._channels, self._word_bits, self._groups = channels, word_bits, groups
        super().__init__({
            "i": In(stream.Signature(pixel_layout(word_bits, channels))),
            "o": Out(stream.Signature(window_layout(word_bits, channels, k))),
        })

    @property
    def w_out(self):
        return (self._width + 2 * self._pad - self._k) // self._stride + 1

    @property
    def bank_depth(self):
        return -(-self._width // self._k) * self._groups

    @property
    def depth_beats(self):
        return self._k ** 2 * self.bank_depth

    @property
    def min_depth(self):
        return ((self._k - 1) * self._width + self._k) * self._groups

    latency = 1

    def elaborate(self, platform):
        m = Module()
        W, K, s, p, G = self._width, self._k, self._stride, self._pad, self._groups
        beat = pixel_layout(self._word_bits, self._channels)

        # input side: position of the next beat to take
        ry = Signal(range(W + 1))
        rx = Signal(range(W))
        rg = Signal(range(G))
        ry_mod = Signal(range(K))
        rx_mod = Signal(range(K))
        rx_div = Signal(range(-(-W // K) + 1))
        in_done = Signal()                              # ry == W

        # output side: the next window, base = o·s − p as (div, mod) of K and as a value
        oy = Signal(range(self.w_out))
        ox = Signal(range(self.w_out))
        og = Signal(range(G))
        low, high = -p, (self.w_out - 1) * s - p + K + 1
        by = Signal(range(low, high + 1))
        bx = Signal(range(low, high + 1))
        div_low = (-p) // K
        div_high = high // K + 2
        by_div = Signal(range(div_low, div_high), init=div_low)
        bx_div = Signal(range(div_low, div_high), init=div_low)
        by_mod = Signal(range(K), init=(-p) % K)
        bx_mod = Signal(range(K), init=(-p) % K)
        m.d.comb += [by.eq(by_div * K + by_mod), bx.eq(bx_div * K + bx_mod)]
        win_done = Signal()

        # banks
        banks = {}
        for a in range(K):
            for b in range(K):
                mem = Memory(shape=beat, depth=self.bank_depth, init=[])
                m.submodules[f"bank_{a}_{b}"] = mem
                banks[a, b] = (mem.write_port(), mem.read_port())

        # take a beat: its slot's old pixel (ry − K, rx) is older than the oldest pixel a
        # window yet to leave needs: (max(by, 0), max(bx, 0)) of the next window
        # (every later window of this row needs pixels at or after it; the next row's
        # windows need (max(by + s, 0), 0), the same row when the rows are top padding)
        if p:
            y_min = Mux(by < 0, 0, by)
            x_min = Mux((bx < 0) | ((by + s <= 0) & (oy != self.w_out - 1)), 0, bx)
        else:                           # no padding: by, bx ≥ 0 (no constant comparisons)
            y_min, x_min = by, bx
        free = win_done | _lex_less((ry, rx), (y_min + K, x_min))
        take = Signal()
        m.d.comb += [take.eq(~in_done & free), self.i.ready.eq(take)]
        for (a, b), (write, _) in banks.items():
            m.d.comb += [
                write.en.eq(take & self.i.valid & (ry_mod == a) & (rx_mod == b)),
                write.addr.eq(rx_div * G + rg),
                write.data.eq(self.i.payload),
            ]
        with m.If(take & self.i.valid):
            with m.If(rg == G - 1):
                m.d.sync += rg.eq(0)
                with m.If(rx == W - 1):
                    m.d.sync += [rx.eq(0), rx_mod.eq(0), rx_div.eq(0), ry.eq(ry + 1),
                                 ry_mod.eq(Mux(ry_mod == K - 1, 0, ry_mod + 1))]
                    with m.If(ry == W - 1):
                        m.d.sync += in_done.eq(1)
                with m.Else():
                    m.d.sync += [rx.eq(rx + 1),
                                 rx_mod.eq(Mux(rx_mod == K - 1, 0, rx_mod + 1)),
                                 rx_div.eq(rx_div + (rx_mod == K - 1))]
            with m.Else():
                m.d.sync += rg.eq(rg + 1)

        # issue a window: its last pixel in the map has arrived
        y_max = Mux(by + K - 1 > W - 1, W - 1, by + K - 1)
        x_max = Mux(bx + K - 1 > W - 1, W - 1, bx + K - 1)
        arrived = _lex_less((y_max, x_max, og), (ry, rx, rg)) | in_done
        advance = Signal()
        issue = Signal()
        out_valid = Signal()
        m.d.comb += [advance.eq(~out_valid | self.o.ready),
                     issue.eq(advance & ~win_done & arrived)]
        for (a, b), (_, read) in banks.items():
            m.d.comb += [read.en.eq(advance),
                         # (b < bx_mod is constant 0 for the last bank column: left out,
                         # Verilator refuses a constant comparison)
                         read.addr.eq((bx_div + ((b < bx_mod) if b < K - 1 else 0)) * G + og)]
        # what the read belongs to: rotation and padding mask, registered with it
        mod_y = Signal(range(K))
        mod_x = Signal(range(K))
        inside = Signal(K * K)
        last = Signal()
        with m.If(advance):
            m.d.sync += [out_valid.eq(issue), mod_y.eq(by_mod), mod_x.eq(bx_mod)]
            for ky in range(K):
                for kx in range(K):
                    # without padding a window never starts left of or above the map
                    above = (by + ky >= 0) & (bx + kx >= 0) if p else Const(1)
                    m.d.sync += inside[ky * K + kx].eq(
                        above & (by + ky < W) & (bx + kx < W))
            m.d.sync += last.eq((og == G - 1) & (ox == self.w_out - 1)
                                & (oy == self.w_out - 1))

        def step(mod, div, by_step):
            quotient, remainder = divmod(by_step, K)
            wrap = mod + remainder >= K
            return [mod.eq(Mux(wrap, mod + remainder - K, mod + remainder)),
                    div.eq(div + quotient + wrap)]

        with m.If(issue):
            with m.If(og == G - 1):
                m.d.sync += og.eq(0)
                with m.If(ox == self.w_out - 1):
                    m.d.sync += [ox.eq(0), bx_div.eq(div_low), bx_mod.eq((-p) % K)]
                    with m.If(oy == self.w_out - 1):
                        m.d.sync += [oy.eq(0), by_div.eq(div_low), by_mod.eq((-p) % K),
                                     win_done.eq(1)]
                    with m.Else():
                        m.d.sync += [oy.eq(oy + 1), *step(by_mod, by_div, s)]
                with m.Else():
                    m.d.sync += [ox.eq(ox + 1), *step(bx_mod, bx_div, s)]
            with m.Else():
                m.d.sync += og.eq(og + 1)

        # next image once both sides are done with this one
        with m.If(win_done & in_done):
            m.d.sync += [win_done.eq(0), in_done.eq(0), ry.eq(0), ry_mod.eq(0)]

        # the window: tap (ky, kx) from bank ((mod_y + ky) mod K, (mod_x + kx) mod K), in
        # two rotations of K inputs each (rows, then columns), not one of K² inputs
        m.d.comb += [self.o.valid.eq(out_valid), self.o.payload.last.eq(last)]
        rows = {}
        for ky in range(K):
            for b in range(K):
                row = rows[ky, b] = Signal(beat, name=f"row_{ky}_{b}")
                with m.Switch(mod_y):
                    for my in range(K):
                        with m.Case(my):
                            m.d.comb += row.eq(banks[(my + ky) % K, b][1].data)
        for ky in range(K):
            for kx in range(K):
                tap = Signal(beat, name=f"tap_{ky}_{kx}")
                with m.Switch(mod_x):
                    for mx in range(K):
                        with m.Case(mx):
                            m.d.comb += tap.eq(rows[ky, (mx + kx) % K])
                m.d.comb += self.o.payload.taps[ky * K + kx].eq(
                    Mux(inside[ky * K + kx], Value.cast(tap), 0))
        return m
