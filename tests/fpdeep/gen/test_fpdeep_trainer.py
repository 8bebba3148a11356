"""FPDeep training (:mod:`nnrtl.gen.fpdeep.trainer`, :mod:`nnrtl.gen.fpdeep.chain`) through
the training interface's functions (:mod:`nnrtl.gen.train`): a small CNN with odd sizes on
1, 2 and 3 FPGAs, fp32 and fixed16; the update against PyTorch float64's own SGD step
within the documented bound; the chain's split changes no fixed16 bit and stays within the
fp32 bound; the stale-weight rule of a pipelined mini-batch, applied to the reference too;
bad options and layers the chain cannot train refused, naming them."""

import json
import types
import warnings

import numpy as np
import pytest
import torch

from nnrtl.boards import get_board
from nnrtl.gen import train as interface
from nnrtl.gen.errors import UsageError
from nnrtl.gen.fpdeep.chain import GoldenRunner
from nnrtl.gen.fpdeep.trainer import GRADIENT_BOUND, FpdeepTrainer, train_hook, train_options
from nnrtl.gen.models import load_network, to_torch

LR = 0.5


def save(tmp_path, model, name="cnn.pt"):
    path = tmp_path / name
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.jit.save(torch.jit.script(model), path)
    return path


def brief_cnn():
    """3x11x11 -> conv 3->5 k3 pad1, ReLU, pool 2 -> 5x5 -> conv 5->4 k3 -> 3x3 -> Linear."""
    torch.manual_seed(7)
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 5, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(5, 4, 3), torch.nn.ReLU(), torch.nn.Flatten(), torch.nn.Linear(36, 6))


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fpdeep-train")
    rng = np.random.default_rng(1)
    np.save(tmp / "x1.npy", rng.uniform(-1, 1, (1, 3, 11, 11)))
    np.save(tmp / "y1.npy", np.array([4]))
    np.save(tmp / "x3.npy", rng.uniform(-1, 1, (3, 3, 11, 11)))
    np.save(tmp / "y3.npy", np.array([0, 5, 2]))
    return types.SimpleNamespace(dir=tmp, model=save(tmp, brief_cnn()))


def request(files, *options, batch=1, params=(), backend="golden", model=None, steps=1):
    return interface.TrainRequest(
        board=get_board("vc709"), model=model or files.model,
        inputs=files.dir / f"x{batch}.npy", targets=files.dir / f"y{batch}.npy",
        loss="cross-entropy", lr=LR, steps=steps, backend=backend, params=tuple(params),
        options=tuple(options))


def step(trainer, network, req):
    """One step through the interface's functions: ``(gradients, update difference from
    the float64 reference, the reference's update of plain SGD)``."""
    batch = interface.prepare_batch(network, np.load(req.inputs), np.load(req.targets),
                                    req.loss)
    outputs = trainer.forward(network, batch.inputs.numpy())
    _, grad_outputs = interface.loss_and_gradient(outputs, batch, req.loss, False)
    gradients = trainer.backward(grad_outputs)
    updated = interface.sgd_step(network, gradients, req.lr)
    _, reference = interface.reference_step(network, batch, req.loss, req.lr,
                                            trainer.forward_networks())
    _, plain = interface.reference_step(network, batch, req.loss, req.lr)
    return gradients, difference(updated, reference), difference(updated, plain), updated


def difference(a, b):
    pa, pb = a.parameters(), b.parameters()
    return max(float(np.max(np.abs(pa[name] - pb[name]))) for name in pa)


class Recorder(GoldenRunner):
    """The golden runner, recording which node ran which module on which layer."""

    def __init__(self):
        self.calls = set()

    def fp(self, node, cfg, *args):
        self.calls.add((node, "fp", cfg.n_in, cfg.n_out))
        return super().fp(node, cfg, *args)

    def eb(self, node, cfg, *args):
        self.calls.add((node, "eb", cfg.n_in, cfg.n_out))
        return super().eb(node, cfg, *args)


