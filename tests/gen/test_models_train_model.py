"""The whole model ``nnrtl train`` trains (:mod:`nnrtl.gen.models.train_model`): RNN stacks
and a Linear head from a state_dict, chained stacks, ``prefix``, every other key refused
by name, and the model written back with the head's tensors."""

import re

import numpy as np
import pytest
import torch

from nnrtl.gen.errors import UsageError
from nnrtl.gen.models import GRU, LSTM, Linear
from nnrtl.gen.models.train_model import load_train_model, save_train_model


class GruHead(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.GRU(1, 8, 2)
        self.head = torch.nn.Linear(8, 1)


def saved(tmp_path, state, name="m.pt"):
    torch.save(state, tmp_path / name)
    return tmp_path / name


def test_rnn_and_linear_head(tmp_path):
    torch.manual_seed(0)
    module = GruHead()
    model = load_train_model(saved(tmp_path, module.state_dict()))
    assert [type(layer) for layer in model.network.layers] == [GRU, GRU]
    assert model.stacks == ("rnn.",) and model.unchanged == ()
    assert [type(layer) for layer in model.head.layers] == [Linear]
    assert set(model.head.parameters()) == {"head.weight", "head.bias"}
    assert np.array_equal(model.head.parameters()["head.weight"],
                          module.head.weight.detach().double().numpy())
    assert model.placement() == {
        "engine": ["GRU(1 -> 8) (rnn.weight_ih_l0, rnn.weight_hh_l0, rnn.bias_ih_l0, "
                   "rnn.bias_hh_l0)",
                   "GRU(8 -> 8) (rnn.weight_ih_l1, rnn.weight_hh_l1, rnn.bias_ih_l1, "
                   "rnn.bias_hh_l1)"],
        "host": ["Linear(8 -> 1) (head.weight, head.bias)"], "unchanged": []}


def test_save_writes_the_head_back(tmp_path):
    torch.manual_seed(1)
    module = GruHead()
    model = load_train_model(saved(tmp_path, module.state_dict()))
    head = model.head.with_parameters({"head.weight": np.full((1, 8), 0.25)})
    save_train_model(model.__class__(model.network, head, model.stacks), tmp_path / "o.pt")
    written = torch.load(tmp_path / "o.pt", weights_only=True)
    assert list(written) == list(module.state_dict())
    assert torch.equal(written["head.weight"], torch.full((1, 8), 0.25))
    assert written["head.weight"].dtype == torch.float32
    for name, value in module.state_dict().items():
        if name != "head.weight":
            assert torch.equal(written[name], value), name


def test_chained_stacks_run_in_order(tmp_path):
    torch.manual_seed(2)
    stacks = torch.nn.ModuleList([torch.nn.LSTM(1, 8), torch.nn.LSTM(8, 3, 2)])
    model = load_train_model(saved(tmp_path, stacks.state_dict()))
    assert model.stacks == ("0.", "1.") and model.head is None
    assert [(layer.input_size, layer.hidden_size) for layer in model.network.layers] == [
        (1, 8), (8, 3), (3, 3)]
    assert list(model.network.parameters()) == list(stacks.state_dict())
    assert np.array_equal(model.network.layers[2].weight_hh,
                          stacks[1].weight_hh_l1.detach().double().numpy())
    changed = model.network.with_parameters({"1.bias_hh_l1": np.ones(12)})
    assert np.array_equal(changed.layers[2].bias_hh, np.ones(12))
    save_train_model(model.__class__(changed), tmp_path / "o.pt")
    assert torch.equal(torch.load(tmp_path / "o.pt", weights_only=True)["1.bias_hh_l1"],
                       torch.ones(12))


def test_prefix_picks_one_stack(tmp_path):
    torch.manual_seed(3)
    path = saved(tmp_path, torch.nn.ModuleList([torch.nn.GRU(1, 8),
                                                torch.nn.GRU(3, 1)]).state_dict())
    with pytest.raises(UsageError, match=rf"^{re.escape(str(path))}: several RNNs \('0\.', "
                                         r"'1\.'\) that do not chain: '1\.' takes 3 "
                                         r"features, '0\.' gives 8; pick one with --prefix "
                                         r"\(e\.g\. --prefix 0\.\)$"):
        load_train_model(path)
    model = load_train_model(path, prefix="1.")
    assert model.stacks == ("1.",) and model.network.layers[0].input_size == 3
    assert model.unchanged == ("0.bias_hh_l0", "0.bias_ih_l0", "0.weight_hh_l0",
                               "0.weight_ih_l0")
    assert model.placement()["unchanged"] == list(model.unchanged)
    with pytest.raises(UsageError, match=rf"^--prefix '2\.': {re.escape(str(path))} has no "
                                         r"key 2\.weight_ih_l0; its RNNs are at the "
                                         r"prefixes: '0\.', '1\.'$"):
        load_train_model(path, prefix="2.")


@pytest.mark.parametrize("case, keys", [
    ("embedding", r"emb\.weight is"),
    ("two linears", r"out\.weight, out\.bias are"),
    ("batch norm", r"norm\.weight, norm\.bias, norm\.running_mean, norm\.running_var, "
                   r"norm\.num_batches_tracked are"),
])
def test_other_keys_are_refused_by_name(tmp_path, case, keys):
    torch.manual_seed(4)
    layers = {"embedding": {"emb": torch.nn.Embedding(10, 4)},
              "two linears": {"head": torch.nn.Linear(8, 6), "out": torch.nn.Linear(6, 2)},
              "batch norm": {"norm": torch.nn.BatchNorm1d(8)}}[case]
    module = torch.nn.ModuleDict({**layers, "rnn": torch.nn.GRU(4, 8)})
    path = saved(tmp_path, module.state_dict())
    with pytest.raises(UsageError, match=rf"^{re.escape(str(path))}: {keys} neither an RNN "
                                         r"stack \('rnn\.'\) nor one nn\.Linear reading its "
                                         r"8 outputs: nnrtl train would leave (it|them) "
                                         r"untrained$"):
        load_train_model(path)


def test_a_bias_free_weight_of_the_input_width_is_no_head(tmp_path):
    """``weight`` alone, ``(n, 4)`` with the RNN's input and output both 4 wide, may be an
    embedding in front: refused, not taken for a head."""
    module = torch.nn.ModuleDict({"rnn": torch.nn.LSTM(4, 4),
                                  "proj": torch.nn.Linear(4, 9, bias=False)})
    with pytest.raises(UsageError, match=r": proj\.weight is neither an RNN stack"):
        load_train_model(saved(tmp_path, module.state_dict()))
    module = torch.nn.ModuleDict({"rnn": torch.nn.LSTM(3, 4),
                                  "proj": torch.nn.Linear(4, 9, bias=False)})
    assert load_train_model(saved(tmp_path, module.state_dict())).head.layers[0].bias is None


def test_prefix_needs_a_state_dict(tmp_path):
    path = tmp_path / "m.onnx"
    path.write_bytes(b"\x08\x07")
    with pytest.raises(UsageError, match=rf"^--prefix picks an RNN of a PyTorch state_dict; "
                                         rf"{re.escape(str(path))} is not one$"):
        load_train_model(path, prefix="rnn.")
    with pytest.raises(TypeError, match=r"^prefix must be a string, not 3$"):
        load_train_model(path, prefix=3)


def test_a_plain_rnn(tmp_path):
    torch.manual_seed(5)
    lstm = torch.nn.LSTM(2, 3)
    path = saved(tmp_path, lstm.state_dict())
    model = load_train_model(path)
    assert model.head is None and model.stacks == ("",)
    assert isinstance(model.network.layers[0], LSTM)
