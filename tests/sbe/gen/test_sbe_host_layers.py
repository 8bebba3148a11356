"""The layers around the SBE's stack that the host runs (:mod:`nnrtl.gen.sbe.host_layers`)."""

import numpy as np
import pytest
import torch

from nnrtl.gen.errors import UsageError
from nnrtl.gen.sbe.frommodel import CALIBRATION_SEED, CALIBRATION_SEQUENCES
from nnrtl.gen.sbe.host_layers import HostLayers, load_tokens, load_whole_model


class Model(torch.nn.Module):
    def __init__(self, embed=True, head=True):
        super().__init__()
        if embed:
            self.embed = torch.nn.Embedding(9, 5)
        self.lstm = torch.nn.LSTM(5, 6)
        if head:
            self.fc = torch.nn.Linear(6, 2)


@pytest.fixture
def whole(tmp_path):
    torch.manual_seed(3)
    model = Model()
    torch.save(model.state_dict(), tmp_path / "m.pt")
    return model, tmp_path / "m.pt"


def test_a_whole_state_dict_splits_into_the_stack_and_the_host_layers(whole):
    model, path = whole
    network, host = load_whole_model(path)
    assert len(network.layers) == 1 and network.spec.input_size == 5
    assert host and host.described == ("Embedding(9 -> 5) (embed.weight)",
                                       "Linear(6 -> 2) (fc.weight, fc.bias)")
    tokens = np.array([4, 0, 8])
    rows = host.engine_inputs(tokens)
    np.testing.assert_array_equal(rows, model.embed.weight.detach().double().numpy()[tokens])
    hs = np.random.default_rng(0).uniform(-1, 1, (3, 6))
    with torch.no_grad():
        want = model.fc.double()(torch.tensor(hs)).numpy()
    np.testing.assert_allclose(host.outputs(hs), want, rtol=0, atol=1e-12)


def test_a_bare_stack_has_no_host_layers(tmp_path):
    torch.save(Model(embed=False, head=False).state_dict(), tmp_path / "bare.pt")
    _, host = load_whole_model(tmp_path / "bare.pt")
    assert not host and host.outputs([[1.0, 2.0]]).tolist() == [[1.0, 2.0]]


def test_a_tensor_the_model_cannot_place_is_refused(tmp_path):
    state = Model(embed=False).state_dict()
    state["extra.weight"] = torch.zeros(3, 3)
    torch.save(state, tmp_path / "extra.pt")
    with pytest.raises(UsageError, match="extra.weight"):
        load_whole_model(tmp_path / "extra.pt")


def test_token_ids_are_checked(whole, tmp_path):
    _, path = whole
    _, host = load_whole_model(path)
    for name, value in (("ok", [[1], [8], [0]]), ("vectors", np.zeros((3, 5))),
                        ("fraction", [1.5, 2.0]), ("high", [1, 9]), ("low", [-1, 2])):
        np.save(tmp_path / f"{name}.npy", np.array(value))
    assert load_tokens(tmp_path / "ok.npy", host.embedding).tolist() == [1, 8, 0]
    with pytest.raises(UsageError, match=r"the inputs are token ids: an array of shape "
                                         r"\(seq_len,\), not \(3, 5\)"):
        load_tokens(tmp_path / "vectors.npy", host.embedding)
    with pytest.raises(UsageError, match=r"token ids must be integers"):
        load_tokens(tmp_path / "fraction.npy", host.embedding)
    with pytest.raises(UsageError, match=r"token id 9 is outside the embedding's 0\.\.8 "
                                         r"\(embed\.weight\)"):
        load_tokens(tmp_path / "high.npy", host.embedding)
    with pytest.raises(UsageError, match=r"token id -1 is outside"):
        load_tokens(tmp_path / "low.npy", host.embedding)


def test_the_calibration_of_an_embedding_is_its_rows(whole):
    model, path = whole
    _, host = load_whole_model(path)
    inputs, used = host.calibration(20)
    tokens = np.random.default_rng(CALIBRATION_SEED).integers(
        0, 9, size=(20, CALIBRATION_SEQUENCES))
    np.testing.assert_array_equal(inputs, model.embed.weight.detach().double().numpy()[tokens])
    assert used["steps"] == 20 and "embed.weight" in used["distribution"]


def test_host_layers_default_to_none():
    assert not HostLayers() and HostLayers().described == ()


def test_explore_and_generate_quantize_a_whole_model_alike(whole, capsys):
    """An embedding's model is calibrated on the embedding's rows by explore as by the
    binding generate and sim use: the same fraction bits, and explore says what the host
    runs."""
    import json

    from nnrtl.boards import get_board
    from nnrtl.gen.cli import main
    from nnrtl.gen.engines import ModelRequest, get_engine
    _, path = whole
    assert main(["explore", "sbe", "--board", "zc706", "--model", str(path), "--seq-len",
                 "7", "--top", "1", "--json"]) == 0
    out, err = capsys.readouterr()
    explored = json.loads(out)
    assert "the host runs Embedding(9 -> 5) (embed.weight); Linear(6 -> 2)" in err
    assert "the embedding's rows (embed.weight)" in explored["quantization"]["calibration"]
    binding = get_engine("sbe").load_model(ModelRequest(
        path=path, weights=None, board=get_board("zc706"), params=("pes=32",), seq_len=7))
    assert explored["quantization"]["ranges"] == binding.model.ranges
    chosen = explored["chosen"]
    assert (chosen["act_frac"], chosen["weight_frac"], chosen["cell_frac"]) == (
        binding.config.act_frac, binding.config.weight_frac, binding.config.cell_frac)


def test_a_stack_in_two_directions_is_refused():
    from nnrtl.gen.models import LSTM, Network
    from nnrtl.gen.sbe.frommodel import check_model
    rng = np.random.default_rng(0)
    fields = dict(weight_ih=rng.normal(size=(8, 2)), weight_hh=rng.normal(size=(8, 2)))
    mixed = Network((LSTM(**fields), LSTM(direction="reverse", **fields)))
    with pytest.raises(UsageError, match=r"^model: layer 1 runs in direction 'reverse', "
                                         r"layer 0 'forward'; the SBE runs stacks whose "
                                         r"layers all run forward, or all in reverse$"):
        check_model(mixed)
    reverse = Network((LSTM(direction="reverse", **fields),) * 2)
    assert check_model(reverse) is reverse
