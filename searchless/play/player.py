"""The searchless player: a checkpoint's policy plus the rules that turn it into moves.

This is the Python API for querying and playing a trained model:

>>> import chess
>>> player = Player.load('pretrained-transformer')  # A shipped model's name, or a run's folder ('runs/demo/train').
>>> board = chess.Board()
>>> values = player.win_probabilities(board)  # {UCI move: the mover's win probability after it}, best first.
>>> len(values), all(0 <= p <= 1 for p in values.values())
(20, True)
>>> player.play(board) in board.legal_moves  # The model's move: which one, a retrain may change.
True

How a move is chosen from the policy's scores (`PlayOptions`):

* argmax, or softmax sampling at `temperature` while the game is in its first
  `temperature_full_moves` full moves (the paper: 5), argmax afterwards;
* a move that lets the opponent claim a threefold repetition (or makes a
  fivefold one) is valued at 0.5, as the reference engines do (value policies);
* decisive-win rule: when two or more moves are above `decisive_threshold`
  (the model cannot tell winning moves apart and may shuffle forever), pick
  among them by `decisive`: ``rule`` (engine-free: mate, then promotion,
  capture, pawn move, check, never a move that stalemates or draws), or
  ``stockfish`` (the paper: ask Stockfish which of those moves to play), or
  ``off``.
"""

import dataclasses
from collections.abc import Sequence

import chess
import chess.engine
import jax.numpy as jnp
import numpy as np

from searchless.core import legality
from searchless.engines import launch
from searchless.model import loading
from searchless.model import network
from searchless.play import background_compile
from searchless.play import compilation_cache
from searchless.play import policy as policy_lib
from searchless.play import predictor as predictor_lib
from searchless.plumbing import errors

DECISIVE_RULES = ('rule', 'stockfish', 'off')
_PIECE_VALUES = {None: 0, chess.PAWN: 1, chess.KNIGHT: 3, chess.BISHOP: 3, chess.ROOK: 5, chess.QUEEN: 9, chess.KING: 0}


@dataclasses.dataclass(frozen=True)
class PlayOptions:
  """How the player turns scores into a move."""

  temperature: float | None = None  # Softmax temperature; None or 0 plays the argmax.
  temperature_full_moves: int | None = 5  # Sample only while fullmove_number <= this; None: always.
  repetition_draws: bool = True  # Value moves that allow a threefold claim at 0.5 (value policies).
  decisive: str = 'rule'  # Among several near-certain wins: 'rule', 'stockfish' or 'off'.
  decisive_threshold: float = 0.99  # Win probability above which moves count as decisive.
  stockfish_path: str | None = None  # For decisive='stockfish' (default: find_stockfish()).
  stockfish_limit: str = 'time=0.05'  # Search limit of that Stockfish call.
  seed: int | None = None  # Sampling seed (None: fresh entropy).

  def __post_init__(self):
    if self.decisive not in DECISIVE_RULES:
      raise errors.BadInput(f'decisive must be one of {DECISIVE_RULES}, got {self.decisive!r}')
    if self.temperature is not None and self.temperature < 0:
      raise errors.BadInput(f'temperature must be >= 0, got {self.temperature}')


def _progress_key(board: chess.Board, move: chess.Move) -> tuple:
  """Larger is better for converting a won position."""
  captured = board.piece_type_at(move.to_square)
  if board.is_en_passant(move):
    captured = chess.PAWN
  board.push(move)
  try:
    mate = board.is_checkmate()
    drawn = (
      board.is_stalemate()
      or board.is_insufficient_material()
      or board.can_claim_draw()
      or board.is_fivefold_repetition()
    )
    check = board.is_check()
  finally:
    board.pop()
  pawn = board.piece_type_at(move.from_square) == chess.PAWN
  return (mate, not drawn, _PIECE_VALUES[move.promotion], _PIECE_VALUES[captured], pawn, check)


def load_policy(
  path: str, *, policy: str | None = None, compute_dtype: str = 'auto', ema: bool = True
) -> policy_lib.Policy:
  """A checkpoint (ours, the published layout, or a shipped model's name: ``'pretrained'``) as a policy.

  `policy` defaults to the checkpoint's experiment config (published
  checkpoints: action_value); one that contradicts that config is a
  ValueError. `compute_dtype`: float32, bfloat16 or auto. Turns on the persistent compilation cache
  first (`compilation_cache.enable`), so a new process reuses the shapes an earlier one compiled. Parameters
  that do not fit their config are a ValueError (`loading.check_fit`: the first load of a model's files runs
  its probe, here through the predictor, in the shape the start position's move uses).

  >>> import chess
  >>> board = chess.Board()
  >>> analysis = load_policy('pretrained-transformer', compute_dtype='float32').analyse(board)
  >>> len(analysis.moves), analysis.best_move() in board.legal_moves
  (20, True)
  """
  compilation_cache.enable()
  model_config, params, experiment = loading.load_model(path, ema=ema, check=False)
  trained = loading.trained_policy(path, experiment)  # Published checkpoints: by their name, if any.
  if policy is not None and trained is not None and policy != trained:
    raise errors.BadInput(
      f'{path} was trained for the {trained} policy; the {policy} policy would read outputs '
      'it never learned (leave the policy unset)'
    )
  kind = policy or trained or policy_lib.ACTION_VALUE
  dtype = network.resolve_dtype(compute_dtype)
  predictor = predictor_lib.predictor_for(model_config, params, compute_dtype=dtype)
  # The probe through the predictor (in float32, as it was saved), in the start position's shape: the first
  # move needs no compile of its own.
  with background_compile.tracing():  # Its traces take their turn with the background compiles of other predictors.
    loading.check_fit(path, model_config, params, ema=ema, probe=predictor.probe if dtype == jnp.float32 else None)
  try:
    return policy_lib.make_policy(kind, predictor)
  except errors.BadInput as error:
    raise errors.BadInput(f'{path}: {error}') from None


