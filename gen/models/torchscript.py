"""TorchScript archives (``torch.jit.save``) of a CNN, read without ``torch.jit.load``.

``torch.jit.load`` is not safe on untrusted files: its docstring warns that malicious
pickle data can execute arbitrary code during the load, PyTorch's maintainers state there
is no safe mode for it (pytorch/pytorch#143403) and that TorchScript models are code
(SECURITY.md, pytorch/pytorch#152336), and its C++ unpickler only takes trusted input
(pytorch/pytorch#77573). So the archive is read as data:

* ``data.pkl`` (the module tree and tensor records) is disassembled with
  :func:`pickletools.genops` and interpreted by a small stack machine that only builds
  inert records (class names, dicts, tuples, tensor references); no callable is looked up
  or called, so nothing in it can run. Unknown opcodes are refused.
* The tensors are the raw bytes of ``data/<key>``, shaped by the records' size and
  stride (contiguous parameters only).
* The structure comes from the ``code/`` files, TorchScript source in Python syntax, parsed
  with :func:`ast.parse` (parsing runs nothing): the top module's ``forward`` calls its
  children in order; each child's class is ``Conv2d``, ``ReLU``, ``MaxPool2d``,
  ``Flatten`` or ``Linear`` of ``torch.nn``, its settings the class's ``Final`` constants
  (``torch.jit.script``) or the literal arguments of its ``torch.*`` operator call
  (``torch.jit.trace``).

Writing copies every record of the archive, replacing the parameters' storage bytes.
"""

import ast
import os
import pickletools
import zipfile

import numpy as np

from ..errors import UsageError
from .layers import Conv2d, Flatten, Linear, MaxPool2d, ReLU
from .network import Entry, Network

__all__ = ["load_torchscript", "save_torchscript"]

_STORAGES = {"FloatStorage": np.float32, "DoubleStorage": np.float64,
             "HalfStorage": np.float16}


class _Global(tuple):
    pass


class _Object:
    def __init__(self, cls):
        self.cls, self.state = cls, None


class _Reduce(tuple):
    pass


class _Persistent(tuple):
    pass


def _inert_unpickle(data, label):
    """The object tree of a TorchScript ``data.pkl`` as inert records (see the module)."""
    stack, marks, memo = [], [], {}
    simple = {"NONE": None, "NEWTRUE": True, "NEWFALSE": False}
    try:
        for opcode, arg, _ in pickletools.genops(data):
            name = opcode.name
            if name in ("PROTO", "FRAME", "STOP"):
                continue
            if name in simple:
                stack.append(simple[name])
            elif name in ("BININT", "BININT1", "BININT2", "LONG1", "BINFLOAT", "BINUNICODE",
                          "SHORT_BINUNICODE", "BINUNICODE8", "BINBYTES", "SHORT_BINBYTES"):
                stack.append(arg)
            elif name == "GLOBAL":
                stack.append(_Global(arg.split(" ", 1)))
            elif name == "STACK_GLOBAL":
                attribute = stack.pop()
                stack.append(_Global((stack.pop(), attribute)))
            elif name in ("BINPUT", "LONG_BINPUT"):
                memo[arg] = stack[-1]
            elif name == "MEMOIZE":
                memo[len(memo)] = stack[-1]
            elif name in ("BINGET", "LONG_BINGET"):
                stack.append(memo[arg])
            elif name == "MARK":
                marks.append(len(stack))
            elif name in ("EMPTY_TUPLE", "EMPTY_DICT", "EMPTY_LIST"):
                stack.append({"EMPTY_TUPLE": (), "EMPTY_DICT": {}, "EMPTY_LIST": []}[name])
            elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                count = int(name[-1])
                items = tuple(stack[-count:])
                del stack[-count:]
                stack.append(items)
            elif name in ("TUPLE", "SETITEMS", "APPENDS"):
                start = marks.pop()
                items = stack[start:]
                del stack[start:]
                if name == "TUPLE":
                    stack.append(tuple(items))
                elif name == "SETITEMS":
                    stack[-1].update(zip(items[::2], items[1::2]))
                else:
                    stack[-1].extend(items)
            elif name == "SETITEM":
                value, key = stack.pop(), stack.pop()
                stack[-1][key] = value
            elif name == "APPEND":
                value = stack.pop()
                stack[-1].append(value)
            elif name == "BINPERSID":
                stack.append(_Persistent(stack.pop()))
            elif name == "NEWOBJ":
                stack.pop()
                cls = stack.pop()
                stack.append(_Object(".".join(cls)))
            elif name == "REDUCE":
                args, func = stack.pop(), stack.pop()
                stack.append({} if func == ("collections", "OrderedDict")
                             else _Reduce((func, args)))
            elif name == "BUILD":
                state = stack.pop()
                if not isinstance(stack[-1], _Object):
                    raise ValueError("BUILD of something other than a module object")
                stack[-1].state = state
            else:
                raise ValueError(f"pickle opcode {name} is not expected in a TorchScript "
                                 f"module")
    except (ValueError, KeyError, IndexError, TypeError, AttributeError) as error:
        raise UsageError(f"{label}: data.pkl is not a TorchScript module record ({error})") \
            from None
    if len(stack) != 1 or not isinstance(stack[0], _Object):
        raise UsageError(f"{label}: data.pkl does not hold one module")
    return stack[0]


