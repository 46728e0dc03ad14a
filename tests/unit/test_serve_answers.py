"""A position's answer (`searchless.play.serve.service.describe`) from a policy's analysis, without a model; a
position whose values are not finite fails alone."""

import asyncio

import chess
import numpy as np
import pytest

from searchless.play import policy as policy_lib
from searchless.play.serve import metrics
from searchless.play.serve import service


def _analysis(board: chess.Board, scores: list[float]) -> policy_lib.Analysis:
  moves = tuple(policy_lib.ordered_legal_moves(board))
  wins = np.array(scores, np.float32)
  return policy_lib.Analysis(board.fen(), moves, wins, np.zeros((len(moves), 1)), wins, float(np.max(wins)))


def test_every_move_best_first_with_its_uci_san_and_win_rounded():
  board = chess.Board('6k1/5ppp/8/8/8/8/5PPP/R5K1 w - - 0 1')  # Ra8# among the rook's and king's moves.
  moves = policy_lib.ordered_legal_moves(board)
  scores = [0.25] * len(moves)
  scores[moves.index(chess.Move.from_uci('a1a8'))] = 0.9999996
  answer = service.describe(board, _analysis(board, scores))
  assert answer['best'] == {'uci': 'a1a8', 'san': 'Ra8#', 'win': 1.0}
  assert [m['uci'] for m in answer['moves'][1:]] == [m.uci() for m in moves if m.uci() != 'a1a8']  # Stable order.
  assert {m['win'] for m in answer['moves'][1:]} == {0.25}
  head = (answer['fen'], answer['side_to_move'], answer['check'], answer['outcome'])
  assert head == (board.fen(), 'white', False, None)
  assert answer['value'] == pytest.approx(0.9999996, abs=1e-6)


@pytest.mark.parametrize('bad', [float('nan'), float('inf')])
def test_a_model_that_gives_non_finite_values_is_a_fault_not_a_null(bad):
  board = chess.Board()
  scores = [0.5] * 20
  scores[3] = bad
  with pytest.raises(service.ModelFault, match='the model gave non-finite values on rnbqkbnr/'):
    service.describe(board, _analysis(board, scores))


class _NanOnKiwipete:
  """A policy whose values are NaN on one position (a fault of a model that a real one gives no test of)."""

  kind = 'action_value'
  bad = 'r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1'

  def analyse_many(self, boards, legal):
    return [
      _analysis(b, [float('nan') if b.fen() == self.bad else 0.5] * len(moves)) for b, moves in zip(boards, legal)
    ]


def test_a_position_with_non_finite_values_fails_alone_in_its_batch():
  boards = [chess.Board(), chess.Board(_NanOnKiwipete.bad), chess.Board('7k/6Q1/6K1/8/8/8/8/8 b - - 0 1')]

  async def main():
    served = service.Service(_NanOnKiwipete(), name='nan', metrics=metrics.Metrics(), max_batch=8, max_queue=8)
    served.start()
    try:
      return await served.analyse(boards)
    finally:
      await served.stop()

  start, bad, mated = asyncio.run(main())
  assert len(start['moves']) == 20 and start['value'] == 0.5 and mated['outcome']['result'] == '1-0'
  assert isinstance(bad, service.ModelFault) and str(bad).startswith(
    f'the model gave non-finite values on {_NanOnKiwipete.bad}'
  )
