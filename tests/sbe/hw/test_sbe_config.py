"""The SBE configuration: validation, derived properties, presets."""

import dataclasses

import pytest

from nnrtl.boards import get_board
from nnrtl.gen.errors import UsageError
from nnrtl.gen.params import param_help, parse_params
from nnrtl.hw.sbe import (GATES, PRESETS, VC709_LSTM512, ZC706_LSTM256, LayerShape,
                          SbeConfig)

# A 4-layer-capable base: 80 inputs, 16 hidden -> 96 and 32 columns.
SMALL = dict(input_size=80, hidden_size=16, seq_len=16, pes=64, batch=8, blocks=4,
             bus_weights=8)


@pytest.mark.parametrize("kwargs, error, message", [
    ({"hidden_size": -3}, TypeError, r"^hidden_size must be a positive integer, not -3$"),
    ({"pes": True}, TypeError, r"^pes must be a positive integer, not True$"),
    ({"seq_len": 2.0}, TypeError, r"^seq_len must be a positive integer, not 2\.0$"),
    ({"blocks": 0}, TypeError, r"^blocks must be a positive integer, not 0$"),
    ({"batch_norm": 1}, TypeError, r"^batch_norm must be a bool, not 1$"),
    ({"operand_width": 19}, TypeError,
     r"^operand_width must be an integer from 2 to 18, not 19$"),
    ({"acc_width": 65}, TypeError, r"^acc_width must be an integer from 4 to 64, not 65$"),
    ({"weight_frac": -1}, TypeError, r"^weight_frac must be a non-negative integer, not -1$"),
    ({"lut_multipliers": None}, TypeError,
     r"^lut_multipliers must be a non-negative integer, not None$"),
    ({"acc_width": 24}, ValueError,
     r"^acc_width \(24\) must be at least 2 \* operand_width \(32\)$"),
    ({"weight_frac": 16}, ValueError,
     r"^weight_frac \(16\) cannot exceed operand_width - 1 \(15\)$"),
    ({"act_frac": 9, "weight_frac": 4, "operand_width": 8, "acc_width": 16}, ValueError,
     r"^act_frac \(9\) cannot exceed operand_width - 1 \(7\)$"),
    ({"cell_frac": 31}, ValueError, r"^cell_frac \(31\) cannot exceed acc_width - 2 \(30\)$"),
    ({"pes": 6}, ValueError, r"^pes \(6\) must be a multiple of 4: a pass computes the four "
                             r"gate rows of whole hidden units; nearest valid values: 4 or 8$"),
    ({"lut_multipliers": 65}, ValueError, r"^lut_multipliers \(65\) cannot exceed pes \(64\)$"),
    ({"bus_weights": 12}, ValueError, r"^bus_weights \(12\) must be a power of two; nearest "
                                      r"valid values: 8 or 16$"),
    ({"bus_weights": 128}, ValueError,
     r"^bus_weights \* operand_width \(2048\) cannot exceed 1024, the widest AXI4 data bus$"),
    ({"input_size": 12, "hidden_size": 4, "pes": 16, "bus_weights": 32}, ValueError,
     r"^bus_weights \(32\) must divide pes \(16\): a beat fills one group of PEs; nearest "
     r"valid pes: 32$"),
    ({"post_units": 3}, ValueError, r"^post_units \(3\) must be a power of two; nearest valid "
                                    r"values: 2 or 4$"),
    ({"post_units": 32}, ValueError,
     r"^post_units \(32\) must divide pes / 4 \(16\), the hidden units a pass completes; "
     r"nearest valid post_units: 16$"),
    ({"hidden_size": 4, "input_size": 12, "pes": 4, "bus_weights": 8, "blocks": 1,
      "post_units": 1}, ValueError, r"^bus_weights \(8\) must divide pes \(4\): a beat "
                                    r"fills one group of PEs; nearest valid pes: 8$"),
    ({"bus_weights": 1}, ValueError, r"^bus_weights \* operand_width \(16\) must be at "
                                     r"least acc_width \(32\): a header beat carries a bias$"),
])
def test_config_rejects(kwargs, error, message):
    with pytest.raises(error, match=message):
        SbeConfig(**{**SMALL, **kwargs})


