"""How a log key given as text is read (`--log-key`, SAGACITY_LOG_VERIFIER): text that
parses as keys is keys, never a path, whatever files lie around; a file is read when
named `@FILE`, or when the text cannot be a key (no `+`); anything else is a malformed
key, said as such."""

from __future__ import annotations

from pathlib import Path

import pytest

from sagacity.tlog._checkpoint import CheckpointError
from sagacity.tlog._note_keys import NoteSigner
from sagacity.worker._log_keys import parse_verifier_text

REAL = NoteSigner.generate("sagacity.local/journal")
OTHER = NoteSigner.generate("sagacity.local/journal")


def _plant(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def test_key_text_is_never_read_as_a_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    real = REAL.verifier.encode()
    _plant(tmp_path, real, OTHER.verifier.encode() + "\n")
    monkeypatch.chdir(tmp_path)
    assert parse_verifier_text(real) == [REAL.verifier]
    assert parse_verifier_text(f"{real}\n# staging\n{OTHER.verifier.encode()}\n") == [
        REAL.verifier,
        OTHER.verifier,
    ]
    assert parse_verifier_text(f"@{real}") == [OTHER.verifier]  # only when named a file


def test_a_file_is_read_when_named_or_when_the_text_cannot_be_a_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    keys = f"# prod\n{REAL.verifier.encode()}\n\n{OTHER.verifier.encode()}\n"
    plain = _plant(tmp_path, "both.keys", keys)
    plus = _plant(tmp_path, "keys+old.txt", keys)
    assert parse_verifier_text(str(plain)) == [REAL.verifier, OTHER.verifier]
    assert parse_verifier_text(f"@{plus}") == [REAL.verifier, OTHER.verifier]
    named = NoteSigner.generate("@acme/log")  # a name may start with @: still a key
    assert parse_verifier_text(named.verifier.encode()) == [named.verifier]
    monkeypatch.chdir(tmp_path)
    assert parse_verifier_text("both.keys") == [REAL.verifier, OTHER.verifier]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("nonsense", "is neither a verifier key (NAME+HASH+KEY"),
        ("   ", "is neither a verifier key"),
        ("@missing.keys", "nor a readable file"),
        (REAL.verifier.encode()[:-4], "(a file of keys is given as @PATH)"),
        ("keys+old.txt", "is not of the form NAME+HASH+KEY (a file of keys is given as @PATH)"),
        ("@empty.keys", "holds no verifier key"),
        ("@bytes.keys", "is not UTF-8 text"),
        ("@junk.keys", "log key file 'junk.keys': verifier key"),
    ],
    # Fixed ids: a generated key's text would name the test differently in each xdist
    # worker, which then refuses to run the suite.
    ids=["nonsense", "blank", "missing-file", "cut-key", "plain-path", "empty", "bytes", "junk"],
)
def test_what_is_not_a_key_says_so(
    text: str, message: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _plant(tmp_path, "keys+old.txt", REAL.verifier.encode())  # a file, but not named @
    _plant(tmp_path, "empty.keys", "# nothing here\n")
    (tmp_path / "bytes.keys").write_bytes(b"\xff\xfe")
    _plant(tmp_path, "junk.keys", "not+a+key\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(CheckpointError) as refused:
        parse_verifier_text(text)
    assert message in str(refused.value)
