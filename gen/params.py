"""``--param name=value`` parsing against an engine's frozen configuration dataclass, and the
completion of a partial configuration.

The parameters a user gives are *pinned*; every other one is the tool's to choose. A
configuration class may describe its free choices with a class method::

    candidates(values, pinned) -> {name: [value, ...]}

``values`` holds every field (the defaults, or a preset's values, with the pinned ones put
in), ``pinned`` the names the user gave; the result lists, for unpinned parameters, the
values to try, the preferred one (the default derived from the pinned values) first.
:func:`parse_params` takes the first combination, in the order of the summed preference
ranks, that the class accepts (and that ``accept``, e.g. the board's resource budget,
accepts). A refusal therefore means the pinned values conflict by themselves.
"""

import dataclasses
import itertools
import typing

from .errors import UsageError

__all__ = ["parse_params", "parse_values", "complete", "param_help", "param_fields", "MAX_COMPLETIONS"]

#: The most combinations of free values :func:`parse_params` tries before it refuses.
MAX_COMPLETIONS = 5_000


def _field_types(config_class):
    hints = typing.get_type_hints(config_class)
    return {field.name: hints[field.name] for field in dataclasses.fields(config_class)
            if field.init}


def _convert(name, text, kind):
    if kind is bool:
        lowered = text.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise UsageError(f"parameter {name} must be a boolean (true/false), not {text!r}")
    if kind is int:
        try:
            return int(text, 0)
        except ValueError:
            raise UsageError(f"parameter {name} must be an integer, not {text!r}") from None
    if typing.get_origin(kind) is tuple:     # tuple[int, ...]: comma-separated
        parts = [part.strip() for part in text.split(",")] if text.strip() else []
        try:
            return tuple(int(part, 0) for part in parts)
        except ValueError:
            raise UsageError(f"parameter {name} must be comma-separated integers (e.g. "
                             f"16,9), not {text!r}") from None
    if kind is float:
        try:
            return float(text)
        except ValueError:
            raise UsageError(f"parameter {name} must be a number, not {text!r}") from None
    return text


def param_help(config_class):
    """``name (type, default value)`` for every parameter, in declaration order."""
    defaults = config_class()
    return [f"{name} ({kind.__name__}, default {getattr(defaults, name)!r})"
            for name, kind in _field_types(config_class).items()]


def param_fields(config_class):
    """``[{"name", "type", "default"}]`` for every parameter, in declaration order."""
    defaults = config_class()
    return [{"name": name, "type": kind.__name__, "default": getattr(defaults, name)}
            for name, kind in _field_types(config_class).items()]


def parse_params(config_class, items, *, base=None, accept=None, log=None):
    """Build a configuration from ``name=value`` strings, completing the parameters not given.

    Parameters
    ----------
    config_class : type
        A frozen dataclass whose ``__post_init__`` validates, optionally with a
        ``candidates`` class method (see the module).
    items : iterable of str
        ``name=value`` strings, as given to ``--param``: the pinned parameters.
    base : config_class, optional
        The configuration the values replace (default: the class defaults); its values are
        the preferred ones of the parameters not given.
    accept : callable, optional
        Called with a valid configuration; raises :class:`UsageError` when the design
        cannot be used (e.g. :func:`nnrtl.gen.engines.check_fit` on a board). The free
        parameters are then chosen again.
    log : callable, optional
        Told each free parameter that was given another value than its default, and why.

    Raises
    ------
    UsageError
        Naming the parameter, the value and the rule: malformed item, unknown name (with
        the valid ones), a value of the wrong type, or pinned values that no choice of the
        free parameters makes valid (the rule the preferred completion broke, which names
        the values).
    """
    return complete(config_class, parse_values(config_class, items), base=base,
                    accept=accept, log=log)


def parse_values(config_class, items):
    """``name=value`` strings as ``{name: value}`` of the configuration's field types.

    Raises
    ------
    UsageError
        A malformed item, an unknown name (with the valid ones), a name given twice, or a
        value of the wrong type.
    """
    kinds = _field_types(config_class)
    values = {}
    for item in items:
        name, sep, text = item.partition("=")
        name = name.strip()
        if not sep or not name:
            raise UsageError(f"--param takes name=value, not {item!r}")
        if name not in kinds:
            raise UsageError(f"unknown parameter {name!r} for {config_class.__name__}; "
                             f"valid parameters: {', '.join(kinds)}")
        if name in values:
            raise UsageError(f"parameter {name} is given twice")
        values[name] = _convert(name, text.strip(), kinds[name])
    return values


def complete(config_class, values, *, base=None, accept=None, log=None):
    """:func:`parse_params` of values already of their types: ``values`` (name to value)
    pinned, the other parameters completed.

    Raises
    ------
    UsageError
        As :func:`parse_params`.
    """
    kinds = _field_types(config_class)
    unknown = sorted(set(values) - set(kinds))
    if unknown:
        raise UsageError(f"unknown parameter {unknown[0]!r} for {config_class.__name__}; "
                         f"valid parameters: {', '.join(kinds)}")
    start = {name: getattr(base, name) for name in kinds} if base is not None else {}
    start.update(values)
    return _complete(config_class, start, frozenset(values), accept, log)


def _build(config_class, values, accept):
    try:
        config = config_class(**values)
    except (TypeError, ValueError) as error:
        return None, UsageError(str(error))
    if accept is not None:
        try:
            accept(config)
        except UsageError as error:
            return None, error
    return config, None


def _ranked(lists):
    """Index tuples over ``lists`` in the order of their summed ranks."""
    combos = itertools.islice(itertools.product(*(range(len(v)) for v in lists)),
                              MAX_COMPLETIONS)
    return sorted(combos, key=sum)


def _complete(config_class, start, pinned, accept, log):
    defaults = {f.name: f.default for f in dataclasses.fields(config_class)
                if f.init and f.default is not dataclasses.MISSING}
    values = {**defaults, **start}
    candidates = getattr(config_class, "candidates", None)
    choices = {}
    if candidates is not None:
        try:
            choices = {name: list(options) for name, options in
                       candidates(dict(values), pinned).items()
                       if name not in pinned and options}
        except (TypeError, ValueError) as error:     # pinned values of the wrong kind
            raise UsageError(str(error)) from None
    names = list(choices)
    first_error = None
    for ranks in _ranked([choices[name] for name in names]) if names else [()]:
        trial = dict(values)
        trial.update({name: choices[name][rank] for name, rank in zip(names, ranks)})
        config, error = _build(config_class, {k: v for k, v in trial.items()
                                              if k in start or k in names}, accept)
        if config is not None:
            if log is not None:
                for name in names:
                    if trial[name] != values[name]:
                        log(f"{name} = {trial[name]!r} (not given: chosen for the parameters "
                            f"given, where the default is {values[name]!r})")
            return config
        first_error = first_error or error
    raise first_error
