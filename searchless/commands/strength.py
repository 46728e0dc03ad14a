r"""``searchless-strength``: how strongly a model plays, and whether one plays better than another.

    searchless-strength measure --checkpoint pretrained --out runs/strength/pretrained \
        --puzzles lichess_db_puzzle.csv --sts sts01_undermine.epd --ladder 1350,1500,1800 --games 20
    searchless-strength compare runs/strength/pretrained runs/strength/mine

``measure`` runs the parts it is given (`searchless.evaluation.strength`: held-out boards,
puzzles by rating band with Wilson intervals, an EPD suite such as STS, a ladder of Stockfish
levels with BayesElo) into an evaluation folder and prints its table; rerunning resumes.
``compare`` pairs two evaluation folders board by board, puzzle by puzzle and game by game and
prints new - base with its 95% interval (``--json``: one JSON object).
"""

import argparse
from collections.abc import Sequence
import json
import pathlib
from typing import Any

from searchless.evaluation import strength
from searchless.plumbing import cli
from searchless.plumbing import errors


def lines(result: dict[str, Any]) -> list[str]:
  """`strength.compare`'s result, as the command prints it.

  >>> from searchless.evaluation import paired
  >>> print('\\n'.join(lines({'puzzles': paired.Puzzles(1500, 418, 409, 31, 40)})))
  puzzles: 1500 in both; base 418, new 409; new - base -0.0060 ± 0.0110 (95%); new alone 31, base alone 40 (z -1.07)
  """
  out = []
  if 'heldout' in result:
    n = max(d.n for d in result['heldout'].values())
    out.append(f'held-out boards: {n} in both; new - base (95%):')
    out += [
      f'  {name:16s} {d.mean:+.4f} ± {d.half_width_95:.4f}  ({d.n} boards)' for name, d in result['heldout'].items()
    ]
  if 'puzzles' in result:
    p = result['puzzles']
    d = p.difference
    out.append(
      f'puzzles: {p.n} in both; base {p.base_solved}, new {p.new_solved}; new - base {d.mean:+.4f} ± '
      f'{d.half_width_95:.4f} (95%); new alone {p.new_only}, base alone {p.base_only} (z {p.z:+.2f})'
    )
  if 'match' in result:
    m = result['match']
    out.append(
      f'match: {m.games} games in both; base {m.base_score:g}, new {m.new_score:g}; per game '
      f'{m.per_game.mean:+.3f} ± {m.per_game.half_width_95:.3f} (95%); new better in {m.new_better}, '
      f'worse in {m.new_worse}'
    )
  return out


def as_json(result: dict[str, Any]) -> dict[str, Any]:
  """`strength.compare`'s result as plain JSON values."""
  out: dict[str, Any] = {k: v._asdict() for k, v in result.items() if k != 'heldout'}
  if 'puzzles' in out:
    out['puzzles'].update(z=result['puzzles'].z, difference=result['puzzles'].difference._asdict())
  if 'match' in out:
    out['match']['per_game'] = result['match'].per_game._asdict()
  if 'heldout' in result:
    out['heldout'] = {k: d._asdict() for k, d in result['heldout'].items()}
  return out


def _ladder(value: str) -> tuple[int, ...]:
  try:
    return tuple(int(elo) for elo in value.split(',') if elo.strip())
  except ValueError:
    raise argparse.ArgumentTypeError(f'expected UCI_Elo levels such as 1350,1500,1800, got {value!r}') from None


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog='searchless-strength', description=__doc__.split('\n\n')[0])
  sub = p.add_subparsers(dest='command', required=True)
  m = sub.add_parser(
    'measure', formatter_class=cli.DefaultsHelpFormatter, help='measure a model into an evaluation folder (resumable)'
  )
  m.add_argument(
    '--checkpoint', required=True, help="the model: a workdir, an export, or a name ('pretrained', 'chessbench-270M')"
  )
  m.add_argument('--out', required=True, type=cli.output_dir, help='the evaluation folder (strength.json, strength.md)')
  m.add_argument('--puzzles', default=None, help='a Lichess puzzle CSV (lichess_db_puzzle.csv columns)')
  m.add_argument('--sts', default=None, help='an EPD suite with bm and c0 partial credit (e.g. STS)')
  m.add_argument('--heldout', default=None, help='held-out board records with labels (a bag, spec or glob)')
  m.add_argument('--heldout_boards', type=int, default=2000, help='the first N held-out boards')
  m.add_argument('--ladder', type=_ladder, default=(), help='Stockfish UCI_Elo levels to play, e.g. 1350,1500,1800')
  m.add_argument('--games', type=int, default=20, help='games against each level')
  m.add_argument(
    '--openings',
    nargs='+',
    default=[],
    help='opening files sampled for the ladder (.tsv, .pgn, .epd); default: balanced openings made with Stockfish',
  )
  m.add_argument('--opponent_limit', default=strength.OPPONENT_LIMIT, help="the opponents' search a move")
  m.add_argument('--workers', type=int, default=2, help='games played at once')
  m.add_argument(
    '--engine_path',
    default=None,
    help="the ladder's Stockfish binary (default: $SEARCHLESS_STOCKFISH, stockfish on PATH, /usr/games/stockfish)",
  )
  m.add_argument('--no_progress', action='store_true', help='no progress bars')
  c = sub.add_parser(
    'compare',
    formatter_class=cli.DefaultsHelpFormatter,
    help='pair two evaluation folders: new - base with its 95%% interval',
  )
  c.add_argument('base', type=pathlib.Path, help='the evaluation folder compared against')
  c.add_argument('new', type=pathlib.Path, help='the evaluation folder compared')
  c.add_argument('--json', action='store_true', help='print one JSON object instead of lines')
  return p


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  if args.command == 'compare':
    with errors.one_line_errors():
      result = strength.compare(args.base, args.new)
    errors.print_or_quit(json.dumps(as_json(result)) if args.json else '\n'.join(lines(result)))
    return
  with errors.one_line_errors():
    protocol = strength.Protocol(
      puzzles=args.puzzles,
      sts=args.sts,
      heldout=args.heldout,
      heldout_boards=args.heldout_boards,
      ladder=args.ladder,
      games=args.games,
      openings=tuple(args.openings),
      opponent_limit=args.opponent_limit,
      workers=args.workers,
      engine_path=args.engine_path,
    )
    done = strength.measure(args.checkpoint, args.out, protocol, progress=not args.no_progress)
  errors.print_or_quit(strength.markdown(done))


if __name__ == '__main__':
  main()
