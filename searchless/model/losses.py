"""Losses on the last token: log-loss (the paper) and HL-Gauss soft labels.

Both take the model's log-probabilities at the last position, ``[B, V]``, and the
target class per sequence, ``[B]``.

>>> import jax.numpy as jnp
>>> log_probs = jnp.log(jnp.array([[0.25, 0.75], [0.5, 0.5]]))
>>> round(float(log_loss(log_probs, jnp.array([1, 0]))), 4)  # mean(-ln 0.75, -ln 0.5)
0.4904
>>> [round(float(x), 3) for x in hl_gauss_labels(jnp.array([1]), num_classes=4, sigma=0.75)[0]]
[0.235, 0.507, 0.235, 0.023]
"""

import jax
import jax.numpy as jnp
import jax.scipy.special


def log_loss(log_probs: jax.Array, targets: jax.Array, reduce: bool = True) -> jax.Array:
  """Mean negative log-likelihood of `targets` [B] under `log_probs` [B, V] ([B] if not `reduce`)."""
  picked = jnp.take_along_axis(log_probs, targets[:, None], axis=-1)[:, 0]  # [B]
  return -jnp.mean(picked) if reduce else -picked


def hl_gauss_labels(targets: jax.Array, num_classes: int, sigma: float) -> jax.Array:
  """Histogram-loss Gaussian labels (Imani & White 2018; Farebrother et al. 2024).

  A Gaussian centred on the target bucket's centre, with std `sigma` bucket
  widths, integrated over each bucket of [0, num_classes] and renormalised.
  Returns [B, num_classes].
  """
  edges = jnp.arange(num_classes + 1, dtype=jnp.float32)  # [V + 1], bucket units.
  centre = targets.astype(jnp.float32)[:, None] + 0.5  # [B, 1]
  cdf = jax.scipy.special.ndtr((edges[None, :] - centre) / sigma)  # [B, V + 1]
  mass = cdf[:, 1:] - cdf[:, :-1]  # [B, V]
  return mass / (cdf[:, -1:] - cdf[:, :1])


def hl_gauss_loss(log_probs: jax.Array, targets: jax.Array, sigma: float, reduce: bool = True) -> jax.Array:
  """Mean cross-entropy between HL-Gauss labels around `targets` and `log_probs` ([B] if not `reduce`)."""
  labels = hl_gauss_labels(targets, log_probs.shape[-1], sigma)  # [B, V]
  per_target = -jnp.sum(labels * log_probs, axis=-1)  # [B]
  return jnp.mean(per_target) if reduce else per_target
