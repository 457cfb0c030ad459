"""Typed run configs: YAML (plus `a.b=value` overrides) -> frozen dataclass, saved beside outputs.

Unknown keys and wrong types are errors that name the file and the field, as in llm-foundry.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

from contracts.bounded import YamlTooLarge, load_yaml, short_repr
from contracts.bounded import yaml_problem as _yaml_problem
from contracts.layout import RUN_CONFIG_FILE
from contracts.provenance import atomic_write_text, git_sha, package_versions, stable_hash, utc_now

T = TypeVar("T")


class ConfigError(ValueError):
    """A config that cannot become its dataclass; the message names the source and field."""


def _convert(value: Any, annotation: Any, where: str) -> Any:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in (a for a in args if a is not type(None)):
            try:
                return _convert(value, arg, where)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if len(errors) == 1 else f"{where}: {short_repr(value)} matches none of {args}")
    if origin is typing.Literal:
        if value not in args:
            raise ConfigError(f"{where}: {short_repr(value)} is not one of {list(args)}")
        return value
    if dataclasses.is_dataclass(annotation):
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping for {annotation.__name__}, got {short_repr(value)}")
        return _build(annotation, value, where)
    if origin in (tuple, list):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{where}: expected a list, got {short_repr(value)}")
        item = args[0] if args else Any
        return tuple(_convert(v, item, f"{where}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{where}: expected a mapping, got {short_repr(value)}")
        return dict(value)
    if annotation is float and isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if annotation is float and isinstance(value, str):
        try:  # YAML 1.1 reads "5e-4" as a string
            return float(value)
        except ValueError:
            pass
    if (
        annotation in (int, str, bool)
        and isinstance(value, annotation)
        and not (annotation is int and isinstance(value, bool))
    ):
        return value
    if annotation is Path and isinstance(value, (str, os.PathLike)):
        return Path(value)
    raise ConfigError(f"{where}: expected {getattr(annotation, '__name__', annotation)}, got {short_repr(value)}")


def _build(cls: type[T], data: dict, where: str) -> T:
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    unknown = set(data) - set(fields)
    if unknown:
        name = sorted(unknown)[0]
        raise ConfigError(f"{where}.{name}: unknown key; valid keys of {cls.__name__}: {sorted(fields)}")
    kwargs = {}
    for name, fld in fields.items():
        if name in data:
            kwargs[name] = _convert(data[name], hints[name], f"{where}.{name}")
        elif fld.default is dataclasses.MISSING and fld.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}.{name}: missing required key")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


def apply_overrides(data: dict, overrides: list[str], where: str = "override") -> dict:
    """Apply `a.b.c=value` strings (values parsed as YAML) to a nested dict, returning a copy."""
    import copy

    data = copy.deepcopy(data)
    for item in overrides:
        if "=" not in item:
            raise ConfigError(f"{where} {short_repr(item, 400)}: expected key.path=value")
        key, raw = item.split("=", 1)
        node = data
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise ConfigError(f"{where} {short_repr(item, 400)}: {part} is not a mapping")
        try:  # the safe loader: a `!!python/...` tag is refused here, never run
            node[parts[-1]] = load_yaml(raw)
        except YamlTooLarge as exc:
            raise ConfigError(f"{where} {short_repr(item, 400)}: the value {exc}") from None
        except RecursionError:
            raise ConfigError(f"{where} {short_repr(item, 400)}: the value is nested too deeply") from None
        except yaml.YAMLError as exc:
            problem = _yaml_problem(exc)
            raise ConfigError(
                f"{where} {short_repr(item, 400)}: the value is not plain YAML ({problem}); quote it"
            ) from None
    return data


CONFIG_BYTES_LIMIT = 8 << 20  # the largest config we write (a paper study's reproduce.yaml) is a few kB


def read_yaml_mapping(path: str | os.PathLike) -> dict:
    """The mapping a YAML config file holds; ConfigError naming the file when it is missing, not a
    file, not YAML (PyYAML's safe loader: no tags that build Python objects) or not a mapping."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"{path}: config file not found")
    if not path.is_file():
        raise ConfigError(f"{path}: not a file; give a YAML config file")
    from contracts.bounded import BoundedReadError, read_text

    try:
        # a size cap and the recursion limit: a 200 MB config parsed for minutes and a 100,000-deep one
        # gave a RecursionError traceback thousands of lines long (issue 56)
        data = load_yaml(read_text(path, CONFIG_BYTES_LIMIT)) or {}
    except BoundedReadError as exc:
        raise ConfigError(f"{exc}; a config is a few kB") from None
    except YamlTooLarge as exc:
        raise ConfigError(f"{path}: {exc} (an alias bomb?); a config is a few hundred values") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {_yaml_problem(exc)}") from None
    except RecursionError:
        raise ConfigError(f"{path}: nested too deeply to be a config") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not a text file; give a YAML config file") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    return data


def config_from_dict(cls: type[T], data: dict, source: str = "config") -> T:
    return _build(cls, data or {}, source)


def load_config(cls: type[T], path: str | os.PathLike, overrides: list[str] = ()) -> T:
    data = read_yaml_mapping(path)
    return config_from_dict(cls, apply_overrides(data, list(overrides)), str(path))


def config_to_dict(cfg) -> dict:
    def plain(value):
        if isinstance(value, Path):
            return str(value)
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    return plain(dataclasses.asdict(cfg))


def save_resolved_config(
    cfg, out_dir: str | os.PathLike, name: str = RUN_CONFIG_FILE, extra: dict | None = None
) -> Path:
    """Write the resolved config with git sha, package versions and its hash next to the outputs
    (`extra`: more top-level keys, e.g. the version of the settings' meaning)."""
    body = config_to_dict(cfg)
    document = {
        "config": body,
        "config_hash": stable_hash(body),
        **(extra or {}),
        "git_sha": git_sha(),
        "package_versions": package_versions(),
        "written": utc_now(),
    }
    return atomic_write_text(Path(out_dir) / name, yaml.safe_dump(document, sort_keys=False))


def saved_config(out_dir: str | os.PathLike, name: str = RUN_CONFIG_FILE) -> dict:
    """The config body that save_resolved_config wrote in `out_dir` (OSError if absent, KeyError if not one,
    contracts.bounded.BoundedReadError, a ValueError, if not a regular YAML file of at most CONFIG_BYTES_LIMIT)."""
    from contracts.bounded import read_yaml

    return read_yaml(Path(out_dir) / name, CONFIG_BYTES_LIMIT)["config"]
