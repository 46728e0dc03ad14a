"""The player's rules: argmax, temperature, repetition, decisive wins; the Python API on checkpoints."""

import chess
import numpy as np
import pytest

from searchless.play import player as player_lib
from searchless.play import policy as policy_lib


class ScriptedPolicy:
  """Scores chosen by the test (the rules are what is under test, not the model)."""

  kind = 'action_value'

  def __init__(self, scores: dict[str, float], default: float = 0.1, value_policy: bool = True):
    self.scores, self.default, self.value_policy = scores, default, value_policy

  def analyse(self, board):
    ms = tuple(policy_lib.ordered_legal_moves(board))
    scores = np.array([self.scores.get(m.uci(), self.default) for m in ms])
    if self.value_policy:
      return policy_lib.Analysis(board.fen(), ms, scores, np.zeros((len(ms), 4)), scores, float(scores.max()))
    log_probs = np.log(scores / scores.sum())
    return policy_lib.Analysis(board.fen(), ms, np.exp(log_probs), log_probs, None, None)


def test_argmax_plays_the_best_score():
  player = player_lib.Player(ScriptedPolicy({'g1f3': 0.6, 'e2e4': 0.55}))
  assert player.play(chess.Board()) == chess.Move.from_uci('g1f3')


def test_temperature_samples_reproducibly_early_and_argmax_later():
  scores = {m.uci(): 0.5 for m in chess.Board().legal_moves}
  scores['e2e4'] = 0.51
  options = player_lib.PlayOptions(temperature=0.05, seed=7)
  played = [player_lib.Player(ScriptedPolicy(scores), options).play(chess.Board()) for _ in range(2)]
  assert played[0] == played[1]  # Same seed, same move.
  many = {
    player_lib.Player(ScriptedPolicy(scores), player_lib.PlayOptions(temperature=0.05, seed=s)).play(chess.Board())
    for s in range(20)
  }
  assert len(many) > 5  # Near-equal scores: sampling spreads.
  late = chess.Board('rnbqkbnr/pppppppp/8/8/8/8/PPPPPPPP/RNBQKBNR w KQkq - 0 6')
  assert {
    player_lib.Player(ScriptedPolicy(scores), player_lib.PlayOptions(temperature=0.05, seed=s)).play(late)
    for s in range(5)
  } == {chess.Move.from_uci('e2e4')}
  always = [player_lib.PlayOptions(temperature=0.05, temperature_full_moves=None, seed=s) for s in range(20)]
  assert len({player_lib.Player(ScriptedPolicy(scores), options).play(late) for options in always}) > 5


def test_temperature_of_a_cloning_policy_samples_from_its_probabilities():
  scores = {'e2e4': 1000.0}  # ~all the probability mass.
  picks = {
    player_lib.Player(
      ScriptedPolicy(scores, default=1e-3, value_policy=False), player_lib.PlayOptions(temperature=1.0, seed=s)
    ).play(chess.Board())
    for s in range(10)
  }
  assert picks == {chess.Move.from_uci('e2e4')}


def test_a_move_allowing_a_threefold_claim_is_valued_at_one_half():
  board = chess.Board()
  for uci in ('g1f3', 'g8f6', 'f3g1', 'f6g8', 'g1f3', 'g8f6', 'f3g1'):
    board.push_uci(uci)
  # Black's f6g8 now repeats the start position a third time.
  scores = {'f6g8': 0.7, 'e7e5': 0.6}
  assert player_lib.Player(ScriptedPolicy(scores)).play(board) == chess.Move.from_uci('e7e5')
  no_rule = player_lib.Player(ScriptedPolicy(scores), player_lib.PlayOptions(repetition_draws=False))
  assert no_rule.play(board) == chess.Move.from_uci('f6g8')
  # When the repetition is the best the position offers (all else below 0.5), it is played.
  assert player_lib.Player(ScriptedPolicy({'f6g8': 0.7}, default=0.2)).play(board) == chess.Move.from_uci('f6g8')


WON = chess.Board('6k1/5ppp/8/8/8/8/1n3PPP/R5K1 w - - 0 1')  # Ra8 mates (back rank).