# Sizes the RTL's rules refuse are padded to the smallest they accept (worked by hand).
@pytest.mark.parametrize("kwargs, padded", [
    ({"input_size": 39, "hidden_size": 19}, (40, 32)),    # 4H multiple of 64; 72 cols / 4
    ({"input_size": 13, "hidden_size": 40}, (16, 48)),    # 4 * 48 = 3 passes of 64
    ({"input_size": 123, "hidden_size": 100, "layers": 2}, (124, 112)),
    ({"input_size": 1792, "hidden_size": 256, "pes": 1000, "blocks": 16, "post_units": 2},
     (1804, 500)),                                        # 4 * 500 = 2 passes of 1000
    ({"pes": 96}, (80, 24)),                              # 4 * 24 = 96 rows, one pass
    ({"blocks": 5}, (84, 16)),                            # 100 columns
    ({"blocks": 3, "layers": 2}, (81, 48)),               # 2H and In + H multiples of 3
    ({"pes": 128, "blocks": 32}, (112, 16)),              # 2 columns a cycle, 4 per block
    ({"hidden_size": 4, "input_size": 11, "pes": 48, "blocks": 1}, (11, 12)),
    ({"hidden_size": 3, "input_size": 13, "pes": 24, "blocks": 1, "post_units": 1,
      "bus_weights": 4}, (13, 6)),
    ({}, (80, 16)),
])
def test_config_pads_sizes_the_rtl_refuses(kwargs, padded):
    config = SbeConfig(**{**SMALL, **kwargs})
    assert (config.padded_input_size, config.padded_hidden_size) == padded
    assert config.is_padded == (padded != (config.input_size, config.hidden_size))
    hw = config.padded
    assert (hw.input_size, hw.hidden_size) == padded and not hw.is_padded
    assert hw.layer_shapes == config.layer_shapes
    inputs, hidden = config.input_size, config.hidden_size
    true_macs = 4 * hidden * (inputs + hidden) + (config.layers - 1) * 8 * hidden * hidden
    assert config.macs_per_step == true_macs
    assert config.padded_macs_per_step == hw.macs_per_step
    assert config.padding_macs_per_step == hw.macs_per_step - true_macs


def test_defaults_are_valid_and_parse_from_the_command_line():
    config = SbeConfig()
    assert config.case == 1 and config.passes == 1
    assert any(line.startswith("pes (int, default 64)") for line in param_help(SbeConfig))
    parsed = parse_params(SbeConfig, ["batch_norm=true", "pes=32", "post_units=2"])
    assert parsed.batch_norm and parsed.passes == 2 and parsed.units_per_pass == 8


def test_a_batch_longer_than_the_sequence_is_a_partial_batch():
    """The engine runs a partial last batch, so a batch over ``seq_len`` is no error; when
    ``batch`` is not given, the completion keeps it within ``seq_len``."""
    assert SbeConfig(seq_len=5, batch=8).batch == 8
    assert parse_params(SbeConfig, ["seq_len=5"]).batch == 5
    assert parse_params(SbeConfig, ["seq_len=5", "batch=8"]).batch == 8


@pytest.mark.parametrize("given, chosen", [
    (["pes=40"], {"post_units": 2, "bus_weights": 8}),
    (["pes=76"], {"post_units": 1, "bus_weights": 4}),
    (["pes=4", "hidden_size=4", "input_size=12"], {"post_units": 1, "bus_weights": 4}),
    (["pes=8", "operand_width=8", "acc_width=16", "weight_frac=6", "act_frac=6",
      "cell_frac=12"], {"bus_weights": 8, "post_units": 2}),
])
def test_a_parameter_given_completes_the_defaults_it_conflicts_with(given, chosen):
    config = parse_params(SbeConfig, given)
    assert {name: getattr(config, name) for name in chosen} == chosen


def test_pinned_values_that_conflict_by_themselves_are_refused_naming_them():
    with pytest.raises(UsageError, match=r"^post_units \(4\) must divide pes / 4 \(10\), the "
                                         r"hidden units a pass completes; nearest valid "
                                         r"post_units: 2$"):
        parse_params(SbeConfig, ["pes=40", "post_units=4"])


def test_layer_index_is_checked():
    with pytest.raises(TypeError, match=r"^layer index must be an integer from 0 to 0, not 1$"):
        SbeConfig().layer(1)


