"""Tasks and models from outside the package: one registry for built-ins and plugins.

``task.name`` and ``model.arch`` name a built-in (``add``, ``transformer``), an object by import
path (``mypkg.tasks:parity``: module, colon, attribute) or a name registered through the Python
entry-point groups ``sweepgrok.tasks`` and ``sweepgrok.models`` (an installed package's
``[project.entry-points."sweepgrok.tasks"]``). ``resolve`` looks a name up in that order and
returns the object; a plugin is imported once per process (cached), at config validation, so
an import error, a missing attribute or a wrong signature is a config error naming the key and
the module (exit 2 before any Ray work).

A plugin module in the current directory (not installed, not on PYTHONPATH) is found as
``python -m`` would find it: the directory is appended to sys.path when the module is not found
otherwise. An embedded Ray adds the driver's current directory to its workers' path too.

The protocols themselves (what a task gives, what a model exposes) are in docs/extending.md;
``check_callable`` checks the signatures here, without calling anything.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import entry_points
from typing import Any

from pydantic import BaseModel, ValidationError

from sweepgrok.config.suggest import did_you_mean
from sweepgrok.config.tasks import TASKS, Task
from sweepgrok.core.errors import excerpt

GROUPS = {"task.name": "sweepgrok.tasks", "model.arch": "sweepgrok.models"}
"""Config key -> the entry-point group its plugins register in."""


class PluginError(ValueError):
    """A plugin that cannot be used; the message names the config key and the module."""


def is_import_path(name: str) -> bool:
    """Whether `name` is an import path 'module:attribute' (not a registered name)."""
    module, sep, attr = name.partition(":")
    return bool(sep and module and attr)


def registered(group: str) -> dict[str, str]:
    """Entry-point name -> its 'module:attribute' value, for one group (installed packages)."""
    return {ep.name: ep.value for ep in entry_points(group=group)}


def resolve(key: str, name: str, builtins: Mapping[str, Any]) -> Any:
    """The object `name` stands for under config `key`: a built-in, an entry point of the key's
    group, or an import path. Raises PluginError naming the key (and the module)."""
    if name in builtins:
        return builtins[name]
    target = name if is_import_path(name) else registered(GROUPS[key]).get(name)
    if target is None:
        names = [*builtins, *registered(GROUPS[key])]
        raise PluginError(
            f"must be one of {', '.join(names)}, or a plugin as 'module:attribute' or an entry "
            f"point of group {GROUPS[key]} (docs/extending.md), got {excerpt(name)!r}"
            + did_you_mean(name, names)
        )
    return load(target)


@functools.cache
def load(target: str) -> Any:
    """Import 'module:attribute' (cached per process); PluginError on any failure."""
    module_name, _, attr = target.partition(":")
    module = _import(module_name)
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise PluginError(
                f"plugin {target!r}: module {module_name!r} has no attribute {attr!r}"
            )
        obj = getattr(obj, part)
    return obj


def _import(module_name: str) -> Any:
    """Import a plugin's module, appending the current directory to sys.path when the module is
    not found otherwise (an uninstalled package beside the trial file)."""
    try:
        return _import_once(module_name)
    except ModuleNotFoundError as err:
        cwd = os.getcwd()
        if cwd in sys.path or not module_name.startswith(str(err.name)):
            raise PluginError(_not_found(module_name, err)) from None
        sys.path.append(cwd)
        try:
            return _import_once(module_name)
        except ModuleNotFoundError as again:
            sys.path.remove(cwd)
            raise PluginError(_not_found(module_name, again)) from None


def _import_once(module_name: str) -> Any:
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError:
        raise
    except Exception as err:  # the module's own code failed: a user error to report, any type
        why = (str(err).strip().splitlines() or [""])[0]
        raise PluginError(
            f"importing module {module_name!r} failed: {type(err).__name__}: {excerpt(why)}"
        ) from None


def _not_found(module_name: str, err: ModuleNotFoundError) -> str:
    return (f"cannot import module {module_name!r} ({err}): install its package or put its "
            "folder on PYTHONPATH (docs/extending.md)")


def where(key: str, name: str) -> str:
    """How messages name a plugin: "plugin 'mypkg.tasks:parity' (module mypkg.tasks)"."""
    target = name if is_import_path(name) else registered(GROUPS[key]).get(name, "")
    return f"plugin {excerpt(name)!r} (module {target.partition(':')[0]})"


def task_spec(name: str) -> Task:
    """The Task that task.name names: a built-in (read from TASKS each time), or a plugin
    checked against the protocol (docs/extending.md). Raises PluginError."""
    return TASKS[name] if name in TASKS else _plugin_task(name)


@functools.cache
def _plugin_task(name: str) -> Task:
    return as_task(resolve("task.name", name, TASKS), where("task.name", name))


TASK_REQUIRED = ("table", "n_tokens", "size")
"""What a plugin task must have: callables of the task config (sweepgrok.config.tasks.Task)."""
TASK_OPTIONAL = ("n_classes", "seq_len", "validate_options")


def as_task(obj: Any, who: str) -> Task:
    """A plugin task as a Task: itself, or an object with Task's attributes (a module, a
    class instance); its callables' signatures are checked, nothing is called."""
    if not isinstance(obj, Task):
        missing = [a for a in TASK_REQUIRED if not hasattr(obj, a)]
        if missing:
            raise PluginError(f"{who}: is not a task: missing attribute(s) {', '.join(missing)} "
                              "(a task has table, n_tokens, size; docs/extending.md)")
        schema = getattr(obj, "Options", None)
        obj = Task(
            obj.table, n_tokens=obj.n_tokens, size=obj.size,
            n_classes=getattr(obj, "n_classes", None),
            seq_len=getattr(obj, "seq_len", None) or Task.seq_len,
            cyclic=bool(getattr(obj, "cyclic", False)),
            additive=bool(getattr(obj, "additive", False)),
            uses_p=bool(getattr(obj, "uses_p", False)),
            validate_options=getattr(obj, "validate_options", None) or (
                schema.model_validate if isinstance(schema, type)
                and issubclass(schema, BaseModel) else None),
        )
    for attr in (*TASK_REQUIRED, *TASK_OPTIONAL):
        fn = getattr(obj, attr)
        if fn is not None:
            check_callable(f"{who}: {attr}", fn, (None,), {})
    return obj


