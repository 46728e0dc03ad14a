r"""Two of the campaign's evaluations, paired board by board, puzzle by puzzle and game by game.

    python -m searchless.commands.campaign_compare /root/searchless-data/campaign/eval/8019 \
        /root/searchless-data/campaign/eval/23123

Each argument is an evaluation folder (`searchless.evaluation.paired`): the campaign's
``eval/STEP/`` or ``eval/NAME/`` (a side model, e.g. the shipped one: ``--steps evaluate,match
--model searchless/pretrained``). Prints new - base for each held-out metric with its 95%
interval, the puzzles each solved alone, and the match's points a game; ``--json`` prints
the same as one JSON object.
"""

import argparse
from collections.abc import Sequence
import json
import pathlib
from typing import Any

from searchless.commands import cli
from searchless.commands import errors
from searchless.evaluation import paired


def lines(result: dict[str, Any]) -> list[str]:
  """`paired.compare`'s result, as the command prints it.

  >>> print('\\n'.join(lines({'puzzles': paired.Puzzles(1500, 418, 409, 31, 40)})))
  puzzles: 1500 in both; base 418, new 409; new alone 31, base alone 40 (z -1.07)
  """
  out = []
  if 'heldout' in result:
    n = max(d.n for d in result['heldout'].values())
    out.append(f'held-out boards: {n} in both; new - base (95%):')
    out += [f'  {name:16s} {d.mean:+.4f} ± {d.half_width_95:.4f}  ({d.n} boards)' for name, d in result['heldout'].items()]
  if 'puzzles' in result:
    p = result['puzzles']
    out.append(f'puzzles: {p.n} in both; base {p.base_solved}, new {p.new_solved}; '
               f'new alone {p.new_only}, base alone {p.base_only} (z {p.z:+.2f})')
  if 'match' in result:
    m = result['match']
    out.append(f'match: {m.games} games in both; base {m.base_score:g}, new {m.new_score:g}; per game '
               f'{m.per_game.mean:+.3f} ± {m.per_game.half_width_95:.3f} (95%); new better in {m.new_better}, '
               f'worse in {m.new_worse}')
  return out


def _json(result: dict[str, Any]) -> dict[str, Any]:
  out: dict[str, Any] = {k: v._asdict() for k, v in result.items() if k != 'heldout'}
  if 'puzzles' in out:
    out['puzzles']['z'] = result['puzzles'].z
  if 'match' in out:
    out['match']['per_game'] = result['match'].per_game._asdict()
  if 'heldout' in result:
    out['heldout'] = {k: d._asdict() for k, d in result['heldout'].items()}
  return out


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('base', type=pathlib.Path, help='the evaluation folder compared against (e.g. eval/8019)')
  p.add_argument('new', type=pathlib.Path, help='the evaluation folder compared (e.g. eval/23123)')
  p.add_argument('--json', action='store_true', help='print one JSON object instead of lines')
  return p


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  with errors.one_line_errors():
    result = paired.compare(args.base, args.new)
  errors.print_out(json.dumps(_json(result)) if args.json else '\n'.join(lines(result)))


if __name__ == '__main__':
  main()