def test_pes_below_and_above_the_rows():
    passes = SbeConfig(**{**SMALL, "pes": 16, "post_units": 2})
    assert (passes.passes, passes.columns_per_cycle, passes.rows_per_pass) == (4, 1, 16)
    assert passes.units_per_pass == 4 and passes.bb_fifo_depth == 32
    wide = SbeConfig(**{**SMALL, "pes": 256})
    assert (wide.passes, wide.columns_per_cycle, wide.rows_per_pass) == (1, 4, 64)
    assert wide.units_per_pass == 16 and wide.dsp == 256


@pytest.mark.parametrize("blocks, case, first, x_cols", [
    (1, 1, 0, 80),      # everything in one block
    (2, 1, 1, 32),      # 48-column blocks: h shares block 1 with 32 x columns
    (4, 1, 3, 8),
    (6, 1, 5, 0),       # 16-column blocks: h exactly the last block
    (8, 2, 6, 8),       # 12-column blocks: h from column 80 = block 6 + 8 columns
    (12, 2, 10, 0),
    (16, 3, 13, 2),
    (24, 3, 20, 0),
])
def test_cases_by_blocks(blocks, case, first, x_cols):
    config = SbeConfig(**{**SMALL, "blocks": blocks})
    shape = config.layer(0)
    assert isinstance(shape, LayerShape)
    assert (shape.case, shape.first_hidden_block, shape.x_columns_in_hidden_blocks) == \
        (case, first, x_cols)
    assert shape.hidden_blocks == blocks - first
    assert shape.alpha == first / blocks
    assert config.case == case and config.cases == (case,)
    assert config.weights_resident == (blocks <= 2)


def test_layers_after_the_first_read_h():
    config = SbeConfig(**{**SMALL, "layers": 3, "blocks": 2})
    shapes = config.layer_shapes
    assert [s.input_size for s in shapes] == [80, 16, 16]
    assert [s.columns for s in shapes] == [96, 32, 32]
    assert [s.block_columns for s in shapes] == [48, 16, 16]
    assert config.max_block_columns == 48
    assert config.cases == (1, 1, 1)
    assert config.macs_per_step == 64 * (96 + 32 + 32)


def test_weight_traffic_per_batch():
    case1 = SbeConfig(**SMALL)                       # every block once per batch
    assert case1.weight_words_per_batch == 64 * 96
    case3 = SbeConfig(**{**SMALL, "blocks": 16})     # 13 x blocks once, 3 h blocks per step
    assert case3.weight_words_per_batch == 64 * 6 * (13 + 8 * 3)
    resident = SbeConfig(**{**SMALL, "blocks": 2})
    assert resident.weight_words_per_batch == 0


def test_paper_designs():
    # "LSTM-256 ... Each LSTM-256 gate weights matrix is 2048*256", Npe = 1024, B = 64,
    # Nt = 16 ("when the DMA data bus is 256-bit"), "the proper blocking number is 16".
    z = ZC706_LSTM256
    assert (z.columns, z.rows, z.pes, z.batch, z.bus_weights, z.blocks) == \
        (2048, 1024, 1024, 64, 16, 16)
    assert z.bus_weights * z.operand_width == 256
    assert z.case == 2                           # 256 h columns = two 128-column blocks
    assert z.post_units == 4                     # "The number of PPs is 4"
    # "A few multiplication units are implemented using LUTs": fewer DSP PEs than the
    # board's 900 DSPs (the preset's 224 LUT multipliers leave the rest to the PPs; the
    # paper does not say how many, see the preset's `source`).
    assert 0 < z.lut_multipliers and z.dsp < get_board("zc706").capacity.dsp == 900
    # "only 1/8 on-chip memory required compared to ... all the weights on-chip"
    assert z.buffer_words * 8 == z.weight_words
    # "Note that there are 2048 PEs ... for LSTM-512 targeting Virtex 7 VX690T"
    v = VC709_LSTM512
    assert (v.input_size, v.hidden_size, v.pes, v.rows) == (1792, 512, 2048, 2048)
    assert v.case == 2 and v.dsp <= get_board("vc709").capacity.dsp
    assert set(PRESETS) == {"zc706-lstm256", "vc709-lstm512"}
    assert PRESETS["vc709-lstm512"].clock_hz == 125e6    # "only runs at 125MHz"
    assert PRESETS["zc706-lstm256"].clock_hz is None     # not in the paper's text
    for preset in PRESETS.values():
        get_board(preset.board)