@pytest.mark.parametrize("precision", ["fp32", "fixed16"])
def test_one_step_on_1_2_3_fpgas(files, precision):
    """Batch 1: the update within lr x bound of PyTorch float64's SGD step on every
    chain; every split gives 1 FPGA's gradients (fixed16 bit for bit, fp32 within the
    bound); the nodes run the segments the mapping gives them (conv1 OCP over the nodes,
    conv2 on the last, no EB on conv1)."""
    network = load_network(files.model)
    found = {}
    for fpgas in (1, 2, 3):
        req = request(files, "--fpgas", str(fpgas), "--precision", precision)
        trainer = train_hook(req, network)
        recorder = trainer.chain.runner = Recorder()
        gradients, diff, _, _ = step(trainer, network, req)
        assert diff <= LR * trainer.gradient_bound, (fpgas, diff)
        found[fpgas] = gradients
        assert len(trainer.mapping.nodes) == fpgas
        conv1 = trainer.layers[0]
        assert [s.node for s in conv1] == list(range(1, fpgas + 1))
        assert {s.seg.mode for s in conv1} == ({"ICP"} if fpgas == 1 else {"OCP"})
        assert sum(s.cfg.n_out for s in conv1) == 5
        assert {c for c in recorder.calls if c[1] == "fp"} == {
            (s.node, "fp", s.cfg.n_in, s.cfg.n_out)
            for segs in trainer.layers.values() for s in segs}
        assert {c for c in recorder.calls if c[1] == "eb"} == {(fpgas, "eb", 5, 4)}
        counters = trainer.counters()
        assert counters["useful_macs"] == (2 * 121 * 5 * 3 * 9 + 3 * 9 * 4 * 5 * 9
                                           + 3 * 6 * 36)     # the FC engine's Linear(36, 6)
        assert counters["saturated_words"] == 0
    assert set(found[1]) == {(0, "weight"), (0, "bias"), (3, "weight"), (3, "bias"),
                             (6, "weight"), (6, "bias")}
    for fpgas in (2, 3):
        for key, value in found[1].items():
            if precision == "fixed16":
                assert np.array_equal(found[fpgas][key], value), (fpgas, key)
            else:
                assert np.abs(found[fpgas][key] - value).max() <= GRADIENT_BOUND["fp32"]


@pytest.mark.parametrize("precision", ["fp32", "fixed16"])
def test_icp_partial_chain(files, precision):
    """``ocp_min_ic=1``: conv1 (3 input channels) cut by input channels over 3 nodes, the
    partial sums chained (R_m = R_{m-1} + local), the bias and SFU on node 3; fixed16
    gives 1 FPGA's gradients bit for bit, fp32 within the bound; the update within the
    bound of float64."""
    network = load_network(files.model)
    req = request(files, "--fpgas", "3", "--precision", precision,
                  params=["ocp_min_ic=1"])
    trainer = train_hook(req, network)
    assert [(s.node, s.seg.mode, s.seg.lo, s.seg.hi) for s in trainer.layers[0]] == [
        (1, "ICP", 0, 1), (2, "ICP", 1, 2), (3, "ICP", 2, 3)]
    assert [s.cfg.partial_in for s in trainer.layers[0]] == [False, True, True]
    gradients, diff, _, _ = step(trainer, network, req)
    assert diff <= LR * trainer.gradient_bound
    single = train_hook(request(files, "--fpgas", "1", "--precision", precision), network)
    alone, _, _, _ = step(single, network, req)
    for key, value in alone.items():
        if precision == "fixed16":
            assert np.array_equal(gradients[key], value), key
        else:
            assert np.abs(gradients[key] - value).max() <= GRADIENT_BOUND["fp32"]


def test_stale_weights_through_train(files, tmp_path):
    """Batch 3, three steps through gen/train.py's ``train`` on 3 FPGAs (fixed16): from
    the second mini-batch on, samples run FP on a segment with the weights of mini-batch
    ⌊(g + 1 − R_s) / B⌋ (R_s the mapper's residency); the reference applies the same and
    the update stays within the bound; train.json records each segment's versions. Then
    fp32, two steps: within the bound of the stale reference, while plain SGD's reference
    is farther than the bound (the rule is visible)."""
    req = request(files, "--fpgas", "3", "--precision", "fixed16", batch=3, steps=3)
    summary = interface.train(types.SimpleNamespace(name="fpdeep"), train_hook, req,
                              tmp_path / "run")
    assert summary["within_bound"] and len(summary["loss"]) == 3
    record = json.loads((tmp_path / "run" / "train.json").read_text())
    assert record["config"]["pipeline"] == "stale" and record["config"]["fpgas"] == 3
    segments = record["steps"][2]["segments"]
    for segment in segments:
        expected = [min(2, max(0, int(np.floor((2 * 3 + j + 1 - segment["residency"]) / 3))))
                    for j in range(3)]
        assert segment["fp_weights_of_step"] == expected
    assert any(v < 2 for s in segments for v in s["fp_weights_of_step"])

    network = load_network(files.model)
    req = request(files, "--fpgas", "3", batch=3)
    trainer = train_hook(req, network)
    _, diff, _, network = step(trainer, network, req)        # mini-batch 0: no stale
    assert trainer.forward_networks() is None
    _, diff, plain, _ = step(trainer, network, req)
    assert diff <= LR * trainer.gradient_bound < plain


