"""The loader's shuffle: a keyed pseudo-random bijection of record positions, new every epoch.

Epoch ``e`` visits the records in the order ``permute(positions, num_records,
seed, e)``. It is stateless (a Feistel network, no permutation table), so any
position of any epoch costs the same whatever the dataset size, and every
process and grain worker computes the same order on its own.

>>> order = permute(np.arange(10), 10, seed=0, epoch=0)
>>> sorted(order.tolist()) == list(range(10))
True
"""

import numpy as np

_MASK64 = (1 << 64) - 1


def _splitmix64(x: int) -> int:
  x = (x + 0x9E3779B97F4A7C15) & _MASK64
  x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK64
  x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK64
  return x ^ (x >> 31)


def _mix(x: np.ndarray) -> np.ndarray:
  """splitmix64's finaliser on uint64 arrays (multiplication wraps modulo 2**64)."""
  x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
  x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
  return x ^ (x >> np.uint64(31))


def permute(positions: np.ndarray, num_records: int, seed: int, epoch: int, rounds: int = 6) -> np.ndarray:
  """The record index at each of `positions` in epoch `epoch`'s shuffled order.

  A keyed bijection of ``[0, num_records)``: a `rounds`-round Feistel network on
  the smallest even number of bits that holds ``num_records - 1`` (splitmix64
  round function, keys from seed and epoch), cycle-walked back into range.
  Stateless, so any position of any epoch costs the same: no permutation table
  is stored, whatever the dataset size.

  >>> order = permute(np.arange(10), 10, seed=0, epoch=0)
  >>> sorted(order.tolist()) == list(range(10)), order.tolist() == list(range(10))
  (True, False)
  """
  if num_records < 1:
    raise ValueError(f'num_records must be positive, got {num_records}')
  half = max(1, ((num_records - 1).bit_length() + 1) // 2)
  shift, mask = np.uint64(half), np.uint64((1 << half) - 1)
  key = _splitmix64(_splitmix64(seed) ^ epoch)
  keys = []
  for _ in range(rounds):
    key = _splitmix64(key)
    keys.append(np.uint64(key))

  def feistel(x: np.ndarray) -> np.ndarray:
    left: np.ndarray = x >> shift
    right: np.ndarray = x & mask
    for k in keys:
      left, right = right, left ^ (_mix(right ^ k) & mask)
    return (left << shift) | right

  out = feistel(np.asarray(positions, dtype=np.uint64))
  outside = out >= np.uint64(num_records)
  while outside.any():  # Cycle-walk: the domain is < 4 * num_records, so ~<4 passes.
    out[outside] = feistel(out[outside])
    outside = out >= np.uint64(num_records)
  return out.astype(np.int64)
