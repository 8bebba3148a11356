"""Board platforms and capacity records (nnrtl.boards).

Run with ``python -m pytest tests/boards -q -W error``.
"""

import dataclasses
import json
import math
import re

import pytest
from amaranth.hdl import Elaboratable, Module, Signal
from amaranth.lib import io
from amaranth.vendor import XilinxPlatform

from nnrtl.boards import BOARDS, Capacity, board_names, get_board
from nnrtl.boards.capacity import peak_bandwidth_gbps


# Data-sheet figures per board: DS190 (XC7Z045), DS180 + UG474 (XC7VX690T), DS890 + XMP103
# (XCVU9P, XCVU37P). LUT/FF for the UltraScale+ parts are the exact counts behind DS890's
# rounded "1,182K"/"2,364K" and "1,304K"/"2,607K".
DATASHEET = {
    "zc706":  dict(lut=218_600,   ff=437_200,   dsp=900,  dsp_kind="DSP48E1",
                   bram36=545,  uram=0,   onchip_mb=19.2,  yosys_family="xc7"),
    "vc709":  dict(lut=433_200,   ff=866_400,   dsp=3600, dsp_kind="DSP48E1",
                   bram36=1470, uram=0,   onchip_mb=51.7,  yosys_family="xc7"),
    "vu9p":   dict(lut=1_182_240, ff=2_364_480, dsp=6840, dsp_kind="DSP48E2",
                   bram36=2160, uram=960, onchip_mb=345.9, yosys_family="xcup"),
    "vcu128": dict(lut=1_303_680, ff=2_607_360, dsp=9024, dsp_kind="DSP48E2",
                   bram36=2016, uram=960, onchip_mb=340.9, yosys_family="xcup"),
}

# Off-chip bandwidth: channels × bits × MT/s as recorded in each board module.
OFFCHIP_GBPS = {"zc706": 12.8, "vc709": 29.856, "vu9p": 38.4, "vcu128": 460.8}

PART = {
    "zc706":  "xc7z045ffg900-2",
    "vc709":  "xc7vx690tffg1761-2",
    "vu9p":   "xcvu9p-flga2104-2L-e",
    "vcu128": "xcvu37p-fsvh2892-2L-e",
}

FAMILY = {"zc706": "series7", "vc709": "series7",
          "vu9p": "ultrascaleplus", "vcu128": "ultrascaleplus"}

# (board, default clock (p, n) pins, IOSTANDARD, period in ns)
CLOCK = {
    "zc706":  (("H9", "G9"),     "LVDS",        5.0),
    "vc709":  (("H19", "G18"),   "LVDS",        5.0),
    "vu9p":   (("AY24", "AY23"), "LVDS",        8.0),
    "vcu128": (("BH51", "BJ51"), "DIFF_SSTL12", 10.0),
}

LED_COUNT = {"zc706": 4, "vc709": 8, "vu9p": 8, "vcu128": 8}


def _leds(platform):
    return sorted(number for (name, number) in platform.resources if name == "led")


class Blinky(Elaboratable):
    """Counts on the default clock and shows the counter's top bits on every user LED."""

    def elaborate(self, platform):
        m = Module()
        counter = Signal(range(int(platform.default_clk_frequency)))
        m.d.sync += counter.eq(counter + 1)
        for index, number in enumerate(_leds(platform)):
            port = platform.request("led", number, dir="-")
            m.submodules[f"led_{number}"] = led = io.Buffer("o", port)
            m.d.comb += led.o.eq(counter[-1 - index])
        return m


# --- registry -----------------------------------------------------------------------------

def test_board_names_in_brief_order():
    assert board_names() == ["zc706", "vc709", "vu9p", "vcu128"]
    assert list(BOARDS) == board_names()


@pytest.mark.parametrize("name", ["zc706", "vc709", "vu9p", "vcu128"])
def test_get_board_returns_platform_class(name):
    platform_cls = get_board(name)
    assert issubclass(platform_cls, XilinxPlatform)
    assert platform_cls.name == name
    assert isinstance(platform_cls.capacity, Capacity)
    assert platform_cls.connectors == []


