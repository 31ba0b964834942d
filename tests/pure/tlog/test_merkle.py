"""The RFC 6962 / 9162 Merkle tree: published known answers, a naive reference written
straight from the RFC's recursive definitions, exhaustive proof round trips, tampering,
malformed input, and the promise that only complete subtrees are ever looked up."""

from __future__ import annotations

import functools
import hashlib
import random
from collections.abc import Callable
from typing import Any

import pytest

from sagacity.tlog._merkle import (
    EMPTY_ROOT,
    HASH_SIZE,
    MemoryTree,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    nodes_completed,
    subtree_root,
    tree_root,
    verify_consistency,
    verify_inclusion,
)

# ---- published vectors ----------------------------------------------------------------
# The RFC 6962 reference vectors of the certificate-transparency project: leaves, roots
# of sizes 1..8, inclusion and consistency proofs in that tree. Taken from
# transparency-dev/merkle, proof/verify_test.go (commit 02194e9afb6c1d95b5381350007963aa70fff472),
# which carries them over from google/certificate-transparency (python/ct/crypto/
# merkle_test.py, "test vectors lifted from the C++ branch"). Indices below are 0-based;
# the Go file numbers inclusion-proof leaves from 1.

VECTOR_LEAVES = [
    bytes.fromhex(h)
    for h in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]
