"""Expected activity failures as one log line, not a traceback.

The SDK logs every failed activity attempt at WARNING with its traceback. For sagacity's
own typed failures — a compensation the provider refused, a journal conflict, a call
routed to the wrong worker, each raised as an ApplicationError that says what happened
and what to do — a traceback is noise that reads as a crash (`sagacity dev` showed one
for every refund fault). Those records keep their message and gain the error's type and
text on the same line; anything else (a bug) keeps its traceback.
"""

from __future__ import annotations

import logging

from temporalio.exceptions import ApplicationError

ACTIVITY_LOGGER = "temporalio.activity"


class ExpectedFailures(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if isinstance(exc, ApplicationError):
            kind = exc.type or type(exc).__name__
            record.msg = f"{record.getMessage()}: {kind}: {exc.message}"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


def quiet_expected_failures() -> None:
    """Install the filter on the SDK's activity logger (idempotent)."""
    logger = logging.getLogger(ACTIVITY_LOGGER)
    if not any(isinstance(f, ExpectedFailures) for f in logger.filters):
        logger.addFilter(ExpectedFailures())
