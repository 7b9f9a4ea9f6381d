"""Exceptions that cross a process boundary as they were raised.

An exception is pickled as its class and ``args``, the arguments it gave ``Exception.__init__``,
and unpickled by calling the class with them. One whose ``__init__`` takes other arguments than it
passes on (a message built from a limit, a line and column kept beside the message) fails to
unpickle, and a pool of processes that sends it back breaks (``concurrent.futures``'
BrokenProcessPool): the document and engine processes send back what their work raised.
"""

from __future__ import annotations

import functools
from typing import Any


class Picklable(BaseException):
    """Mixed into an exception class: it pickles as the call that made it, and its attributes."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Picklable:
        made = super().__new__(cls, *args, **kwargs)
        made._made_with = (args, kwargs)
        return made

    def __reduce__(self) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
        args, kwargs = self._made_with
        remake = functools.partial(type(self), **kwargs) if kwargs else type(self)
        return remake, args, self.__dict__
