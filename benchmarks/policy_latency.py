"""Move latency of the searchless action-value policy vs the reference engine wrapper.

    .venv/bin/python benchmarks/policy_latency.py                        # tiny and 9m, CPU
    .venv/bin/python benchmarks/policy_latency.py --configs 9m 136m 270m --dtype bfloat16   # a GPU
    .venv/bin/python benchmarks/policy_latency.py --reference_src /tmp/ref   # also the reference code itself

The same parameters (the config's architecture, random init) and the same real
boards (positions from the Lichess games in ../shared/data, every 7th ply of
the first games: ~35 legal moves on average) go through:

* ours: `Player.play` (one batched forward pass over all legal moves, bucketed
  batch shapes, last position only, repetition rule included);
* the reference's loop, re-implemented: its `ActionValueEngine.play` with
  `wrap_predict_fn(batch_size=1)`: every legal move is a batch-1 call of the
  jitted full model ([1, 79, 128] out), then the same argmax and repetition
  rule. With `--reference_src` the reference's own `neural_engines` module is
  imported from that checkout (it is not part of this project) and timed too;
* the compute bound: the reference's FLOPs per move (legal moves x
  `transformer.flops_per_sequence`) / the f32 (or bf16) matmul rate this device
  sustains, measured in the same run. Ours does less than that work (the last
  block runs one query per sequence), so it can beat the bound.

Prints median and p95 move latency, sequences/s, and the ratios.
"""

import argparse
import pathlib
import statistics
import sys
import time

import chess
import chess.pgn
import jax
import jax.numpy as jnp
import numpy as np

from searchless import configs
from searchless.core import moves as moves_lib
from searchless.core import tokenizer
from searchless.core import values
from searchless.model import network
from searchless.model import transformer
from searchless.model.config import ModelConfig
from searchless.play import player as player_lib
from searchless.play import policy as policy_lib
from searchless.play import predictor as predictor_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]
GAMES = ROOT.parent / 'shared' / 'data' / 'games' / 'lichess_db_standard_rated_2021-10_first999.pgn'


def sample_boards(count: int, every: int = 7) -> list[chess.Board]:
  """Boards (with history) from real games: every `every`-th ply, game after game."""
  boards = []
  with open(GAMES) as f:
    while len(boards) < count:
      game = chess.pgn.read_game(f)
      if game is None:
        break
      board = game.board()
      for ply, move in enumerate(game.mainline_moves()):
        board.push(move)
        if ply % every == every - 1 and not board.is_game_over():
          boards.append(board.copy())
  return boards[:count]


class ReferenceLoop:
  """The reference's ActionValueEngine.play with wrap_predict_fn(batch_size=1), re-implemented."""

  def __init__(self, model_config, params, compute_dtype):
    self._params = params
    self._predict = jax.jit(network.build(model_config, compute_dtype).apply)  # [1, 79] -> [1, 79, 128]
    _, self._centres = values.uniform_buckets(model_config.output_size)

  def play(self, board: chess.Board) -> chess.Move:
    legal = policy_lib.ordered_legal_moves(board)
    state = tokenizer.tokenize(board.fen()).astype(np.int32)
    sequences = np.concatenate(
      [
        np.stack([state] * len(legal)),
        np.array([[moves_lib.MOVE_TO_ACTION[m.uci()]] for m in legal], np.int32),
        np.zeros((len(legal), 1), np.int32),
      ],
      axis=1,
    )
    outputs = [np.asarray(self._predict(self._params, None, row[None])) for row in sequences]  # Batch 1 each.
    log_probs = np.concatenate(outputs)[:, -1]
    win_probs = np.inner(np.exp(log_probs), self._centres)
    for i, move in enumerate(legal):
      board.push(move)
      if board.is_fivefold_repetition() or board.can_claim_threefold_repetition():
        win_probs[i] = 0.5
      board.pop()
    return legal[int(np.argmax(win_probs))]


def reference_engine(src: str, model_config, params):
  """The reference's own ActionValueEngine and transformer from a checkout at `src` (only for
  this measurement; float32 as the reference): the whole published inference path."""
  sys.path.insert(0, src)
  from searchless_chess.src import transformer  # pylint: disable=import-outside-toplevel
  from searchless_chess.src.engines import neural_engines  # pylint: disable=import-outside-toplevel

  config = transformer.TransformerConfig(
    vocab_size=moves_lib.NUM_ACTIONS,
    output_size=model_config.output_size,
    embedding_dim=model_config.embedding_dim,
    num_layers=model_config.num_layers,
    num_heads=model_config.num_heads,
    use_causal_mask=False,
    pos_encodings=transformer.PositionalEncodings.LEARNED,
    max_sequence_length=model_config.max_sequence_length,
    widening_factor=model_config.widening_factor,
    apply_qk_layernorm=model_config.apply_qk_layernorm,
    apply_post_ln=model_config.apply_post_ln,
  )
  predictor = transformer.build_transformer_predictor(config)
  predict_fn = neural_engines.wrap_predict_fn(predictor, params, batch_size=1)
  return neural_engines.ActionValueEngine(values.uniform_buckets(model_config.output_size)[1], predict_fn)