def test_flush_is_plain_sgd(files):
    """``--pipeline flush``: every sample uses the step's weights; the update is plain
    SGD's within the bound."""
    network = load_network(files.model)
    req = request(files, "--fpgas", "2", "--pipeline", "flush", "--precision", "fixed16",
                  batch=3)
    trainer = train_hook(req, network)
    for _ in range(2):
        _, diff, plain, network = step(trainer, network, req)
        assert trainer.forward_networks() is None
        assert diff == plain <= LR * trainer.gradient_bound


@pytest.mark.parametrize("options, message", [
    ((), r"^--fpgas is required: the fpdeep engine takes --fpgas N"),
    (("--fpgas", "0"), r"^--fpgas must be a positive integer, not 0$"),
    (("--fpgas", "two"), r"^argument --fpgas: invalid int value: 'two'$"),
    (("--fpgas",), r"^argument --fpgas: expected one argument$"),
    (("--fpgas=2", "--precision", "fp16"),
     r"^--precision must be one of fp32, fixed16, not 'fp16'$"),
    (("--fpgas", "2", "--frac-bits", "16"),
     r"^--frac-bits must be an integer from 1 to 15, not 16$"),
    (("--fpgas", "2", "--pipeline", "stash"),
     r"^--pipeline must be one of stale, flush, not 'stash'$"),
    (("--fpgas", "2", "--chain", "4"), r"^unknown option '--chain' for nnrtl train fpdeep; "
                                        r"its options: --fpgas, --precision"),
    (("--fpgas", "2", "--backpressure", "jitter"),
     r"^--backpressure must be one of none, cycle, random, bursty, not 'jitter'$"),
    (("--fpgas", "2", "--simulator", "icarus"),
     r"^--simulator must be one of amaranth, verilator, not 'icarus'$"),
])
def test_bad_options(files, options, message):
    with pytest.raises(UsageError, match=message):
        train_hook(request(files, *options), load_network(files.model))


def test_bad_requests(files, tmp_path):
    network = load_network(files.model)
    # Two conv layers on 2 boards: a layer pipeline, conv1 split over both, conv2 the second
    # segment of board 2 (tests/fpdeep/gen/test_fpdeep_chain_rtl.py has the refusals).
    trainer = train_hook(request(files, "--fpgas", "2", backend="rtl"), network)
    assert trainer.rtl.config.layers == (0, 0, 1)
    assert [len(node.segments) for node in trainer.rtl.config.nodes] == [1, 2]
    with pytest.raises(UsageError, match=r"^--pipeline stale with --backend rtl: the RTL "
                                         r"chain is loaded with each step's weights"):
        train_hook(request(files, "--fpgas", "2", "--pipeline", "stale", backend="rtl"),
                   network)
    for option, value in (("--backpressure", "none"), ("--simulator", "verilator")):
        with pytest.raises(UsageError, match=rf"^{option} applies to --backend rtl \(the RTL "
                                             rf"chain\)$"):
            train_hook(request(files, "--fpgas", "2", option, value), network)
    with pytest.raises(UsageError, match=r"^--param 'ocp=1': FPDeep's mapping options"):
        train_hook(request(files, "--fpgas", "2", params=["ocp=1"]), network)
    np.save(tmp_path / "x.npy", np.zeros((1, 3, 11, 12)))
    req = interface.TrainRequest(board=get_board("vc709"), model=files.model,
                                 inputs=tmp_path / "x.npy", targets=files.dir / "y1.npy",
                                 options=("--fpgas", "1"))
    with pytest.raises(UsageError, match=r"^--inputs must be batch x C x H x W with square "
                                         r"images \(H = W\)"):
        train_hook(req, network)
    with pytest.raises(TypeError, match=r"^config must be an FpdeepTrainConfig, not 3$"):
        FpdeepTrainer(3, None)