class Player:
  """A searchless policy that plays moves; satisfies the tournament `Agent` protocol."""

  def __init__(self, policy: policy_lib.Policy, options: PlayOptions = PlayOptions(), name: str = 'searchless'):
    self.policy = policy
    self.options = options
    self.name = name
    self._rng = np.random.default_rng(options.seed)
    self._stockfish: chess.engine.SimpleEngine | None = None

  @classmethod
  def load(
    cls,
    path: str,
    *,
    policy: str | None = None,
    compute_dtype: str = 'auto',
    ema: bool = True,
    options: PlayOptions = PlayOptions(),
    name: str | None = None,
  ) -> 'Player':
    """Loads a checkpoint (ours, or the published layout) as a player.

    `policy` defaults to the checkpoint's experiment config (published
    checkpoints: action_value). `compute_dtype`: float32, bfloat16 or auto.
    """
    loaded = load_policy(path, policy=policy, compute_dtype=compute_dtype, ema=ema)
    return cls(loaded, options, name or f'searchless-{loaded.kind}')

  def analyse(self, board: chess.Board) -> policy_lib.Analysis:
    """The policy's raw analysis of `board` (no play rules applied); an illegal position is a ValueError."""
    if problems := legality.problems(board):
      raise errors.BadInput(f'illegal position {board.fen()!r}: {problems}')
    return self.policy.analyse(board)

  def win_probabilities(self, board: chess.Board) -> dict[str, float]:
    """{UCI move: the mover's win probability after it}, best first (value policies);
    move probabilities for a behavioral-cloning policy."""
    return {m.uci(): s for m, s in self.analyse(board).ranked()}

  def adjusted_scores(self, board: chess.Board, analysis: policy_lib.Analysis) -> np.ndarray:
    """Scores after the repetition rule: [M]."""
    scores = np.array(analysis.scores, np.float64)
    if self.options.repetition_draws and analysis.win_probs is not None:
      for i, move in enumerate(analysis.moves):
        board.push(move)
        # A position can only recur since the last capture or pawn move: a claim
        # (now, or after the opponent's reply) needs 7 reversible plies at least.
        if board.halfmove_clock >= 7 and (board.is_fivefold_repetition() or board.can_claim_threefold_repetition()):
          scores[i] = 0.5
        board.pop()
    return scores

  def play(self, board: chess.Board) -> chess.Move:
    move, _ = self.choose(board)
    return move

  def choose(
    self, board: chess.Board, root_moves: Sequence[chess.Move] | None = None
  ) -> tuple[chess.Move, policy_lib.Analysis]:
    """The move to play (among `root_moves` if given) and the analysis it came from."""
    analysis = self.analyse(board)
    if root_moves:
      analysis = analysis.restrict(root_moves)
      if not analysis.moves:
        raise errors.BadInput(f'none of {[m.uci() for m in root_moves]} is legal in {board.fen()}')
    if not analysis.moves:
      raise errors.BadInput(f'no legal moves in {board.fen()}')
    scores = self.adjusted_scores(board, analysis)
    options = self.options
    if options.temperature and (
      options.temperature_full_moves is None or board.fullmove_number <= options.temperature_full_moves
    ):
      logits = (analysis.log_probs if analysis.win_probs is None else scores) / options.temperature
      probs = np.exp(logits - logits.max())
      return analysis.moves[self._rng.choice(len(probs), p=probs / probs.sum())], analysis
    if analysis.win_probs is not None and options.decisive != 'off':
      order = np.argsort(-scores, kind='stable')
      decisive = [analysis.moves[i] for i in order if scores[i] > options.decisive_threshold]
      if len(decisive) > 1:
        return self._convert(board, decisive), analysis
    return analysis.moves[int(np.argmax(scores))], analysis

  def _convert(self, board: chess.Board, candidates: list[chess.Move]) -> chess.Move:
    """One of several winning moves that makes progress (candidates best-scored first)."""
    if self.options.decisive == 'stockfish':
      if self._stockfish is None:
        self._stockfish = launch.open_engine(self.options.stockfish_path)
      limit = launch.SearchLimit.parse(self.options.stockfish_limit).to_chess()
      move = self._stockfish.play(board, limit, root_moves=candidates).move
      return move if move is not None else candidates[0]
    return max(candidates, key=lambda m: _progress_key(board, m))  # max keeps the first of equals.

  def close(self) -> None:
    """Stops the policy's background compiling and the decisive rule's Stockfish, if any."""
    close = getattr(self.policy, 'close', None)
    if close is not None:
      close()
    if self._stockfish is not None:
      self._stockfish.quit()
      self._stockfish = None