def test_weight_sizes_quoted_by_the_paper():
    """Introduction: "The size of weights for a typical single LSTM layer with both input
    and hidden vector sizes as 512 is around 33.6Mb when the data precision is 16-bit. This
    size becomes 134.3Mb when both the sizes of the vectors become 1024." (biases
    included, 1 Mb = 10**6 bits); Experimental Setup: the ZC706 model's weights "are more
    than 32Mb"."""
    def megabits(config):
        return (config.weight_words + config.rows) * config.operand_width / 1e6
    common = dict(pes=4, batch=1, blocks=1, bus_weights=4, post_units=1, seq_len=1)
    assert round(megabits(SbeConfig(input_size=512, hidden_size=512, **common)), 1) == 33.6
    assert round(megabits(SbeConfig(input_size=1024, hidden_size=1024, **common)), 1) == 134.3
    assert megabits(ZC706_LSTM256) > 32 * 2 ** 20 / 1e6


def test_bram_eq7():
    z = ZC706_LSTM256
    # (Lx + Lh)(4 Lh + B) DW 2 / Nb / BRAM_size, BB-FIFOs (64 deep) in LUTRAM
    assert z.bb_fifo_in_lutram
    assert z.bram_eq7 == pytest.approx(2048 * (1024 + 64) * 16 * 2 / 16 / 36864)
    deep = dataclasses.replace(z, batch=128)
    assert not deep.bb_fifo_in_lutram
    assert deep.bram_eq7 == pytest.approx(
        (2048 * (1024 + 128) * 16 * 2 / 16 + 128 * 1024 * 16) / 36864)


def test_drain_and_gates():
    # The post-processing unit's latency is measured in simulation in test_sbe_post.py.
    config = SbeConfig()
    assert config.drain_cycles == 4                  # 16 units over 4 post units
    assert GATES == ("i", "u", "f", "o")


def test_formats():
    f = SbeConfig(operand_width=12, acc_width=28, weight_frac=10, act_frac=8,
                  cell_frac=20).formats
    assert (f.weight.width, f.weight.fraction_bits) == (12, 10)
    assert (f.vector.width, f.vector.fraction_bits) == (12, 8)
    assert (f.acc.width, f.acc.fraction_bits) == (28, 18)       # products: 10 + 8
    assert (f.cell.width, f.cell.fraction_bits) == (28, 20)


def test_header_layout():
    plain = SbeConfig().header_layout
    assert (plain.fields, plain.index("bias", 3)) == (4, 3)
    with pytest.raises(ValueError, match=r"^the header has no scale fields "
                                         r"\(batch_norm is False\)$"):
        plain.index("scale", 0)
    bn = SbeConfig(batch_norm=True)
    layout = bn.header_layout
    # Per unit: biases i, u, f, o, then the four scales, then the four shifts.
    assert [layout.index(kind, g) for kind in ("bias", "scale", "shift")
            for g in range(4)] == list(range(12))
    assert bn.header_beats == 16 * 12


def test_stream_and_register_widths():
    config = SbeConfig(operand_width=12, weight_frac=8, act_frac=8, bus_weights=8,
                       post_units=2, pes=128, blocks=2)
    assert config.columns_per_cycle == 2
    # Whole bytes: 8 x 12 = 96, 2 x 12 = 24 bits.
    assert config.stream_bits == (96, 24, 24)
    assert SbeConfig(operand_width=10, weight_frac=6, act_frac=6,
                     post_units=1).stream_bits.outputs == 16
    assert config.step_bits == 32                    # an AXI4-Lite register
    flags = SbeConfig(batch_norm=True).registers["flags"]
    assert flags.reset == 1 << flags.field("batch_norm").offset
    assert SbeConfig().registers["flags"].reset == 0


