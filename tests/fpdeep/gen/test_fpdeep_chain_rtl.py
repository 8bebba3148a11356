# amaranth: UnusedElaboratable=no
"""``nnrtl train fpdeep --backend rtl`` (nnrtl.gen.fpdeep.chain_rtl): the rate register's
word and its refusal, the mappings the RTL chain refuses (anchored messages), and (slow)
training steps of a one-conv CNN (OCP or ICP), of a two-conv CNN (a layer pipeline) and of
one whose second conv is split by output channels over two nodes, on 3 FPGAs through the
node chain and the FC engine: every step bit-exact
against the golden models and the golden chain, the update within the bound of PyTorch's
SGD step; a corrupted expectation is caught (CheckFailed)."""

import json
import types
import warnings

import numpy as np
import pytest
import torch

from nnrtl.boards import get_board
from nnrtl.gen import train as interface
from nnrtl.gen.errors import CheckFailed, UsageError
from nnrtl.gen.fpdeep.chain_rtl import chain_config, lr_word
from nnrtl.gen.fpdeep.trainer import train_hook
from nnrtl.gen.models import load_network


def one_conv_cnn():
    """3x6x6 -> conv 3->6 k3 pad1, ReLU, pool 2 -> 6x3x3 -> Linear(54, 3): on 3 VC709s
    the mapper splits the conv by output channels, one segment a node."""
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 6, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.MaxPool2d(2), torch.nn.Flatten(),
                               torch.nn.Linear(54, 3))


def two_conv_cnn():
    """3x6x6 -> conv 3->4, ReLU, pool 2 -> conv 4->4, ReLU -> 4x3x3 -> Linear(36, 3): on 3
    VC709s the mapper splits conv1 by output channels over nodes 1 and 2 and puts conv2
    on node 3 (a layer pipeline, conv2's EB training conv1)."""
    torch.manual_seed(5)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.MaxPool2d(2), torch.nn.Conv2d(4, 4, 3, padding=1),
                               torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(36, 3))


def no_pool_cnn():
    """3x6x6 -> conv 3->4, ReLU -> conv 4->4 -> Linear(144, 3): on 3 VC709s the mapper
    splits conv2 by output channels over nodes 2 and 3 (with ``ocp_min_ic=1`` by input
    channels)."""
    torch.manual_seed(9)
    return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU(),
                               torch.nn.Conv2d(4, 4, 3, padding=1), torch.nn.Flatten(),
                               torch.nn.Linear(144, 3))


