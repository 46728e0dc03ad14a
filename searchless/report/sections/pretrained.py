"""The "Beside the pretrained model" section: this run's model and the one it is compared with, side by side.

The comparison is the demo's ``eval_pretrained/`` and ``puzzles_pretrained/``
and the match's other checkpoint player (see `context.other_model`). The
section is left out when the run has none of them (``--pretrained ''``).
"""

from searchless.core import artefacts
from searchless.report.context import Context, model_names, other_model
from searchless.report.document import Section, Table, Text, format_number, format_percent


def _record(pair: dict | None, player: str | None) -> tuple[int, int, int, int] | None:
  """`player`'s (wins, draws, losses, games) in a pair of the match results."""
  if pair is None:
    return None
  wins, losses = (pair['a_wins'], pair['b_wins']) if pair['a'] == player else (pair['b_wins'], pair['a_wins'])
  return wins, pair['draws'], losses, pair['games']


def _match_rows(results: artefacts.MatchResults, model: str, other: str | None) -> list[list[str]]:
  """Both models against each other player, head to head, and their Elo ('-' where `other` did not play)."""
  names = [a['name'] for a in results.agents]
  find = lambda x, y: next((p for p in results.pairs if {p['a'], p['b']} == {x, y}), None)
  rows = []
  for opponent in [n for n in names if n not in (model, other)]:
    cells = []
    for player in (model, other):
      record = _record(find(player, opponent), player)
      cells.append(
        '-'
        if record is None
        else f'+{record[0]} ={record[1]} -{record[2]} ({format_percent((record[0] + record[1] / 2) / record[3])})'
      )
    rows.append([f'Against `{opponent}`', *cells])
  head = _record(find(model, other), model)
  if head:
    wins, draws, losses, _ = head
    rows.append(['Head to head', f'+{wins} ={draws} -{losses}', f'+{losses} ={draws} -{wins}'])
  if results.elo:
    ratings = {p['name']: p for p in results.elo['players']}
    rows.append(
      [
        'Elo (BayesElo)',
        *[f'{ratings[n]["elo"]:.0f} ± {ratings[n]["plus_minus"]:.0f}' if n in ratings else '-' for n in (model, other)],
      ]
    )
  return rows


def pretrained_section(ctx: Context) -> Section | None:
  """This run's model beside the pretrained one on the same test boards, puzzles and opponents; None (no
  section) when the run did not include the pretrained model."""
  paths = ctx.paths
  evals = [artefacts.EvaluationMetrics.read_or_none(p) for p in (paths.eval_metrics, paths.pretrained_eval_metrics)]
  puzzles = [
    artefacts.PuzzleSummary.read_or_none(d / artefacts.PuzzleSummary.FILE)
    for d in (paths.puzzles, paths.pretrained_puzzles)
  ]
  results = artefacts.MatchResults.read_or_none(paths.match_results)
  names = [a['name'] for a in results.agents] if results else []
  model = next(iter(sorted(model_names(results, names, paths.train))), None) if results else None
  other = other_model(results, {model} if model else set())
  if evals[1] is None and puzzles[1] is None and other is None:
    return None
  rows = []
  for key, label in (('action_accuracy', 'Action accuracy (test boards)'), ('kendall_tau', "Kendall's tau-b")):
    values = [getattr(e, key) if e else None for e in evals]
    if any(v is not None for v in values):
      fmt = format_percent if key == 'action_accuracy' else format_number
      rows.append([label, *[fmt(v) if v is not None else '-' for v in values]])
  if any(puzzles):
    rows.append(
      ['Puzzles solved', *[f'{format_percent(q.accuracy)} ({q.solved}/{q.n})' if q else '-' for q in puzzles]]
    )
  if results and model:
    rows += _match_rows(results, model, other)
  section = Section('Beside the pretrained model', 'pretrained')
  section.blocks.append(
    Text(
      'The model this run trained beside the pretrained one shipped in the package '
      "(`Player.load('pretrained')`; how it was made: its model card, "
      '`searchless/pretrained/MODEL_CARD.md`), on the same test boards, puzzles and opponents.'
    )
  )
  section.blocks.append(Table(['', 'this run', 'pretrained'], rows, numeric=(1, 2)))
  return section
