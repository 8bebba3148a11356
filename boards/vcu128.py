"""Xilinx VCU128 evaluation board: Virtex UltraScale+ HBM XCVU37P-L2FSVH2892E.

Pin locations and I/O standards are those of the VCU128 Evaluation Board User Guide (UG1302)
and its master XDC ("VCU128 Rev1.0 XDC"), whose per-pin bank comments were read for this
file; litex-boards (``xilinx_vcu128.py``) agrees on every location.
"""

from amaranth.build import Attrs, Clock, DiffPairs, Pins, Resource
from amaranth.vendor import XilinxPlatform
from amaranth_boards.resources import LEDResources

from .capacity import Capacity, peak_bandwidth_gbps


__all__ = ["VCU128Platform"]


class VCU128Platform(XilinxPlatform):
    """The VCU128 board (Virtex UltraScale+ HBM XCVU37P-L2FSVH2892E) as an Amaranth platform.

    The default clock is the 100 MHz DDR4 reference clock (also litex-boards' default
    clock for this board); the default reset is the CPU_RESET push button; eight user LEDs are
    ``led`` 0 to 7. The device has two 4 GB HBM2 stacks in package.

    Attributes
    ----------
    name : str
        ``"vcu128"``, the name :func:`nnrtl.boards.get_board` knows it by.
    title : str
        Human-readable board and part.
    capacity : Capacity
        FPGA resources and the HBM bandwidth.
    """
    name        = "vcu128"
    title       = "Xilinx VCU128 (XCVU37P-L2FSVH2892E)"

    # Vivado part xcvu37p-fsvh2892-2L-e.
    device      = "xcvu37p"
    package     = "fsvh2892"
    speed       = "2L-e"
    default_clk = "clk100"
    default_rst = "cpu_reset"

    resources   = [
        # Master XDC: DDR4_CLK_100MHZ_P/N on BH51/BJ51, bank 66 (VCCO 1.2 V), DIFF_SSTL12.
        Resource("clk100", 0, DiffPairs("BH51", "BJ51", dir="i"),
                 Clock(100e6), Attrs(IOSTANDARD="DIFF_SSTL12")),

        # Master XDC: CPU_RESET on BM29, bank 64 (VCCO 1.2 V), LVCMOS12, active high.
        Resource("cpu_reset", 0, Pins("BM29", dir="i"), Attrs(IOSTANDARD="LVCMOS12")),

        # Master XDC: GPIO_LED_0_LS..GPIO_LED_7_LS in bank 67 (VCCO 1.8 V), LVCMOS18.
        *LEDResources(pins="BH24 BG24 BG25 BF25 BF26 BF27 BG27 BG28",
                      attrs=Attrs(IOSTANDARD="LVCMOS18")),
    ]
    connectors  = []

    capacity = Capacity(
        # DS890 / XMP103 VU37P column: 1,304K CLB LUTs, 2,607K CLB flip-flops, 9,024 DSP
        # slices, 2,016 block RAMs (70.9 Mb), UltraRAM 270.0 Mb (= 960 × 288 Kb), 8 GB HBM.
        # Exact LUT and flip-flop counts are 162,960 CLBs × 8 and × 16, as Vivado reports
        # them for this die (also the Alveo U280's).
        lut=1_303_680,
        ff=2_607_360,
        dsp=9024,
        dsp_kind="DSP48E2",
        bram36=2016,
        uram=960,
        onchip_mb=340.9,            # 70.9 Mb block RAM + 270.0 Mb UltraRAM
        # Two HBM2 stacks of 4 GB, each 1024 data bits (8 channels × 128 bits), at
        # 1800 MT/s (900 MHz memory clock): 2 × 1024 / 8 × 1.8 GT/s = 460.8 GB/s, the
        # "up to 460 GB/s" of the Virtex UltraScale+ HBM literature. NOT CONFIRMED: the
        # 1800 MT/s rate for this -2L part was not re-read from DS923 for this record.
        # The board's DDR4, RLDRAM3 and QDR-IV memories are not counted.
        offchip_kind="HBM2, 2 stacks x 1024-bit, 8 GB in package, 1800 MT/s",
        offchip_gbps=peak_bandwidth_gbps(channels=2, width_bits=1024, mega_transfers=1800),
        yosys_family="xcup",
        sources=(
            "Xilinx DS890 UltraScale Architecture and Product Data Sheet: Overview, "
            "Virtex UltraScale+ (HBM) FPGA feature summary table, VU37P column (CLB LUTs, CLB "
            "flip-flops, block RAM Mb, UltraRAM Mb, HBM GB, DSP slices)",
            "Xilinx XMP103 UltraScale+ FPGAs Product Selection Guide, Virtex UltraScale+ "
            "HBM table, VU37P column (36K block RAM blocks 2,016)",
            "Xilinx UG1302 VCU128 Evaluation Board User Guide, board features "
            "(XCVU37P with 8 GB HBM2)",
            "Xilinx PG276 AXI High Bandwidth Memory Controller product guide (two stacks, "
            "16 pseudo channels of 64 bits per stack)",
        ),
    )