def _tensor(label, name, value, records, prefix):
    """``(array, dtype name, record name)`` of a ``_rebuild_tensor_v2`` record."""
    if not (isinstance(value, _Reduce) and value[0] == ("torch._utils", "_rebuild_tensor_v2")):
        raise UsageError(f"{label}: parameter {name} is not a plain tensor")
    persistent, offset, size, stride = value[1][:4]
    _, storage, key, _, numel = persistent
    dtype = _STORAGES.get(storage[1])
    if dtype is None:
        raise UsageError(f"{label}: parameter {name} is stored as {storage[1]}; float16, "
                         f"float32 and float64 are supported")
    size = tuple(size)
    contiguous = tuple(int(np.prod(size[i + 1:])) for i in range(len(size)))
    if offset != 0 or tuple(stride) != contiguous or int(np.prod(size)) != numel:
        raise UsageError(f"{label}: parameter {name} is a view of a larger storage; only "
                         f"contiguous parameters are supported")
    record = f"{prefix}data/{key}"
    data = records.get(record)
    if data is None or len(data) != numel * np.dtype(dtype).itemsize:
        raise UsageError(f"{label}: parameter {name}: record {record} is missing or of the "
                         f"wrong size")
    array = np.frombuffer(data, dtype=np.dtype(dtype).newbyteorder("<")).reshape(size)
    return array.astype(np.float64), np.dtype(dtype).name, record


def _classes(records, prefix, label):
    """``{qualified class name: ast.ClassDef}`` of the archive's code."""
    classes = {}
    for name, data in records.items():
        if not (name.startswith(prefix + "code/") and name.endswith(".py")):
            continue
        module = name[len(prefix + "code/"):-3].replace("/", ".")
        try:
            tree = ast.parse(data.decode("utf-8"), filename=name)
        except (SyntaxError, UnicodeDecodeError, ValueError) as error:
            raise UsageError(f"{label}: {name} is not TorchScript source ({error})") from None
        for node in tree.body:
            if isinstance(node, ast.ClassDef):
                classes[f"{module}.{node.name}"] = node
    return classes


def _constants(cls):
    """The ``Final`` class constants (``torch.jit.script``) and ``__parameters__``."""
    constants = {}
    for node in cls.body:
        try:
            if isinstance(node, ast.AnnAssign) and node.value is not None \
                    and isinstance(node.target, ast.Name) and "Final" in ast.dump(node.annotation):
                constants[node.target.id] = ast.literal_eval(node.value)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 \
                    and isinstance(node.targets[0], ast.Name) \
                    and node.targets[0].id == "__parameters__":
                constants["__parameters__"] = ast.literal_eval(node.value)
        except ValueError:
            continue
    return constants


def _method(cls, name):
    return next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == name),
                None)


