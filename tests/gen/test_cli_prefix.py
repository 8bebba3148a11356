"""``--prefix`` of ``generate`` and ``sim`` with ``--model``: one RNN of a state_dict that
holds several; refused without ``--model``."""

import json

import torch

from nnrtl.gen.cli import main


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def two_rnns(tmp_path):
    torch.manual_seed(0)
    state = {**{f"enc.{k}": v for k, v in torch.nn.LSTM(5, 4).state_dict().items()},
             **{f"dec.{k}": v for k, v in torch.nn.LSTM(4, 3).state_dict().items()}}
    path = tmp_path / "two.pt"
    torch.save(state, path)
    return path


def test_generate_picks_the_rnn_its_prefix_names(capsys, tmp_path):
    model = two_rnns(tmp_path)
    code, _, err = run(capsys, "generate", "sbe", "--board", "zc706", "--model", str(model),
                       "-o", str(tmp_path / "out"))
    assert code == 2 and "choose one with --prefix (e.g. --prefix dec.)" in err
    code, _, err = run(capsys, "generate", "sbe", "--board", "zc706", "--model", str(model),
                       "--prefix", "enc.", "-o", str(tmp_path / "out"))
    assert code == 0, err
    parameters = json.loads((tmp_path / "out" / "manifest.json").read_text())["parameters"]
    assert (parameters["input_size"], parameters["hidden_size"]) == (5, 4)


def test_prefix_needs_a_model(capsys, tmp_path):
    code, _, err = run(capsys, "sim", "sbe", "--board", "zc706", "--prefix", "enc.")
    assert code == 2 and "nnrtl: error: --prefix needs --model FILE" in err
