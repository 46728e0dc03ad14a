"""The "Puzzles" section: puzzles solved, by rating band, and some missed ones.

Reads ``puzzles/summary.json`` (`artefacts.PuzzleSummary`), ``results.csv``
(one row per puzzle) and ``puzzles.csv`` (the puzzles, for their themes).
"""

from searchless.core import artefacts
from searchless.report.context import Context, read_csv
from searchless.report.document import Callout, Image, Section, Table, Text, format_count, format_percent

PUZZLES_PNG = 'puzzles_by_rating.png'


def puzzles_section(ctx: Context) -> Section:
  """The puzzle evaluation of ``puzzles/``; sets the 'Puzzle accuracy' headline."""
  section = Section('Puzzles', 'puzzles')
  directory = ctx.paths.puzzles
  summary = artefacts.PuzzleSummary.read_or_none(directory / artefacts.PuzzleSummary.FILE)
  if summary is None:
    steps = ('puzzles',) if (directory / 'puzzles.csv').exists() else ('mine', 'puzzles')
    return ctx.not_run(
      section, f'No puzzle evaluation: `{directory / artefacts.PuzzleSummary.FILE}` is missing.', *steps
    )
  from searchless.evaluation import puzzles as puzzle_eval  # No JAX: the band plot and its types.

  results = read_csv(directory / 'results.csv')
  themes = {t for row in (read_csv(directory / 'puzzles.csv') or results) for t in (row.get('Themes') or '').split()}
  blocks = section.blocks
  accuracy, solved = format_percent(summary.accuracy), f'{summary.solved}/{summary.n}'
  blocks.append(
    Text(
      f'**{accuracy}** of {format_count(summary.n)} puzzles solved ({solved}) '
      f'by `{summary.agent}`; puzzles from `{summary.puzzles}`. '
      "A puzzle is solved when every one of the agent's moves is the solution's (any mate in one counts)."
    )
  )
  if 'mined' in themes:
    blocks.append(
      Callout(
        'note',
        'These puzzles were mined from games by `searchless-mine-puzzles` (their Themes contain '
        '`mined`), from games the model was not trained on (the shipped `searchless/samples/sample_puzzles.csv`, or '
        "the test split's games). Their ratings are a proxy set by "
        'the miner, not Lichess ratings: accuracies per band are not comparable with the '
        "paper's Lichess puzzle results.",
      )
    )
  bands = [puzzle_eval.Band(**b) for b in summary.bands]
  if bands:
    blocks.append(
      Table(
        ['rating', 'puzzles', 'solved', 'accuracy'],
        [
          [f'{b.lower}–{b.upper - 1}', format_count(b.n), format_count(b.solved), format_percent(b.accuracy)]
          for b in bands
        ],
        numeric=(1, 2, 3),
        caption='Accuracy per rating band.',
      )
    )
    puzzle_eval.plot_bands(bands, ctx.out_dir / PUZZLES_PNG, f'{summary.agent}: {solved} puzzles solved')
    blocks.append(
      Image(PUZZLES_PNG, 'puzzle accuracy by rating', 'Bars: accuracy per rating band; n = puzzles in the band.')
    )
  missed = [r for r in results if r.get('solved') == '0'][:5]
  if missed:
    blocks.append(
      Table(
        ['puzzle', 'rating', 'solution (agent moves)', 'played'],
        [[f'`{r["PuzzleId"]}`', r['Rating'], f'`{r["expected"]}`', f'`{r["played"]}`'] for r in missed],
        numeric=(1,),
        caption=f'Some missed puzzles (all in `{directory / "results.csv"}`).',
      )
    )
  ctx.headlines['Puzzle accuracy'] = (accuracy, f'{solved} puzzles' + (' (mined)' if 'mined' in themes else ''))
  return section
