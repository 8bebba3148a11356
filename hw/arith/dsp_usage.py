"""How much of the floating-point family's work DSP slices take, in the three levels of the
vendor's "DSP usage" (Xilinx Floating-Point Operator, PG060: no usage, some, max).

A level names the options of each unit (:class:`~.float_mul.FloatMul`,
:class:`~.float_add.FloatAdd`), never a result bit: every level computes the same bits.
Each level's DSP slices for fp32, 3 stages, by Yosys ``synth_xilinx`` (flattened), ``xc7``
(DSP48E1) / ``xcup`` (DSP48E2); the bench's ``arith`` part measures every unit's LUTs
(``make bench``):

========  ==========================================  ================================
level     multiplier                                  adder
========  ==========================================  ================================
``none``  significands' product in LUTs               shifts in LUTs (``shifts="lut"``):
          (``product="lut"``), shifts in LUTs: 0 / 0  0 / 0
``some``  product on DSP slices, shifts in LUTs:      as ``none``: 0 / 0
          2 / 2
``max``   product and the right shift of a subnormal  both shifts as products on DSP
          result on DSP slices (``shifts="dsp"``):    slices (``shifts="dsp"``): 4 / 3
          4 / 3
========  ==========================================  ================================

``some`` is what a unit builds by default. An engine takes the level as one parameter for
all its units (a board with DSP slices to spare takes ``max``, one short of them ``none``).
"""

__all__ = ["DSP_USAGE", "check_dsp_usage", "multiplier_options", "adder_options"]

#: The levels, least DSP first.
DSP_USAGE = ("none", "some", "max")


def check_dsp_usage(dsp_usage, name="dsp_usage"):
    """Raise ``ValueError`` naming ``name`` unless ``dsp_usage`` is one of
    :data:`DSP_USAGE`."""
    if dsp_usage not in DSP_USAGE:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, DSP_USAGE))}, "
                         f"not {dsp_usage!r}")


def multiplier_options(dsp_usage):
    """:class:`~.float_mul.FloatMul`'s keyword arguments (``product``, ``shifts``) at
    level ``dsp_usage``.

    Raises
    ------
    ValueError
        If ``dsp_usage`` is not one of :data:`DSP_USAGE`.
    """
    check_dsp_usage(dsp_usage)
    return {"product": "lut" if dsp_usage == "none" else "dsp",
            "shifts": "dsp" if dsp_usage == "max" else "lut"}


def adder_options(dsp_usage):
    """:class:`~.float_add.FloatAdd`'s keyword arguments (``shifts``) at level
    ``dsp_usage``.

    Raises
    ------
    ValueError
        If ``dsp_usage`` is not one of :data:`DSP_USAGE`.
    """
    check_dsp_usage(dsp_usage)
    return {"shifts": "dsp" if dsp_usage == "max" else "lut"}
