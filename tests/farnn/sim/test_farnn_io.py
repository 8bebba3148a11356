"""The FARNN bench's data (:mod:`nnrtl.sim.tb.farnn.io`), without a simulator: the inputs
drawn from a seed have the shapes a pass needs, the weight streams carry the golden
model's matrices, the output streams' cells are where the top's port docstring puts them
and come back as the same arrays, and bad inputs are named."""

import numpy as np
import pytest

from nnrtl.hw.farnn import FarnnConfig
from nnrtl.hw.farnn.schedule import cell_order
from nnrtl.sim.golden.farnn import layer as golden
from nnrtl.sim.tb.farnn import io as farnn_io

SMALL = dict(input_size=3, seq_len=3, chains=2, layers=1)
LSTM = FarnnConfig(**SMALL, cell="lstm", hidden_size=7, batch=1, chain_length=2, split=1)
GRU = FarnnConfig(**SMALL, cell="gru", hidden_size=5, batch=2, chain_length=2, split=2)


@pytest.mark.parametrize("config", [LSTM, GRU], ids=["lstm", "gru"])
def test_random_inputs_feed_both_passes(tmp_path, config):
    data = farnn_io.random_inputs(config, np.random.default_rng(1))
    for phase in farnn_io.PHASES:
        farnn_io.check_inputs(config, phase, data)
    weights = farnn_io.layer_weights(config, data)
    # the BW stream carries the transposes of the FW stream's matrices
    assert np.array_equal(weights.recurrent_t, weights.recurrent.transpose(0, 2, 1))
    assert (weights.bias_n is None) == (config.cell == "lstm")
    # the BW's saved values are the golden FW's on the same inputs
    fw = golden.forward(config, weights, data["imvm"])
    assert np.array_equal(data["h"], fw.h)
    for name, values in fw.saved.items():
        assert np.array_equal(data[f"saved_{name}"], values)
    # an .npz round trip keeps every array, as uint32
    farnn_io.save(tmp_path / "d.npz", data)
    back = farnn_io.load(tmp_path / "d.npz")
    assert set(back) == set(data)
    assert all(back[k].dtype == np.uint32 and np.array_equal(back[k], data[k]) for k in data)


@pytest.mark.parametrize("config", [LSTM, GRU], ids=["lstm", "gru"])
def test_output_cells_and_arrays_are_inverse(config):
    rng = np.random.default_rng(2)
    data = farnn_io.random_inputs(config, rng)
    for phase in farnn_io.PHASES:
        outputs = farnn_io.expected_outputs(config, phase, data)
        assert sorted(outputs) == sorted(farnn_io.output_names(config, phase))
        frames = farnn_io.output_cells(config, phase, outputs)
        back = farnn_io.arrays_of(config, phase, frames)
        assert sorted(back) == sorted(outputs)
        for name in outputs:
            assert np.array_equal(back[name], outputs[name]), (phase, name)


def test_stream_cells_where_the_top_puts_them():
    """GRU, batch 2, split last round: frame = step (BW in reverse), cells in cell_order;
    m_saved ends with h_{t-1}; s_bw is that beat and dy; m_deltas the W side's gates then
    the R side's n."""
    config = GRU
    data = farnn_io.random_inputs(config, np.random.default_rng(3))
    order = cell_order(config)
    assert order[:4] == [(0, 0), (0, 1), (0, 2), (0, 3)] and len(order) == 10
    b, row = order[5]                                    # round 0, vector 1, row 1
    fw = farnn_io.expected_outputs(config, "fw", data)
    sinks = farnn_io.output_cells(config, "fw", fw)
    assert sinks["m_h"][2][5] == [fw["h"][2, b, row]]
    assert sinks["m_saved"][2][5] == [fw[f"saved_{n}"][2, b, row]
                                      for n in ("r", "z", "n", "hn")] + [fw["h"][1, b, row]]
    assert sinks["m_saved"][0][5][-1] == 0                # h_{-1} = +0
    (source, frames), = farnn_io.input_cells(config, "fw", data).items()
    assert source == "s_imvm" and frames[1][5] == data["imvm"][1, b, :, row].tolist()
    (source, frames), = farnn_io.input_cells(config, "bw", data).items()
    assert source == "s_bw" and len(frames) == 3
    assert frames[0][5] == [data[f"saved_{n}"][2, b, row] for n in ("r", "z", "n", "hn")] + [
        data["h"][1, b, row], data["dy"][2, b, row]]    # frame 0 = step T - 1
    bw = farnn_io.expected_outputs(config, "bw", data)
    deltas = farnn_io.output_cells(config, "bw", bw)["m_deltas"]
    assert deltas[2][5] == bw["d_input"][0, b, :, row].tolist() + [
        bw["d_recurrent"][0, b, 2, row]]


def test_bad_inputs_are_named():
    data = farnn_io.random_inputs(LSTM, np.random.default_rng(4))
    # the weight load of a pass without projection: one frame per unit
    frames = farnn_io.weight_frames(LSTM, "bw", data)
    assert len(frames) == 4 and all(len(f) == 2 * LSTM.weights_per_pe("bw") for f in frames)
    with pytest.raises(ValueError, match=r"^the bw pass needs the array saved_c \(has "):
        farnn_io.check_inputs(LSTM, "bw", {k: v for k, v in data.items() if k != "saved_c"})
    data["imvm"] = data["imvm"][:2]
    with pytest.raises(ValueError, match=r"^array imvm must be uint32 of shape \(3, 1, 4, 7\) "
                                         r"for FarnnConfig\(.*\), not uint32 \(2, 1, 4, 7\)$"):
        farnn_io.check_inputs(LSTM, "fw", data)
    proj = FarnnConfig(**SMALL, cell="lstm", hidden_size=7, proj_size=3, chain_length=2)
    farnn_io.check_supported(proj)              # the top builds a projection
    # the projection's inputs: drawn, carried, and their golden outputs
    data = farnn_io.random_inputs(proj, np.random.default_rng(5))
    weights = farnn_io.layer_weights(proj, data)
    assert weights.projection.shape == (3, 7)
    assert np.array_equal(weights.projection_t, weights.projection.T)
    fw = farnn_io.expected_outputs(proj, "fw", data)
    assert sorted(fw) == ["h", "saved_c", "saved_f", "saved_g", "saved_i", "saved_o", "y"]
    assert fw["y"].shape == (3, 1, 3)
    bw = farnn_io.expected_outputs(proj, "bw", data)
    assert sorted(bw) == ["d_input", "d_recurrent", "dr_hat"]
    # the load: one frame per unit's gate matrix, then per unit's projection block
    frames = farnn_io.weight_frames(proj, "fw", data)
    assert len(frames) == 2 * proj.units
    assert [len(f) for f in frames[:2]] == [2 * proj.matrix("recurrent").weights_per_pe,
                                            2 * proj.matrix("projection").weights_per_pe]
    assert np.array_equal(np.concatenate(frames), data["weights_fw"])
