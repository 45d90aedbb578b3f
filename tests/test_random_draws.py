"""The solvers' random draws (worker/solvers/common.py): splitmix64, a uniform integer below n, Fisher-Yates, checked
against the same rules written plainly with Python's integers."""

from __future__ import annotations

import numpy as np
import pytest

from worker.solvers.common import rng_below, rng_next, rng_state, shuffle_prefix

MASK = 2**64 - 1


def _splitmix64(state: int) -> tuple[int, int]:
    """(new state, draw) of splitmix64, in Python integers."""
    state = (state + 0x9E3779B97F4A7C15) & MASK
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return state, z ^ (z >> 31)


def _below(state: int, n: int) -> tuple[int, int]:
    """(new state, value) of a uniform integer in [0, n): r mod n, drawing again while r < 2^64 mod n."""
    while True:
        state, r = _splitmix64(state)
        if r >= (2**64) % n:
            return state, r % n


@pytest.mark.parametrize("seed", [0, 1, 12345, 2**64 - 1])
def test_state_and_draws_match_splitmix64(seed):
    state = rng_state(seed)
    plain = (seed & MASK) ^ 0x9E3779B97F4A7C15
    assert int(state[0]) == plain
    for _ in range(20):
        plain, r = _splitmix64(plain)
        assert int(rng_next(state)) == r


def test_below_is_r_mod_n_with_the_rejection_rule():
    # small bounds, and large ones: 2^62 + 3 rejects a quarter of the draws (2^64 mod n = 2^62 - 9), 2^63 - 1 keeps
    # draws below n (half of them), whose remainder needs no division
    bounds = [*range(1, 300), 2**32 - 1, 2**32 + 1, 2**62 + 3, 2**63 - 25, 2**63 - 1]
    for seed in range(5):
        state, plain = rng_state(seed), int(rng_state(seed)[0])
        for n in bounds:
            plain, value = _below(plain, n)
            assert int(rng_below(state, np.int64(n))) == value, n
            assert int(state[0]) == plain


def test_shuffle_prefix_is_uniform_and_leaves_the_rest():
    counts = np.zeros((4, 4))
    state = rng_state(3)
    for _ in range(8000):
        index = np.arange(6, dtype=np.int32)
        shuffle_prefix(index, 4, state)
        assert list(index[4:]) == [4, 5] and sorted(index[:4]) == [0, 1, 2, 3]
        counts[np.arange(4), index[:4]] += 1
    assert np.all(np.abs(counts / 8000 - 0.25) < 0.03)  # each row at each place 1/4 of the time (sd 0.005)
