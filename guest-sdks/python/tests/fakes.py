"""Stand-ins for the bindings componentize-py generates: the records and error cases of
``wit_world.imports``, and :class:`Recorder`, a fake interface module (see the ``fake``
fixture in ``conftest.py``)."""

from dataclasses import dataclass
from typing import Any, Optional


@dataclass
class LogRecord:
    seqnum: int
    tags: list
    data: bytes
    aux_data: Optional[bytes]


@dataclass
class Error_Conflict:
    value: Optional[int]


@dataclass
class Error_InvalidArgument:
    value: str


@dataclass
class Error_NotFound:
    value: str


@dataclass
class Error_Unavailable:
    value: str


@dataclass
class Error_TooLarge:
    value: str


@dataclass
class Error_Timeout:
    value: str


class Answers:
    """Answers to successive calls of one function, in order (each one raised if it is
    an exception)."""

    def __init__(self, *answers: Any) -> None:
        self.answers = list(answers)

    def next(self) -> Any:
        assert self.answers, "called more often than the test expected"
        return self.answers.pop(0)


class Recorder:
    """Records calls; answers with `results[name]` (the next one of `Answers`), raising
    it if it is an exception."""

    def __init__(self, **results: Any) -> None:
        self.calls: list = []
        self.results = results

    def __getattr__(self, name: str):
        def call(*args):
            self.calls.append((name, args))
            result = self.results.get(name)
            if isinstance(result, Answers):
                result = result.next()
            if isinstance(result, BaseException):
                raise result
            return result

        return call