def matmul_rate(dtype) -> float:
  """FLOP/s of a square matmul chain on the default device (all its cores)."""
  n = 2048 if jax.default_backend() != 'cpu' else 1024
  a = jnp.ones((n, n), dtype) * 0.001
  mm = jax.jit(lambda x: x @ x)
  mm(a).block_until_ready()
  reps = 50 if jax.default_backend() != 'cpu' else 10
  start = time.perf_counter()
  for _ in range(reps):
    a = mm(a)
  a.block_until_ready()
  return 2 * n**3 * reps / (time.perf_counter() - start)


def time_moves(play, boards) -> list[float]:
  seconds = []
  for board in boards:
    start = time.perf_counter()
    play(board)
    seconds.append(time.perf_counter() - start)
  return seconds


def measure(name: str, dtype_name: str, boards, reference_boards, reference_src, rate) -> dict:
  experiment = configs.load(name)
  model_config = ModelConfig.from_config(experiment)
  params = jax.device_put(network.init_params(model_config))
  dtype = network.resolve_dtype(dtype_name)
  predictor = predictor_lib.Predictor(model_config, params, compute_dtype=dtype)
  predictor.warm_up(policy_lib.ActionValuePolicy.sequence_length)
  ours = player_lib.Player(policy_lib.make_policy('action_value', predictor))
  reference = ReferenceLoop(model_config, params, dtype)
  for board in boards[:3]:  # Warm both (the reference compiles its one batch-1 shape).
    assert ours.play(board) == reference.play(board)
  ours_s = time_moves(ours.play, boards)
  ref_s = time_moves(reference.play, reference_boards)
  agree = sum(ours.play(b) == reference.play(b) for b in reference_boards) / len(reference_boards)
  legal = np.mean([b.legal_moves.count() for b in boards])
  legal_ref = np.mean([b.legal_moves.count() for b in reference_boards])
  flops = transformer.flops_per_sequence(model_config, policy_lib.ActionValuePolicy.sequence_length)
  result = {
    'config': name,
    'dtype': str(dtype),
    'params': network.num_params(params),
    'boards': len(boards),
    'legal_moves': float(legal),
    'ours_median_ms': 1000 * statistics.median(ours_s),
    'ours_p95_ms': 1000 * float(np.percentile(ours_s, 95)),
    'ours_seq_per_s': legal * len(boards) / sum(ours_s),
    'ref_median_ms': 1000 * statistics.median(ref_s),
    'ref_p95_ms': 1000 * float(np.percentile(ref_s, 95)),
    'ref_seq_per_s': legal_ref * len(reference_boards) / sum(ref_s),
    'bound_ms': 1000 * legal * flops / rate,
    'same_moves': agree,
  }
  result['speedup'] = result['ref_seq_per_s'] and result['ours_seq_per_s'] / result['ref_seq_per_s']
  result['ours_over_bound'] = (sum(ours_s) / len(boards)) / (legal * flops / rate)
  if reference_src:
    engine = reference_engine(reference_src, model_config, params)
    for board in reference_boards[:2]:
      assert engine.play(board.copy()) == ours.play(board)
    code_s = time_moves(lambda b: engine.play(b), reference_boards)
    result['refcode_median_ms'] = 1000 * statistics.median(code_s)
    result['refcode_seq_per_s'] = legal_ref * len(reference_boards) / sum(code_s)
  return result


def main(argv=None):
  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--configs', nargs='+', default=['tiny', '9m'])
  p.add_argument('--dtype', default='float32', choices=('float32', 'bfloat16', 'auto'))
  p.add_argument('--boards', type=int, default=200, help='Boards timed for ours.')
  p.add_argument('--reference_boards', type=int, default=40, help='Boards timed for the (slow) reference loop.')
  p.add_argument('--reference_src', help='A searchless_chess checkout to time its own engine too.')
  args = p.parse_args(argv)
  boards = sample_boards(args.boards)
  reference_boards = boards[: args.reference_boards]
  rate = matmul_rate(network.resolve_dtype(args.dtype))
  print(
    f'device: {jax.devices()[0].device_kind} x{jax.device_count()}, matmul rate {rate / 1e9:.1f} GFLOP/s '
    f'({args.dtype}); {len(boards)} boards (reference: {len(reference_boards)}), '
    f'{np.mean([b.legal_moves.count() for b in boards]):.1f} legal moves on average'
  )
  for name in args.configs:
    r = measure(name, args.dtype, boards, reference_boards, args.reference_src, rate)
    print(
      f'{r["config"]:5s} ({r["params"] / 1e6:.2f}M params): ours median {r["ours_median_ms"]:.2f} ms/move, '
      f'p95 {r["ours_p95_ms"]:.2f} ms, {r["ours_seq_per_s"]:.0f} seq/s | reference loop median '
      f'{r["ref_median_ms"]:.1f} ms, p95 {r["ref_p95_ms"]:.1f} ms, {r["ref_seq_per_s"]:.0f} seq/s | '
      f'speedup {r["speedup"]:.1f}x | compute bound {r["bound_ms"]:.2f} ms/move, ours/bound '
      f'{r["ours_over_bound"]:.2f} | same moves {r["same_moves"]:.0%}'
    )
    if 'refcode_median_ms' in r:
      print(
        f'      reference code itself: median {r["refcode_median_ms"]:.1f} ms/move, '
        f'{r["refcode_seq_per_s"]:.0f} seq/s (ours {r["ours_seq_per_s"] / r["refcode_seq_per_s"]:.1f}x)'
      )


if __name__ == '__main__':
  main()
