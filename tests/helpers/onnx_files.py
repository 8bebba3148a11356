"""ONNX graphs written by hand for tests: what the exporters do not write."""

import numpy as np


def reverse_lstm_stack(lstm, path):
    """``lstm``'s layers as an ONNX graph of LSTM nodes with direction "reverse" (ONNX gate
    order i, o, f, c: PyTorch's blocks 0, 3, 1, 2), float64."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def blocks(tensor):
        parts = np.split(tensor.detach().numpy(), 4)
        return np.concatenate([parts[i] for i in (0, 3, 1, 2)])

    nodes, initializers, current = [], [], "x"
    for k in range(lstm.num_layers):
        tensors = {f"W{k}": blocks(getattr(lstm, f"weight_ih_l{k}"))[None],
                   f"R{k}": blocks(getattr(lstm, f"weight_hh_l{k}"))[None],
                   f"B{k}": np.concatenate([blocks(getattr(lstm, f"bias_ih_l{k}")),
                                            blocks(getattr(lstm, f"bias_hh_l{k}"))])[None]}
        initializers += [numpy_helper.from_array(v, n) for n, v in tensors.items()]
        nodes += [helper.make_node("LSTM", [current, *tensors], [f"y{k}"],
                                   hidden_size=lstm.hidden_size, direction="reverse"),
                  helper.make_node("Squeeze", [f"y{k}", "axis"], [f"s{k}"])]
        current = f"s{k}"
    initializers.append(numpy_helper.from_array(np.array([1]), "axis"))
    graph = helper.make_graph(nodes, "g",
                              [helper.make_tensor_value_info("x", TensorProto.DOUBLE, None)],
                              [helper.make_tensor_value_info(current, TensorProto.DOUBLE,
                                                             None)], initializers)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def lstm_with_head(lstm, path, head):
    """A one-layer forward ``lstm`` as an ONNX LSTM node, ``Squeeze``d, then ``head``: a
    list of ``torch.nn.Linear`` modules (a ``MatMul`` and an ``Add`` each, as
    ``torch.onnx.export`` writes a Linear on a sequence) and activation names (``Relu``,
    ``Tanh``, ``Sigmoid``, ``Softmax``), float64, opset 17."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    def blocks(tensor):
        parts = np.split(tensor.detach().numpy(), 4)
        return np.concatenate([parts[i] for i in (0, 3, 1, 2)])

    tensors = {"W": blocks(lstm.weight_ih_l0)[None], "R": blocks(lstm.weight_hh_l0)[None],
               "B": np.concatenate([blocks(lstm.bias_ih_l0), blocks(lstm.bias_hh_l0)])[None],
               "axis": np.array([1])}
    nodes = [helper.make_node("LSTM", ["x", "W", "R", "B"], ["y"],
                              hidden_size=lstm.hidden_size),
             helper.make_node("Squeeze", ["y", "axis"], ["h0"])]
    for n, item in enumerate(head):
        if isinstance(item, str):
            nodes.append(helper.make_node(item, [f"h{n}"], [f"h{n + 1}"]))
        else:
            tensors[f"w{n}"] = item.weight.detach().numpy().T
            tensors[f"b{n}"] = item.bias.detach().numpy()
            nodes += [helper.make_node("MatMul", [f"h{n}", f"w{n}"], [f"m{n}"]),
                      helper.make_node("Add", [f"m{n}", f"b{n}"], [f"h{n + 1}"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.DOUBLE, None)],
        [helper.make_tensor_value_info(f"h{len(head)}", TensorProto.DOUBLE, None)],
        [numpy_helper.from_array(v, k) for k, v in tensors.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return path