VECTOR_ROOTS = {
    1: "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    2: "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    3: "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    4: "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    5: "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    6: "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    7: "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    8: "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
}
VECTOR_EMPTY_ROOT = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
VECTOR_INCLUSION = {  # (index, size): PATH(index, D[size])
    (0, 1): [],
    (0, 8): [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (5, 8): [
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
    (2, 3): ["fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125"],
    (1, 5): [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    ],
}
VECTOR_CONSISTENCY = {  # (old_size, new_size): PROOF(old_size, D[new_size])
    (1, 1): [],
    (1, 8): [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (6, 8): [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
    (2, 5): [
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    ],
    (6, 7): [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
}
# An audit path from a real CT log (leaf 848049 of 3630887), from the same
# google/certificate-transparency python/ct/crypto/merkle_test.py (commit
# 4bfca4952a090a76a0755fb0ddc6d288088b83ed): a tree far too big to build here.
REAL_LOG_LEAF = "7a395c866d5ecdb0cccb623e011dbc392cd348d1d1d72776174e127a24b09c78"
REAL_LOG_INDEX = 848049
REAL_LOG_SIZE = 3630887
REAL_LOG_ROOT = "78316a05c9bcf14a3a4548f5b854a9adfcd46a4c034401b3ce7eb7ac2f1d0ecb"
REAL_LOG_PATH = [
    "1a208aeebcd1b39fe2de247ee8db9454e1e93a312d206b87f6ca9cc6ec6f1ddd",
    "0a1b78b383f580856f433c01a5741e160d451c185910027f6cc9f828687a40c4",
    "3d1745789bc63f2da15850de1c12a5bf46ed81e1cc90f086148b1662e79aab3d",
    "9095b61e14d8990acf390905621e62b1714fb8e399fbb71de5510e0aef45affe",
    "0a332b91b8fab564e6afd1dd452449e04619b18accc0ff9aa8393cd4928451f2",
    "2336f0181d264aed6d8f3a6507ca14a8d3b3c3a23791ac263e845d208c1ee330",
    "b4ce56e300590500360c146c6452edbede25d4ed83919278749ee5dbe178e048",
    "933f6ddc848ea562e4f9c5cfb5f176941301dad0c6fdb9d1fbbe34fac1be6966",
    "b95a6222958a86f74c030be27c44f57dbe313e5e7c7f4ffb98bcbd3a03bb52f2",
    "daeeb3ce5923defd0faeb8e0c210b753b85b809445d7d3d3cd537a9aabaa9c45",
    "7fadd0a13e9138a2aa6c3fdec4e2275af233b94812784f66bcca9aa8e989f2bc",
    "1864e6ba3e32878610546539734fb5eeae2529991f130c575c73a7e25a2a7c56",
    "12842d1202b1dc6828a17ab253c02e7ce9409b5192430feba44189f39cc02d66",
    "29af64b16fa3053c13d02ac63aa75b23aa468506e44c3a2315edc85d2dc22b11",
    "b527b99934a0bd9edd154e449b0502e2c499bba783f3bc3dfe23364b6b532009",
    "4584db8ae8e351ace08e01f306378a92bfd43611714814f3d834a2842d69faa8",
    "86a9a41573b0d6e4292f01e93243d6cc65b30f06606fc6fa57390e7e90ed580f",
    "a88b98fbe84d4c6aae8db9d1605dfac059d9f03fe0fcb0d5dff1295dacba09e6",
    "06326dc617a6d1f7021dc536026dbfd5fffc6f7c5531d48ef6ccd1ed1569f2a1",
    "f41fe8fdc3a2e4e8345e30216e7ebecffee26ff266eeced208a6c2a3cf08f960",
    "40cf5bde8abb76983f3e98ba97aa36240402975674e120f234b3448911090f8d",
    "b3222dc8658538079883d980d7fdc2bef9285344ea34338968f736b04aeb387a",
]


def _unhex(hashes: list[str]) -> list[bytes]:
    return [bytes.fromhex(h) for h in hashes]


# ---- a naive reference, straight from RFC 9162 §2.1.1, §2.1.3.1, §2.1.4.1 ---------------
# Recursive over the leaf list itself and hashing with hashlib directly, so it shares
# nothing with the module under test but the definitions.


def _k(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def ref_mth(d: list[bytes]) -> bytes:
    if not d:
        return hashlib.sha256(b"").digest()
    if len(d) == 1:
        return hashlib.sha256(b"\x00" + d[0]).digest()
    k = _k(len(d))
    return hashlib.sha256(b"\x01" + ref_mth(d[:k]) + ref_mth(d[k:])).digest()


def ref_path(m: int, d: list[bytes]) -> list[bytes]:
    if len(d) == 1:
        return []
    k = _k(len(d))
    if m < k:
        return [*ref_path(m, d[:k]), ref_mth(d[k:])]
    return [*ref_path(m - k, d[k:]), ref_mth(d[:k])]


def ref_subproof(m: int, d: list[bytes], b: bool) -> list[bytes]:
    if m == len(d):
        return [] if b else [ref_mth(d)]
    k = _k(len(d))
    if m <= k:
        return [*ref_subproof(m, d[:k], b), ref_mth(d[k:])]
    return [*ref_subproof(m - k, d[k:], False), ref_mth(d[:k])]


def ref_proof(m: int, d: list[bytes]) -> list[bytes]:
    return ref_subproof(m, d, True)


# ---- fixtures ---------------------------------------------------------------------------

BIG = 72
DATA = [b"leaf %d" % i for i in range(BIG)]


def tree_of(leaves: list[bytes]) -> MemoryTree:
    """A tree with `leaves` appended in order."""
    built = MemoryTree()
    for data in leaves:
        built.append(data)
    return built


@pytest.fixture(scope="module")
def tree() -> MemoryTree:
    return tree_of(DATA)


def complete_only(
    tree: MemoryTree, size: int, calls: list[tuple[int, int]] | None = None
) -> Callable[[int, int], bytes]:
    """tree.subtree, but failing the test for a subtree not complete at `size` (stricter
    than the tree's own KeyError, which only knows the tree's full size)."""

    def lookup(level: int, index: int) -> bytes:
        assert level >= 0 and index >= 0 and (index + 1) << level <= size, (level, index, size)
        if calls is not None:
            calls.append((level, index))
        return tree.subtree(level, index)

    return lookup


_SAME_LEAF_LEVELS = [leaf_hash(b"same")]
for _ in range(70):
    _SAME_LEAF_LEVELS.append(node_hash(_SAME_LEAF_LEVELS[-1], _SAME_LEAF_LEVELS[-1]))


def uniform_subtree(size: int) -> Callable[[int, int], bytes]:
    """A consistent store of `size` identical leaves, for sizes no test could build: every
    perfect subtree of one level has the same hash. Refuses incomplete subtrees."""

    def lookup(level: int, index: int) -> bytes:
        if not (0 <= level < len(_SAME_LEAF_LEVELS) and index >= 0):
            raise KeyError((level, index))
        if (index + 1) << level > size:
            raise KeyError((level, index))
        return _SAME_LEAF_LEVELS[level]

    return lookup


def flip(digest: bytes, bit: int = 0) -> bytes:
    return bytes([digest[0] ^ (1 << bit)]) + digest[1:]


SOME_HASH = hashlib.sha256(b"some other hash").digest()


# ---- hashing and known answers ----------------------------------------------------------


def test_hashes_are_domain_separated_sha256() -> None:
    assert HASH_SIZE == 32
    assert EMPTY_ROOT.hex() == VECTOR_EMPTY_ROOT
    assert leaf_hash(b"abc") == hashlib.sha256(b"\x00abc").digest()
    assert (
        node_hash(b"L" * 32, b"R" * 32) == hashlib.sha256(b"\x01" + b"L" * 32 + b"R" * 32).digest()
    )
    # A leaf whose data is two hashes is not the node over them.
    assert leaf_hash(b"L" * 32 + b"R" * 32) != node_hash(b"L" * 32, b"R" * 32)


def test_known_roots() -> None:
    vectors = MemoryTree()
    assert vectors.root() == EMPTY_ROOT == tree_root(0, vectors.subtree)
    for i, data in enumerate(VECTOR_LEAVES):
        assert vectors.append(data) == i
        assert vectors.root().hex() == VECTOR_ROOTS[i + 1]
    assert vectors.size == 8
    # Every earlier size is still answerable from the grown tree.
    for size, root in VECTOR_ROOTS.items():
        assert vectors.root(size).hex() == root
        assert ref_mth(VECTOR_LEAVES[:size]).hex() == root


@pytest.mark.parametrize(("index", "size"), sorted(VECTOR_INCLUSION))
def test_known_inclusion_proofs(index: int, size: int) -> None:
    vectors = tree_of(VECTOR_LEAVES)
    expected = _unhex(VECTOR_INCLUSION[(index, size)])
    assert vectors.inclusion_proof(index, size) == expected
    root = bytes.fromhex(VECTOR_ROOTS[size])
    assert verify_inclusion(leaf_hash(VECTOR_LEAVES[index]), index, size, expected, root)


@pytest.mark.parametrize(("old", "new"), sorted(VECTOR_CONSISTENCY))
def test_known_consistency_proofs(old: int, new: int) -> None:
    vectors = tree_of(VECTOR_LEAVES)
    expected = _unhex(VECTOR_CONSISTENCY[(old, new)])
    assert vectors.consistency_proof(old, new) == expected
    old_root, new_root = bytes.fromhex(VECTOR_ROOTS[old]), bytes.fromhex(VECTOR_ROOTS[new])
    assert verify_consistency(old, new, old_root, new_root, expected)


def test_a_real_logs_audit_path_verifies() -> None:
    leaf, root = bytes.fromhex(REAL_LOG_LEAF), bytes.fromhex(REAL_LOG_ROOT)
    index, size, path = REAL_LOG_INDEX, REAL_LOG_SIZE, _unhex(REAL_LOG_PATH)
    assert verify_inclusion(leaf, index, size, path, root)
    assert not verify_inclusion(leaf, index + 1, size, path, root)
    assert not verify_inclusion(leaf, index, size, path[:-1], root)
    assert not verify_inclusion(leaf, index, size, [*path[:5], flip(path[5]), *path[6:]], root)


# ---- against the naive reference --------------------------------------------------------


def test_roots_match_the_reference_for_every_size(tree: MemoryTree) -> None:
    for size in range(1, 71):
        expected = ref_mth(DATA[:size])
        assert tree_root(size, complete_only(tree, size)) == expected
        assert subtree_root(0, size, tree.subtree) == expected
        assert tree.root(size) == expected


def test_subtree_root_matches_the_reference_for_any_range(tree: MemoryTree) -> None:
    # Every range of a small tree (aligned or not), then random ranges of the big one.
    ranges = [(lo, hi) for hi in range(1, 18) for lo in range(hi)]
    rng = random.Random(9162)
    for _ in range(300):
        lo = rng.randrange(BIG)
        ranges.append((lo, rng.randrange(lo + 1, BIG + 1)))
    for lo, hi in ranges:
        assert subtree_root(lo, hi, complete_only(tree, hi)) == ref_mth(DATA[lo:hi]), (lo, hi)


def test_proofs_match_the_reference(tree: MemoryTree) -> None:
    for size in range(1, 41):
        for index in range(size):
            assert tree.inclusion_proof(index, size) == ref_path(index, DATA[:size])
        for old in range(1, size + 1):
            assert tree.consistency_proof(old, size) == ref_proof(old, DATA[:size])


# ---- round trips and tampering ----------------------------------------------------------


def one_bit_flipped(proof: list[bytes]) -> list[list[bytes]]:
    """The proof with one bit flipped, once per element (a different bit each time)."""
    return [[*proof[:i], flip(h, i % 8), *proof[i + 1 :]] for i, h in enumerate(proof)]


def others(value: int, size: int) -> list[int]:
    """Wrong values for an index or size in a tree of `size` leaves: every one from -1 to
    past double the size in small trees, the telling neighbours in larger ones."""
    if size <= 8:
        candidates = set(range(-1, 2 * size + 3))
    else:
        candidates = {-1, 0, 1, value - 1, value + 1, value ^ 1, value ^ 2, value ^ 4}
        candidates |= {value * 2, value // 2, size - 1, size, size + 1, 2 * size + 1}
    return sorted(candidates - {value})


@functools.cache
def _proof_length(kind: str, a: int, b: int) -> int:
    """The length of a proof for (a, b): independent of the leaves, so any store will do."""
    lookup = uniform_subtree(b)
    return len(
        inclusion_proof(a, b, lookup) if kind == "inclusion" else consistency_proof(a, b, lookup)
    )


def test_every_inclusion_proof_verifies_and_every_tampering_fails(tree: MemoryTree) -> None:
    for size in range(1, 41):
        root = tree.root(size)
        for index in range(size):
            leaf = tree.subtree(0, index)
            proof = inclusion_proof(index, size, complete_only(tree, size))
            assert verify_inclusion(leaf, index, size, proof, root)
            assert verify_inclusion(bytearray(leaf), index, size, tuple(proof), root)

            bad: list[tuple[Any, ...]] = [
                (leaf, index, size, flipped, root) for flipped in one_bit_flipped(proof)
            ]
            if proof:
                bad.append((leaf, index, size, proof[:-1], root))
                bad.append((leaf, index, size, proof[1:], root))
            bad += [
                (leaf, index, size, [*proof, SOME_HASH], root),
                (leaf, index, size, [*proof, root], root),
                (leaf, index, size, [SOME_HASH, *proof], root),
                (leaf, index, size, [leaf, *proof], root),
                (flip(leaf), index, size, proof, root),
                (leaf_hash(leaf), index, size, proof, root),  # the hash, not the data
                (leaf, index, size, proof, flip(root)),
                (leaf, index, size, proof, EMPTY_ROOT),
                (leaf, index, size, proof, SOME_HASH),
            ]
            # Any other index: the path from the root to a leaf names the leaf.
            bad += [(leaf, other, size, proof, root) for other in others(index, size)]
            # A wrong size: the verifier sees only the tree's shape, so a size with the
            # same path shape (leaf 0 of 3 leaves or of 4: right, right) accepts the same
            # proof; a signed head binds the size to its root. Every size whose path
            # length differs must fail, and doubling or halving always changes it.
            for other in others(size, size):
                if other <= index or _proof_length("inclusion", index, other) != len(proof):
                    bad.append((leaf, index, other, proof, root))
            bad += [(leaf, index, 2 * size, proof, root), (leaf, index, size // 2, proof, root)]
            for probe in bad:
                assert verify_inclusion(*probe) is False, (index, size, probe[1:3])


def test_every_consistency_proof_verifies_and_every_tampering_fails(tree: MemoryTree) -> None:
    for new in range(1, 41):
        new_root = tree.root(new)
        for old in range(1, new + 1):
            old_root = tree.root(old)
            proof = consistency_proof(old, new, complete_only(tree, new))
            assert verify_consistency(old, new, old_root, new_root, proof)
            assert verify_consistency(old, new, bytearray(old_root), new_root, tuple(proof))

            bad: list[tuple[Any, ...]] = [
                (old, new, old_root, new_root, [*proof, SOME_HASH]),
                (old, new, old_root, new_root, [*proof, old_root]),
                (old, new, old_root, new_root, [*proof, new_root]),
                (old, new, old_root, new_root, [SOME_HASH, *proof]),
                (old, new, old_root, new_root, [old_root, *proof]),
                (old, new, old_root, new_root, [new_root, *proof]),
                (old, new, flip(old_root), new_root, proof),
                (old, new, old_root, flip(new_root), proof),
                (old, new, SOME_HASH, new_root, proof),
                (old, new, old_root, EMPTY_ROOT, proof),
            ]
            if old != new:
                bad.append((old, new, new_root, old_root, proof))  # swapped roots
                bad.append((old, new, old_root, new_root, []))
                bad.append((old, new, old_root, new_root, [proof[0], *proof]))
                bad.append((old, new, old_root, new_root, proof[:-1]))
                bad.append((old, new, old_root, new_root, proof[1:]))
                bad += [(old, new, old_root, new_root, f) for f in one_bit_flipped(proof)]
            # Any other old size: old_root must be rebuilt from the proof at that size.
            bad += [(other, new, old_root, new_root, proof) for other in others(old, new)]
            # A wrong new size fails whenever its proof length differs (see the
            # inclusion test: a same-shaped size is indistinguishable by design).
            for other in others(new, new):
                if other < old or _proof_length("consistency", old, other) != len(proof):
                    bad.append((old, other, old_root, new_root, proof))
            bad += [
                (old, 2 * new, old_root, new_root, proof),
                (old, new // 2, old_root, new_root, proof),
            ]
            for probe in bad:
                assert verify_consistency(*probe) is False, (old, new, probe[:2])


def test_the_empty_tree_and_equal_sizes() -> None:
    a, b = leaf_hash(b"a"), leaf_hash(b"b")
    # Any tree extends the empty one, with nothing to prove, but the empty tree has
    # exactly one root.
    assert verify_consistency(0, 0, EMPTY_ROOT, EMPTY_ROOT, [])
    assert verify_consistency(0, 5, EMPTY_ROOT, a, [])
    assert not verify_consistency(0, 5, EMPTY_ROOT, a, [a])
    assert not verify_consistency(0, 5, a, a, [])
    assert not verify_consistency(0, 0, EMPTY_ROOT, a, [])
    # Equal sizes: equal roots and an empty proof.
    assert verify_consistency(3, 3, a, a, [])
    assert not verify_consistency(3, 3, a, b, [])
    assert not verify_consistency(3, 3, a, a, [a])
    assert not verify_consistency(1, 2, a, b, [])
    assert consistency_proof(0, 7, uniform_subtree(7)) == []
    assert consistency_proof(7, 7, uniform_subtree(7)) == []
    # A one-leaf tree: the root is the leaf hash and the path is empty.
    assert verify_inclusion(a, 0, 1, [], a)
    assert not verify_inclusion(a, 0, 1, [], b)
    assert not verify_inclusion(a, 0, 1, [a], a)


# ---- malformed input --------------------------------------------------------------------

H = leaf_hash(b"x")


@pytest.mark.parametrize(
    "args",
    [
        (H, 0, 0, [], H),
        (H, -1, 3, [H, H], H),
        (H, 3, 3, [H], H),
        (H, 0, -1, [], H),
        (H, 5, 2, [H], H),
        (H[:31], 0, 1, [], H[:31]),
        (H + b"\x00", 0, 1, [], H + b"\x00"),
        (H, 0, 1, [], H[:31]),
        (H, 0, 2, [H[:31]], H),
        (H, 0, 2, [H + b"!"], H),
        (H, 0, 2, [b""], H),
        (H, 0, 2, ["00" * 32], H),
        (H, 0, 2, [int.from_bytes(H, "big")], H),
        (H, 0, 2, [None], H),
        (H, 0, 2, None, H),
        (H, 0, 2, 7, H),
        (H, 0, 2, H, H),  # bytes is a sequence, but not of hashes
        (H, 0, 2, H.hex(), H),
        (H.hex(), 0, 1, [], H.hex()),
        (None, 0, 1, [], H),
        (H, 0, 1, [], None),
        (H, "0", 2, [H], H),
        (H, 0, "2", [H], H),
        (H, 0.0, 2, [H], H),
        (H, True, 2, [H], H),
        (H, 0, 2**64, [H] * 70, H),
    ],
)
def test_verify_inclusion_returns_false_for_malformed_input(args: tuple[Any, ...]) -> None:
    assert verify_inclusion(*args) is False


@pytest.mark.parametrize(
    "args",
    [
        (-1, 2, H, H, [H]),
        (1, -2, H, H, [H]),
        (-3, -3, H, H, []),
        (3, 2, H, H, [H]),
        (1, 2, H[:31], H, [H]),
        (1, 2, H, H[:31], [H]),
        (1, 1, H[:31], H[:31], []),
        (0, 0, EMPTY_ROOT[:31], EMPTY_ROOT[:31], []),
        (1, 2, H, H, [H[:31]]),
        (1, 2, H, H, [b""]),
        (1, 2, H, H, ["00" * 32]),
        (1, 2, H, H, [None]),
        (1, 2, H, H, [1, 2]),
        (1, 2, H, H, None),
        (1, 2, H, H, 3),
        (1, 2, H, H, H),
        (1, 2, None, H, [H]),
        (1, 2, H, None, [H]),
        ("1", 2, H, H, [H]),
        (1, 2.0, H, H, [H]),
        (1, None, H, H, [H]),
        (False, 2, EMPTY_ROOT, H, []),
        (1, 2**64, H, H, [H] * 70),
        (3, 2**64, H, H, [H] * 70),
    ],
)
def test_verify_consistency_returns_false_for_malformed_input(args: tuple[Any, ...]) -> None:
    assert verify_consistency(*args) is False


def test_proof_generation_refuses_bad_arguments(tree: MemoryTree) -> None:
    lookup = tree.subtree
    for lo, hi in [(0, 0), (3, 3), (5, 2), (-1, 2)]:
        with pytest.raises(ValueError):
            subtree_root(lo, hi, lookup)
    with pytest.raises(ValueError):
        tree_root(-1, lookup)
    for index, size in [(-1, 3), (3, 3), (0, 0), (7, -2)]:
        with pytest.raises(ValueError):
            inclusion_proof(index, size, lookup)
    for old, new in [(5, 4), (-1, 4), (0, -1), (-2, -1)]:
        with pytest.raises(ValueError):
            consistency_proof(old, new, lookup)
    for bad_type in ("3", 3.0, None):
        with pytest.raises(TypeError):
            tree_root(bad_type, lookup)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        tree.root(tree.size + 1)
    with pytest.raises(ValueError):
        tree.inclusion_proof(0, tree.size + 1)
    with pytest.raises(ValueError):
        tree.consistency_proof(1, tree.size + 1)
    with pytest.raises(ValueError):
        nodes_completed(0, H[:31], lookup)
    with pytest.raises(ValueError):
        nodes_completed(-1, H, lookup)
    with pytest.raises(ValueError):
        MemoryTree().append_hash(b"not a hash")


def test_a_store_answering_garbage_is_an_error_not_a_root() -> None:
    with pytest.raises(ValueError, match="not a 32-byte hash"):
        tree_root(3, lambda level, index: b"short")


# ---- only complete subtrees, O(log n) lookups -------------------------------------------


def test_memory_tree_stores_exactly_the_complete_subtrees() -> None:
    grown = MemoryTree()
    for size in range(1, 71):
        grown.append(DATA[size - 1])
        expected = {(level, i) for level in range(8) for i in range(size >> level)}
        assert set(grown._nodes) == expected
    small = tree_of(DATA[:5])
    for level, index in [(0, 5), (1, 2), (2, 1), (3, 0), (0, -1)]:
        with pytest.raises(KeyError):
            small.subtree(level, index)
    assert small.subtree(2, 0) == ref_mth(DATA[:4])
    assert small.subtree(0, 4) == leaf_hash(DATA[4])


def test_nodes_completed_reads_one_left_sibling_per_trailing_one(tree: MemoryTree) -> None:
    # The same keys the checkpoint log prefetches for an append.
    for index in range(70):
        calls: list[tuple[int, int]] = []
        rows = nodes_completed(index, leaf_hash(DATA[index]), complete_only(tree, index, calls))
        siblings = []
        level = 0
        while index >> level & 1:
            siblings.append((level, (index >> level) - 1))
            level += 1
        assert calls == siblings
        assert rows[0] == (0, index, leaf_hash(DATA[index]))
        assert [(lv, i) for lv, i, _ in rows] == [(0, index)] + [
            (lv + 1, i // 2) for lv, i in siblings
        ]
        for lv, i, digest in rows:
            assert digest == ref_mth(DATA[i << lv : (i + 1) << lv])


def test_roots_look_up_one_perfect_subtree_per_set_bit(tree: MemoryTree) -> None:
    for size in range(1, 71):
        calls: list[tuple[int, int]] = []
        tree_root(size, complete_only(tree, size, calls))
        pieces, start = [], 0
        for level in range(size.bit_length() - 1, -1, -1):
            if size >> level & 1:
                pieces.append((level, start >> level))
                start += 1 << level
        assert calls == pieces


def test_proofs_only_look_up_subtrees_complete_at_their_size(tree: MemoryTree) -> None:
    # complete_only fails the test on any lookup past `size`, though the tree holds more.
    for size in range(1, 70):
        bound = 2 * size.bit_length() + 1
        for index in range(size):
            calls: list[tuple[int, int]] = []
            inclusion_proof(index, size, complete_only(tree, size, calls))
            assert len(calls) <= bound
        for old in range(size + 1):
            calls = []
            consistency_proof(old, size, complete_only(tree, size, calls))
            assert len(calls) <= bound


@pytest.mark.parametrize("size", [2**63 - 1, 2**63, 2**62 + 12345, 2**40 + 1])
def test_huge_trees_take_logarithmic_work(size: int) -> None:
    lookup = uniform_subtree(size)
    root = tree_root(size, lookup)
    for index in (0, size // 3, size - 2, size - 1):
        proof = inclusion_proof(index, size, lookup)
        assert len(proof) <= 64
        assert verify_inclusion(lookup(0, index), index, size, proof, root)
    for old in (1, 2**31, size // 2 + 1, size - 1):
        proof = consistency_proof(old, size, lookup)
        assert len(proof) <= 2 * 64
        assert verify_consistency(old, size, tree_root(old, lookup), root, proof)
    rows = nodes_completed(size - 1, lookup(0, size - 1), lookup)
    assert len(rows) == ((size - 1) ^ size).bit_length()  # the leaf, one per trailing 1
