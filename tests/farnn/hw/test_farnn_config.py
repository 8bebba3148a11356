"""The FARNN configuration: validation, the paper's slice and split arithmetic, weights per
PE, fitting, MACs and the weight stream's length."""

import dataclasses

import pytest

from nnrtl.gen.errors import UsageError
from nnrtl.gen.params import param_help, parse_params
from nnrtl.hw.farnn import GATES, FarnnConfig
from nnrtl.hw.farnn.config import chunk_bounds, split_valid


@pytest.mark.parametrize("kwargs, error, message", [
    ({"cell": "rnn"}, TypeError, r"^cell must be one of lstm, gru, not 'rnn'$"),
    ({"hidden_size": -3}, TypeError, r"^hidden_size must be a positive integer, not -3$"),
    ({"chains": True}, TypeError, r"^chains must be a positive integer, not True$"),
    ({"seq_len": 2.0}, TypeError, r"^seq_len must be a positive integer, not 2\.0$"),
    ({"proj_size": -1}, TypeError, r"^proj_size must be a non-negative integer, not -1$"),
    ({"split": -2}, TypeError, r"^split must be a non-negative integer \(0: chosen\), not -2$"),
    ({"weight_depth": 5000}, TypeError, r"^weight_depth must be one of 4096, 8192, not 5000$"),
    ({"adder_stages": 7}, TypeError, r"^adder_stages must be an integer from 1 to 6, not 7$"),
    ({"multiplier_stages": -1}, TypeError,
     r"^multiplier_stages must be an integer from 0 to 6, not -1$"),
    ({"dsp_usage": "barrel"}, ValueError,
     r"^dsp_usage must be one of 'none', 'some', 'max', not 'barrel'$"),
    ({"cell": "gru", "proj_size": 8}, ValueError,
     r"^proj_size \(8\) must be 0 for cell 'gru': only an LSTM has a recurrent projection$"),
    ({"proj_size": 1024}, ValueError,
     r"^proj_size \(1024\) must be less than hidden_size \(1024\), as nn\.LSTM's; nearest "
     r"valid proj_size: 1023$"),
    ({"split": 3}, ValueError,
     r"^split \(3\) must divide chains \(16\): a split group is whole chains; nearest valid "
     r"split: 2 or 4$"),
])
def test_invalid(kwargs, error, message):
    with pytest.raises(error, match=message):
        FarnnConfig(**kwargs)


def test_defaults_are_the_papers_vu9p_lstm_1024():
    """1,024 cells on 256 PEs per unit: 4 slices, 4,096 weights per PE (exactly the 4K
    depth), 4 x 1,024 MAC cycles per vector (§5.1.3)."""
    config = FarnnConfig()
    assert (config.units, config.pes_per_unit, config.pes) == (4, 256, 1024)
    assert config.gates == GATES["lstm"] == ("i", "f", "g", "o")
    assert config.slices("fw") == config.slices("bw") == 4
    assert config.weights_per_pe("fw") == config.weights_per_pe("bw") == 4096
    assert config.fits
    assert config.matrix("recurrent").cycles_per_vector == 4096
    assert config.mac_cycles_per_step("fw") == 4096
    assert config.weight_port_bits == 512
    # the whole R (4 x 1,024 x 1,024 words) in 16-word beats, no padding
    assert config.weight_stream_beats("fw") == 4 * 1024 * 1024 // 16
    assert config.weight_stream_words("bw") == 4 * 1024 * 1024


def test_paper_split_example():
    """1,024 cells on 768 PEs per unit: 2 rounds; 2,048 cycles unsplit, 1,536 with the
    last round's 256 rows split by 2 (§5.1.3)."""
    unsplit = FarnnConfig(chain_length=48, split=1)
    assert unsplit.pes_per_unit == 768
    assert unsplit.matrix("recurrent").cycles_per_vector == 2048
    shape = FarnnConfig(chain_length=48).matrix("recurrent")
    assert (shape.split, shape.slices, shape.last_rows, shape.split_last) == (2, 2, 256, True)
    assert (shape.lanes, shape.chunk, shape.split_from) == (8, 512, 768)
    assert shape.cycles_per_vector == 1536 and shape.weights_per_pe == 1536
    # split 4: 256 rows do not fit 768 / 4 PEs, the last round runs whole
    four = FarnnConfig(chain_length=48, split=4).matrix("recurrent")
    assert not four.split_last and four.cycles_per_vector == 2048


def test_split_chosen_over_every_matrix():
    """split=0: the divisor of chains with the fewest MAC cycles over FW and BW. 1,024
    cells on 256 PEs: no partial round, so 1; with 1,280 inputs on the GRU 1,280 on 416
    PEs: the last round's 32 rows fit 416 / 8 (52) but not 416 / 16 (26): 8."""
    assert FarnnConfig().split_factor == 1
    gru = FarnnConfig(cell="gru", input_size=1280, hidden_size=1280, chain_length=26)
    assert gru.split_factor == 8
    assert dataclasses.replace(gru, split=2).split_factor == 2


