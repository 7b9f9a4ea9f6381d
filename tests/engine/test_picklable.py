"""Every exception class of the engine and the service survives pickling: the document and engine
processes send back what their work raised, and one that cannot be unpickled broke the process
pool (a 1 KB Markdown file made the document process's MarkupError a 500 and killed the process)."""

from __future__ import annotations

import importlib
import inspect
import pickle
import pkgutil
import types
import typing
from typing import Any

import pytest

import engine
import service

SAMPLES: dict[Any, Any] = {str: "the message", int: 7, float: 1.5, bool: True, dict: {"k": "v"}}


def exception_classes() -> list[type[BaseException]]:
    found = []
    for package in (engine, service):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            loaded = importlib.import_module(module.name)
            found += [
                cls
                for cls in vars(loaded).values()
                if inspect.isclass(cls) and issubclass(cls, BaseException) and cls.__module__ == loaded.__name__
            ]
    return found


def sample(annotation: Any) -> Any:
    """A value of the type ``annotation`` names (the first of a union that is not None)."""
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    return SAMPLES.get(typing.get_origin(annotation) or annotation, "a value")


def made(cls: type[BaseException]) -> BaseException:
    """An instance, every argument of its ``__init__`` given (keyword-only ones too)."""
    hints = typing.get_type_hints(cls.__init__)
    args, kwargs = [], {}
    for parameter in list(inspect.signature(cls.__init__).parameters.values())[1:]:
        if parameter.kind is parameter.VAR_POSITIONAL:
            args.append("the message")
        elif parameter.kind is parameter.KEYWORD_ONLY:
            kwargs[parameter.name] = sample(hints.get(parameter.name, str))
        elif parameter.kind is not parameter.VAR_KEYWORD:
            args.append(sample(hints.get(parameter.name, str)))
    return cls(*args, **kwargs)


def test_the_walk_finds_the_exceptions_that_cross_processes() -> None:
    names = {cls.__name__ for cls in exception_classes()}
    assert {"MarkupError", "TooManyNodes", "TooManyBlocks", "MalformedDocument", "Overloaded", "Cancelled"} <= names


@pytest.mark.parametrize("cls", exception_classes(), ids=lambda cls: f"{cls.__module__}.{cls.__name__}")
def test_every_exception_pickles_as_it_was_raised(cls: type[BaseException]) -> None:
    raised = made(cls)
    back = pickle.loads(pickle.dumps(raised))
    assert type(back) is cls
    assert str(back) == str(raised) and back.args == raised.args
    assert vars(back) == vars(raised)
