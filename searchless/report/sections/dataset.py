"""The "Dataset" section: what the annotation read, kept and made (``data/manifest.json``)."""

from searchless.core import artefacts
from searchless.report.context import Context
from searchless.report.document import (
  Callout,
  Facts,
  Section,
  Table,
  Text,
  format_count,
  format_duration,
  format_percent,
  plural,
)

# What each `pgn.SKIP_REASONS` reason means, for the skipped-games table.
SKIP_MEANINGS = {
  'variant': 'a chess variant (chess960, crazyhouse, ...), not standard chess',
  'illegal_move': 'an illegal or ambiguous move in the game text',
  'unparsable': 'not a PGN game (bad FEN tag, no headers and no moves, ...)',
  'bad_encoding': 'bytes that are not UTF-8',
  'truncated': "the game's text ends before its result",
  'filtered_elo': 'outside --min_elo / --max_elo',
  'filtered_speed': 'time control not among --speeds',
  'filtered_bot': 'a BOT account played (--exclude_bots)',
}
MODE_MEANINGS = {
  'multipv': 'one MultiPV search per board scores every legal move',
  'per_move': 'one search per legal move (the paper)',
}


def dataset_section(ctx: Context) -> Section:
  """The games, splits, engine settings and timings of the annotation; sets the 'Engine' and 'Data' facts."""
  section = Section('Dataset', 'dataset')
  manifest = artefacts.AnnotationManifest.read_or_none(ctx.paths.manifest)
  if manifest is None:
    return ctx.not_run(section, f'No annotated data: `{ctx.paths.manifest}` is missing.', 'annotate')
  ctx.manifest = manifest
  games, engine, split, splits = manifest.games, manifest.engine, manifest.split, manifest.splits
  inputs = [p for paths in manifest.inputs.values() for p in paths]
  skipped = sum(games.get('skipped', {}).values())
  blocks = section.blocks
  blocks.append(
    Text(
      f'**{format_count(games["read"])} games** read, **{format_count(games["kept"])} kept** '
      f'({format_count(skipped)} skipped) from ' + ', '.join(f'`{p}`' for p in inputs) + '; '
      f'split into train/test by {split.get("by", "?")}'
      + (f' (test fraction {split["test_fraction"]:g})' if split.get('test_fraction') else '')
      + f', boards de-duplicated by {split.get("dedup_by", "?")} within each split.'
    )
  )
  rows = [
    [
      name,
      format_count(c.get('boards_seen')),
      format_count(c.get('boards')),
      format_count(c.get('action_values')),
      format_count(c.get('terminal_boards')),
      format_count(c.get('boards_failed')),
    ]
    for name, c in splits.items()
  ]
  blocks.append(
    Table(
      ['split', 'boards seen', 'boards (unique)', 'action-values (board, move)', 'terminal boards', 'engine failures'],
      rows,
      numeric=(1, 2, 3, 4, 5),
      caption='Per split: an action-value record is one legal move of one board with its win probability.',
    )
  )
  mode, limit = engine.get('mode', '?'), engine.get('limit', '?')
  engine_name = ', '.join(i.get('name', '?') for i in engine.get('id') or []) or 'unknown (no id recorded)'
  blocks.append(
    Facts(
      [
        ('Engine', engine_name + (f' (`{engine["path"]}`)' if engine.get('path') else '')),
        (
          'Search',
          f'`--mode {mode}` ({MODE_MEANINGS.get(mode, "")}), `--limit {limit}`'
          + (' per board' if mode == 'multipv' else ' per search'),
        ),
        ('Board value', f'`--state_value {engine.get("state_value", "?")}`'),
        (
          'Engine settings',
          f'{plural(engine.get("threads", 1), "thread")}, {engine.get("hash_mb", "?")} MiB hash, '
          f'{plural(manifest.engine_restarts, "restart")}',
        ),
      ]
    )
  )
  if 'test' in splits:
    overlap, fraction = split.get('test_boards_in_train', 0), split.get('test_boards_in_train_fraction')
    blocks.append(
      Text(
        f'**Test-in-train overlap:** {plural(overlap, "test board")} also in train'
        + (f' ({format_percent(fraction)})' if fraction is not None else '')
        + (
          '; they were dropped from test (`--drop_test_overlap`).'
          if split.get('drop_test_overlap')
          else '; kept, as the paper did (it reports 14.7%).'
        )
      )
    )
  if skipped:
    blocks.append(
      Table(
        ['reason', 'games', 'meaning'],
        [[f'`{r}`', format_count(n), SKIP_MEANINGS.get(r, '')] for r, n in games['skipped'].items()],
        numeric=(1,),
        caption='Games skipped, by reason (each listed in `data/skipped.jsonl`).',
      )
    )
  else:
    blocks.append(Text('No game was skipped.'))
  if games.get('corrupt_input_files'):
    blocks.append(
      Callout(
        'note',
        f'{games["corrupt_input_files"]} input file(s) were corrupt or truncated; '
        'their games up to the damage were kept.',
      )
    )
  per_board = manifest.timings.get('ms_per_board', {})
  blocks.append(
    Text(
      f'Annotation took {format_duration(manifest.timings.get("wall_seconds"))}'
      + (f', {per_board["mean"]:.1f} ms of engine time per board on average' if per_board else '')
      + '.'
    )
  )
  train, test = splits.get('train', {}), splits.get('test', {})
  ctx.facts['Engine'] = f'{engine_name}, `--mode {mode} --limit {limit}`' + (
    ' (per board)' if mode == 'multipv' else ' (per move)'
  )
  ctx.facts['Data'] = (
    f'{plural(games["kept"], "game")} → {format_count(train.get("boards"))} '
    f'train boards ({format_count(train.get("action_values"))} action-values), '
    f'{format_count(test.get("boards"))} test boards ({format_count(test.get("action_values"))})'
  )
  return section
