"""Graph fingerprints for ``--tf_xla_deterministic_cluster_names`` (tf-passes Appendix D).

TF names clusters ``cluster_<fp>_<n>`` where ``fp`` is its 64-bit ``Hash64`` (a
MurmurHash2-64A variant, seed ``0xDECAFCAFFE``) of the graph's deterministic
``GraphDef`` serialization, taken before clustering.

Verified against TF's own cluster names in ``tests/test_mark_for_compilation.py``.
"""

from __future__ import annotations

SEED = 0xDECAFCAFFE
_M = 0xC6A4A7935BD1E995
_R = 47
_MASK = (1 << 64) - 1


def hash64(data: bytes, seed: int = SEED) -> int:
    n = len(data)
    h = (seed ^ (n * _M)) & _MASK
    full = n - n % 8
    for i in range(0, full, 8):
        k = int.from_bytes(data[i:i + 8], "little")
        k = (k * _M) & _MASK
        k ^= k >> _R
        k = (k * _M) & _MASK
        h ^= k
        h = (h * _M) & _MASK
    rest = data[full:]
    if rest:
        for j, b in enumerate(rest):
            h ^= b << (8 * j)
        h = (h * _M) & _MASK
    h ^= h >> _R
    h = (h * _M) & _MASK
    h ^= h >> _R
    return h


def fingerprint_graphdef(gd) -> int:
    """Hash64 of the deterministic serialization of a ToGraphDef-style GraphDef."""
    return hash64(gd.SerializeToString(deterministic=True))
