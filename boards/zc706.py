"""Xilinx ZC706 evaluation board: Zynq-7000 XC7Z045-2FFG900C.

Pin locations and I/O standards are those of the ZC706 Evaluation Board User Guide (UG954)
and its master XDC; they agree with the public ZC706 constraint files of litex-boards
(``xilinx_zc706.py``) and VLSI-EDA/PoC (``ucf/ZC706``), which were used to cross-check them.
"""

from amaranth.build import Attrs, Clock, DiffPairs, Pins, Resource
from amaranth.vendor import XilinxPlatform
from amaranth_boards.resources import LEDResources

from .capacity import Capacity, peak_bandwidth_gbps


__all__ = ["ZC706Platform"]


class ZC706Platform(XilinxPlatform):
    """The ZC706 board (Zynq-7000 XC7Z045-2FFG900C) as an Amaranth platform.

    The default clock is the 200 MHz system oscillator; the default reset is the CPU_RESET
    push button; four user LEDs are ``led`` 0 to 3.

    Attributes
    ----------
    name : str
        ``"zc706"``, the name :func:`nnrtl.boards.get_board` knows it by.
    title : str
        Human-readable board and part.
    capacity : Capacity
        Programmable-logic resources and PL-side memory bandwidth.
    """
    name        = "zc706"
    title       = "Xilinx ZC706 (XC7Z045-2FFG900)"

    # Vivado part xc7z045ffg900-2 (Amaranth joins device, package and speed for 7 series).
    device      = "xc7z045"
    package     = "ffg900"
    speed       = "2"
    default_clk = "clk200"
    default_rst = "cpu_reset"

    resources   = [
        # UG954 "System Clock Source": 200 MHz SiT9102 oscillator (U64), SYSCLK_P/N on
        # H9/G9, LVDS.
        Resource("clk200", 0, DiffPairs("H9", "G9", dir="i"),
                 Clock(200e6), Attrs(IOSTANDARD="LVDS")),

        # UG954 "User I/O", user pushbuttons: CPU_RESET (SW13) on A8, 1.5 V bank, active high.
        Resource("cpu_reset", 0, Pins("A8", dir="i"), Attrs(IOSTANDARD="LVCMOS15")),

        # UG954 "User I/O", user LEDs: GPIO_LED_LEFT Y21, GPIO_LED_CENTER G2,
        # GPIO_LED_RIGHT W21, GPIO_LED_0 A17. They sit in banks of different VCCO (2.5 V
        # and 1.5 V), hence two I/O standards.
        *LEDResources(pins={0: "Y21", 2: "W21"}, attrs=Attrs(IOSTANDARD="LVCMOS25")),
        *LEDResources(pins={1: "G2", 3: "A17"}, attrs=Attrs(IOSTANDARD="LVCMOS15")),
    ]
    connectors  = []

    capacity = Capacity(
        # DS190 Z-7045 column: 218,600 LUTs, 437,200 flip-flops, 900 DSP slices,
        # "19.2 Mb (545)" block RAM. No UltraRAM in 7 series.
        lut=218_600,
        ff=437_200,
        dsp=900,
        dsp_kind="DSP48E1",
        bram36=545,
        uram=0,
        onchip_mb=19.2,             # 545 × 36 Kb = 19,620 Kb = 19.16 Mb
        # UG954 "DDR3 SODIMM Memory (PL)": one 1 GB, 64-bit DDR3 SODIMM on the PL HP banks.
        # NOT CONFIRMED: the 1600 MT/s rate (the DDR3-1600 bin of the SODIMM UG954 names)
        # could not be re-read from UG954 or DS191 for this record.
        # The PS-side 1 GB DDR3 (32-bit) belongs to the ARM host and is not counted.
        offchip_kind="DDR3-1600, 64-bit SODIMM, 1 GB, PL side",
        offchip_gbps=peak_bandwidth_gbps(channels=1, width_bits=64, mega_transfers=1600),
        yosys_family="xc7",
        sources=(
            "Xilinx DS190 Zynq-7000 SoC Data Sheet: Overview, device feature table, "
            "XC7Z045 column (LUTs, flip-flops, block RAM, DSP slices)",
            "Xilinx UG954 ZC706 Evaluation Board User Guide, section "
            "'DDR3 SODIMM Memory (PL)' (1 GB, 64-bit, DDR3-1600 SODIMM, PL side)",
        ),
    )
