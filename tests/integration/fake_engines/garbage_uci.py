"""A UCI 'engine' that completes the handshake, then answers every search with garbage.

Used to provoke the one fault a real Stockfish will not produce: well-formed
protocol with nonsense content (no score, an illegal best move).
"""

import sys

# 'noscore': no score at all; 'banana': a score that is no score; 'badmove': a best move that is no move.
MODE = sys.argv[1] if len(sys.argv) > 1 else 'noscore'

for line in sys.stdin:
  command = line.strip()
  if command == 'uci':
    print('id name GarbageEngine 1.0\noption name MultiPV type spin default 1 min 1 max 500\nuciok', flush=True)
  elif command == 'isready':
    print('readyok', flush=True)
  elif command.startswith('go'):
    move = command.split('searchmoves ')[1] if 'searchmoves' in command else 'a2a3'
    if MODE == 'noscore':
      print(f'info depth 1 nodes 5\nbestmove {move}', flush=True)
    elif MODE == 'banana':
      print(f'info depth 1 score banana 17 nodes -3\nbestmove {move}', flush=True)
    else:
      print('info depth 1 score cp 20\nbestmove z9z9', flush=True)
  elif command == 'quit':
    break