def test_decisive_rule_prefers_mate_then_progress():
  assert WON.is_legal(chess.Move.from_uci('a1a8'))
  board = WON.copy()
  board.push_uci('a1a8')
  assert board.is_checkmate()
  # Several moves look won to the model; the best-scored is a quiet king move.
  scores = {'g1f1': 0.999, 'a1a8': 0.995, 'a1a2': 0.993}
  assert player_lib.Player(ScriptedPolicy(scores)).play(WON) == chess.Move.from_uci('a1a8')
  off = player_lib.Player(ScriptedPolicy(scores), player_lib.PlayOptions(decisive='off'))
  assert off.play(WON) == chess.Move.from_uci('g1f1')
  # Without a mate: a capture beats a quiet move.
  capture = chess.Board('6k1/5ppp/8/8/8/8/1q3PPP/1R4K1 w - - 0 1')
  scores = {'g1f1': 0.999, 'b1b2': 0.995}
  assert player_lib.Player(ScriptedPolicy(scores)).play(capture) == chess.Move.from_uci('b1b2')
  # One decisive move only: plain argmax.
  assert player_lib.Player(ScriptedPolicy({'g1f1': 0.999, 'b1b2': 0.98})).play(capture) == chess.Move.from_uci('g1f1')


def test_decisive_rule_never_stalemates():
  board = chess.Board('k7/2Q5/1K6/8/8/8/8/8 w - - 0 1')

  def after(move):
    b = board.copy()
    b.push(move)
    return b

  stalemating = [m for m in board.legal_moves if after(m).is_stalemate()]
  quiet = [m for m in board.legal_moves if not after(m).is_game_over()]
  assert chess.Move.from_uci('c7d6') in stalemating and quiet
  scores = {'c7d6': 0.999, quiet[0].uci(): 0.995}
  assert player_lib.Player(ScriptedPolicy(scores)).play(board) == quiet[0]


@pytest.mark.engine
def test_decisive_stockfish_picks_among_the_winning_moves(stockfish):
  scores = {'g1f1': 0.999, 'a1a8': 0.995, 'a1a2': 0.993}
  options = player_lib.PlayOptions(decisive='stockfish', stockfish_path=stockfish, stockfish_limit='nodes=2000')
  player = player_lib.Player(ScriptedPolicy(scores), options)
  try:
    assert player.play(WON) == chess.Move.from_uci('a1a8')
  finally:
    player.close()


def test_options_are_checked():
  with pytest.raises(ValueError, match='decisive must be one of'):
    player_lib.PlayOptions(decisive='resign')
  with pytest.raises(ValueError, match='temperature must be >= 0'):
    player_lib.PlayOptions(temperature=-1)


def test_python_api_on_the_published_checkpoint(compat):
  player = player_lib.Player.load(str(compat / 'reference_local_checkpoint'))
  assert player.name == 'searchless-action_value' and player.policy.kind == 'action_value'
  board = chess.Board()
  probs = player.win_probabilities(board)
  assert set(probs) == {m.uci() for m in board.legal_moves}
  assert list(probs.values()) == sorted(probs.values(), reverse=True)
  assert all(0.0 <= p <= 1.0 for p in probs.values())
  move = player.play(board)
  assert move.uci() == next(iter(probs)) and board == chess.Board()  # Board unchanged.


def test_a_policy_that_contradicts_the_checkpoint_is_refused(model_checkpoint, compat):
  player = player_lib.Player.load(str(model_checkpoint), policy='action_value', name='av')
  assert player.name == 'av' and player.policy.kind == 'action_value'
  for policy in ('state_value', 'behavioral_cloning'):
    with pytest.raises(
      ValueError, match=f'^{model_checkpoint} was trained for the action_value policy; the {policy} policy'
    ):
      player_lib.Player.load(str(model_checkpoint), policy=policy)
  # A published checkpoint records no policy: the reference evaluator runs it as any value policy.
  published = player_lib.Player.load(str(compat / 'reference_local_checkpoint'), policy='state_value')
  assert published.policy.kind == 'state_value'
  with pytest.raises(ValueError, match='does not fit'):
    player_lib.Player.load(str(compat / 'reference_local_checkpoint'), policy='behavioral_cloning')


@pytest.mark.parametrize(
  'fen,problem',
  [('4k3/8/8/8/8/8/8/K3K3 w - - 0 1', 'too many kings'), ('4k3/8/8/8/8/8/4Q3/4K3 w - - 0 1', 'opposite check')],
)
def test_an_illegal_board_is_refused_with_its_reason(fen, problem):
  player = player_lib.Player(ScriptedPolicy({}))
  for call in (player.play, player.analyse):
    with pytest.raises(ValueError, match=f"illegal position '{fen}': {problem}"):
      call(chess.Board(fen))
