"""C2SP signed notes and checkpoints: published vectors, round trips, and what is refused.

Every hostile input must be a NoteError (or False from verify), never another exception:
a caller maps NoteError to "this is not evidence", and anything else to a crash.
"""

from __future__ import annotations

import base64
import json
import os
import stat
from pathlib import Path

import pytest

from sagacity._errors import SagacityError
from sagacity.tlog._checkpoint_body import Checkpoint, open_checkpoint, sign_checkpoint
from sagacity.tlog._note_keys import NoteSigner, NoteVerifier, open_note, parse_verifiers
from sagacity.tlog._signed_note import (
    ALG_ED25519,
    MAX_NOTE_BYTES,
    MAX_SIGNATURES,
    MAX_TEXT_BYTES,
    NoteError,
    NoteKeyFileError,
    NoteSignature,
    SignedNote,
    check_key_name,
    check_note_text,
    key_hash,
    parse_note,
)

# Known-answer vectors from golang.org/x/mod/sumdb/note (github.com/golang/mod,
# sumdb/note/example_test.go and note_test.go, BSD-licensed data): the PeterNeumann key
# (private "skey" and verifier "vkey") and its signed note, and the EnochRoot key, which
# ExampleSign_add_signatures generates from an all-zero random reader (seed = 32 zero
# bytes) and whose signature of the same text it prints.
PETER_SKEY = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
GO_TEXT = (
    "If you think cryptography is the answer to your problem,\n"
    "then you don't know what your problem is.\n"
)
PETER_SIG = (
    "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKv"
    "qfqdngotpRZb6KE6RyyBwJnAM=\n"
)
ENOCH_SIG = (
    "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOT"
    "GwnWLox33WWd1RvMc+QQ=\n"
)
PETER_NOTE = GO_TEXT + "\n" + PETER_SIG

# Known-answer vector from the C2SP signed-note specification (github.com/C2SP/C2SP,
# signed-note.md, section "Example").
C2SP_VKEY = "example.com/foo+530d903a+AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"
C2SP_NOTE = (
    "This is an example message.\n\n"
    "— example.com/foo Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYj"
    "OBH3mFXmRKuwHjG1Yu72IneyaQM=\n"
)

# The example checkpoint of the C2SP tlog-checkpoint specification (tlog-checkpoint.md);
# its key is not published, so it is only parsed.
C2SP_CHECKPOINT_NOTE = (
    "example.com/behind-the-sofa\n20852163\nCsUYapGGPo4dkMgIAUqom/Xajj7h2fB2MPA3j2jxq2I=\n\n"
    "— example.com/behind-the-sofa Az3grlgtzPICa5OS8npVmf1Myq/5IZniMp+ZJurmRDeOoRDe4URYN7u5"
    "/Zhcyv2q1gGzGku9nTo+zyWE+xeMcTOAYQ8=\n"
)

ROOT = bytes(range(32))


def peter_signer() -> NoteSigner:
    """The PeterNeumann signer from Go's skey `PRIVATE+KEY+name+hash+base64(0x01||seed)`."""
    _, _, name, hash_hex, material = PETER_SKEY.split("+", 4)
    raw = base64.b64decode(material)
    assert raw[0] == ALG_ED25519 and len(raw) == 33
    signer = NoteSigner.from_private_bytes(name, raw[1:])
    assert signer.key_hash.hex() == hash_hex
    return signer


PETER = NoteVerifier.parse(PETER_VKEY)
ENOCH = NoteVerifier.parse(ENOCH_VKEY)


# Known answers


def test_the_go_example_note_opens_and_our_key_hash_and_vkey_reproduce_it() -> None:
    opened = open_note(PETER_NOTE, [PETER])
    assert opened.text == GO_TEXT
    assert [(s.name, s.key_hash.hex()) for s in opened.signatures] == [("PeterNeumann", "c74f20a3")]
    assert key_hash("PeterNeumann", PETER.public_key) == bytes.fromhex("c74f20a3")
    assert NoteVerifier.from_public_key("PeterNeumann", PETER.public_key).encode() == PETER_VKEY
    assert opened.encode() == PETER_NOTE
    assert open_note(PETER_NOTE.encode("utf-8"), [PETER]) == opened