def test_round_0_is_never_split():
    """One round (rows <= PEs): the vector is fed as it arrives, no split; every chunk
    must be non-empty too (5 inputs in 4 chunks of 2 leave the last empty)."""
    config = FarnnConfig(cell="gru", input_size=3, hidden_size=5, chains=2, chain_length=4,
                         split=2)
    shape = config.matrix("recurrent")
    assert (shape.slices, shape.split_last, shape.split_from) == (1, False, 5)
    assert shape.weights_per_pe == 5
    assert chunk_bounds(5, 4) == [(0, 2), (2, 4), (4, 5), (5, 5)]
    assert chunk_bounds(11, 3) == [(0, 4), (4, 8), (8, 11)]
    assert not split_valid(4, inputs=5) and split_valid(2, inputs=5)
    # 5 rows on 4 PEs: 2 rounds, the last (1 row) fits 4 / 4, but the chunks do not
    empty = FarnnConfig(cell="gru", input_size=3, hidden_size=5, chains=4, chain_length=1,
                        split=4).matrix("recurrent")
    assert (empty.slices, empty.split_last) == (2, False)
    assert FarnnConfig(cell="gru", input_size=3, hidden_size=5, chains=4, chain_length=1,
                       split=2).matrix("recurrent").split_last


def test_8k_configuration_768_pes():
    """The paper's VU9P LSTM configuration for > 1,024 cells: 8K words per PE, 768 PEs."""
    config = FarnnConfig(chain_length=12, weight_depth=8192)
    assert config.pes == 768
    # 1,024 rows on 192 PEs: 5 full rounds and 64 rows split by 2 (64 > 192 / 4)
    assert config.matrix("recurrent").split == 2
    assert config.weights_per_pe("fw") == 5 * 1024 + 512
    assert config.fits
    assert not dataclasses.replace(config, weight_depth=4096).fits


def test_gru_1280_fits_4k_only_with_split():
    """GRU 1,280 cells on 416 PEs per unit: unsplit 4 slices x 1,280 = 5,120 words > 4K;
    the last round's 32 rows split by 8 need 3 x 1,280 + 160 = 4,000."""
    unsplit = FarnnConfig(cell="gru", input_size=1280, hidden_size=1280, chain_length=26,
                          split=1)
    assert unsplit.units == 3 and unsplit.gates == ("r", "z", "n")
    assert unsplit.weights_per_pe("fw") == 5120 and not unsplit.fits
    split = dataclasses.replace(unsplit, split=0)
    assert split.matrix("recurrent").split == 8
    assert split.weights_per_pe("fw") == 4000 and split.fits
    # the spec's bound: 27 chains of 16 -> 432 PEs per unit fit unsplit (3 x 1,280)
    assert dataclasses.replace(unsplit, chain_length=27).weights_per_pe("fw") == 3840


def test_projection_slices_differ_between_passes():
    """RNN-T's encoder layer: 2,048 cells, projection 640, on 640 PEs per unit. FW runs R_k
    (2,048 x 640: 4 slices, the last 128 rows split by 4: they fit 640 / 4 PEs, not 640 /
    8) and W_hr (640 x
    2,048 cut over 4 units: 160 rows each, 1 slice); BW runs R_k^T (640 x 2,048: 1 slice)
    and W_hr^T (2,048 x 640: 512 rows per unit, 1 slice)."""
    config = FarnnConfig(hidden_size=2048, proj_size=640, chain_length=40,
                         weight_depth=8192)
    assert config.matrices == ("recurrent", "projection", "recurrent_t", "projection_t")
    assert config.recurrent_size == config.output_size == 640
    assert config.slices("fw") == 4 and config.slices("bw") == 1
    assert config.split_factor == 4
    recurrent, projection = config.pass_matrices("fw")
    assert (recurrent.slices, recurrent.last_rows, recurrent.split_last) == (4, 128, True)
    assert (projection.rows, projection.slices, projection.split_last) == (160, 1, False)
    assert config.weights_per_pe("fw") == 3 * 640 + 160 + 2048
    recurrent_t, projection_t = config.pass_matrices("bw")
    assert (recurrent_t.rows, recurrent_t.inputs, recurrent_t.slices) == (640, 2048, 1)
    assert (projection_t.rows, projection_t.slices) == (512, 1)
    assert config.weights_per_pe("bw") == 2048 + 640
    assert config.max_weights_per_pe == 4128 and config.fits
    assert not dataclasses.replace(config, weight_depth=4096).fits
    # useful MACs are the same in both passes: 4 gates x 2,048 x 640 + 640 x 2,048
    assert config.useful_macs_per_step("fw") == config.useful_macs_per_step("bw") == \
        5 * 2048 * 640


def test_useful_macs():
    config = FarnnConfig(cell="gru", input_size=8, hidden_size=10, layers=3, seq_len=7,
                         batch=2, chain_length=1)
    assert config.useful_macs_per_step("fw") == 2 * 3 * 10 * 10
    assert config.useful_macs_per_pass("bw") == 7 * 600
    assert config.useful_macs == 3 * 2 * 7 * 600


def test_matrix_and_phase_names():
    config = FarnnConfig(hidden_size=512, input_size=512)
    with pytest.raises(ValueError, match=r"^matrix must be one of recurrent, recurrent_t, "
                                         r"not 'projection'$"):
        config.matrix("projection")
    with pytest.raises(ValueError, match=r"^phase must be fw or bw, not 'up'$"):
        config.slices("up")


def test_frozen_and_params():
    config = FarnnConfig()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.hidden_size = 4
    parsed = parse_params(FarnnConfig, ["cell=gru", "chain_length=27", "split=1"])
    assert (parsed.cell, parsed.units, parsed.pes) == ("gru", 3, 3 * 16 * 27)
    assert parse_params(FarnnConfig, ["split=3"]).chains % 3 == 0     # chains completed
    with pytest.raises(UsageError, match=r"^split \(3\) must divide chains \(16\)"):
        parse_params(FarnnConfig, ["split=3", "chains=16"])
    assert any(line.startswith("weight_depth (int, default 4096)")
               for line in param_help(FarnnConfig))
