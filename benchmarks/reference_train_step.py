"""Our per-move (paper) train step beside the published reference trainer's: agreement and speed.

    pip install --target /tmp/refdeps jaxtyping chex   # the reference imports them; our package does not
    git --git-dir=<mirror of google-deepmind/searchless_chess> archive HEAD | tar -x -C /tmp/ref_sc
    PYTHONPATH=/tmp/refdeps:$PWD python benchmarks/reference_train_step.py --reference /tmp/ref_sc
    ... --write-vector tests/fixtures/compat/reference_train_step.npz --config tiny --set model.embedding_dim=32 \\
        model.num_layers=2 model.num_heads=2 --batch 32     # how the pinned vector was made

Both sides get the same parameters (the reference's initialisation), the same batch of action-value records
(../shared/compat/action_value_sample.bag, turned into sequences by each side's own data code, which must agree)
and the reference's optimiser (clip the global norm at 1.0, then Adam at 1e-4; EMA 0.99): our
`step.make_functions(...).update` against the reference's `training_utils.update_parameters` with the loss of
`training_utils.make_loss_fn`. Checks the loss, every gradient, the parameters and EMA after one step to float32
tolerance, then times `--steps` steps of each (same batch, float32, this machine's devices) and prints steps/s and
the ratio. Exits 1 on any disagreement. The reference's code is run from `--reference` and never copied here; its
shims, for what newer JAX removed: `jax.sharding.PositionalSharding` (an annotation of `training_utils`) and
`jnp.clip`'s `a_min`/`a_max` keywords (its loss's clip), both installed only where missing.
"""

import argparse
import inspect
import pathlib
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import numpy as np
import optax

from searchless.core import bags
from searchless import configs
from searchless.data import sequences as sequences_lib
from searchless.model import network
from searchless.model.config import ModelConfig
from searchless.training import sharding
from searchless.training import step as step_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]
RECORDS = ROOT.parent / 'shared' / 'compat' / 'action_value_sample.bag'
# The reference's train config (src/train.py and config.TrainConfig's defaults), as our overrides.
REFERENCE_OPTIM = [
  'optim.learning_rate=1e-4',
  'optim.max_grad_norm=1.0',
  'optim.ema_decay=0.99',
  'optim.cooldown_steps=0',
  'train.compute_dtype=float32',
  'train.micro_batch=0',
]
SLICE = 16  # Exact values kept per leaf in the vector: the first SLICE and SLICE more at fixed random places.


# The fields our ModelConfig and the reference's TransformerConfig share, name for name.
SHARED_FIELDS = (
  'output_size',
  'max_sequence_length',
  'num_heads',
  'num_layers',
  'embedding_dim',
  'widening_factor',
  'emb_init_scale',
  'apply_post_ln',
  'apply_qk_layernorm',
  'use_causal_mask',
  'seed',
)


def import_reference(path: pathlib.Path) -> dict:
  """The reference's modules, imported from its source folder as the package `searchless_chess`."""
  if not (path / 'src' / 'transformer.py').exists():
    raise SystemExit(f"--reference {path}: no src/transformer.py (the searchless_chess repository's root)")
  if not hasattr(jax.sharding, 'PositionalSharding'):
    jax.sharding.PositionalSharding = jax.sharding.Sharding  # Only an annotation in training_utils.
  if 'a_min' not in inspect.signature(jnp.clip).parameters:  # Its loss calls jnp.clip(x, a_min=1).
    clip = jnp.clip
    jnp.clip = lambda x, min=None, max=None, *, a_min=None, a_max=None: clip(  # pylint: disable=redefined-builtin
      x, min if a_min is None else a_min, max if a_max is None else a_max
    )
  holder = pathlib.Path(tempfile.mkdtemp(prefix='reference_'))
  (holder / 'searchless_chess').symlink_to(path.resolve())
  sys.path.insert(0, str(holder))
  from searchless_chess.src import bagz, data_loader, training_utils, transformer, utils  # pylint: disable=import-error

  return {
    'bagz': bagz,
    'data_loader': data_loader,
    'training_utils': training_utils,
    'transformer': transformer,
    'utils': utils,
  }


def our_overrides(overrides: list[str], batch: int) -> list[str]:
  """The overrides of our config that make it the reference's training setup (`--set` and batch included)."""
  return [*REFERENCE_OPTIM, *overrides, f'data.batch_size={batch}', 'data.train=unused', 'policy=action_value']


def reference_predictor(ref: dict, m: ModelConfig):
  t = ref['transformer']
  return t.build_transformer_predictor(
    t.TransformerConfig(
      vocab_size=ref['utils'].NUM_ACTIONS,
      pos_encodings=t.PositionalEncodings.LEARNED,
      **{field: getattr(m, field) for field in SHARED_FIELDS},
    )
  )


