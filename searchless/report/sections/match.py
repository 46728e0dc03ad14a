"""The "Match" section: the games of this run's model, its score and its BayesElo rating.

Reads ``match/results.json`` (`artefacts.MatchResults`) and ``match/games.pgn``.
"""

from searchless.core import artefacts
from searchless.report import figures
from searchless.report.context import Context, model_names, read_games
from searchless.report.document import (
  Callout,
  Image,
  Section,
  Table,
  Text,
  format_count,
  format_duration,
  format_percent,
)

RATINGS_PNG = 'ratings.png'


def _elo(ctx: Context, results: artefacts.MatchResults, models: set[str]) -> list:
  """The BayesElo table and what its anchor means; sets the 'Elo' headline."""
  elo, anchors = results.elo, results.anchors or {}
  if not elo:
    return [Callout('note', f'Elo not fitted: {results.elo_error}')] if results.elo_error else []
  specs = {a['name']: a.get('spec', '') for a in results.agents}
  confidence = format_percent(elo.get('confidence', 0.95), 0)
  rows = []
  for p in elo['players']:
    anchored = p['name'] in anchors
    rows.append(
      [
        f'**{p["name"]}**' if p['name'] in models else p['name'],
        f'{p["elo"]:.0f}',
        'fixed (anchor)' if anchored else f'± {p["plus_minus"]:.0f}',
        '' if anchored else f'{p["lower"]:.0f} – {p["upper"]:.0f}',
        format_count(p['games']),
        format_percent(p['score'], 0),
        f'`{specs.get(p["name"], "")}`',
      ]
    )
  blocks: list = [
    Table(
      ['player', 'Elo', '±', f'{confidence} interval', 'games', 'score', 'agent'],
      rows,
      numeric=(1, 2, 3, 4, 5),
      caption=f'BayesElo ratings ({confidence} intervals).',
    )
  ]
  players = [{**p, 'lower': None, 'upper': None} if p['name'] in anchors else p for p in elo['players']]
  figures.plot_ratings(players, ctx.out_dir / RATINGS_PNG, models, confidence)
  blocks.append(
    Image(
      RATINGS_PNG,
      'BayesElo ratings with their intervals',
      f"Each player's rating and its {confidence} interval; this run's model in blue.",
    )
  )
  if anchors:
    anchor_text = ', '.join(f'`{n}` = {v:g}' for n, v in anchors.items())
    blocks.append(
      Text(
        f'Ratings are anchored to {anchor_text}: Stockfish playing with `UCI_LimitStrength` at '
        'that `UCI_Elo`, which Stockfish calibrates against CCRL-like rating lists at its own time '
        "control. Treat the model's rating as a rough estimate on that scale, with the interval "
        'above (few games give wide intervals).'
      )
    )
  else:
    blocks.append(
      Text(
        'No anchor (no Stockfish with a `UCI_Elo` among the players): ratings have mean 0 and '
        'only their differences mean something.'
      )
    )
  model_ratings = [p for p in elo['players'] if p['name'] in models]
  if model_ratings:
    r = model_ratings[0]
    ctx.headlines['Elo'] = (
      f'{r["elo"]:.0f} ± {r["plus_minus"]:.0f}',
      f'{confidence} interval; '
      + (f'anchor {", ".join(f"{n}={v:g}" for n, v in anchors.items())}' if anchors else 'mean 0, no anchor'),
    )
  return blocks


def match_section(ctx: Context) -> Section:
  """The match of ``match/``, from the model's side; sets the 'Match score' and 'Elo' headlines."""
  section = Section('Match', 'match')
  results = artefacts.MatchResults.read_or_none(ctx.paths.match_results)
  if results is None:
    return ctx.not_run(section, f'No match: `{ctx.paths.match_results}` is missing.', 'match')
  names = [a['name'] for a in results.agents] or sorted(results.scores)
  models = model_names(results, names, ctx.paths.train)
  blocks = section.blocks
  rows, points_total, games_total, opponents = [], 0.0, 0, []
  for p in results.pairs:
    a, b, aw, bw = p['a'], p['b'], p['a_wins'], p['b_wins']
    if b in models and a not in models:
      a, b, aw, bw = b, a, bw, aw
    points = aw + p['draws'] / 2
    rows.append(
      [
        a,
        b,
        format_count(p['games']),
        aw,
        p['draws'],
        bw,
        f'{points:g}/{p["games"]}',
        format_percent(points / p['games']),
      ]
    )
    if a in models:
      points_total, games_total = points_total + points, games_total + p['games']
      opponents.append(b)
  blocks.append(
    Table(
      ['player', 'opponent', 'games', 'W', 'D', 'L', 'score', 'score %'],
      rows,
      numeric=(2, 3, 4, 5, 6, 7),
      caption="Results from the model's side (W/D/L: its wins, draws, losses).",
    )
  )
  blocks += _elo(ctx, results, models)
  if games_total:
    against = f'vs {opponents[0]}' if len(set(opponents)) == 1 else f'vs {len(set(opponents))} opponents'
    ctx.headlines['Match score'] = (
      f'{points_total:g}/{games_total}',
      f'{format_percent(points_total / games_total)} {against}',
    )
  endings = results.endings or results.terminations or {}
  if endings:
    blocks.append(
      Table(
        ['how games ended', 'games'], [[k, v] for k, v in sorted(endings.items(), key=lambda kv: -kv[1])], numeric=(1,)
      )
    )
  adjudication = results.adjudication or {}
  if adjudication:
    blocks.append(
      Text(
        f'Adjudication: a draw after {adjudication.get("max_plies")} plies from the opening; '
        + (
          f'a win when an evaluating Stockfish ({adjudication.get("eval_limit")}) sees a mate or more than '
          f'{adjudication["win_cp"]} cp'
          if adjudication.get('eval') and adjudication.get('win_cp')
          else 'no evaluation adjudication'
        )
        + f'. {format_count(results.games)} games in `{ctx.paths.games}`'
        + (f', played in {format_duration(results.wall_seconds)}' if results.wall_seconds else '')
        + '.'
      )
    )
  games = read_games(ctx.paths.games)
  if games:
    rows = []
    for g in games[:30]:
      h = g.headers
      rows.append(
        [
          h.get('Round', '?'),
          h.get('White', '?'),
          h.get('Black', '?'),
          f'**{h.get("Result", "*")}**',
          h.get('PlyCount', '?'),
          h.get('Opening', ''),
          g.end().comment or h.get('Termination', ''),
        ]
      )
    blocks.append(
      Table(
        ['round', 'White', 'Black', 'result', 'plies', 'opening', 'ending'],
        rows,
        numeric=(0, 4),
        caption='The games' + (' (first 30)' if len(games) > 30 else '') + '.',
      )
    )
  return section
