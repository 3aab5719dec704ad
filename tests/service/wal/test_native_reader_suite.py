"""The Python reader's own test suite, run again against the native reader.

Every test function of tests/service/wal/test_reader{,_walk,_fuzz}.py is collected here again
with the name `XLogReader` in its module bound to `service.wal.native.NativeXLogReader`,
so each behaviour those tests pin down (page and record checks, contrecords, XLOG_SWITCH,
start positions, errors, stopping early, damaged real WAL) is checked on both readers,
as STYLE.md asks of the native core. Tests about the Python reader's own internals
would be left out, each with its reason; since the Python walk lost its speed tricks
there are none.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any
from unittest import mock

from service.wal.native import NativeXLogReader
from tests.service.wal import test_reader as test_xlogreader
from tests.service.wal import test_reader_fuzz as test_xlogreader_fuzz
from tests.service.wal import test_reader_walk as test_xlogreader_walk

# test name -> why it does not apply to the native reader
PYTHON_INTERNALS: dict[str, str] = {}


def _native(module: ModuleType, test: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> Any:
        with mock.patch.object(module, "XLogReader", NativeXLogReader):
            return test(*args, **kwargs)

    run.__doc__ = f"(native reader) {test.__doc__}"
    return run


def _collect(module: ModuleType) -> dict[str, Callable[..., Any]]:
    out = {}
    for name, obj in vars(module).items():
        if name.startswith("test_") and callable(obj) and name not in PYTHON_INTERNALS:
            out[f"{name}__native_{module.__name__.rsplit('.', 1)[1]}"] = _native(module, obj)
    return out


for _module in (test_xlogreader, test_xlogreader_walk, test_xlogreader_fuzz):
    globals().update(_collect(_module))