def test_signing_with_the_published_private_keys_reproduces_the_published_signatures() -> None:
    peter = peter_signer()
    assert peter.verifier == PETER and peter.verifier.encode() == PETER_VKEY
    assert peter.sign(GO_TEXT) == PETER_NOTE
    enoch = NoteSigner.from_private_bytes("EnochRoot", bytes(32))
    assert enoch.verifier.encode() == ENOCH_VKEY
    assert enoch.sign(GO_TEXT) == GO_TEXT + "\n" + ENOCH_SIG


def test_go_open_cases_one_known_key_both_known_none_known() -> None:
    both = GO_TEXT + "\n" + PETER_SIG + ENOCH_SIG
    assert [s.name for s in open_note(both, [PETER]).signatures] == ["PeterNeumann"]
    assert [s.name for s in open_note(both, [ENOCH, PETER]).signatures] == [
        "PeterNeumann",
        "EnochRoot",
    ]
    with pytest.raises(NoteError, match="no signature by a known key"):
        open_note(both, [])
    assert len(parse_note(both).signatures) == 2


def test_the_c2sp_examples_verify_and_parse() -> None:
    verifier = NoteVerifier.parse(C2SP_VKEY)
    assert verifier.encode() == C2SP_VKEY
    assert open_note(C2SP_NOTE, [verifier]).text == "This is an example message.\n"
    parsed = parse_note(C2SP_CHECKPOINT_NOTE)
    checkpoint = Checkpoint.parse(parsed.text)
    assert (checkpoint.origin, checkpoint.size) == ("example.com/behind-the-sofa", 20852163)
    assert checkpoint.body() == parsed.text and checkpoint.extensions == ()
    assert parsed.encode() == C2SP_CHECKPOINT_NOTE


# Round trips


def test_sign_and_open_round_trip_with_unicode_text_and_empty_inner_lines() -> None:
    signer = NoteSigner.generate("log.example/sagacity")
    text = "ed è subito sera\n\nline after an empty one \u2028 still text\n"
    note = signer.sign(text)
    opened = open_note(note, [signer.verifier])
    assert opened.text == text and opened.encode() == note
    assert signer.sign(text) == note  # Ed25519 is deterministic


def test_checkpoint_body_parse_sign_open_round_trip() -> None:
    signer = NoteSigner.generate("log.example/chain")
    for checkpoint in (
        Checkpoint("log.example/chain", 0, bytes(32)),
        Checkpoint("log.example/chain", 2**63 - 1, ROOT, ("ext one", "ext+two")),
    ):
        assert Checkpoint.parse(checkpoint.body()) == checkpoint
        note = sign_checkpoint(signer, checkpoint)
        assert open_checkpoint(note, [signer.verifier]) == checkpoint
        assert open_checkpoint(note, [signer.verifier], origin="log.example/chain") == checkpoint
        with pytest.raises(NoteError, match=r"not 'other\.example/log'"):
            open_checkpoint(note, [signer.verifier], origin="other.example/log")
    assert (
        Checkpoint("o", 7, ROOT, ("x",)).body() == f"o\n7\n{base64.b64encode(ROOT).decode()}\nx\n"
    )


def test_vkey_encode_parse_round_trip_and_parse_verifiers() -> None:
    signer = NoteSigner.generate("example.com/rotating-key")
    vkey = signer.verifier.encode()
    assert NoteVerifier.parse(vkey) == signer.verifier
    assert parse_verifiers([vkey, PETER_VKEY, vkey]) == [signer.verifier, PETER]
    with pytest.raises(NoteError, match="verifier key 2"):
        parse_verifiers([vkey, "nonsense"])


