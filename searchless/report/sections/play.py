"""The "Play it" section: commands to play this run's model (a GUI, Python, puzzles, a ladder of opponents)."""

import json
import shlex

from searchless.report.context import Context
from searchless.report.document import Code, Section, Text


def play_section(ctx: Context) -> Section:
  """How to play the checkpoint in ``train/``."""
  section = Section('Play it', 'play')
  train = str(ctx.paths.train)
  if not (ctx.paths.train / 'checkpoints').exists():
    return ctx.not_run(section, f'No checkpoint to play: `{ctx.paths.train / "checkpoints"}` is missing.', 'train')
  q = shlex.quote
  blocks = section.blocks
  blocks.append(Text('**In a chess GUI** (Arena, Cute Chess, BanksiaGUI, ...): add a UCI engine whose command is'))
  blocks.append(Code(f'searchless-uci --checkpoint {q(train)}'))
  blocks.append(Text('**From Python**, through UCI with python-chess, or directly with the player API:'))
  blocks.append(
    Code(
      'import chess, chess.engine\n\n'
      f'engine = chess.engine.SimpleEngine.popen_uci(["searchless-uci", "--checkpoint", {json.dumps(train)}])\n'
      'board = chess.Board()\n'
      'print(engine.play(board, chess.engine.Limit(time=1.0)).move)\n'
      'engine.quit()\n\n'
      'from searchless import Player\n'
      f'player = Player.load({json.dumps(train)})\n'
      'print(player.win_probabilities(board))  # {move: win probability}, best first\n'
      'print(player.play(board))',
      'python',
    )
  )
  blocks.append(Text('**Puzzles** (any Lichess puzzle CSV) and **a ladder of Stockfish opponents** for a sharper Elo:'))
  blocks.append(
    Code(
      f'searchless-puzzles --puzzles lichess_db_puzzle.csv --agent {q("checkpoint:" + train)} --num 1000 '
      f'--out {q(str(ctx.paths.run_dir / "puzzles-lichess"))}\n'
      f'searchless-tournament --agent {q("checkpoint:" + train + ",name=searchless")} '
      '--agent stockfish:nodes=1000,elo=1350 --agent stockfish:nodes=1000,elo=1500 --gauntlet '
      f'--make_openings 10 --out {q(str(ctx.paths.run_dir / "ladder"))}'
    )
  )
  return section
