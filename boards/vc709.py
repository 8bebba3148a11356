"""Xilinx VC709 Connectivity Kit board: Virtex-7 XC7VX690T-2FFG1761C.

Pin locations and I/O standards are those of the VC709 Evaluation Board User Guide (UG887)
and its master XDC. The LED pins and LVCMOS18 standard also appear in Xilinx's own VC709
PCIe example design constraints (``xilinx_pcie3_7x_ep_x8g3_VC709.xdc``); clock, reset and all
eight LEDs agree with Alex Forencich's public VC709 constraint files, used to cross-check.
"""

from amaranth.build import Attrs, Clock, DiffPairs, Pins, Resource
from amaranth.vendor import XilinxPlatform
from amaranth_boards.resources import LEDResources

from .capacity import Capacity, peak_bandwidth_gbps


__all__ = ["VC709Platform"]


class VC709Platform(XilinxPlatform):
    """The VC709 board (Virtex-7 XC7VX690T-2FFG1761C) as an Amaranth platform.

    The default clock is the 200 MHz system oscillator; the default reset is the CPU_RESET
    push button; eight user LEDs are ``led`` 0 to 7.

    Attributes
    ----------
    name : str
        ``"vc709"``, the name :func:`nnrtl.boards.get_board` knows it by.
    title : str
        Human-readable board and part.
    capacity : Capacity
        FPGA resources and the bandwidth of the two DDR3 SODIMMs.
    """
    name        = "vc709"
    title       = "Xilinx VC709 (XC7VX690T-2FFG1761)"

    # Vivado part xc7vx690tffg1761-2.
    device      = "xc7vx690t"
    package     = "ffg1761"
    speed       = "2"
    default_clk = "clk200"
    default_rst = "cpu_reset"

    resources   = [
        # UG887 "System Clock Source": 200 MHz oscillator, SYSCLK_P/N on H19/G18 (bank 38),
        # LVDS input. (Designs that share the pins with the DDR3 MIG declare DIFF_SSTL15.)
        Resource("clk200", 0, DiffPairs("H19", "G18", dir="i"),
                 Clock(200e6), Attrs(IOSTANDARD="LVDS")),

        # UG887 "User I/O", user pushbuttons: CPU_RESET on AV40, 1.8 V bank, active high.
        Resource("cpu_reset", 0, Pins("AV40", dir="i"), Attrs(IOSTANDARD="LVCMOS18")),

        # UG887 "User I/O", user LEDs GPIO_LED_0..7, all in 1.8 V banks.
        *LEDResources(pins="AM39 AN39 AR37 AT37 AR35 AP41 AP42 AU39",
                      attrs=Attrs(IOSTANDARD="LVCMOS18")),
    ]
    connectors  = []

    capacity = Capacity(
        # DS180 gives slices, not LUTs: XC7VX690T has 108,300 slices of 4 LUTs and
        # 8 flip-flops each (UG474 Table 1-1 lists the products: 433,200 and 866,400),
        # 3,600 DSP slices and 1,470 36 Kb block RAMs ("Max (Kb)" 52,920).
        lut=433_200,
        ff=866_400,
        dsp=3600,
        dsp_kind="DSP48E1",
        bram36=1470,
        uram=0,
        # 52,920 Kb / 1024 = 51.7 Mb in the data sheets' unit (the "52.9 Mb" sometimes
        # quoted divides the Kb figure by 1000 instead).
        onchip_mb=51.7,
        # UG887 "DDR3 Memory Module": two independent 4 GB, 64-bit DDR3 SODIMMs, one memory
        # controller each. NOT CONFIRMED: the 1866 MT/s rate (DDR3-1866) could not be
        # re-read from UG887 for this record.
        offchip_kind="DDR3-1866, 2 x 64-bit SODIMM, 2 x 4 GB",
        offchip_gbps=peak_bandwidth_gbps(channels=2, width_bits=64, mega_transfers=1866),
        yosys_family="xc7",
        sources=(
            "Xilinx DS180 7 Series FPGAs Data Sheet: Overview, Virtex-7 FPGA feature "
            "summary table, XC7VX690T column (slices, DSP slices, 36 Kb block RAMs, Max Kb)",
            "Xilinx UG474 7 Series FPGAs CLB User Guide, Table 1-1 7 Series FPGA CLB "
            "Resources, XC7VX690T row (6-input LUTs, flip-flops)",
            "Xilinx UG887 VC709 Evaluation Board for the Virtex-7 FPGA User Guide, section "
            "'DDR3 Memory Module' (two 4 GB 64-bit DDR3-1866 SODIMMs)",
        ),
    )