def _children_in_order(cls, label):
    """Names of the submodules ``forward`` applies, in order: the value returned must be
    a chain of ``child.forward(...)`` calls from the input (``nn.Sequential``), nested
    (``torch.jit.trace``) or through variables (``torch.jit.script``)."""
    forward = _method(cls, "forward")
    if forward is None or len(forward.args.args) != 2:
        raise UsageError(f"{label}: the top module has no forward(self, input)")
    source = forward.args.args[1].arg
    aliases, chains, result = {}, {}, None

    def chain(expr, line):
        if isinstance(expr, ast.Name) and expr.id == source:
            return []
        if isinstance(expr, ast.Name) and expr.id in chains:
            return chains[expr.id]
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) \
                and expr.func.attr == "forward" and isinstance(expr.func.value, ast.Name) \
                and expr.func.value.id in aliases and len(expr.args) == 1 \
                and not expr.keywords:
            return chain(expr.args[0], line) + [aliases[expr.func.value.id]]
        raise UsageError(f"{label}: the top module's forward, line {line}: only a chain of "
                         f"submodule calls (nn.Sequential) is supported")

    for statement in forward.body:
        line = statement.lineno
        if isinstance(statement, ast.Return) and statement.value is not None:
            result = chain(statement.value, line)
            break
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)):
            chain(None, line)
        target, value = statement.targets[0].id, statement.value
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
                and value.func.id == "getattr" and len(value.args) == 2 \
                and isinstance(value.args[0], ast.Name) and value.args[0].id == "self" \
                and isinstance(value.args[1], ast.Constant):
            aliases[target] = value.args[1].value
        elif isinstance(value, ast.Attribute) and isinstance(value.value, ast.Name) \
                and value.value.id == "self":
            aliases[target] = value.attr
        else:
            chains[target] = chain(value, line)
    if result is None:
        raise UsageError(f"{label}: the top module's forward returns nothing")
    return result


_OPS = {"conv2d": ("stride", "padding", "dilation", "groups"),
        "_convolution": ("stride", "padding", "dilation", "transposed", "output_padding",
                         "groups"),
        "max_pool2d": ("kernel_size", "stride", "padding", "dilation", "ceil_mode"),
        "flatten": ("start_dim", "end_dim")}


def _traced_settings(cls):
    """Settings from the literal arguments of the class's ``torch.<op>(...)`` call."""
    for node in ast.walk(cls):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "torch" \
                and node.func.attr in _OPS:
            skip = 1 if node.func.attr in ("max_pool2d", "flatten") else 3
            settings = {}
            for key, argument in zip(_OPS[node.func.attr], node.args[skip:]):
                try:
                    settings[key] = ast.literal_eval(argument)
                except ValueError:
                    pass
            return settings
    return {}


def _layer(label, child, cls, settings, tensors):
    kind = child.cls.rsplit(".", 1)[-1]
    where = f"submodule {child.name} ({kind})"
    if not child.cls.startswith("__torch__.torch.nn.modules.") \
            or kind not in ("Conv2d", "ReLU", "MaxPool2d", "Flatten", "Linear"):
        raise UsageError(f"{label}: {where}: {child.cls} is not supported; a CNN is "
                         f"Conv2d, ReLU, MaxPool2d, Flatten and Linear of torch.nn")
    try:
        if kind == "Conv2d":
            if settings.get("groups", 1) != 1 or settings.get("transposed", False) \
                    or settings.get("padding_mode", "zeros") != "zeros":
                raise UsageError(f"{label}: {where}: only groups=1, zero-padded, "
                                 f"not transposed convolutions are supported")
            return Conv2d(tensors["weight"], tensors.get("bias"),
                          stride=settings.get("stride", 1), padding=settings.get("padding", 0),
                          dilation=settings.get("dilation", 1))
        if kind == "MaxPool2d":
            if settings.get("ceil_mode") or settings.get("return_indices") \
                    or settings.get("dilation", 1) not in (1, [1, 1], (1, 1)):
                raise UsageError(f"{label}: {where}: only ceil_mode=False, dilation 1 are "
                                 f"supported")
            kernel = settings["kernel_size"]
            return MaxPool2d(kernel, settings.get("stride") or kernel,
                             settings.get("padding", 0))
        if kind == "Flatten":
            if (settings.get("start_dim", 1), settings.get("end_dim", -1)) != (1, -1):
                raise UsageError(f"{label}: {where}: only nn.Flatten() (dimensions 1 to -1) "
                                 f"is supported")
            return Flatten()
        if kind == "Linear":
            return Linear(tensors["weight"], tensors.get("bias"))
        return ReLU()
    except (KeyError, TypeError, ValueError) as error:
        raise UsageError(f"{label}: {where}: {error!r}") from None