def test_key_file_round_trip_is_owner_only(tmp_path: Path) -> None:
    signer = NoteSigner.generate("log.example/worker")
    path = tmp_path / "log.key"
    signer.to_file(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    record = json.loads(path.read_text())
    assert record["type"] == "sagacity/log-key/v1" and record["vkey"] == signer.verifier.encode()
    again = NoteSigner.from_file(path)
    assert again.verifier == signer.verifier
    assert again.sign("hello\n") == signer.sign("hello\n")


def test_a_signer_repr_never_shows_the_private_key() -> None:
    signer = peter_signer()
    seed_b64 = base64.b64encode(base64.b64decode(PETER_SKEY.split("+", 4)[4])[1:]).decode()
    assert PETER_VKEY in repr(signer) and seed_b64 not in repr(signer)
    assert seed_b64[:12] not in repr(signer) and "private" not in repr(signer).lower()


# Hostile notes


def flip_signature_byte(note: str, index: int) -> str:
    """The note with one byte of its first signature's raw Ed25519 signature changed,
    re-encoded canonically (so only the verification can catch it)."""
    text, line = note.rsplit("\n\n", 1)
    prefix, payload = line.rstrip("\n").rsplit(" ", 1)
    raw = bytearray(base64.b64decode(payload))
    raw[4 + index] ^= 0x01
    return f"{text}\n\n{prefix} {base64.b64encode(bytes(raw)).decode()}\n"


def test_a_changed_text_or_signature_byte_is_a_bad_signature() -> None:
    changed_text = PETER_NOTE.replace("cryptography", "cryptographY")
    with pytest.raises(NoteError, match="bad signature by PeterNeumann"):
        open_note(changed_text, [PETER])
    for index in (0, 31, 63):
        with pytest.raises(NoteError, match="bad signature by PeterNeumann"):
            open_note(flip_signature_byte(PETER_NOTE, index), [PETER])
    # A known key's bad signature sinks the note even beside a good one.
    with pytest.raises(NoteError, match="bad signature by PeterNeumann"):
        open_note(flip_signature_byte(PETER_NOTE, 5) + ENOCH_SIG, [PETER, ENOCH])


def test_every_single_byte_change_or_deletion_of_a_note_is_refused() -> None:
    raw = PETER_NOTE.encode("utf-8")
    for i in range(len(raw)):
        bumped = raw[:i] + bytes([(raw[i] + 1) % 256]) + raw[i + 1 :]
        deleted = raw[:i] + raw[i + 1 :]
        for mutant in (bumped, deleted):
            with pytest.raises(NoteError):
                open_note(mutant, [PETER])


def test_every_truncation_or_byte_change_of_a_vkey_is_refused() -> None:
    for i in range(len(PETER_VKEY)):
        for j in range(i + 1, len(PETER_VKEY) + 1):
            if (i, j) != (0, len(PETER_VKEY)):
                with pytest.raises(NoteError):
                    NoteVerifier.parse(PETER_VKEY[i:j])
        bumped = PETER_VKEY[:i] + chr(ord(PETER_VKEY[i]) + 1) + PETER_VKEY[i + 1 :]
        with pytest.raises(NoteError):
            NoteVerifier.parse(bumped)


@pytest.mark.parametrize(
    ("vkey", "why"),
    [
        (PETER_VKEY.replace("c74f20a3", "C74F20A3"), "lower-case hex"),
        (PETER_VKEY.replace("c74f20a3", "c74f20a4"), "does not match"),
        (PETER_VKEY.replace("10TW", "10TX"), "does not match"),
        ("x+" + "0" * 8 + "+" + base64.b64encode(b"\x01" + bytes(33)).decode(), "not 32"),
        (PETER_VKEY.rstrip("W") + "=", "canonical|valid base64"),
        (PETER_VKEY + "=", "valid base64|canonical"),
        ("Peter+Neumann+c74f20a3+" + PETER_VKEY.split("+", 2)[2], "lower-case hex"),
        ("Peter Neumann+c74f20a3+" + PETER_VKEY.split("+", 2)[2], "space"),
        # Go's note_test.go: wrong-length key and unknown algorithm, hashes adjusted.
        (
            "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",
            "canonical",
        ),
        ("PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW", "not Ed25519"),
        ("", "NAME\\+HASH\\+KEY"),
    ],
)
def test_malformed_vkeys_are_refused(vkey: str, why: str) -> None:
    with pytest.raises(NoteError, match=why):
        NoteVerifier.parse(vkey)


def test_a_wrong_key_hash_or_unknown_signer_is_ignored_and_then_no_known_key() -> None:
    line = PETER_SIG.rstrip("\n").rsplit(" ", 1)
    raw = bytearray(base64.b64decode(line[1]))
    raw[0] ^= 0xFF
    wrong_hash = f"{line[0]} {base64.b64encode(bytes(raw)).decode()}\n"
    with pytest.raises(NoteError, match="no signature by a known key"):
        open_note(GO_TEXT + "\n" + wrong_hash, [PETER])
    # An unknown key's signature is ignored beside a good one, and dropped from the result.
    opened = open_note(GO_TEXT + "\n" + wrong_hash + ENOCH_SIG + PETER_SIG, [PETER])
    assert [s.name for s in opened.signatures] == ["PeterNeumann"]
    with pytest.raises(NoteError, match="no signature by a known key"):
        open_note(GO_TEXT + "\n" + ENOCH_SIG, [PETER])
    # The same name under another key is another key.
    stranger = NoteSigner.generate("PeterNeumann")
    with pytest.raises(NoteError, match="no signature by a known key"):
        open_note(stranger.sign(GO_TEXT), [PETER])


def test_a_keys_repeated_signatures_are_each_checked_and_kept_once() -> None:
    twice = GO_TEXT + "\n" + PETER_SIG + PETER_SIG
    assert len(open_note(twice, [PETER]).signatures) == 1
    with pytest.raises(NoteError, match="bad signature"):
        open_note(twice + flip_signature_byte(PETER_NOTE, 9).rsplit("\n\n", 1)[1], [PETER])


def test_two_different_keys_under_one_name_and_hash_are_ambiguous() -> None:
    impostor = NoteVerifier.__new__(NoteVerifier)  # bypass the hash check, as a bug might
    object.__setattr__(impostor, "name", PETER.name)
    object.__setattr__(impostor, "key_hash", PETER.key_hash)
    object.__setattr__(impostor, "public_key", ENOCH.public_key)
    with pytest.raises(NoteError, match="ambiguous key PeterNeumann\\+c74f20a3"):
        open_note(PETER_NOTE, [PETER, impostor])


@pytest.mark.parametrize(
    ("note", "why"),
    [
        (GO_TEXT + PETER_SIG, "no blank line"),
        (GO_TEXT, "no blank line"),
        (GO_TEXT + "\n", "no signature lines"),
        (GO_TEXT + "\n" + PETER_SIG.rstrip("\n"), "does not end with a newline"),
        (PETER_NOTE.replace("\n", "\r\n"), "U\\+000D"),
        ("\x01" + PETER_NOTE, "U\\+0001"),
        ("a\x00b" + PETER_NOTE, "U\\+0000"),
        (PETER_NOTE.replace("If you", "If\tyou"), "U\\+0009"),
        ("\ud800" + PETER_NOTE, "lone surrogate"),
        (GO_TEXT + "\n" + PETER_SIG + "Unexpected line.\n", "em dash"),
        (GO_TEXT + "\n" + PETER_SIG.replace("—", "-"), "em dash"),
        (GO_TEXT + "\n" + PETER_SIG.replace("— ", "—"), "em dash"),
        (GO_TEXT + "\n" + PETER_SIG.replace("PeterNeumann", "Peter+Neumann"), "'\\+'"),
        (GO_TEXT + "\n" + PETER_SIG.replace("PeterNeumann", "Peter Neumann"), "base64"),
        (GO_TEXT + "\n" + PETER_SIG.replace("PeterNeumann", "Peter\u00a0Neumann"), "space"),
        (GO_TEXT + "\n" + PETER_SIG.replace("PeterNeumann ", ""), "NAME SIGNATURE"),
        (GO_TEXT + "\n" + PETER_SIG.replace("PeterNeumann", ""), "key name is empty"),
        (GO_TEXT + "\n" + PETER_SIG.replace("AM=", "AM"), "base64"),
        (GO_TEXT + "\n" + PETER_SIG.replace("AM=", "AN="), "canonical"),
        (GO_TEXT + "\n" + PETER_SIG.replace("AM=", "AM= "), "base64"),
        (GO_TEXT + "\n" + "— PeterNeumann x08g\n", "3 bytes, under a key hash"),
        (GO_TEXT + "\n" + "— PeterNeumann \n", "base64"),
        ("\n\n" + PETER_SIG, "ends with an empty line"),
        (GO_TEXT + "\n\n" + PETER_SIG, "ends with an empty line"),
        ("x" * (MAX_TEXT_BYTES + 1) + "\n\n" + PETER_SIG, f"over {MAX_TEXT_BYTES}"),
        ("x" * (MAX_NOTE_BYTES + 1), f"over {MAX_NOTE_BYTES}"),
        ("\u20ac" * (MAX_NOTE_BYTES // 2), f"over {MAX_NOTE_BYTES}"),
        (GO_TEXT + "\n" + PETER_SIG * (MAX_SIGNATURES + 1), "101 signatures"),
    ],
)
def test_malformed_notes_are_refused_naming_what_is_wrong(note: str, why: str) -> None:
    with pytest.raises(NoteError, match=why):
        parse_note(note)
    with pytest.raises(NoteError):
        open_note(note, [PETER])


@pytest.mark.parametrize(
    "note",
    [
        b"\xff" + PETER_NOTE.encode(),
        b"\xed\xa0\x80" + PETER_NOTE.encode(),  # a UTF-8-encoded surrogate
        PETER_NOTE.encode()[:-3] + b"\xc3\n",
        b"x" * (MAX_NOTE_BYTES + 1),
        None,
        12,
    ],
)
def test_malformed_note_bytes_and_non_text_are_refused(note: object) -> None:
    with pytest.raises(NoteError):
        open_note(note, [PETER])  # type: ignore[arg-type]


def test_a_five_byte_signature_parses_and_a_known_keys_fails_to_verify() -> None:
    short = GO_TEXT + "\n" + "— PeterNeumann x08go/Y=\n"
    assert parse_note(short).signatures[0].signature == b"\xf6"
    with pytest.raises(NoteError, match="bad signature by PeterNeumann"):
        open_note(short, [PETER])


def test_up_to_one_hundred_signatures_are_accepted() -> None:
    many = GO_TEXT + "\n" + ENOCH_SIG * (MAX_SIGNATURES - 1) + PETER_SIG
    assert len(parse_note(many).signatures) == MAX_SIGNATURES
    assert len(open_note(many, [PETER]).signatures) == 1


def test_verify_answers_false_and_never_raises() -> None:
    signature = base64.b64decode(PETER_SIG.split(" ")[2])[4:]
    text = GO_TEXT.encode()
    assert PETER.verify(text, signature)
    bad: list[tuple[object, object]] = [
        (text + b"x", signature),
        (text, signature[:-1]),
        (text, signature + b"\x00"),
        (text, b""),
        (GO_TEXT, signature),
        (None, signature),
        (text, None),
        (text, "not bytes"),
        (12, 13),
    ]
    for message, sig in bad:
        assert PETER.verify(message, sig) is False  # type: ignore[arg-type]


# Names, texts and structures


@pytest.mark.parametrize(
    "name", ["", "a+b", "a b", "a\tb", "a\u00a0b", "a\u2003b", "a\u2028b", "a\x00b", "\ud800"]
)
def test_bad_key_names_are_refused(name: str) -> None:
    with pytest.raises(NoteError):
        check_key_name(name)
    with pytest.raises(NoteError):
        NoteSigner.generate(name)


def test_good_key_names_pass_unchanged() -> None:
    for name in ("PeterNeumann", "example.com/log42", "quasimodo.example/salvatore", "è—ok"):
        assert check_key_name(name) == name


@pytest.mark.parametrize(
    "text",
    ["", "no newline", "\n", "a\n\n", "a\r\n", "a\tb\n", "a\x7f\x00\n", "\ud83d\n", 5, None],
)
def test_bad_note_texts_are_refused(text: object) -> None:
    with pytest.raises(NoteError):
        check_note_text(text)  # type: ignore[arg-type]
    with pytest.raises(NoteError):
        peter_signer().sign(text)  # type: ignore[arg-type]


def test_note_text_limits() -> None:
    check_note_text("x" * (MAX_TEXT_BYTES - 1) + "\n")
    with pytest.raises(NoteError, match="over"):
        check_note_text("x" * MAX_TEXT_BYTES + "\n")
    with pytest.raises(NoteError, match="over"):
        check_note_text("\u20ac" * (MAX_TEXT_BYTES // 3 + 1) + "\n")
    check_note_text("DEL \x7f and NEL \x85 are not ASCII controls below U+0020\n")


def test_structures_refuse_inconsistent_parts() -> None:
    with pytest.raises(NoteError, match="not its key's"):
        NoteVerifier("PeterNeumann", bytes(4), PETER.public_key)
    with pytest.raises(NoteError, match="32 bytes"):
        NoteVerifier.from_public_key("x", bytes(31))
    with pytest.raises(NoteError):
        NoteSignature("a+b", bytes(4), b"sig")
    with pytest.raises(NoteError):
        NoteSignature("a", bytes(3), b"sig")
    with pytest.raises(NoteError):
        NoteSignature("a", bytes(4), b"")
    with pytest.raises(NoteError, match="at least one signature"):
        SignedNote(GO_TEXT, ())
    with pytest.raises(NoteError):
        SignedNote("no newline", (NoteSignature("a", bytes(4), b"s"),))
    with pytest.raises(NoteError):
        NoteSigner.from_private_bytes("a", bytes(31))
    assert issubclass(NoteError, SagacityError) and issubclass(NoteError, ValueError)


# Checkpoints

ROOT_B64 = base64.b64encode(ROOT).decode()


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (f"log\n01\n{ROOT_B64}\n", "leading zeros"),
        (f"log\n00\n{ROOT_B64}\n", "leading zeros"),
        (f"log\n-1\n{ROOT_B64}\n", "decimal"),
        (f"log\n+1\n{ROOT_B64}\n", "decimal"),
        (f"log\n1e3\n{ROOT_B64}\n", "decimal"),
        (f"log\n1_000\n{ROOT_B64}\n", "decimal"),
        (f"log\n 1\n{ROOT_B64}\n", "decimal"),
        (f"log\n\u0661\n{ROOT_B64}\n", "decimal"),  # ARABIC-INDIC DIGIT ONE: int() takes it
        (f"log\n{2**63}\n{ROOT_B64}\n", "decimal"),
        (f"log\n{'9' * 5000}\n{ROOT_B64}\n", "decimal"),
        (f"log\n\n{ROOT_B64}\n", "decimal"),
        (f"log\n1\n{base64.b64encode(bytes(31)).decode()}\n", "31 bytes"),
        (f"log\n1\n{base64.b64encode(bytes(33)).decode()}\n", "33 bytes"),
        (f"log\n1\n{ROOT_B64.rstrip('=')}\n", "base64"),
        (f"log\n1\n{ROOT_B64[:-2]}9=\n", "canonical"),
        (f"\n1\n{ROOT_B64}\n", "origin is empty"),
        (f" \n1\n{ROOT_B64}\n", "origin is empty"),
        (f"log\n1\n{ROOT_B64}\n\nextension\n", "extension line 1 is empty"),
        (f"log\n1\n{ROOT_B64}\n\n", "empty line"),
        ("log\n1\n", "2 lines"),
        (f"log\r\n1\n{ROOT_B64}\n", "U\\+000D"),
        (f"log\n1\n{ROOT_B64}", "newline"),
    ],
)
def test_malformed_checkpoints_are_refused(body: str, why: str) -> None:
    with pytest.raises(NoteError, match=why):
        Checkpoint.parse(body)


def test_a_signed_malformed_checkpoint_is_refused_after_verification() -> None:
    signer = peter_signer()
    note = signer.sign(f"log\n01\n{ROOT_B64}\n")
    assert open_note(note, [PETER]).text.startswith("log\n01\n")
    with pytest.raises(NoteError, match="leading zeros"):
        open_checkpoint(note, [PETER])
    with pytest.raises(NoteError, match="no signature by a known key"):
        open_checkpoint(sign_checkpoint(signer, Checkpoint("log", 1, ROOT)), [ENOCH])


@pytest.mark.parametrize(
    "parts",
    [
        ("", 1, ROOT, ()),
        ("  ", 1, ROOT, ()),
        ("a\nb", 1, ROOT, ()),
        ("a\tb", 1, ROOT, ()),
        ("log", -1, ROOT, ()),
        ("log", 2**63, ROOT, ()),
        ("log", True, ROOT, ()),
        ("log", "1", ROOT, ()),
        ("log", 1, ROOT[:31], ()),
        ("log", 1, ROOT, ("",)),
        ("log", 1, ROOT, ("a\nb",)),
        ("log", 1, ROOT, ["list"]),
        ("log", 1, ROOT, ("x" * MAX_TEXT_BYTES,)),
    ],
)
def test_checkpoints_cannot_be_built_malformed(parts: tuple[object, ...]) -> None:
    with pytest.raises(NoteError):
        Checkpoint(*parts)  # type: ignore[arg-type]


# Key files


def test_a_key_file_readable_by_others_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "log.key"
    NoteSigner.generate("log").to_file(path)
    os.chmod(path, 0o644)
    with pytest.raises(NoteKeyFileError, match=f"chmod 600 {path}"):
        NoteSigner.from_file(path)


def test_an_existing_key_file_is_never_overwritten(tmp_path: Path) -> None:
    path = tmp_path / "log.key"
    first = NoteSigner.generate("log")
    first.to_file(path)
    before = path.read_bytes()
    with pytest.raises(NoteError, match="never overwritten"):
        NoteSigner.generate("log").to_file(path)
    assert path.read_bytes() == before
    assert NoteSigner.from_file(path).verifier == first.verifier


def test_key_files_of_the_wrong_type_or_with_mismatching_keys_are_refused(tmp_path: Path) -> None:
    signer, other = NoteSigner.generate("log"), NoteSigner.generate("log")
    good = json.loads(_written(tmp_path / "good.key", signer))
    cases = {
        "type": {**good, "type": "sagacity/approver-key/v1"},
        "public": {**good, "public_key": base64.b64encode(other.public_key).decode()},
        "vkey": {**good, "vkey": other.verifier.encode()},
        "name": {**good, "name": "a b"},
        "private": {**good, "private_key": good["private_key"].rstrip("=")},
        "missing": {k: v for k, v in good.items() if k != "private_key"},
    }
    for label, record in cases.items():
        path = tmp_path / f"{label}.key"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as out:
            json.dump(record, out)
        with pytest.raises(NoteKeyFileError):
            NoteSigner.from_file(path)
    for label, content in {"list": "[]", "junk": "not json", "binary": "\udcff"}.items():
        path = tmp_path / f"{label}.key"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", errors="surrogateescape") as out:
            out.write(content)
        with pytest.raises(NoteKeyFileError):
            NoteSigner.from_file(path)
    with pytest.raises(NoteKeyFileError, match="cannot read"):
        NoteSigner.from_file(tmp_path / "absent.key")


def _written(path: Path, signer: NoteSigner) -> str:
    signer.to_file(path)
    return path.read_text()
