"""The Python reader's own test suite, run again against the native reader.

Every test function of tests/service/test_xlogreader*.py is collected here a second time
with the name `XLogReader` in its module bound to `service.wal.native.NativeXLogReader`,
so each behaviour those tests pin down (page and record checks, contrecords, XLOG_SWITCH,
start positions, errors, stopping early, damaged real WAL) is checked on both readers,
as STYLE.md asks of the native core. Tests about the Python reader's own internals
(its struct caches and its one-block shortcut) are left out, each with its reason.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from types import ModuleType
from typing import Any
from unittest import mock

from service.wal.native import NativeXLogReader
from tests.service.wal import test_reader as test_xlogreader
from tests.service.wal import test_reader_fastpath as test_xlogreader_fastpath
from tests.service.wal import test_reader_fuzz as test_xlogreader_fuzz

# test name -> why it does not apply to the native reader
PYTHON_INTERNALS = {
    "test_splitter_cache_is_bounded_by_the_page": "checks the Python walk's Struct cache",
    "test_one_block_shortcut_equals_general_decode": "compares two Python decode paths",
    "test_one_block_shortcut_rejects_what_the_general_path_rejects": "the same, for errors",
    "test_residue_constant": "a constant of the Python fast loop",
}


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


for _module in (test_xlogreader, test_xlogreader_fastpath, test_xlogreader_fuzz):
    globals().update(_collect(_module))
