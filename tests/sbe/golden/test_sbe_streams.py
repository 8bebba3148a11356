"""The SBE's stream formats (:mod:`nnrtl.sim.golden.sbe.streams`) against decoders written
from the contract's text (:mod:`sbe_contract`)."""

import numpy as np
import pytest

from nnrtl.hw.sbe.config import SbeConfig
from nnrtl.sim.golden import sbe

from sbe_contract import (STREAM_SEEDS, decode_inputs, decode_weights, random_config, signed,
                          stream_case)


def test_stream_cases_cover_the_contract():
    """The random stream cases include every case, resident and streamed weights, several
    passes and several columns per cycle, batches not dividing the steps, layer 1 and
    batch norm on and off."""
    seen = set()
    for seed in STREAM_SEEDS:
        config, index, steps, _, _ = stream_case(seed)
        shape = config.layer(index)
        seen |= {f"case {shape.case}", f"resident {config.weights_resident}",
                 f"batch norm {config.batch_norm}", f"layer {index}"}
        seen |= {"passes" for _ in [0] if config.passes > 1}
        seen |= {"columns per cycle" for _ in [0] if config.columns_per_cycle > 1}
        seen |= {"partial batch" for _ in [0] if steps % config.batch}
        seen |= {"x in hidden blocks" for _ in [0] if shape.x_columns_in_hidden_blocks}
        seen |= {"streamed case 3" for _ in [0]
                 if shape.case == 3 and not config.weights_resident}
        seen |= {"wide header" for _ in [0] if config.acc_width > config.operand_width * 2}
    assert seen >= {"case 1", "case 2", "case 3", "resident True", "resident False",
                    "batch norm True", "batch norm False", "layer 0", "layer 1", "passes",
                    "columns per cycle", "partial batch", "x in hidden blocks",
                    "streamed case 3", "wide header"}


@pytest.mark.parametrize("seed", STREAM_SEEDS)
def test_streams_against_contract(seed):
    config, index, steps, params, xs = stream_case(seed)
    counts = sbe.beat_counts(config, index, steps)
    assert counts["header"] == config.header_beats

    weights = sbe.weight_beats(config, index, params, steps)
    assert weights.shape == (counts["header"] + counts["weights"], config.bus_weights)
    assert weights.min() >= 0 and weights.max() < 1 << config.operand_width
    order = decode_weights(config, index, steps, weights, params)
    assert order == sbe.block_schedule(config, index, steps)

    inputs = sbe.input_beats(config, index, xs)
    assert inputs.shape == (counts["inputs"], config.columns_per_cycle)
    decode_inputs(config, index, inputs, xs)

    V = config.formats.vector
    hs = np.random.default_rng(seed).integers(
        V.min_code, V.max_code, size=(steps, config.hidden_size), endpoint=True)
    outputs = sbe.output_beats(config, hs)
    per_step = config.hidden_size // config.post_units
    assert outputs.shape == (counts["outputs"], config.post_units)
    for t in range(steps):
        for d in range(per_step):
            for m in range(config.post_units):
                assert signed(int(outputs[t * per_step + d, m]), config.operand_width) == \
                    hs[t, d * config.post_units + m]
    assert np.array_equal(sbe.unpack_outputs(config, outputs), hs)
    last = sbe.output_last(config, steps)
    assert np.flatnonzero(last).tolist() == [per_step * (t + 1) - 1 for t in range(steps)]

    for beat in outputs[:5]:
        value = sbe.pack_beat(beat, config.operand_width)
        words = sbe.unpack_beat(value, config.post_units, config.operand_width)
        assert value < 1 << (config.post_units * config.operand_width)
        assert words == [signed(int(w), config.operand_width) for w in beat]
        assert sbe.unpack_beat(value, config.post_units, config.operand_width,
                               signed=False) == beat.tolist()
        assert sbe.pack_beat(words, config.operand_width) == value