BUILTIN_ARCHS = ("transformer", "mlp")
"""The built-in model.arch names (sweepgrok.train.models.ARCHS builds them)."""
MODEL_ARGS = ("cfg", "n_tokens", "n_classes", "seeds")
"""A model factory's positional arguments; seq_len (input positions before '=') by keyword."""


@functools.cache
def check_model(name: str) -> Any:
    """The model factory that model.arch names (None for a built-in), its signatures checked:
    factory(cfg, n_tokens, n_classes, seeds, seq_len=...) and, for an nn.Module class,
    forward(x, hidden=...). Raises PluginError."""
    obj = resolve("model.arch", name, dict.fromkeys(BUILTIN_ARCHS))
    if obj is None:
        return None
    who = where("model.arch", name)
    check_callable(f"{who}: the factory", obj, (None, 1, 1, [0]), {"seq_len": 2})
    forward = getattr(obj, "forward", None) if isinstance(obj, type) else None
    if forward is not None:
        check_callable(f"{who}: forward", forward, (None, None), {"hidden": None})
    return obj


def check_callable(what: str, fn: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> None:
    """PluginError unless `fn` is callable with these arguments (its signature only)."""
    if not callable(fn):
        raise PluginError(f"{what} must be callable (got {type(fn).__name__})")
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # a builtin without a signature: trust it
        return
    try:
        signature.bind(*args, **kwargs)
    except TypeError as err:
        raise PluginError(f"{what} has the wrong signature {signature}: {err}") from None


def validate_options(key: str, owner: Any, options: Mapping[str, Any], who: str) -> None:
    """Check `options` (task.options / model.options) with what the plugin `owner` exposes:
    ``Options``, a pydantic model, or ``validate_options(options)``, a callable that raises
    ValueError or TypeError; an owner with neither takes no options."""
    schema = getattr(owner, "Options", None)
    check: Callable[[Mapping[str, Any]], Any] | None = getattr(owner, "validate_options", None)
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            schema.model_validate(dict(options))
        except ValidationError as err:
            raise PluginError(_options_errors(key, err)) from None
    elif callable(check):
        try:
            check(dict(options))
        except ValidationError as err:  # a pydantic model's model_validate
            raise PluginError(_options_errors(key, err)) from None
        except (ValueError, TypeError) as err:
            raise PluginError(f"{key}: {excerpt(str(err))} ({who})") from None
    elif options:
        raise PluginError(
            f"{key}: {who} takes no options (it exposes neither Options nor validate_options); "
            f"got {', '.join(map(str, options))}"
        )


def _options_errors(key: str, err: ValidationError) -> str:
    """Each option error as 'model.options.width: message'."""
    parts = []
    for e in err.errors()[:5]:
        loc = ".".join(str(p) for p in (key, *e["loc"]))
        parts.append(f"{loc}: {e['msg']}")
    return "; ".join(parts)
