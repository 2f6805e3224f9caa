"""A small counter-free random number generator for the compiled learners: xoshiro256**.

The whole generator state is four ``uint64`` words in one array that the kernels update in
place, so it can be checkpointed with the tables, and a run continues exactly where it stopped:
300 episodes then 700 draw the same numbers as 1,000 at once. The state is seeded from the
config seed by splitmix64, as the xoshiro authors recommend.

Reference: D. Blackman and S. Vigna, "Scrambled linear pseudorandom number generators" (2021).
"""

from __future__ import annotations

import numpy as np
from numba import njit

# numba types a mix of uint64 and a Python int as float64, so every constant is a uint64
_5 = np.uint64(5)
_7 = np.uint64(7)
_9 = np.uint64(9)
_11 = np.uint64(11)
_17 = np.uint64(17)
_45 = np.uint64(45)
_64 = np.uint64(64)
_TWO_POW_MINUS_53 = 1.0 / 9007199254740992.0

_MASK64 = (1 << 64) - 1


def seed_rng(seed: int) -> np.ndarray:
    """A fresh generator state ``uint64[4]`` from an integer seed (splitmix64 of the seed)."""
    x = int(seed) & _MASK64
    words = []
    for _ in range(4):
        x = (x + 0x9E3779B97F4A7C15) & _MASK64
        z = x
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK64
        words.append(z ^ (z >> 31))
    return np.array(words, dtype=np.uint64)


@njit(cache=True, inline="always")
def _rotl(x: np.uint64, k: np.uint64) -> np.uint64:
    return (x << k) | (x >> (_64 - k))


@njit(cache=True, inline="always")
def next_u64(state: np.ndarray) -> np.uint64:
    """The next 64 random bits; advances ``state`` in place (xoshiro256**)."""
    result = _rotl(state[1] * _5, _7) * _9
    t = state[1] << _17
    state[2] ^= state[0]
    state[3] ^= state[1]
    state[1] ^= state[2]
    state[0] ^= state[3]
    state[2] ^= t
    state[3] = _rotl(state[3], _45)
    return result


@njit(cache=True, inline="always")
def uniform(state: np.ndarray) -> float:
    """A float uniform on ``[0, 1)`` from the top 53 bits."""
    # through int64 (exact below 2**53): a signed conversion is one instruction, unsigned is not
    return float(np.int64(next_u64(state) >> _11)) * _TWO_POW_MINUS_53


@njit(cache=True, inline="always")
def random_index(state: np.ndarray, n: int) -> int:
    """An integer uniform on ``{0, ..., n - 1}``.

    ``floor(u * n)`` is biased by at most ``n / 2**53``, far below anything a learner can see.
    """
    i = int(uniform(state) * n)
    return i if i < n else n - 1


@njit(cache=True)
def draw_seed(state: np.ndarray) -> int:
    """A non-negative 62-bit integer, e.g. to seed a Gymnasium env's reset."""
    return int(next_u64(state) >> np.uint64(2))
