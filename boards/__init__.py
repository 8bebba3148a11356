"""The boards nnrtl generates for: one Amaranth ``XilinxPlatform`` per board, each with a
:class:`Capacity` record citing the data sheets its figures come from.

Example
-------
>>> from nnrtl.boards import get_board
>>> platform_cls = get_board("zc706")
>>> platform_cls.capacity.dsp
900
"""

from .capacity import Capacity
from .zc706 import ZC706Platform
from .vc709 import VC709Platform
from .vu9p import VU9PPlatform
from .vcu128 import VCU128Platform


__all__ = [
    "BOARDS", "board_names", "get_board", "vivado_part", "Capacity",
    "ZC706Platform", "VC709Platform", "VU9PPlatform", "VCU128Platform",
]


#: Board name -> platform class, in the order the design brief lists the boards.
BOARDS = {
    platform.name: platform
    for platform in (ZC706Platform, VC709Platform, VU9PPlatform, VCU128Platform)
}


def board_names():
    """The known board names, in :data:`BOARDS` order.

    Returns
    -------
    list of str
    """
    return list(BOARDS)


def get_board(name):
    """The platform class of the board called ``name``.

    Parameters
    ----------
    name : str
        One of :func:`board_names`.

    Returns
    -------
    type
        A :class:`amaranth.vendor.XilinxPlatform` subclass; instantiate it to build.

    Raises
    ------
    TypeError
        If ``name`` is not a string.
    ValueError
        If no board has that name.
    """
    if not isinstance(name, str):
        raise TypeError(f"board name must be a string, not {name!r}")
    try:
        return BOARDS[name]
    except KeyError:
        raise ValueError(f"unknown board {name!r}; valid boards: "
                         f"{', '.join(board_names())}") from None


def vivado_part(platform_class):
    """The exact part name Vivado is given for a board, e.g. ``xc7z045ffg900-2``."""
    return platform_class()._part