def test_beat_counts_follow_the_paper():
    """Over one full batch of every layer, the weight beats carry the paper's traffic
    (eqs. 5 and 6): each x block once, the h blocks once (cases 1 and 2) or once per step
    (case 3); or the whole matrix once (resident weights)."""
    checked = 0
    for seed in range(40):
        config = random_config(np.random.default_rng(seed)).padded
        words = sum(sbe.beat_counts(config, index, config.batch)["weights"]
                    for index in range(config.layers)) * config.bus_weights
        if config.weights_resident:
            expected = sum(config.rows * (shape.input_size + config.hidden_size)
                           for shape in config.layer_shapes)
        else:
            expected = 0
            for shape in config.layer_shapes:
                columns = shape.input_size + config.hidden_size
                x_blocks = shape.input_size // (columns // config.blocks)
                h_blocks = config.blocks - x_blocks
                sends = x_blocks + h_blocks * (config.batch if h_blocks > 2 else 1)
                expected += sends * config.rows * columns // config.blocks
            assert config.weight_words_per_batch == expected
            checked += 1
        assert words == expected
    assert checked >= 5


def test_header_without_batch_norm_params_is_identity():
    config = SbeConfig(batch_norm=True, hidden_size=4, input_size=12, pes=16, blocks=2,
                       post_units=2)
    params = sbe.random_layer(config, 0, np.random.default_rng(0), batch_norm=False)
    beats = sbe.weight_beats(config, 0, params, 3)
    header = [signed(sbe.pack_beat(beat, 16), 32) for beat in beats[:48]]
    for j in range(4):
        assert header[12 * j:12 * j + 4] == params.bias[4 * j:4 * j + 4].tolist()
        assert header[12 * j + 4:12 * j + 12] == [1 << config.cell_frac] * 4 + [0] * 4


@pytest.mark.parametrize("kwargs", [
    dict(input_size=39, hidden_size=19),
    dict(input_size=13, hidden_size=40, batch_norm=True),
    dict(input_size=123, hidden_size=100, layers=2, seq_len=4, batch=2),
])
def test_streams_of_odd_sizes_are_the_padded_problem(kwargs):
    """A model whose sizes the RTL refuses is streamed as its padded problem: zero rows
    for the padded units, zero columns for the padded x and h entries; the outputs are
    cut back to the model's units."""
    config = SbeConfig(**kwargs)
    hw = config.padded
    assert config.is_padded
    rng = np.random.default_rng(7)
    steps = 5
    for index in range(config.layers):
        params = sbe.random_layer(config, index, rng)
        inputs, hidden = config.layer_sizes(index)
        assert params.matrix.shape == (4 * hidden, inputs + hidden)
        padded = sbe.pad_params(config, index, params)
        shape = hw.layer(index)
        # Written out: the model's weights at their rows and columns, zeros elsewhere.
        expected = np.zeros((hw.rows, shape.columns), dtype=np.int64)
        expected[:4 * hidden, :inputs] = params.matrix[:, :inputs]
        expected[:4 * hidden, shape.input_size:shape.input_size + hidden] = \
            params.matrix[:, inputs:]
        assert np.array_equal(padded.matrix, expected)
        assert np.array_equal(padded.bias[:4 * hidden], params.bias)
        assert not padded.bias[4 * hidden:].any()
        assert np.array_equal(sbe.weight_beats(config, index, params, steps),
                              sbe.weight_beats(hw, index, padded, steps))
        xs = sbe.random_inputs(config, steps, rng, layer_index=index)
        xs_padded = np.zeros((steps, shape.input_size), dtype=np.int64)
        xs_padded[:, :inputs] = xs
        assert np.array_equal(sbe.input_beats(config, index, xs),
                              sbe.input_beats(hw, index, xs_padded))
        assert sbe.beat_counts(config, index, steps) == sbe.beat_counts(hw, index, steps)
        # The golden model runs the padded problem and cuts it back: the model's units
        # are exactly the padded run's first `hidden` units.
        hs, c = sbe.run_layer(config, index, params, xs)
        hs_hw, c_hw = sbe.run_layer(hw, index, padded, xs_padded)
        assert hs.shape == (steps, hidden)
        assert np.array_equal(hs, hs_hw[:, :hidden]) and np.array_equal(c, c_hw[:hidden])
        words = sbe.output_beats(hw, hs_hw)
        assert np.array_equal(sbe.unpack_outputs(config, words), hs)
        assert len(words) == sbe.beat_counts(config, index, steps)["outputs"]