def test_block_schedule():
    # 80 + 16 columns in 4 blocks of 24: blocks 0-2 x only, block 3 the h (case 1).
    config = SbeConfig()
    assert config.batches(19) == [(0, 8), (8, 8), (16, 3)]
    assert config.block_schedule(0, 19) == [0, 1, 2, 3] * 3
    # 16 + 16 columns in 8 blocks of 4: blocks 4-7 hold h (case 3), sent once per step.
    case3 = SbeConfig(input_size=16, blocks=8, batch=2, seq_len=3)
    assert case3.case == 3
    assert case3.block_schedule(0, 3) == ([0, 1, 2, 3] + [4, 5, 6, 7] * 2
                                          + [0, 1, 2, 3, 4, 5, 6, 7])
    resident = SbeConfig(blocks=2)
    assert resident.block_schedule(0, 19) == [0, 1]
    with pytest.raises(TypeError, match=r"^steps must be a positive integer, not 0$"):
        config.batches(0)


# -- Layers of different hidden sizes -------------------------------------------------------

def test_hidden_sizes_per_layer_run_padded_to_the_largest():
    """A stack tapering 16 -> 9: the engine is the 16-unit one; layer 1's 7 missing units
    and layer 1's work beyond 4 * 9 * (16 + 9) MACs count as padding."""
    config = SbeConfig(input_size=12, hidden_size=16, hidden_sizes=(16, 9), layers=2)
    assert config.layer_hidden_sizes == (16, 9)
    assert [config.layer_sizes(n) for n in range(2)] == [(12, 16), (16, 9)]
    assert config.is_padded and config.padded == SbeConfig(input_size=12, hidden_size=16,
                                                           layers=2)
    assert [s.hidden_size for s in config.layer_shapes] == [16, 16]
    assert [s.input_size for s in config.layer_shapes] == [12, 16]
    assert config.macs_per_step == 4 * 16 * (12 + 16) + 4 * 9 * (16 + 9)
    assert config.padded_macs_per_step == 4 * 16 * (12 + 16) + 4 * 16 * (16 + 16)
    assert config.padding_macs_per_step == 4 * 16 * 32 - 4 * 9 * 25
    assert config.register_constants["hidden_size"] == 16
    # Widening: layer 0's 9 units padded to 16, layer 1 reads 9 true h and 7 zero columns.
    widening = SbeConfig(input_size=12, hidden_size=16, hidden_sizes=(9, 16), layers=2)
    assert [widening.layer_sizes(n) for n in range(2)] == [(12, 9), (9, 16)]
    assert widening.padded == config.padded
    # Equal sizes given per layer: the same engine, nothing padded.
    even = SbeConfig(hidden_sizes=(16, 16), layers=2)
    assert not even.is_padded and even.padding_macs_per_step == 0
    # A JSON list (a manifest's parameters) is taken as the tuple.
    assert SbeConfig(hidden_sizes=[16, 9], layers=2).hidden_sizes == (16, 9)


@pytest.mark.parametrize("kwargs, error, message", [
    (dict(hidden_sizes=(16, 9)), ValueError,
     r"hidden_sizes \(16, 9\) must have one size per layer: layers is 1; set layers=2"),
    (dict(hidden_sizes=(32, 9), layers=2), ValueError,
     r"hidden_size \(16\) must be the largest of hidden_sizes \(32, 9\), what the engine "
     r"is sized for; set hidden_size=32"),
    (dict(hidden_sizes=(16, 0), layers=2), TypeError,
     r"hidden_sizes must be a tuple of positive integers, not \(16, 0\)"),
    (dict(hidden_sizes=16), TypeError,
     r"hidden_sizes must be a tuple of positive integers, not 16"),
])
def test_hidden_sizes_rejects(kwargs, error, message):
    with pytest.raises(error, match=rf"^{message}$"):
        SbeConfig(**kwargs)


def test_hidden_sizes_from_the_command_line():
    config = parse_params(SbeConfig, ["layers=3", "hidden_size=32", "hidden_sizes=32,16,9"])
    assert config.hidden_sizes == (32, 16, 9)
    assert "hidden_sizes (tuple, default ())" in param_help(SbeConfig)
    with pytest.raises(UsageError, match=r"^parameter hidden_sizes must be comma-separated "
                                         r"integers \(e\.g\. 16,9\), not '16;9'$"):
        parse_params(SbeConfig, ["hidden_sizes=16;9"])
    with pytest.raises(UsageError, match=r"^hidden_sizes \(16, 9\) must have one size per "
                                         r"layer: layers is 1; set layers=2$"):
        parse_params(SbeConfig, ["hidden_sizes=16,9"])