def batches(ref: dict, records: pathlib.Path, batch: int) -> tuple[np.ndarray, np.ndarray]:
  """The first `batch` records as the reference's (sequences, loss mask) and as our sequences; they must agree."""
  raw = [bags.reader(str(records))[i] for i in range(batch)]
  convert = ref['data_loader'].ConvertActionValueDataToSequence(num_return_buckets=128)
  theirs, masks = zip(*(convert.map(r) for r in raw))
  theirs, masks = np.stack(theirs).astype(np.int32), np.stack(masks)
  ours = sequences_lib.to_sequences('action_value', raw, 128)
  if not np.array_equal(theirs, ours):
    raise SystemExit(
      f"{records}: our sequences differ from the reference's in rows {np.flatnonzero((theirs != ours).any(1)).tolist()}"
    )
  return ours, masks


def reference_side(ref: dict, m: ModelConfig, sequences: np.ndarray, masks: np.ndarray):
  """(params, loss, grads, update): the reference's init, value_and_grad and jitted update_parameters."""
  predictor = reference_predictor(ref, m)
  params = predictor.initial_params(rng=jax.random.PRNGKey(m.seed), targets=jnp.asarray(sequences[:1]))
  tu = ref['training_utils']
  grad_fn = jax.value_and_grad(tu.make_loss_fn(predictor=predictor))
  optimizer = optax.chain(optax.clip_by_global_norm(1.0), optax.adam(1e-4))
  loss, grads = jax.jit(grad_fn)(params, sequences, masks)

  def update(state):
    p, ema, opt = state
    p, ema, opt, loss, _ = tu.update_parameters(p, ema, opt, sequences, masks, grad_fn=grad_fn, optimizer=optimizer)
    return (p, ema, opt), loss

  return params, loss, grads, update, (params, params, optimizer.init(params))


def our_side(config, params, sequences: np.ndarray):
  """(loss, grads, update, state) of our library on `params` (a copy) and the batch."""
  fns = step_lib.make_functions(config, sharding.make_mesh(config.train.fsdp))
  net = network.build(fns.model_config, network.resolve_dtype(config.train.compute_dtype))
  loss_fn = step_lib.make_loss_fn(net.apply, config)
  (loss, _), grads = jax.jit(jax.value_and_grad(loss_fn, has_aux=True))(params, jnp.asarray(sequences))
  copy = jax.tree.map(jnp.array, params)  # The update donates its state.
  state = step_lib.TrainingState(
    jnp.zeros((), jnp.int32), copy, jax.tree.map(jnp.array, params), step_lib.make_optimizer(config).init(copy)
  )
  batch = jax.device_put(sequences, fns.batch_sharding)

  def update(s):
    s, metrics = fns.update(s, batch)
    return s, metrics['loss']

  return loss, grads, update, state


def flat(tree) -> dict[str, np.ndarray]:
  return {f'{module}/{name}': np.asarray(leaf) for module, leaves in tree.items() for name, leaf in leaves.items()}


def compare(what: str, ours, theirs, atol: float, rtol: float = 1e-4) -> list[str]:
  """One line per leaf of `ours` that differs from `theirs` beyond tolerance (and any leaf missing)."""
  ours, theirs = flat(ours), flat(theirs)
  if sorted(ours) != sorted(theirs):
    return [
      f'{what}: leaves differ: ours only {sorted(set(ours) - set(theirs))}, theirs only '
      f'{sorted(set(theirs) - set(ours))}'
    ]
  bad = []
  for key in sorted(ours):
    if not np.allclose(ours[key], theirs[key], atol=atol, rtol=rtol):
      bad.append(f'{what} {key}: max |diff| {np.abs(ours[key] - theirs[key]).max():.3g}')
  return bad


def timed(updates: dict, states: dict, steps: int) -> dict[str, float]:
  """Steps/s of each of `updates` (name -> update(state) -> (state, loss)): the median of `steps` single steps,
  taken in turns, so that a machine whose load changes slows every side alike."""
  times = {name: [] for name in updates}
  for name, update in updates.items():  # Compile.
    states[name], loss = update(states[name])
    jax.block_until_ready(loss)
  for _ in range(steps):
    for name, update in updates.items():
      start = time.perf_counter()
      states[name], loss = update(states[name])
      jax.block_until_ready(loss)
      times[name].append(time.perf_counter() - start)
  return {name: 1 / float(np.median(t)) for name, t in times.items()}


