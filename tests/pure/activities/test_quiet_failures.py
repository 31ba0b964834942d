"""The worker logs its own typed activity failures as one line; a bug keeps its traceback."""

from __future__ import annotations

import logging
import sys

from temporalio.exceptions import ApplicationError

from sagacity.worker._quiet_failures import ExpectedFailures


def _record(exc: BaseException) -> logging.LogRecord:
    try:
        raise exc
    except BaseException:
        info = sys.exc_info()
    return logging.LogRecord(
        "temporalio.activity", logging.WARNING, __file__, 1, "Completing activity as failed (%s)",
        ("step 2",), info,
    )  # fmt: skip


def test_a_typed_failure_is_one_line() -> None:
    record = _record(ApplicationError("payment provider refused the refund", type="ShopError"))
    assert ExpectedFailures().filter(record) is True
    assert record.exc_info is None
    text = logging.Formatter().format(record)
    assert text == (
        "Completing activity as failed (step 2): ShopError: payment provider refused the refund"
    )


def test_a_bug_keeps_its_traceback() -> None:
    record = _record(KeyError("oops"))
    assert ExpectedFailures().filter(record) is True
    assert record.exc_info is not None
    assert "Traceback" in logging.Formatter().format(record)