def test_get_board_unknown_name():
    with pytest.raises(ValueError,
                       match=r"^unknown board 'foo'; valid boards: zc706, vc709, vu9p, vcu128$"):
        get_board("foo")


def test_get_board_wrong_type():
    with pytest.raises(TypeError, match=r"^board name must be a string, not 3$"):
        get_board(3)


@pytest.mark.parametrize("name, title", [
    ("zc706",  "Xilinx ZC706 (XC7Z045-2FFG900)"),
    ("vc709",  "Xilinx VC709 (XC7VX690T-2FFG1761)"),
    ("vu9p",   "Xilinx VCU118 (XCVU9P-L2FLGA2104E)"),
    ("vcu128", "Xilinx VCU128 (XCVU37P-L2FSVH2892E)"),
])
def test_titles(name, title):
    assert get_board(name).title == title


# --- capacity figures ---------------------------------------------------------------------

@pytest.mark.parametrize("name", list(DATASHEET))
def test_capacity_matches_datasheet(name):
    capacity = get_board(name).capacity
    for field, value in DATASHEET[name].items():
        assert getattr(capacity, field) == value, field


@pytest.mark.parametrize("name", list(OFFCHIP_GBPS))
def test_offchip_bandwidth(name):
    assert math.isclose(get_board(name).capacity.offchip_gbps, OFFCHIP_GBPS[name])


def test_block_ram_in_datasheet_kb():
    # DS180 gives the XC7VX690T's block RAM as "Max (Kb) 52,920"; DS190 gives the XC7Z045's
    # as "19.2 Mb (545)"; DS890 gives the VU9P's as 75.9 Mb and its UltraRAM as 270.0 Mb.
    assert get_board("vc709").capacity.bram36 * 36 == 52_920
    assert round(get_board("zc706").capacity.bram_mb, 1) == 19.2
    assert round(get_board("vu9p").capacity.bram_mb, 1) == 75.9
    assert round(get_board("vu9p").capacity.uram_mb, 1) == 270.0
    assert round(get_board("vcu128").capacity.bram_mb, 1) == 70.9


@pytest.mark.parametrize("name", list(BOARDS))
def test_capacity_has_sources(name):
    capacity = get_board(name).capacity
    assert len(capacity.sources) >= 2
    assert all(re.match(r"^Xilinx (DS|UG|XMP|PG)\d+ ", source) for source in capacity.sources)


@pytest.mark.parametrize("name", list(BOARDS))
def test_capacity_as_dict_is_json(name):
    capacity = get_board(name).capacity
    as_dict = capacity.as_dict()
    assert list(as_dict) == [field.name for field in dataclasses.fields(Capacity)]
    assert as_dict["sources"] == list(capacity.sources)
    assert json.loads(json.dumps(as_dict)) == as_dict


def test_peak_bandwidth():
    assert peak_bandwidth_gbps(channels=1, width_bits=64, mega_transfers=1600) == 12.8
    assert peak_bandwidth_gbps(channels=2, width_bits=1024, mega_transfers=1800) == 460.8
    with pytest.raises(TypeError, match=r"^channels must be a positive integer, not 0$"):
        peak_bandwidth_gbps(channels=0, width_bits=64, mega_transfers=1600)
    with pytest.raises(TypeError, match=r"^mega_transfers must be a positive number, not -1$"):
        peak_bandwidth_gbps(channels=1, width_bits=64, mega_transfers=-1)


# --- capacity validation ------------------------------------------------------------------

def _capacity(**overrides):
    fields = dict(DATASHEET["vu9p"], offchip_kind="DDR4", offchip_gbps=38.4,
                  sources=("Xilinx DS890 test",))
    fields.update(overrides)
    return Capacity(**fields)


def test_capacity_valid_baseline():
    assert _capacity().lut == 1_182_240


def test_capacity_is_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        _capacity().lut = 1