@pytest.mark.parametrize("layers, message", [
    ([torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.MaxPool2d(2, padding=1),
      torch.nn.Flatten(), torch.nn.Linear(144, 2)],
     r"^layers\[0\]: max-pool 2x2 stride 2 padding 1: the SFU's backward step"),
    ([torch.nn.Linear(11, 2)],
     r"^\S*cnn\.pt: no Conv2d layer; the fpdeep chain trains convolution layers"),
])
def test_layers_the_chain_refuses(files, tmp_path, layers, message):
    path = save(tmp_path, torch.nn.Sequential(*layers))
    with pytest.raises(UsageError, match=message):
        train_hook(request(files, "--fpgas", "1", model=path), load_network(path))


@pytest.mark.parametrize("precision", [pytest.param("fp32", marks=pytest.mark.slow),
                                       "fixed16"])
def test_strided_layers_train(files, tmp_path, precision):
    """Conv layers of stride 2 past the first (their EB dilates the δ map) on 2 FPGAs:
    the update within lr x bound of PyTorch float64's SGD step."""
    torch.manual_seed(3)
    path = save(tmp_path, torch.nn.Sequential(
        torch.nn.Conv2d(3, 5, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(5, 4, 3, stride=2), torch.nn.ReLU(),
        torch.nn.Conv2d(4, 3, 3, stride=2, padding=1), torch.nn.ReLU(),
        torch.nn.Flatten(), torch.nn.Linear(27, 6)))
    network = load_network(path)
    req = request(files, "--fpgas", "2", "--precision", precision, model=path)
    trainer = train_hook(req, network)
    strides = {index: {s.cfg.stride for s in segs} for index, segs in trainer.layers.items()}
    assert sorted(strides.values(), key=min) == [{1}, {2}, {2}]
    _, diff, _, _ = step(trainer, network, req)
    assert diff <= LR * trainer.gradient_bound, diff


@pytest.mark.parametrize("precision", [pytest.param("fp32", marks=pytest.mark.slow),
                                       "fixed16"])
def test_passes_and_overlapping_pools_train(files, tmp_path, precision):
    """Issue 14's shapes through the golden chain on 2 FPGAs, a mini-batch of 2: AlexNet's
    overlapping 3×3/2 pool (11×11 → 5×5) and a 2×2/1 one, and a layer the mapper gives
    ``Q = 1 < S_IC = 5`` (5 passes); the update within lr x bound of PyTorch float64's SGD
    step (its max_pool2d backward sums where windows overlap)."""
    torch.manual_seed(5)
    path = save(tmp_path, torch.nn.Sequential(
        torch.nn.Conv2d(3, 5, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(3, 2),
        torch.nn.Conv2d(5, 6, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2, 1),
        torch.nn.Flatten(), torch.nn.Linear(24, 6)))
    rng = np.random.default_rng(2)
    np.save(tmp_path / "x2.npy", rng.uniform(-1, 1, (2, 3, 11, 11)))
    np.save(tmp_path / "y2.npy", np.array([4, 1]))
    network = load_network(path)
    req = interface.TrainRequest(
        board=get_board("vc709"), model=path, inputs=tmp_path / "x2.npy",
        targets=tmp_path / "y2.npy", loss="cross-entropy", lr=LR, steps=1,
        backend="golden", options=("--fpgas", "2", "--precision", precision))
    trainer = train_hook(req, network)
    cfgs = [s.cfg for segs in trainer.layers.values() for s in segs]
    assert any(c.q < c.n_in and c.n_in % c.q == 0 for c in cfgs)      # passes
    assert any(c.pool is not None and c.pool[0] > c.pool[1] for c in cfgs)
    _, diff, _, _ = step(trainer, network, req)
    assert diff <= LR * trainer.gradient_bound, diff


def test_stale_reference_is_the_engines_rule():
    """gen/train.py's reference with per-sample forward weights: the values of the stale
    network, the gradients through the current one (a hand-built two-sample case:
    sample 0 forward with W_old, sample 1 with W; loss the sum of outputs)."""
    from nnrtl.gen.models import Network
    from nnrtl.gen.models.layers import Linear
    new = Network((Linear(weight=np.array([[2.0, 0.0]]), bias=np.array([0.0])),))
    old = Network((Linear(weight=np.array([[1.0, 1.0]]), bias=np.array([0.0])),))
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=torch.float64)
    out = interface._stale_forward(to_torch(new), to_torch(old), x[:1])
    assert out.item() == 3.0                                 # W_old · [1, 2]
    module = to_torch(new)
    interface._stale_forward(module, to_torch(old), x[:1]).sum().backward()
    assert module[0].weight.grad.tolist() == [[1.0, 2.0]]   # δ · x, as PG computes it


def test_nnrtl_train_command(files, tmp_path, capsys):
    """``nnrtl train ENGINE ... --fpgas 2 --precision fixed16``: the engine options reach
    the hook from the command line (an engine registered for the test with the hook as its
    ``train``; the fpdeep engine's registration is another module's)."""
    from nnrtl.gen import engines as registry
    from nnrtl.gen.cli import main
    from nnrtl.gen.engines import Engine
    from nnrtl.hw.demo import DemoConfig, DemoEngine
    registry.register(Engine(
        name="fpdeep_train_test", summary="the fpdeep train hook (tests)",
        config_class=DemoConfig, top=DemoEngine,
        resources=lambda config, family: {"dsp": config.dsp},
        predict=lambda config, workload: {"cycles": 0},
        simulate=lambda request: {}, train=train_hook, options={"train": train_options}))
    try:
        code = main(["train", "fpdeep_train_test", "--board", "vc709", "--model",
                     str(files.model), "--inputs", str(files.dir / "x1.npy"), "--targets",
                     str(files.dir / "y1.npy"), "--loss", "cross-entropy", "--lr", "0.5",
                     "-o", str(tmp_path / "run"), "--fpgas", "2", "--precision", "fixed16"])
        assert code == 0, capsys.readouterr().err
        record = json.loads((tmp_path / "run" / "train.json").read_text())
        assert record["within_bound"] and record["config"]["precision"] == "fixed16"
        assert record["gradient_bound"] == GRADIENT_BOUND["fixed16"]
        code = main(["train", "fpdeep_train_test", "--board", "vc709", "--model",
                     str(files.model), "--inputs", str(files.dir / "x1.npy"), "--targets",
                     str(files.dir / "y1.npy"), "-o", str(tmp_path / "bad"), "--fpgas", "x"])
        assert code == 2 and not (tmp_path / "bad").exists()
        assert "argument --fpgas: invalid int value: 'x'" in capsys.readouterr().err
    finally:
        registry.unregister("fpdeep_train_test")


@pytest.mark.slow
@pytest.mark.parametrize("precision, fpgas", [("fp32", 3), ("fixed16", 4)])
def test_32x32_cnn_two_mini_batches(tmp_path, precision, fpgas):
    """The spec's end-to-end case (§5.2) on the golden chain: 3x32x32 inputs, conv 3->8
    pad 1 + ReLU + pool 2, conv 8->16 pad 1 + ReLU + pool 2, Linear 1024->10; batch 4,
    three mini-batches (stale weights from the second on) on ``fpgas`` VC709s: every
    update within the bound of the float64 reference with the same staleness."""
    torch.manual_seed(11)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(8, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(1024, 10))
    rng = np.random.default_rng(11)
    np.save(tmp_path / "x4.npy", rng.uniform(-1, 1, (4, 3, 32, 32)))
    np.save(tmp_path / "y4.npy", np.array([3, 9, 0, 5]))
    files = types.SimpleNamespace(dir=tmp_path, model=save(tmp_path, model))
    req = request(files, "--fpgas", str(fpgas), "--precision", precision, batch=4, steps=3)
    summary = interface.train(types.SimpleNamespace(name="fpdeep"), train_hook, req,
                              tmp_path / "run")
    record = json.loads((tmp_path / "run" / "train.json").read_text())
    print(json.dumps([{k: s[k] for k in ("loss", "reference_loss", "update_max_abs_diff",
                                         "update_bound")} for s in record["steps"]]))
    assert summary["within_bound"]
    assert len({s["node"] for s in record["steps"][0]["segments"]}) == fpgas


def test_saturated_words_are_counted(files):
    """fixed16 Q2.13 holds ±4: inputs scaled by 8 saturate, and the count says so (at
    least the input words beyond the range)."""
    network = load_network(files.model)
    trainer = train_hook(request(files, "--fpgas", "1", "--precision", "fixed16"), network)
    x = 8 * np.load(files.dir / "x1.npy")
    trainer.forward(network, x)
    assert trainer.counters()["saturated_words"] >= np.count_nonzero(np.abs(x) >= 4)
    assert np.count_nonzero(np.abs(x) >= 4) > 0
