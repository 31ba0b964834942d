"""RFC 6962 / RFC 9162 Merkle trees over stored complete-subtree hashes.

The checkpoint log (sagacity.tlog._log) is a transparency log: its tree heads are
the Merkle Tree Hash (MTH) of RFC 9162 §2.1.1, so any RFC 6962 tooling can check them,
and auditors verify inclusion and consistency proofs (§2.1.3, §2.1.4) with only the
signed heads in hand.

A log with millions of leaves cannot re-read them all for every root or proof, so this
module never sees leaves. It sees a `Subtree` callable answering "the hash of the
perfect subtree of 2**level leaves starting at leaf index*2**level", which the log
keeps as rows of a table. Appending a leaf stores the rows it completes
(`nodes_completed`); from then on every root and proof is assembled from O(log n) such
lookups. The RFC's recursive definitions split a range of n leaves at k, the largest
power of two smaller than n, so the left part is always a perfect, aligned subtree
(one lookup) and only the right edge needs further splitting.

Every lookup made for a tree of `size` leaves lies inside the first `size` leaves, so
a root or proof for an older size only reads subtrees that were already complete at
that size: the answer does not depend on how far the log has grown since.

The verifiers are the algorithms of RFC 9162 §2.1.3.2 and §2.1.4.2. They take data
from untrusted parties (a proof from the log, a head from a gossip peer), so they
return False for anything malformed instead of raising.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence

HASH_SIZE = 32
"""Bytes in a SHA-256 digest: every leaf hash, node hash, root and proof element."""

EMPTY_ROOT = hashlib.sha256(b"").digest()
"""MTH({}) = HASH(): the root of the empty tree (RFC 9162 §2.1.1)."""

_LEAF_PREFIX = b"\x00"
_NODE_PREFIX = b"\x01"

Subtree = Callable[[int, int], bytes]
"""(level, index) -> hash of the perfect subtree of 2**level leaves starting at leaf
index*2**level. Level 0 is a leaf hash."""


def leaf_hash(data: bytes) -> bytes:
    """SHA-256(0x00 || data). The prefix keeps a leaf from posing as an interior node
    (a second-preimage attack on the tree), as RFC 6962 requires."""
    return hashlib.sha256(_LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right): an interior node, prefixed apart from leaves."""
    return hashlib.sha256(_NODE_PREFIX + left + right).digest()


def _split(n: int) -> int:
    """k, the largest power of two smaller than n (n > 1): where the RFC splits n leaves."""
    return 1 << ((n - 1).bit_length() - 1)


def _is_int(value: object) -> bool:
    """A real integer: bool is an int subclass but never a size or an index."""
    return isinstance(value, int) and not isinstance(value, bool)


_BYTES = (bytes, bytearray)


def _is_hash(value: object) -> bool:
    return isinstance(value, _BYTES) and len(value) == HASH_SIZE


def _lookup(subtree: Subtree, level: int, index: int) -> bytes:
    """subtree(level, index), refusing a store's answer that cannot be a hash: a
    truncated or NULL column would otherwise yield a wrong root without any error."""
    digest = subtree(level, index)
    if not _is_hash(digest):
        raise ValueError(f"subtree({level}, {index}) is not a {HASH_SIZE}-byte hash")
    return bytes(digest)


def _check_int(name: str, value: object) -> None:
    if not _is_int(value):
        raise TypeError(f"{name} must be an int, not {type(value).__name__}")


def subtree_root(lo: int, hi: int, subtree: Subtree) -> bytes:
    """MTH(leaves[lo:hi]) for 0 <= lo < hi, splitting as RFC 9162 §2.1.1 does.

    A piece of 2**j leaves that starts at a multiple of 2**j is one subtree() lookup;
    anything else is split at the largest power of two smaller than its length. Every
    range that roots and proofs ask for starts at such a multiple, so it costs at most
    one lookup per set bit of its length. A range starting elsewhere is a different
    tree from any the log stores and is split down to its aligned pieces (up to
    hi - lo lookups). The recursion halves the length each level: depth <= 64 for
    any 64-bit size, never one frame per leaf.
    """
    _check_int("lo", lo)
    _check_int("hi", hi)
    if not 0 <= lo < hi:
        raise ValueError(f"bad leaf range [{lo}, {hi}): need 0 <= lo < hi")
    return _mth(lo, hi, subtree)