@pytest.mark.parametrize("overrides, exc, message", [
    (dict(lut=-3), TypeError, r"^lut must be a positive integer, not -3$"),
    (dict(ff=0), TypeError, r"^ff must be a positive integer, not 0$"),
    (dict(dsp=1.5), TypeError, r"^dsp must be a positive integer, not 1\.5$"),
    (dict(bram36=True), TypeError, r"^bram36 must be a positive integer, not True$"),
    (dict(uram=-1), TypeError, r"^uram must be a non-negative integer, not -1$"),
    (dict(onchip_mb="345.9"), TypeError,
     r"^onchip_mb must be a positive number, not '345\.9'$"),
    (dict(offchip_gbps=0), TypeError, r"^offchip_gbps must be a positive number, not 0$"),
    (dict(offchip_kind=""), TypeError, r"^offchip_kind must be a non-empty string, not ''$"),
    (dict(sources=()), TypeError,
     r"^sources must be a non-empty tuple of non-empty strings, not \(\)$"),
    (dict(sources=["Xilinx DS890"]), TypeError,
     r"^sources must be a non-empty tuple of non-empty strings, not \['Xilinx DS890'\]$"),
    (dict(dsp_kind="DSP58"), ValueError,
     r"^dsp_kind must be one of 'DSP48E1' or 'DSP48E2', not 'DSP58'$"),
    (dict(yosys_family="ice40"), ValueError,
     r"^yosys_family must be one of 'xc7' or 'xcup', not 'ice40'$"),
    (dict(dsp_kind="DSP48E1"), ValueError,
     r"^dsp_kind \('DSP48E1'\) does not match yosys_family \('xcup'\), "
     r"whose DSP slice is 'DSP48E2'$"),
    (dict(yosys_family="xc7", dsp_kind="DSP48E1"), ValueError,
     r"^uram \(960\) must be 0 for yosys_family 'xc7', which has no UltraRAM$"),
    (dict(onchip_mb=52.9, bram36=1470, uram=0, yosys_family="xc7", dsp_kind="DSP48E1"),
     ValueError,
     r"^onchip_mb \(52\.9\) does not match bram36 \(1470\) × 36 Kb \+ uram \(0\) × 288 Kb "
     r"= 51\.7 Mb \(1 Mb = 1024 Kb\)$"),
])
def test_capacity_validation(overrides, exc, message):
    with pytest.raises(exc, match=message):
        _capacity(**overrides)


# --- platforms and build plans ------------------------------------------------------------

@pytest.mark.parametrize("name", list(BOARDS))
def test_platform_family_and_part(name):
    platform = get_board(name)()
    assert platform.family == FAMILY[name]
    assert platform.default_rst == "cpu_reset"
    assert _leds(platform) == list(range(LED_COUNT[name]))


@pytest.mark.parametrize("name", list(BOARDS))
def test_blinky_build_plan(name):
    platform = get_board(name)()
    plan = platform.build(Blinky(), name="top", do_build=False)

    assert {"top.v", "top.xdc", "top.tcl", "build_top.sh"} <= set(plan.files)
    assert re.search(r"^module top\(", plan.files["top.v"], re.MULTILINE)

    tcl = plan.files["top.tcl"]
    assert re.search(rf"^create_project -force -name top -part {re.escape(PART[name])}$",
                     tcl, re.MULTILINE)
    assert "read_xdc top.xdc" in tcl

    (pin_p, pin_n), iostandard, period = CLOCK[name]
    clock = platform.default_clk
    xdc = plan.files["top.xdc"]
    assert f'set_property LOC {pin_p} [get_ports "{clock}_0__p"]' in xdc
    assert f'set_property LOC {pin_n} [get_ports "{clock}_0__n"]' in xdc
    assert f'set_property IOSTANDARD "{iostandard}" [get_ports "{clock}_0__p"]' in xdc
    assert f"create_clock -name {clock}_0__p -period {period} " in xdc
    assert 'get_ports "cpu_reset_0__io"' in xdc
    for number in range(LED_COUNT[name]):
        assert f'get_ports "led_{number}__io"' in xdc
