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
