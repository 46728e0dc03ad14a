"""A UCI 'engine' that answers every search of the start position with a fixed MultiPV script.

The script holds what a real engine's output can hold and a parser can get
wrong: every line at depth 1, a second iteration stopped part-way (so only some
lines are new), bound scores, a mate score, a line that changes its first move,
a ``currmove`` line with neither score nor PV, and ``info string`` lines.
"""

import uci_loop

MOVES = [
  'a2a3',
  'a2a4',
  'b2b3',
  'b2b4',
  'c2c3',
  'c2c4',
  'd2d3',
  'd2d4',
  'e2e3',
  'e2e4',
  'f2f3',
  'f2f4',
  'g2g3',
  'g2g4',
  'h2h3',
  'h2h4',
  'b1a3',
  'b1c3',
  'g1f3',
  'g1h3',
]
SCRIPT = ['info string NNUE evaluation using nn.nnue enabled']
SCRIPT += [
  f'info depth 1 seldepth 1 multipv {i + 1} score cp {40 - 5 * i} nodes 20 pv {move} e7e5'
  for i, move in enumerate(MOVES)
]
# Depth 2 re-ranks every line: d2d4 (line 8 before) mates in 7, e2e4 is first on a lower bound, g1f3 second
# on an upper bound, and the rest keep their order.
DEPTH_2 = ['d2d4', 'e2e4', 'g1f3'] + [m for m in MOVES if m not in ('d2d4', 'e2e4', 'g1f3')]
SCORES_2 = ['mate 7', 'cp 35 lowerbound', 'cp 31 upperbound'] + [f'cp {30 - 3 * i}' for i in range(17)]
SCRIPT += ['info depth 2 currmove e2e4 currmovenumber 1']
SCRIPT += [
  f'info depth 2 seldepth 3 multipv {i + 1} score {score} nodes 90 pv {move} e7e5'
  for i, (move, score) in enumerate(zip(DEPTH_2, SCORES_2))
]
SCRIPT += [
  'info depth 2 seldepth 3 multipv 5 score cp -7 nodes 100',  # A score with no PV: line 5 keeps its move.
  'info string a stray remark with score cp 999 pv a2a3',
]

uci_loop.serve('MultiPVScript 1.0', lambda go: '\n'.join(SCRIPT) + '\nbestmove e2e4 ponder e7e5')
