"""A refusal names its code once (issue 36): the saga's sentence often leads with the
code, and `refused (CODE): CODE: ...` said it twice, in the CLI and in the README's
`print(f"refused ({exc.reason}): {exc.detail}")`."""

from __future__ import annotations

from sagacity.worker.client._errors import ApprovalRefusedError, ResolutionRefusedError


def test_the_code_leading_the_sentence_is_said_once() -> None:
    exc = ApprovalRefusedError(
        "APPROVER_NOT_ALLOWED", "APPROVER_NOT_ALLOWED: 'bob' may not decide", journaled=True
    )
    assert exc.reason == "APPROVER_NOT_ALLOWED"
    assert exc.detail == "'bob' may not decide"
    assert str(exc) == (
        "decision refused (APPROVER_NOT_ALLOWED): 'bob' may not decide (journaled as evidence)"
    )


def test_a_sentence_that_only_mentions_the_code_is_kept_whole() -> None:
    exc = ResolutionRefusedError("NOT_DIRTY", "step 2 is not dirty (NOT_DIRTY)", journaled=False)
    assert exc.detail == "step 2 is not dirty (NOT_DIRTY)"
    assert (
        str(exc)
        == "resolution refused (NOT_DIRTY): step 2 is not dirty (NOT_DIRTY) (not journaled)"
    )
