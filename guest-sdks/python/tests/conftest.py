"""Fixtures of the SDK's tests."""

from typing import Any

import pytest
from fakes import Recorder

from tally import _bindings


@pytest.fixture
def fake(monkeypatch):
    """Replaces an interface of the bindings (``fake("log", append=1)``) with a
    :class:`Recorder` for the test, and returns it."""

    def install(interface: str, **results: Any) -> Recorder:
        recorder = Recorder(**results)
        monkeypatch.setattr(_bindings, interface, recorder)
        return recorder

    return install
