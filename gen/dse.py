"""What every engine's design-space exploration shares: the resource budget it searches
under and the objective that picks one design among those that fit.

The budget (:class:`Budget`) is a share of each of the board's resources (DSP slices,
block RAM: BRAM36 and URAM, LUTs by :func:`~nnrtl.gen.engines.budget`'s rule) and an
optional cap on the processing elements. The objective (:data:`OBJECTIVES`) is
``fastest`` (fewest cycles) or ``per-dsp``: among the designs within ``tolerance`` of the
fastest one's cycles, the best throughput per DSP slice (fewest ``cycles x DSPs``), which
takes a design a little slower for much less hardware. ``nnrtl explore`` gives both to an
engine's ``explore`` hook in its :class:`~nnrtl.gen.engines.ExploreRequest`.
"""

import dataclasses
import math

from .engines import LUT_SHARE, budget
from .errors import UsageError

__all__ = ["Budget", "OBJECTIVES", "DEFAULT_TOLERANCE", "check_objective", "within",
           "choose", "tightest", "describe_objective"]

#: The objectives of ``nnrtl explore --objective``.
OBJECTIVES = ("fastest", "per-dsp")

#: ``--tolerance`` of ``--objective per-dsp``: the share of the fastest design's cycles a
#: chosen design may take beyond them.
DEFAULT_TOLERANCE = 0.05


def _share(flag, value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) \
            or not 0 < value <= 1:
        raise UsageError(f"{flag} must be a share of the board's resource in (0, 1], "
                         f"not {value!r}")
    return float(value)


@dataclasses.dataclass(frozen=True)
class Budget:
    """The share of a board an exploration may use.

    Attributes
    ----------
    dsp_share, bram_share, lut_share : float
        Shares in (0, 1] of the board's DSP slices, block RAM (BRAM36 and URAM) and LUTs
        (the LUTs an engine's resource model counts; default
        :data:`~nnrtl.gen.engines.LUT_SHARE`, where the rule is argued).
    max_pes : int or None
        The most processing elements; ``None``: no cap.

    Raises
    ------
    UsageError
        Naming the command-line flag (``--dsp-share`` ...), the value and the rule.
    """

    dsp_share: float = 1.0
    bram_share: float = 1.0
    lut_share: float = LUT_SHARE
    max_pes: int | None = None

    def __post_init__(self):
        for flag, name in (("--dsp-share", "dsp_share"), ("--bram-share", "bram_share"),
                           ("--lut-share", "lut_share")):
            _share(flag, getattr(self, name))
        cap = self.max_pes
        if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int)
                                or cap < 1):
            raise UsageError(f"--max-pes must be a positive integer, not {cap!r}")

    @classmethod
    def of(cls, request):
        """The budget an :class:`~nnrtl.gen.engines.ExploreRequest` asks for."""
        lut_share = LUT_SHARE if request.lut_share is None else request.lut_share
        return cls(dsp_share=request.dsp_share, bram_share=request.bram_share,
                   lut_share=lut_share, max_pes=request.max_pes)

    def limits(self, capacity):
        """``{"dsp", "bram36", "uram", "lut"}``: how much of each resource of
        ``capacity`` (a :class:`~nnrtl.boards.Capacity`) a design may take."""
        return {"dsp": int(self.dsp_share * capacity.dsp),
                "bram36": int(self.bram_share * capacity.bram36),
                "uram": int(self.bram_share * capacity.uram),
                "lut": budget(capacity, "lut", lut_share=self.lut_share)}

    def as_json(self, capacity):
        """The shares, the PE cap and the :meth:`limits` on ``capacity``."""
        return {**dataclasses.asdict(self), "limits": self.limits(capacity)}

    def describe(self, capacity):
        """One line: each resource's limit and share, and the PE cap."""
        limits = self.limits(capacity)
        parts = [f"{limits['dsp']:,} DSP ({self.dsp_share:.0%})",
                 f"{limits['bram36']:,} BRAM36" + (f", {limits['uram']:,} URAM"
                                                   if capacity.uram else "")
                 + f" ({self.bram_share:.0%})",
                 f"{limits['lut']:,} LUT ({self.lut_share:.0%})",
                 "no PE cap" if self.max_pes is None else f"at most {self.max_pes:,} PEs"]
        return "budget: " + ", ".join(parts)


def check_objective(objective, tolerance):
    """``(objective, tolerance)`` checked: ``tolerance`` ``None`` becomes
    :data:`DEFAULT_TOLERANCE` under ``per-dsp`` and 0 under ``fastest``.

    Raises
    ------
    UsageError
        An objective not in :data:`OBJECTIVES`, a tolerance that is not a finite number of
        at least 0, or one above 0 with ``fastest``."""
    if objective not in OBJECTIVES:
        raise UsageError(f"--objective must be one of {', '.join(OBJECTIVES)}, not "
                         f"{objective!r}")
    if tolerance is None:
        return objective, (DEFAULT_TOLERANCE if objective == "per-dsp" else 0.0)
    if isinstance(tolerance, bool) or not isinstance(tolerance, (int, float)) \
            or not math.isfinite(tolerance) or tolerance < 0:
        raise UsageError(f"--tolerance must be a finite number of at least 0, not "
                         f"{tolerance!r}")
    if objective == "fastest" and tolerance:
        raise UsageError("--tolerance goes with --objective per-dsp (the fastest design "
                         "has no tolerance)")
    return objective, float(tolerance)


def within(cycles, fastest, tolerance):
    """Whether ``cycles`` are within ``tolerance`` of the ``fastest`` cycles."""
    return cycles <= fastest * (1 + tolerance)


def choose(ranked, objective, tolerance, *, cycles, dsp):
    """The design the objective picks from ``ranked`` (fastest first, ties broken).

    ``cycles(item)`` and ``dsp(item)`` read an item's cycles and DSP slices. ``fastest``
    picks the first; ``per-dsp`` the fewest ``cycles x DSPs`` among the items within
    ``tolerance`` of the first one's cycles (ties to the earlier)."""
    if objective == "fastest":
        return ranked[0]
    best = cycles(ranked[0])
    near = [item for item in ranked if within(cycles(item), best, tolerance)]
    return min(near, key=lambda item: cycles(item) * max(1, dsp(item)))


def tightest(needs, limits, *, pes=None, max_pes=None):
    """``(name, share)``: the budget a design is nearest to (the largest share of its
    limit it takes): a resource of ``limits`` or ``"pes"`` under a PE cap."""
    shares = {key: needs[key] / limits[key] if limits[key] else math.inf
              for key in needs if key in limits}
    if max_pes is not None and pes is not None:
        shares["pes"] = pes / max_pes
    name = max(shares, key=shares.get)
    return name, shares[name]


def describe_objective(objective, tolerance):
    """One line: the objective as the table prints it."""
    if objective == "fastest":
        return "objective: fastest (fewest cycles)"
    return (f"objective: per-dsp (the best throughput per DSP among the designs within "
            f"{tolerance:.1%} of the fastest's cycles)")
