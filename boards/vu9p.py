"""Xilinx VCU118 evaluation board: Virtex UltraScale+ XCVU9P-L2FLGA2104E.

The board is named after its device here (``"vu9p"``), as the FARNN paper does. Pin locations
and I/O standards are those of the VCU118 Evaluation Board User Guide (UG1224) and its master
XDC; they agree with the public VCU118 constraint files of litex-boards
(``xilinx_vcu118.py``) and of Alex Forencich, used to cross-check them.
"""

from amaranth.build import Attrs, Clock, DiffPairs, Pins, Resource
from amaranth.vendor import XilinxPlatform
from amaranth_boards.resources import LEDResources

from .capacity import Capacity, peak_bandwidth_gbps


__all__ = ["VU9PPlatform"]


class VU9PPlatform(XilinxPlatform):
    """The VCU118 board (Virtex UltraScale+ XCVU9P-L2FLGA2104E) as an Amaranth platform.

    The default clock is the 125 MHz system clock; the default reset is the CPU_RESET push
    button; eight user LEDs are ``led`` 0 to 7. The device has three SLRs.

    Attributes
    ----------
    name : str
        ``"vu9p"``, the name :func:`nnrtl.boards.get_board` knows it by.
    title : str
        Human-readable board and part.
    capacity : Capacity
        FPGA resources and the bandwidth of the two DDR4 component interfaces.
    """
    name        = "vu9p"
    title       = "Xilinx VCU118 (XCVU9P-L2FLGA2104E)"

    # Vivado part xcvu9p-flga2104-2L-e: for UltraScale(+) Amaranth joins the three with "-",
    # and the -L2 "E"-temperature ordering code is speed "2L" and temperature "e".
    device      = "xcvu9p"
    package     = "flga2104"
    speed       = "2L-e"
    default_clk = "clk125"
    default_rst = "cpu_reset"

    resources   = [
        # UG1224 clock sources: 125 MHz system clock on AY24 (P) / AY23 (N), LVDS.
        Resource("clk125", 0, DiffPairs("AY24", "AY23", dir="i"),
                 Clock(125e6), Attrs(IOSTANDARD="LVDS")),

        # UG1224 "User I/O", user pushbuttons: CPU_RESET on L19, 1.2 V bank, active high.
        Resource("cpu_reset", 0, Pins("L19", dir="i"), Attrs(IOSTANDARD="LVCMOS12")),

        # UG1224 "User I/O", user LEDs GPIO_LED_0..7, LVCMOS12.
        *LEDResources(pins="AT32 AV34 AY30 BB32 BF32 AU37 AV36 BA37",
                      attrs=Attrs(IOSTANDARD="LVCMOS12")),
    ]
    connectors  = []

    capacity = Capacity(
        # DS890 / XMP103 VU9P column: 1,182K CLB LUTs, 2,364K CLB flip-flops, 6,840 DSP
        # slices, 2,160 block RAMs (75.9 Mb), UltraRAM 270.0 Mb (= 960 × 288 Kb).
        # The data sheet rounds LUTs and flip-flops to thousands; the exact counts are
        # 147,780 CLBs × 8 LUTs and × 16 flip-flops, which is what Vivado reports as
        # available for this part.
        lut=1_182_240,
        ff=2_364_480,
        dsp=6840,
        dsp_kind="DSP48E2",
        bram36=2160,
        uram=960,
        onchip_mb=345.9,            # 75.9 Mb block RAM + 270.0 Mb UltraRAM
        # UG1224 "DDR4 Component Memory": two independent DDR4 interfaces (C1, C2), each
        # five x16 components = 80 bits, of which 64 carry data (the public VCU118 XDCs wire
        # 80 DQ per interface). NOT CONFIRMED: the 2400 MT/s rate could not be re-read from
        # UG1224 for this record; the Micron parts named in public VCU118 constraint files
        # (MT40A256M16GE-075E) are DDR4-2666 bins, so 2400 MT/s is, if anything, low.
        offchip_kind="DDR4-2400, 2 x 64-bit component interfaces (C1, C2; 80 bits wired)",
        offchip_gbps=peak_bandwidth_gbps(channels=2, width_bits=64, mega_transfers=2400),
        yosys_family="xcup",
        sources=(
            "Xilinx DS890 UltraScale Architecture and Product Data Sheet: Overview, "
            "Virtex UltraScale+ FPGA feature summary table, VU9P column (CLB LUTs, CLB "
            "flip-flops, block RAM Mb, UltraRAM Mb, DSP slices)",
            "Xilinx XMP103 UltraScale+ FPGAs Product Selection Guide, Virtex UltraScale+ "
            "table, VU9P column (36K block RAM blocks 2,160)",
            "Xilinx UG1224 VCU118 Evaluation Board User Guide, section "
            "'DDR4 Component Memory' (two 80-bit DDR4 interfaces C1 and C2)",
        ),
    )
