"""What the FP, EB and PG modules of a layer segment share: the segment's configuration and
MAC count (:class:`SegmentModule`) and their LPRAM read port, own or shared (spec §3.3: one
LPRAM per segment, FP and EB reading different rows concurrently, the weight update writing
it; :mod:`.node` builds the shared one)."""

from amaranth.lib import data, stream, wiring
from amaranth.lib.wiring import In, Out

from .conv import ce_latency
from .lpram import Lpram, load_layout, row_layout

__all__ = ["SegmentModule", "READ_PORTS"]

#: The LPRAM's read ports: name -> (rows it addresses, banks it returns) of a config.
READ_PORTS = {
    "fp": lambda cfg: (cfg.rows, cfg.banks + 1),
    "eb": lambda cfg: (cfg.rows, cfg.banks),
}


class SegmentModule(wiring.Component):
    """A module of the segment ``cfg`` reading the LPRAM through its port ``port`` (``"fp"``
    or ``"eb"``, or ``None``): with ``shared_lpram`` the ports ``{port}_addr``,
    ``{port}_en`` (out) and ``{port}_data`` (in) reach an LPRAM outside, else the module
    builds its own with a ``load`` stream."""

    #: The configuration's attribute giving a CE's tiles (FP ``q``, EB ``p``).
    _tiles = "q"

    def __init__(self, cfg, ports, *, port=None, shared_lpram=False):
        self._cfg = cfg
        self._port, self._shared = port, bool(shared_lpram)
        ports = dict(ports)
        if port is not None and self._shared:
            rows, banks = READ_PORTS[port](cfg)
            ports.update({f"{port}_addr": Out(range(rows)), f"{port}_en": Out(1),
                          f"{port}_data": In(data.ArrayLayout(row_layout(cfg), banks))})
        elif port is not None:
            ports["load"] = In(stream.Signature(load_layout(cfg)))
        super().__init__(ports)

    @property
    def cfg(self):
        return self._cfg

    @property
    def macs(self):
        """``P · Q · K²`` MAC units."""
        return self._cfg.macs

    @property
    def ce_latency(self):
        """Cycles through the CE array without stalls."""
        return ce_latency(self._cfg, getattr(self._cfg, self._tiles), self._cfg.taps)

    def lpram_read(self, m):
        """``(addr, en, data)`` of the module's read port: its own ports when shared, else
        those of an :class:`Lpram` built here (loaded from ``load``)."""
        port = self._port
        if self._shared:
            owner = self
        else:
            owner = Lpram(self._cfg, eb_port=port == "eb")
            m.submodules.lpram = owner
            wiring.connect(m, wiring.flipped(self.load), owner.load)
        return (getattr(owner, f"{port}_addr"), getattr(owner, f"{port}_en"),
                getattr(owner, f"{port}_data"))
