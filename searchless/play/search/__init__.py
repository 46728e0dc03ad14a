"""Search on top of a learned model: PUCT/MCTS (AlphaZero) and alpha-beta (KnightCap).

* `evaluator`: what a search reads from a checkpoint's policy for a board
  (move priors, the model's value of each move, the board's value);
* `mcts`: PUCT Monte-Carlo tree search with batched leaf evaluation (virtual
  loss) and tree reuse;
* `alphabeta`: fixed-depth alpha-beta with the model's values at the leaves;
* `agent`: `SearchAgent`, the ``search:CHECKPOINT,...`` agent spec that puzzles,
  EPD suites, tournaments and the UCI engine play.
"""