def _mth(lo: int, hi: int, subtree: Subtree) -> bytes:
    n = hi - lo
    if n & (n - 1) == 0 and lo % n == 0:
        return _lookup(subtree, n.bit_length() - 1, lo // n)
    k = _split(n)
    return node_hash(_mth(lo, lo + k, subtree), _mth(lo + k, hi, subtree))


def tree_root(size: int, subtree: Subtree) -> bytes:
    """MTH of the first `size` leaves: EMPTY_ROOT for 0, otherwise the fold of the
    perfect subtrees named by the set bits of `size` (one lookup each)."""
    _check_int("size", size)
    if size < 0:
        raise ValueError(f"negative tree size {size}")
    if size == 0:
        return EMPTY_ROOT
    return _mth(0, size, subtree)


def inclusion_proof(index: int, size: int, subtree: Subtree) -> list[bytes]:
    """PATH(index, D[size]) of RFC 9162 §2.1.3.1: the sibling hashes from the leaf up
    to the root, which with the leaf hash recompute the root of `size` leaves.

    Walks down from the whole tree: at each split the sibling of the half holding the
    leaf is one proof element. Left siblings are perfect subtrees (one lookup); at most
    one right sibling is a partial right edge, so the proof costs O(log size) lookups.
    """
    _check_int("index", index)
    _check_int("size", size)
    if not 0 <= index < size:
        raise ValueError(f"leaf index {index} is not in a tree of {size} leaves")
    siblings: list[bytes] = []
    lo, hi = 0, size
    while hi - lo > 1:
        k = _split(hi - lo)
        if index < lo + k:
            siblings.append(_mth(lo + k, hi, subtree))
            hi = lo + k
        else:
            siblings.append(_mth(lo, lo + k, subtree))
            lo += k
    siblings.reverse()  # the RFC lists the deepest sibling first
    return siblings


def consistency_proof(old_size: int, new_size: int, subtree: Subtree) -> list[bytes]:
    """PROOF(old_size, D[new_size]) of RFC 9162 §2.1.4.1: the hashes that let someone
    holding both roots check that the first old_size leaves of the new tree are the
    old tree. Empty when old_size == new_size or old_size == 0 (nothing to prove).

    SUBPROOF(m, D[n], b) unrolled into a walk down from the whole tree: each split
    contributes the subtree the old tree does not reach into, and the walk ends at the
    subtree whose leaves are exactly the old tree's last ones, contributing its own
    hash unless it is the whole old tree (b still true: the verifier has that root).
    """
    _check_int("old_size", old_size)
    _check_int("new_size", new_size)
    if old_size < 0 or new_size < 0:
        raise ValueError(f"negative tree size in ({old_size}, {new_size})")
    if old_size > new_size:
        raise ValueError(f"old size {old_size} is larger than new size {new_size}")
    if old_size == 0 or old_size == new_size:
        return []
    hashes: list[bytes] = []
    lo, hi = 0, new_size
    whole_old_tree = True  # SUBPROOF's b
    while hi != old_size:
        k = _split(hi - lo)
        if old_size - lo <= k:
            hashes.append(_mth(lo + k, hi, subtree))
            hi = lo + k
        else:
            hashes.append(_mth(lo, lo + k, subtree))
            lo += k
            whole_old_tree = False
    if not whole_old_tree:
        hashes.append(_mth(lo, hi, subtree))
    hashes.reverse()  # the RFC lists the innermost hash first
    return hashes


def verify_inclusion(
    leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes
) -> bool:
    """Whether `proof` shows the leaf hash `leaf` at `index` in the tree of `size`
    leaves whose root is `root` (RFC 9162 §2.1.3.2). False, never an exception, for
    malformed input: the proof comes from a party the caller does not trust."""
    hashes = _hash_list(proof)
    if hashes is None or not (_is_hash(leaf) and _is_hash(root)):
        return False
    if not (_is_int(index) and _is_int(size) and 0 <= index < size):
        return False
    fn, sn = index, size - 1
    r = bytes(leaf)
    for p in hashes:
        if sn == 0:
            return False  # more hashes than the path from this leaf has levels
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            # fn == sn with fn even: the node is the last of its level and has no right
            # sibling, so it rises unchanged until it is a right child, where p is its
            # left sibling; the shifts skip the levels it rose through.
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    return sn == 0 and r == root


def verify_consistency(
    old_size: int, new_size: int, old_root: bytes, new_root: bytes, proof: Sequence[bytes]
) -> bool:
    """Whether `proof` shows that the tree of old_size leaves with root old_root is a
    prefix of the tree of new_size leaves with root new_root (RFC 9162 §2.1.4.2).

    Equal sizes need an empty proof and equal roots; old_size == 0 needs an empty proof
    and old_root == EMPTY_ROOT (any new tree extends the empty one). False, never an
    exception, for malformed input.
    """
    hashes = _hash_list(proof)
    if hashes is None or not (_is_hash(old_root) and _is_hash(new_root)):
        return False
    if not (_is_int(old_size) and _is_int(new_size) and 0 <= old_size <= new_size):
        return False
    if old_size == 0:
        # The empty tree has exactly one root; a head claiming another is not consistent
        # with anything, even though there is nothing else to prove.
        return not hashes and old_root == EMPTY_ROOT and (new_size > 0 or new_root == old_root)
    if old_size == new_size:
        return not hashes and old_root == new_root
    if not hashes:
        return False
    if old_size & (old_size - 1) == 0:
        # The old tree is one perfect subtree of the new: its root is the proof's start,
        # so the log leaves it out (SUBPROOF with b true) and the verifier supplies it.
        hashes.insert(0, bytes(old_root))
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = hashes[0]
    for c in hashes[1:]:
        if sn == 0:
            return False  # more hashes than the new tree has levels above this node
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    return sn == 0 and fr == old_root and sr == new_root


def _hash_list(proof: object) -> list[bytes] | None:
    """The proof as a list of 32-byte hashes, or None if it is not one. A bytes or str
    value is a sequence too, but never a list of hashes."""
    if isinstance(proof, bytes | bytearray | str | memoryview) or not isinstance(proof, Iterable):
        return None
    hashes: list[bytes] = []
    for item in proof:
        if not _is_hash(item):
            return None
        hashes.append(bytes(item))
    return hashes


def nodes_completed(index: int, leaf: bytes, subtree: Subtree) -> list[tuple[int, int, bytes]]:
    """The (level, index, hash) rows appending `leaf` (a leaf hash) at leaf position
    `index` completes: (0, index, leaf) first, then each parent whose perfect subtree
    this leaf completes (reading left siblings through subtree()). Storing these rows
    for every appended leaf is exactly what makes subtree() answerable for every
    aligned perfect subtree of the tree.

    A leaf completes one parent per trailing 1 bit of its index: at each such level
    the node is a right child and its left sibling, already complete, is read back.
    """
    _check_int("index", index)
    if index < 0:
        raise ValueError(f"negative leaf index {index}")
    if not _is_hash(leaf):
        raise ValueError(f"a leaf hash is {HASH_SIZE} bytes")
    digest = bytes(leaf)
    rows = [(0, index, digest)]
    level, position = 0, index
    while position & 1:
        digest = node_hash(_lookup(subtree, level, position - 1), digest)
        level += 1
        position >>= 1
        rows.append((level, position, digest))
    return rows


class MemoryTree:
    """An in-memory tree built with nodes_completed: for tests and for verifying a log
    read in full. It holds exactly the rows a database log would, so a lookup of a
    subtree that is not complete yet raises KeyError instead of inventing an answer."""

    def __init__(self) -> None:
        self._nodes: dict[tuple[int, int], bytes] = {}
        self._size = 0

    def append(self, data: bytes) -> int:
        """Append leaf_hash(data); returns the leaf's index."""
        return self.append_hash(leaf_hash(data))

    def append_hash(self, leaf: bytes) -> int:
        """Append an already hashed leaf; returns its index."""
        index = self._size
        for level, position, digest in nodes_completed(index, leaf, self.subtree):
            self._nodes[(level, position)] = digest
        self._size += 1
        return index

    @property
    def size(self) -> int:
        """The number of leaves appended."""
        return self._size

    def subtree(self, level: int, index: int) -> bytes:
        """The stored hash of a complete subtree; KeyError for one that is not."""
        try:
            return self._nodes[(level, index)]
        except KeyError:
            raise KeyError(
                f"subtree (level {level}, index {index}) is not complete "
                f"in a tree of {self._size} leaves"
            ) from None

    def _sized(self, size: int | None) -> int:
        if size is None:
            return self._size
        _check_int("size", size)
        if not 0 <= size <= self._size:
            raise ValueError(f"size {size} is not in 0..{self._size}")
        return size

    def root(self, size: int | None = None) -> bytes:
        """The root of the first `size` leaves (default: all of them)."""
        return tree_root(self._sized(size), self.subtree)

    def inclusion_proof(self, index: int, size: int | None = None) -> list[bytes]:
        """PATH(index, D[size]) (default size: all leaves)."""
        return inclusion_proof(index, self._sized(size), self.subtree)

    def consistency_proof(self, old_size: int, new_size: int | None = None) -> list[bytes]:
        """PROOF(old_size, D[new_size]) (default new size: all leaves)."""
        return consistency_proof(old_size, self._sized(new_size), self.subtree)
