"""A UCI 'engine' that completes the handshake, then answers every search with garbage.

Used to provoke the one fault a real Stockfish will not produce: well-formed
protocol with nonsense content (no score, an illegal best move).
"""

import sys

import uci_loop

# 'noscore': no score at all; 'banana': a score that is no score; 'badmove': a best move that is no move.
MODE = sys.argv[1] if len(sys.argv) > 1 else 'noscore'


def _answer(go: str) -> str:
  move = go.split('searchmoves ')[1] if 'searchmoves' in go else 'a2a3'
  if MODE == 'noscore':
    return f'info depth 1 nodes 5\nbestmove {move}'
  if MODE == 'banana':
    return f'info depth 1 score banana 17 nodes -3\nbestmove {move}'
  return 'info depth 1 score cp 20\nbestmove z9z9'


uci_loop.serve('GarbageEngine 1.0', _answer)
