"""The entropy behind release noise: ChaCha20 keystream under fresh os.urandom keys.

:func:`spatialdp.privacy.exact.random_bytes` is the one source of random bits
of the exact samplers. These tests check that it is the standard ChaCha20
keystream, keyed only from :func:`os.urandom` and never the same twice, that
its bytes are uniform, and that releases built on it differ call to call.
"""

from __future__ import annotations

import inspect
import os
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse
from scipy import stats

from spatialdp.privacy import exact
from spatialdp.privacy.exact import random_bytes
from spatialdp.privacy.noise import LaplaceMechanism, release_discrete_laplace

P_MIN = 1e-6  # the uniformity tests fail only below this p-value
PIECE = exact._PIECE_BYTES

# RFC 8439 (ChaCha20), appendix A.1, test vector 1: the first block of keystream
# for the all-zero key, block counter 0 and the all-zero nonce.
ZERO_KEY_BLOCK = bytes.fromhex(
    "76b8e0ada0f13d90405d6ae55386bd28bdd219b8a08ded1aa836efcc8b770dc7"
    "da41597c5157488d7724e03fb8d84a376a43b8f41518a11cc387b669b2ee6586")


def byte_uniformity_pvalue(data: bytes | bytearray) -> float:
    """Return the chi-square p-value of the byte counts against uniform on 0 .. 255."""
    counts = np.bincount(np.frombuffer(data, dtype=np.uint8), minlength=256)
    return float(stats.chisquare(counts).pvalue)


def pair_uniformity_pvalue(data: bytes | bytearray) -> float:
    """Return the chi-square p-value of non-overlapping 16-bit words against uniform."""
    words = np.frombuffer(data[: len(data) // 2 * 2], dtype=np.uint16)
    return float(stats.chisquare(np.bincount(words, minlength=1 << 16)).pvalue)


def test_random_bytes_is_chacha20_keyed_by_os_urandom(monkeypatch: pytest.MonkeyPatch) -> None:
    # every key comes from os.urandom: with it forced to zeros, the stream is the
    # RFC 8439 zero-key keystream, and the function has no other input (no seed)
    keys: list[int] = []

    def zero_key(n: int) -> bytes:
        keys.append(n)
        return bytes(n)

    monkeypatch.setattr(os, "urandom", zero_key)
    first = random_bytes(4096)
    assert first[:64] == ZERO_KEY_BLOCK
    assert random_bytes(4096) == first  # no hidden state between calls
    assert keys == [32, 32]
    assert list(inspect.signature(random_bytes).parameters) == ["nbytes"]


def test_fill_random_writes_what_random_bytes_returns(monkeypatch: pytest.MonkeyPatch) -> None:
    # the in-place form (a large release reuses one buffer for its chunks): the same
    # keystream under the same (here: zero) keys, one fresh key per call and per MiB,
    # and every byte overwritten
    monkeypatch.setattr(os, "urandom", lambda n: bytes(n))
    for nbytes in (100, 4096, PIECE + 4096):
        buf = bytearray(b"\xff" * nbytes)
        exact.fill_random(memoryview(buf))
        assert buf == random_bytes(nbytes)


def test_chunks_of_one_release_draw_fresh_words() -> None:
    # the chunks of a long release share one workspace: each must be drawn afresh
    chunk = exact._CHUNK
    noise = LaplaceMechanism(0.4, 19.0).release(np.zeros(3 * chunk)).reshape(3, chunk)
    assert len({row.tobytes() for row in noise}) == 3
    r = np.corrcoef(noise)[np.triu_indices(3, 1)]
    assert np.all(np.abs(r) < 6 / np.sqrt(chunk))  # 6 SE of a correlation under independence


def test_each_call_and_each_mib_gets_a_fresh_key() -> None:
    big = random_bytes(2 * PIECE + 4096)
    assert len(big) == 2 * PIECE + 4096
    pieces = [bytes(big[i:i + 64]) for i in (0, PIECE, 2 * PIECE)]
    assert len(set(pieces)) == 3  # a reused key would repeat its first block
    assert random_bytes(4096)[:64] != random_bytes(4096)[:64]


@pytest.mark.parametrize("nbytes", [100, 2048, 80_000, PIECE, 3 * PIECE + 12_345])
def test_random_bytes_are_uniform(nbytes: int) -> None:
    # several calls of each size (short ones are os.urandom, long ones the keystream,
    # the last one spans several keys and ends in a short piece)
    data = b"".join(bytes(random_bytes(nbytes)) for _ in range(max(1, (1 << 22) // nbytes)))
    assert byte_uniformity_pvalue(data) > P_MIN
    if len(data) >= 1 << 21:  # at least 16 words per 16-bit bin
        assert pair_uniformity_pvalue(data) > P_MIN


def test_the_last_short_piece_is_uniform_too() -> None:
    tails = b"".join(bytes(random_bytes(PIECE + 8192)[PIECE:]) for _ in range(64))
    assert byte_uniformity_pvalue(tails) > P_MIN


def test_two_large_releases_with_identical_inputs_differ() -> None:
    values = np.linspace(0.0, 1000.0, 200_000)  # chunks of 2**16 values: keystream draws
    mech = LaplaceMechanism(0.4, 19.0)
    first, second = mech.release(values), mech.release(values)
    assert np.mean(first == second) < 1e-3
    counts = np.zeros(1_000_000, dtype=np.int64)  # 2 MB of 16-bit words: several keys
    assert np.mean(release_discrete_laplace(counts, 2.5)
                   == release_discrete_laplace(counts, 2.5)) < 0.5



def test_a_first_release_loads_neither_scipy_nor_numpy_polynomial() -> None:
    # a first real-valued release pays its imports: scipy.sparse (only sparse input
    # needs it) and numpy.polynomial (error-bar quadrature) load when first needed
    code = ("import sys, numpy as np\n"
            "from spatialdp.privacy.noise import LaplaceMechanism\n"
            "LaplaceMechanism(0.4, 19.0).release(np.zeros(3000))\n"
            "print(sorted(m for m in ('scipy', 'numpy.polynomial') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_sparse_input_is_still_recognised() -> None:
    sparse = scipy.sparse.csr_array(np.array([[0.0, 5.0, 0.0]]))
    out = LaplaceMechanism(0.4, 19.0).release(sparse)
    assert isinstance(out, np.ndarray)
    assert out.shape == (1, 3)
