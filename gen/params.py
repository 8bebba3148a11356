"""``--param name=value`` parsing against an engine's frozen configuration dataclass."""

import dataclasses
import typing

from .errors import UsageError

__all__ = ["parse_params", "param_help", "param_fields"]


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


def parse_params(config_class, items, *, base=None):
    """Build a configuration from ``name=value`` strings.

    Parameters
    ----------
    config_class : type
        A frozen dataclass whose ``__post_init__`` validates.
    items : iterable of str
        ``name=value`` strings, as given to ``--param``.
    base : config_class, optional
        The configuration the values replace (default: the class defaults).

    Raises
    ------
    UsageError
        Naming the parameter, the value and the rule: malformed item, unknown name (with
        the valid ones), a value of the wrong type, or a value the configuration rejects.
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
    try:
        if base is None:
            return config_class(**values)
        return dataclasses.replace(base, **values)
    except (TypeError, ValueError) as error:
        raise UsageError(str(error)) from None
