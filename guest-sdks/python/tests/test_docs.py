"""The examples in the docstrings (those that need no host run with `doctest: +SKIP`)."""

import doctest

import pytest

import tally
from tally import _seqnum, _tag, config, context, http, invoke, locks, log, objects, queues, state


@pytest.mark.parametrize("module", [tally, _tag, _seqnum, log, state, objects, queues, locks, invoke, context, config, http], ids=lambda module: module.__name__)
def test_docstring_examples(module):
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