def save(module, path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.jit.save(torch.jit.script(module), path)
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fpdeep-rtl")
    rng = np.random.default_rng(0)
    for batch in (1, 2):
        np.save(tmp / f"x{batch}.npy", rng.uniform(-1, 1, (batch, 3, 6, 6)))
        np.save(tmp / f"y{batch}.npy", np.array([2, 0][:batch]))
    return types.SimpleNamespace(dir=tmp, model=save(one_conv_cnn(), tmp / "cnn.pt"),
                                 two=save(two_conv_cnn(), tmp / "cnn2.pt"),
                                 nopool=save(no_pool_cnn(), tmp / "nopool.pt"))


def request(files, *options, batch=1, steps=1, lr=0.5, model=None, params=()):
    return interface.TrainRequest(
        board=get_board("vc709"), model=model or files.model, inputs=files.dir / f"x{batch}.npy",
        targets=files.dir / f"y{batch}.npy", loss="cross-entropy", lr=lr, steps=steps,
        backend="rtl", options=tuple(options), params=params)


def test_lr_word():
    assert lr_word("fixed16", 0.5, 2) == 16384                 # 0.25 in Q0.16
    assert lr_word("fp32", 0.5, 2) == 0x3E800000               # 0.25f
    with pytest.raises(UsageError, match=r"^--lr 2\.0 over batch 1: the fixed16 nodes' rate "
                                         r"register holds eta/B in Q0\.16"):
        lr_word("fixed16", 2.0, 1)


def test_rtl_refuses_what_the_chain_does_not_carry(files):
    """A node whose layers all run on the host (here: node 3 given only the FC layer) is
    refused, naming the node."""
    trainer = train_hook(request(files, "--fpgas", "3"), load_network(files.model))
    mapping = trainer.mapping
    fc_only = types.SimpleNamespace(node=3, segments=tuple(
        s for s in mapping.nodes[2].segments if s.kind != "conv"))
    mapping = types.SimpleNamespace(nodes=list(mapping.nodes[:2]) + [fc_only])
    with pytest.raises(UsageError, match=r"^--backend rtl: node 3 holds no conv segment \(its "
                                         r"layers run on the host\); the node chain needs "
                                         r"one a node$"):
        chain_config(trainer.layers, mapping, "fixed16", 13, 1, 0.5)


def test_rtl_refuses_a_line_buffer_wider_than_one_pixel(files):
    """A segment mapped to take two input pixels a cycle is refused: the RTL line buffer
    takes one."""
    import dataclasses
    trainer = train_hook(request(files, "--fpgas", "3"), load_network(files.model))
    nodes = list(trainer.mapping.nodes)
    wide = dataclasses.replace(nodes[1].segments[0], line_pixels=2)
    nodes[1] = dataclasses.replace(nodes[1], segments=(wide, *nodes[1].segments[1:]))
    mapping = types.SimpleNamespace(nodes=nodes)
    with pytest.raises(UsageError, match=r"^--backend rtl: node 2's layers\[0\] takes line_pixels 2 "
                                         r"input pixels a cycle; the RTL line buffer takes 1 "):
        chain_config(trainer.layers, mapping, "fixed16", 13, 1, 0.5)


def test_rtl_chain_of_the_mapping(files):
    """The mapper's OCP split on 1, 2, 3 boards becomes the chain's nodes (``lag`` =
    batch, ``lr`` η/B, flush)."""
    network = load_network(files.model)
    for fpgas, outs in ((1, [6]), (2, [3, 3]), (3, [2, 2, 2])):
        trainer = train_hook(request(files, "--fpgas", str(fpgas), "--precision", "fixed16"),
                             network)
        config = trainer.rtl.config
        assert [config.segment(n).n_out for n in range(fpgas)] == outs
        assert config.lag == 1 and {n.lr for n in config.nodes} == {32768}   # 0.5 in Q0.16
        assert trainer.config.pipeline == "flush" and trainer.rtl.pattern == "none"
    trainer = train_hook(request(files, "--fpgas", "3", "--precision", "fixed16", batch=2,
                                 model=files.two), load_network(files.two))
    config = trainer.rtl.config
    assert config.layers == (0, 0, 1) and config.lag == 2
    assert [config.segment(n).n_out for n in range(3)] == [2, 2, 4]
    assert [node.eb[0] for node in config.nodes] == [False, False, True]
    assert [s.node for s in trainer.rtl.segments] == [1, 2, 3]
    trainer = train_hook(request(files, "--fpgas", "2", "--precision", "fixed16",
                                 model=files.two), load_network(files.two))
    config = trainer.rtl.config            # node 2: conv1's channel 3 and conv2
    assert config.stages == ((0, 0), (1, 0), (1, 1)) and config.layers == (0, 0, 1)
    assert [config.segment(n).n_out for n in range(3)] == [3, 1, 4]
    trainer = train_hook(request(files, "--fpgas", "3", "--precision", "fixed16",
                                 model=files.nopool), load_network(files.nopool))
    config = trainer.rtl.config            # conv2 over nodes 2 and 3, partial errors
    assert config.layers == (0, 1, 1) and [config.segment(n).n_out for n in (1, 2)] == [2, 2]
    assert [config.partial_errors(n) for n in (1, 2)] == [(True, False), (False, True)]
    trainer = train_hook(request(files, "--fpgas", "3", "--precision", "fixed16",
                                 params=("ocp_min_ic=1",)), network)
    config = trainer.rtl.config            # conv1 split by input channels, 1 + 1 + 1
    assert config.icp(0) and [config.segment(n).n_in for n in range(3)] == [1, 1, 1]
    assert [config.segment(n).completes for n in range(3)] == [False, False, True]
    assert config.nodes[2].delta_out == (True,)
    trainer = train_hook(request(files, "--fpgas", "3", "--precision", "fixed16",
                                 params=("ocp_min_ic=1",), model=files.nopool),
                         load_network(files.nopool))
    config = trainer.rtl.config            # conv2 split by input channels, 2 + 2
    assert config.layers == (0, 1, 1) and config.icp(1)
    assert [config.segment(n).n_in for n in (1, 2)] == [2, 2]


@pytest.mark.slow
@pytest.mark.parametrize("model, precision, batch, pattern, params", [
    ("model", "fixed16", 1, "random", ()), ("model", "fixed16", 2, "bursty", ()),
    ("model", "fp32", 1, "cycle", ()), ("two", "fixed16", 1, "random", ()),
    ("two", "fixed16", 2, "bursty", ()), ("two", "fp32", 1, "cycle", ()),
    ("two", "fp32", 2, "none", ()),
    ("nopool", "fixed16", 1, "random", ()), ("nopool", "fixed16", 2, "cycle", ()),
    ("nopool", "fp32", 1, "bursty", ()),
    ("model", "fixed16", 1, "bursty", ("ocp_min_ic=1",)),
    ("model", "fixed16", 2, "random", ("ocp_min_ic=1",)),
    ("model", "fp32", 1, "cycle", ("ocp_min_ic=1",)),
    ("two", "fixed16", 1, "none", ("ocp_min_ic=1",)),
    ("nopool", "fixed16", 1, "random", ("ocp_min_ic=1",)),
    ("nopool", "fixed16", 2, "bursty", ("ocp_min_ic=1",)),
    ("nopool", "fp32", 1, "none", ("ocp_min_ic=1",))])
def test_train_steps_through_the_rtl_chain(files, tmp_path, model, precision, batch, pattern,
                                           params):
    """Every step bit-exact and within the bound: one conv (OCP over 3 nodes; with
    ``ocp_min_ic=1`` ICP), two convs (a layer pipeline; ICP conv1 with ``ocp_min_ic=1``),
    and conv2 split over nodes 2 and 3 (``nopool``: by output channels; with
    ``ocp_min_ic=1`` by input channels)."""
    req = request(files, "--fpgas", "3", "--precision", precision, "--backpressure",
                  pattern, batch=batch, steps=2, model=getattr(files, model), params=params)
    summary = interface.train(types.SimpleNamespace(name="fpdeep"), train_hook, req,
                              tmp_path / "run")
    record = json.loads((tmp_path / "run" / "train.json").read_text())
    print(model, precision, batch, pattern, json.dumps([
        {k: s[k] for k in ("loss", "reference_loss", "update_max_abs_diff", "update_bound",
                           "cycles")} | {"link_words": s["rtl"]["link_words"],
                                         "seconds": s["rtl"]["seconds"]}
        for s in record["steps"]]))
    assert summary["within_bound"] and record["config"]["backpressure"] == pattern
    for step in record["steps"]:
        assert step["rtl"]["bit_exact"] and step["rtl"]["pattern"] == pattern
        assert step["update_max_abs_diff"] <= step["update_bound"]
        assert [f["layer"] for f in step["fc_rtl"]] == [f["layer"] for f in step["fc_engine"]]
        assert all(f["bit_exact"] and f["pattern"] == pattern for f in step["fc_rtl"])


@pytest.mark.slow
def test_a_wrong_expectation_is_caught(files):
    """The golden chain's activations changed in one word: the step raises CheckFailed
    naming the node (the check compares, it does not copy)."""
    network = load_network(files.model)
    req = request(files, "--fpgas", "3", "--precision", "fixed16")
    trainer = train_hook(req, network)
    batch = interface.prepare_batch(network, np.load(req.inputs), np.load(req.targets),
                                    req.loss)
    outputs = trainer.forward(network, batch.inputs.numpy())
    trainer._outputs[0] = trainer._outputs[0].copy()
    trainer._outputs[0][0, 0, 5] += 1                       # node 3's first channel
    _, grad = interface.loss_and_gradient(outputs, batch, req.loss, False)
    with pytest.raises(CheckFailed, match=r"^the RTL chain's mini-batch is not bit-exact "
                                          r"against the golden models \(none backpressure\): "
                                          r"image 0: node 3's activations differ"):
        trainer.backward(grad)
