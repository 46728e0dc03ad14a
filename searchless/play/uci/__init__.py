"""A UCI engine over a checkpoint: the searchless player behind any chess GUI.

``searchless-uci --checkpoint DIR`` (`searchless.commands.uci`, which calls
`run`) speaks UCI on stdin/stdout (one line in, lines out, flushed one by one;
logs and anything JAX or a C library prints go to stderr). ``DIR`` is anything
`searchless.model.loading.load_model` reads: our workdir / step dir, a published-layout
model dir, or ``pretrained`` (the model shipped in the package). The modules:
`protocol` (parsing and formatting), `engine` (`UciEngine`, the protocol
state), `options` (what ``uci`` declares, what ``setoption`` records),
`loader` (the model, its batch shapes), `search` (one ``go``), `process`
(CPUs, stdout) and `serve` (`run`: the engine on stdin/stdout).

Commands: ``uci``, ``isready``, ``setoption name N [value V]``, ``ucinewgame``,
``position startpos|fen FEN [moves ...]``, ``go [wtime|btime|winc|binc|
movestogo|movetime|depth|nodes|mate N] [infinite] [ponder] [searchmoves ...]``,
``stop``, ``ponderhit``, ``debug on|off``, ``register`` (ignored), ``d`` (the
board, for humans) and ``quit`` (end of input counts as ``quit``).

* The model is loaded when the engine starts, before it reads ``uci``: a
  checkpoint that cannot be loaded, whatever the reason, ends the process
  there with one line on stderr (naming it and the reason) and status 2, so no
  move is ever played without a model. Its batch shapes compile on the first
  ``isready`` or ``go`` (`loader`): one shape is compiled then (the start position's move bucket: the shape the
  checkpoint's probe ran in when its files were first loaded, so nothing to compile after that load and a load
  from the persistent cache later) and the others on a background thread (boards of up to 48 moves first;
  with ``Search``, ``isready`` compiles that one too, so that a search's root seldom compiles on its clock),
  while ``go`` runs on the shapes already
  compiled (padding a little more); no background compile starts while a
  ``go`` runs (`searchless.play.background_compile.held`); a ``go`` with a time limit counts its time
  from the ``go``, loading included. Compiled shapes are kept on disk for the
  next start: JAX's persistent cache in ``--compilation_cache DIR``, by default
  the folder `searchless.play.compilation_cache` names (``~/.cache/searchless/xla``
  unless ``$SEARCHLESS_COMPILATION_CACHE`` or ``$JAX_COMPILATION_CACHE_DIR`` says
  otherwise); ``''`` turns it off. The times to the first
  move, cold and warm, are in benchmarks/RESULTS.md ("The UCI engine's first
  move").
* Without ``Search`` (below), ``go`` answers at once whatever its limits (a
  searchless policy has no search to extend): one ``info depth 1 seldepth 1 multipv 1 score cp C nodes
  N nps R time T pv M`` line per ``MultiPV``, then ``bestmove M``. N counts the
  moves the model scored; C is the move's win probability for the mover, 0.5 if
  it allows a repetition claim (``RepetitionDraws``), as centipawns
  (`values.win_probability_to_centipawns`, clipped to +-`CP_CLIP`). Line 1 is
  the chosen move, the others the next best by that value. With
  ``UCI_ShowWDL`` each line has ``wdl W D L`` after the score, per mille, from
  the move's value distribution over buckets (`search.wdl`). A
  behavioral-cloning policy predicts moves, not values: its info lines have no
  score. ``go infinite`` / ``go ponder`` hold ``bestmove`` back until ``stop``
  (or ``ponderhit`` for ponder); the search runs on a worker thread, so
  ``isready``, ``stop`` and ``quit`` are read meanwhile. ``searchmoves``
  restricts the choice (illegal ones are reported; none legal: all moves). No
  legal move: ``bestmove 0000`` after an ``info string``.
* ``go`` before any ``position`` plays from the start position; the move list
  of ``position`` is kept as the board's move stack (repetition rules).
* Malformed input (unknown command, bad option value, bad ``go`` argument)
  answers ``info string error: ...`` and changes nothing. A rejected
  ``position`` (bad FEN, illegal position, illegal move) leaves no position: the
  next ``go`` answers ``info string error: no position to search ...`` and
  ``bestmove 0000``, never a move of an earlier board, until a good
  ``position`` or ``ucinewgame``. As UCI asks, unknown leading tokens are
  skipped (``joho debug on`` turns debug on).

Options (``setoption``):

* ``Policy`` (combo): reloads the checkpoint with that policy; one the model
  does not fit (e.g. behavioral_cloning on a value model) is an error and the
  old policy stays. Before the first load it is only recorded (checked then).
* ``Temperature`` (string, a float >= 0, default 0 = argmax): softmax sampling
  while the game is in its first ``TemperatureFullMoves`` (spin, default 5)
  full moves; argmax afterwards (`player.PlayOptions`).
* ``Decisive`` (combo rule/stockfish/off) and ``RepetitionDraws`` (check): the
  player's decisive-win and repetition rules.
* ``Threads`` (spin 1-1024, default all available CPUs or ``--threads``; more
  than the CPUs this process may use is clamped to them, with an ``info
  string``): CPU threads for XLA. It acts
  when the model is loaded, at start (``--threads``): the process is restricted
  to that many CPUs while JAX's backend starts, so XLA sizes its CPU thread
  pools to it, and the affinity is restored afterwards (Linux; elsewhere a
  no-op). Once the backend is up it cannot change: ``setoption`` values are
  accepted and ignored (an ``info string`` says so).
* ``Ponder`` (check): accepted for GUIs that manage it; pondering itself is
  ``go ponder`` above.
* ``MultiPV`` (spin 1-500, default 1): info lines per ``go``, see above.
* ``UCI_ShowWDL`` (check): ``wdl`` in the info lines, see above.
* ``UCI_Chess960`` (check): the next ``position`` is Chess960: X-FEN or
  Shredder-FEN castling rights, castling moves in and out as king-takes-rook
  (``e1h1``). The model, which learned standard chess, reads castling rights
  as KQkq and castling as the king's move to the g- or c-file
  (`policy.model_fen`, `policy.model_move`).
* ``Search`` (combo none/mcts/alphabeta, default none or ``--search``): with
  ``mcts`` or ``alphabeta`` each ``go`` searches over the policy
  (`searchless.play.search`) instead of playing the model's move: ``go nodes
  N`` gives MCTS N simulations and alpha-beta N nodes visited, ``go depth D``
  alpha-beta D plies and MCTS a depth (it stops after the batch of simulations
  that first reaches D plies); ``movetime``
  or the clock (``wtime``/``btime``/``winc``/``binc``/``movestogo``, its share
  `search.budget`) gives the time, less ``Move Overhead``; a ``go`` without
  limits uses ``SearchNodes`` (spin, default 256) or ``SearchDepth`` (spin
  1-64, default 2); ``infinite`` and ``ponder`` search until ``stop`` /
  ``ponderhit``, and ``stop`` ends any search with its best move so far. The
  info lines then carry the search's depth, nodes (simulations, or alpha-beta
  nodes), its values (``score mate N`` for a mate it proved) and the
  principal line; MultiPV ranks root moves by visits. MCTS keeps its tree
  between the moves of one game (``ucinewgame`` drops it).
* ``Hash`` (spin) and ``SyzygyPath`` (string): accepted, range-checked and
  recorded so that GUIs and lichess-bot can send their defaults; no-ops, as
  the model keeps no table and reads no tablebases. ``Move Overhead`` (spin,
  ms) is kept off a search's time (a no-op without search).

``debug on`` adds ``info string`` lines (load time, the top moves' scores).

>>> lines = []
>>> engine = UciEngine(lambda policy, options: None, lines.append, checkpoint_name='demo')
>>> engine.handle('uci'), lines[-1]
(True, 'uciok')
"""

from searchless.play.uci.engine import SEARCHES
from searchless.play.uci.engine import UciEngine
from searchless.play.uci.process import available_cpus
from searchless.play.uci.process import limit_cpu_threads
from searchless.play.uci.protocol import CP_CLIP
from searchless.play.uci.protocol import GoRequest
from searchless.play.uci.protocol import NULL_MOVE
from searchless.play.uci.protocol import UciError
from searchless.play.uci.protocol import parse_go
from searchless.play.uci.protocol import parse_position
from searchless.play.uci.serve import checkpoint_policy
from searchless.play.uci.serve import run

__all__ = [
  'CP_CLIP',
  'GoRequest',
  'NULL_MOVE',
  'SEARCHES',
  'UciEngine',
  'UciError',
  'available_cpus',
  'checkpoint_policy',
  'limit_cpu_threads',
  'parse_go',
  'parse_position',
  'run',
]