def digest(tree) -> dict[str, np.ndarray]:
  """Per leaf: sum, L2 norm, the first SLICE values and SLICE values at fixed random places (float64 sums)."""
  out = {}
  for key, leaf in flat(tree).items():
    values = leaf.astype(np.float64).reshape(-1)
    places = np.random.default_rng(0).choice(values.size, size=min(SLICE, values.size), replace=False)
    out[f'{key}/sum'] = np.float64(values.sum())
    out[f'{key}/norm'] = np.float64(np.sqrt((values**2).sum()))
    out[f'{key}/first'] = leaf.reshape(-1)[:SLICE]
    out[f'{key}/places'] = places
    out[f'{key}/at'] = leaf.reshape(-1)[places]
  return out


def write_vector(path: pathlib.Path, args, sequences, params, loss, grads, stepped) -> None:
  """The reference's numbers, small: full initial parameters, batch, loss, digests of grads and one Adam step."""
  arrays = {
    'config': np.array(args.config),
    'overrides': np.array(our_overrides(args.set, args.batch)),
    'sequences': sequences,
    'loss': np.float32(loss),
  }
  arrays.update({f'params/{k}': v for k, v in flat(params).items()})
  arrays.update({f'grads/{k}': v for k, v in digest(grads).items()})
  arrays.update({f'stepped/{k}': v for k, v in digest(stepped[0]).items()})
  arrays.update({f'ema/{k}': v for k, v in digest(stepped[1]).items()})
  path.parent.mkdir(parents=True, exist_ok=True)
  with open(path, 'wb') as f:
    np.savez_compressed(f, **arrays)
  print(f'wrote {path} ({path.stat().st_size / 1024:.0f} KiB)')


def main(argv=None) -> int:
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--reference', type=pathlib.Path, required=True, help='the searchless_chess source (its root)')
  p.add_argument('--records', type=pathlib.Path, default=RECORDS, help='an action-value bag (the compat sample)')
  p.add_argument('--config', default='tiny', help="our config (tiny = the reference's `local` model)")
  p.add_argument('--set', nargs='*', default=[], metavar='KEY=VALUE', help='overrides of the model config')
  p.add_argument('--batch', type=int, default=64)
  p.add_argument('--steps', type=int, default=6, help='timed steps of each side')
  p.add_argument('--write-vector', type=pathlib.Path, metavar='NPZ', help="also save the reference's numbers here")
  args = p.parse_args(argv)
  ref = import_reference(args.reference)
  config = configs.load(args.config, our_overrides(args.set, args.batch))
  m = ModelConfig.from_config(config)
  sequences, masks = batches(ref, args.records, args.batch)
  params, ref_loss, ref_grads, ref_update, ref_state = reference_side(ref, m, sequences, masks)
  loss, grads, update, state = our_side(config, params, sequences)
  bad = compare('init', network.init_params(m), params, atol=0, rtol=0)  # Same initialiser, same numbers.
  if not np.isclose(loss, ref_loss, atol=0, rtol=1e-6):
    bad.append(f'loss: ours {float(loss)!r}, reference {float(ref_loss)!r}')
  bad += compare('grad', grads, ref_grads, atol=1e-7)
  ref_after, _ = ref_update(ref_state)
  after, _ = update(jax.tree.map(jnp.array, state))
  bad += compare('params after one step', after.params, ref_after[0], atol=1e-7, rtol=1e-6)
  bad += compare('ema after one step', after.params_ema, ref_after[1], atol=1e-7, rtol=1e-6)
  print(
    f'{m.num_layers} layers, d={m.embedding_dim}, {m.num_heads} heads, {network.num_params(params):,} params; '
    f'batch {args.batch} of {args.records.name}; loss ours {float(loss):.7f} reference {float(ref_loss):.7f}; '
    f'grad norm {float(optax.global_norm(grads)):.6g}'
  )
  print(
    'agreement: '
    + (
      'loss, every gradient, params and EMA after one Adam step agree'
      if not bad
      else f'{len(bad)} DISAGREEMENTS\n  ' + '\n  '.join(bad)
    )
  )
  if args.write_vector:
    write_vector(args.write_vector, args, sequences, params, ref_loss, ref_grads, ref_after)
  rates = timed({'ours': update, 'reference': ref_update}, {'ours': state, 'reference': ref_state}, args.steps)
  ours_rate, ref_rate = rates['ours'], rates['reference']
  print(
    f'{jax.device_count()} x {jax.devices()[0].device_kind}: ours {ours_rate:.2f} steps/s, reference '
    f'{ref_rate:.2f} steps/s, ours / reference {ours_rate / ref_rate:.3f} '
    f'(median of {args.steps} steps of {args.batch}, in turns)'
  )
  return 1 if bad else 0


if __name__ == '__main__':
  sys.exit(main())