def _entry(name, index, field, dtype):
    def get(layers):
        return getattr(layers[index], field)

    def set_(fields, array):
        fields.setdefault(index, {})[field] = array
    return Entry(name, get, set_, dtype)


def load_torchscript(path):
    """A CNN (``nn.Sequential`` of Conv2d, ReLU, MaxPool2d, Flatten, Linear) from a
    ``torch.jit.save`` archive, scripted or traced, read as data (see the module);
    parameters named as ``named_parameters()`` (``"0.weight"``)."""
    label = os.fspath(path)
    try:
        with zipfile.ZipFile(label) as archive:
            records = {name: archive.read(name) for name in archive.namelist()}
    except (zipfile.BadZipFile, OSError) as error:
        raise UsageError(f"{label}: not a TorchScript archive ({error})") from None
    tops = [name[:-len("data.pkl")] for name in records if name.endswith("data.pkl")
            and name.count("/") == 1]
    if len(tops) != 1:
        raise UsageError(f"{label}: not a TorchScript archive (no <name>/data.pkl)")
    prefix = tops[0]
    if records.get(prefix + "byteorder", b"little") != b"little":
        raise UsageError(f"{label}: big-endian archives are not supported")
    top = _inert_unpickle(records[prefix + "data.pkl"], label)
    classes = _classes(records, prefix, label)
    if top.cls not in classes or not isinstance(top.state, dict):
        raise UsageError(f"{label}: no code for the top module {top.cls}")
    layers, entries, storages = [], [], {}
    for child_name in _children_in_order(classes[top.cls], label):
        child = top.state.get(child_name)
        if not isinstance(child, _Object) or child.cls not in classes \
                or not isinstance(child.state, dict):
            raise UsageError(f"{label}: submodule {child_name} has no module record or code")
        child.name = child_name
        cls = classes[child.cls]
        constants = _constants(cls)
        settings = {k: v for k, v in constants.items() if k != "__parameters__"} \
            or _traced_settings(cls)
        tensors, dtypes = {}, {}
        for field in constants.get("__parameters__", []):
            value = child.state.get(field)
            if value is None:
                continue
            name = f"{child_name}.{field}"
            array, dtype, record = _tensor(label, name, value, records, prefix)
            if not np.all(np.isfinite(array)):
                raise UsageError(f"{label}: {name} has NaN or infinite values")
            tensors[field], dtypes[field], storages[name] = array, dtype, record
        layer = _layer(label, child, cls, settings, tensors)
        if set(layer.tensor_fields()) != set(tensors):
            raise UsageError(f"{label}: submodule {child_name} has parameters "
                             f"{sorted(tensors)}, expected {sorted(layer.tensor_fields())}")
        entries.extend(_entry(f"{child_name}.{field}", len(layers), field, dtypes[field])
                       for field in layer.tensor_fields())
        layers.append(layer)
    if not layers:
        raise UsageError(f"{label}: the module has no layers")
    try:
        return Network(tuple(layers), source=label, format="torchscript",
                       entries=tuple(entries), writer=(records, storages))
    except ValueError as error:
        raise UsageError(f"{label}: {error}") from None


def save_torchscript(network, path):
    """A copy of the source archive with the parameters' storage records replaced."""
    records, storages = network.writer
    records = dict(records)
    for entry in network.entries:
        array = np.ascontiguousarray(entry.get(network.layers),
                                     dtype=np.dtype(entry.dtype).newbyteorder("<"))
        records[storages[entry.name]] = array.tobytes()
    with zipfile.ZipFile(os.fspath(path), "w", zipfile.ZIP_STORED) as archive:
        for name, data in records.items():
            archive.writestr(name, data)
