"""A named configuration of an engine (``--preset``): the record every engine's presets use
(:data:`nnrtl.hw.sbe.PRESETS`, :data:`nnrtl.hw.farnn.presets.PRESETS`) and the platform
lists (:class:`nnrtl.gen.engines.Engine`'s ``presets``)."""

import dataclasses
from typing import Any

__all__ = ["Preset"]


@dataclasses.dataclass(frozen=True)
class Preset:
    """A paper's design, or one chosen for it: its configuration, board and sources.

    Attributes
    ----------
    config : the engine's configuration class
    board : str
        :func:`nnrtl.boards.get_board` name.
    source : str
        What the paper states and what was chosen here because it does not.
    clock_hz : float or None
        The clock the paper reports for it; ``None`` when the paper's text does not give it.
    paper_gops : float or None
        The throughput the paper reports for it; ``None`` when its text does not give it.
    """

    config: Any
    board: str
    source: str
    clock_hz: float | None = None
    paper_gops: float | None = None
