r"""The strength campaign: labels for every shared game, a long resumable training, evaluation, shipping.

    python -m searchless.commands.campaign --workdir /root/searchless-data/campaign            # everything, resumable
    python -m searchless.commands.campaign --workdir DIR --steps labels --max_chunks 1         # one more chunk of labels

Steps (each resumable: rerunning the same command continues where it stopped; on a
new machine it starts again from ``--shared`` and the model the keep step kept, else the shipped checkpoint):

1. games     the shared Lichess games, written as chunk PGN files
             (WORKDIR/games/SOURCE_NNN.pgn, SOURCES: chunk i of a file is its games
             i, i + n, i + 2n, ... with n = games // 500 + 1, exactly as
             ``../shared/data/labels/make_chunks.py`` cuts the 46k file);
2. labels    each chunk not labelled yet, with the shipped recipe
             (``pretrained.ANNOTATE_RECIPE``; `campaign_labels`) -> WORKDIR/labels/SOURCE_NNN (done when its
             manifest.json exists; an unfinished folder is labelled again). The chunks
             already in ``--shared``/data/labels are used as they are, never labelled again;
3. adopt     (by name, with ``--model DIR``) a model trained elsewhere, e.g. on a lent GPU
             by ``benchmarks/device_campaign.py``, becomes the campaign's model
             (`campaign_model`): evaluated and shipped as it is, and the start of the next run;
4. train     the campaign config on every labelled board, de-duplicated across chunks
             (WORKDIR/boards: one bag of distinct boards, rebuilt when labels were added),
             for ``--train_seconds`` more, resuming WORKDIR/train;
5. evaluate  the campaign's model on the held-out boards (the shared chunks' test splits)
             and the dev puzzles -> one line of WORKDIR/curve.jsonl per training run,
             and WORKDIR/curve.png, the campaign's curve so far;
6. match     the same model against Stockfish at UCI_Elo 1350, ``--games`` games from the
             named openings (`campaign_match`) -> WORKDIR/eval/STEP/match, its score and
             BayesElo in WORKDIR/runs.jsonl;
7. ship      (by name) export, measure and (``--install``) ship the campaign's model
             when it beats the shipped ``pretrained`` (`campaign_ship`);
8. keep      (by name, with ``--keep_dir DIR``) the campaign's model (float32) and records written to DIR,
             to be committed: a new machine's campaign started with ``--keep_dir DIR`` restores them
             before any step, and its next train step starts from that model (`campaign_model.keep`).

Every step appends what it did and what it cost (wall-clock, core-hours of CPU, hours of an
accelerator) to WORKDIR/runs.jsonl, and WORKDIR/README.md is rewritten from it (`campaign_log`).

SIGTERM or Ctrl-C stops it cleanly: training saves a checkpoint; a label job is stopped with its
workers and engines, and its chunk, left unfinished, is labelled again by the next run.
"""

import argparse
from collections.abc import Sequence
import dataclasses
import json
import os
import pathlib
import re
import time
from typing import Any

from searchless.commands import campaign_labels
from searchless.commands import campaign_log
from searchless.commands import campaign_match
from searchless.commands import campaign_model
from searchless.commands import cli
from searchless.commands import errors
from searchless.commands import pretrained
from searchless.core import atomic

STEPS = ('games', 'labels', 'adopt', 'train', 'evaluate', 'match', 'ship', 'keep')
# 'adopt' needs --model; 'ship' and 'keep' write into the source tree: all three are asked for by name.
DEFAULT_STEPS = ('games', 'labels', 'train', 'evaluate', 'match')
GAMES_PER_CHUNK = 500  # A chunk's games at most: ~35k boards, ~10 min of labels on 2 cores.


@dataclasses.dataclass(frozen=True)
class Source:
  """A shared game file and the chunks of it this campaign labels."""

  name: str  # Chunk files and label folders are named NAME_NNN.
  path: str  # The game file, relative to --shared.
  shared_labels: int = 0  # Its first N chunks are labelled in --shared/data/labels (chunk_NNN): never labelled again.


# In labelling order: the order, the smaller files first.
SOURCES = (
    Source('lichess999', 'data/games/lichess_db_standard_rated_2021-10_first999.pgn'),
    Source('bfx3970', 'data/games/lichess_games_Bfx-de-Blr_3970.pgn'),
    Source('magnus46k', 'data/games/lichess_games_js_magnus_46177.pgn.zst', shared_labels=6),
)


def split_games(text: str) -> list[str]:
  """The games of a PGN text, each starting at its `[Event ` tag (make_chunks.py's rule).

  >>> split_games('[Event "a"]\\n\\n1. e4 *\\n\\n[Event "b"]\\n\\n1. d4 *\\n')
  ['[Event "a"]\\n\\n1. e4 *\\n\\n', '[Event "b"]\\n\\n1. d4 *\\n']
  """
  return [g for g in re.split(r'(?m)^(?=\[Event )', text) if g.startswith('[Event ')]


def chunk_texts(games: Sequence[str], games_per_chunk: int = GAMES_PER_CHUNK) -> list[str]:
  """The chunks' PGN texts: chunk i holds games i, i + n, ... (n = len // games_per_chunk + 1).

  >>> chunk_texts(['a ', 'b', 'c'], games_per_chunk=2)
  ['a\\n\\nc\\n\\n', 'b\\n\\n']
  """
  stride = len(games) // games_per_chunk + 1
  return [''.join(g.strip() + '\n\n' for g in games[i::stride]) for i in range(stride)]


def _read_text(path: pathlib.Path) -> str:
  data = path.read_bytes()
  if path.suffix == '.zst':
    import zstandard
    data = zstandard.ZstdDecompressor().decompress(data, max_output_size=1 << 31)
  return data.decode()


def write_games(shared: pathlib.Path, games_dir: pathlib.Path, sources: Sequence[Source] = SOURCES) -> list[pathlib.Path]:
  """Writes every source's chunks not yet written (atomically); returns the chunks to label, in order."""
  games_dir.mkdir(parents=True, exist_ok=True)
  todo = []
  for source in sources:
    index = games_dir / f'{source.name}.json'
    if not index.exists():
      texts = chunk_texts(split_games(_read_text(shared / source.path)))
      for i, text in enumerate(texts):
        atomic.write_text(games_dir / f'{source.name}_{i:03d}.pgn', text, durable=False)
      index.write_text(json.dumps({'source': source.path, 'chunks': len(texts),
                                   'games': sum(t.count('[Event ') for t in texts)}, indent=2) + '\n')
    chunks = json.loads(index.read_text())['chunks']
    todo += [games_dir / f'{source.name}_{i:03d}.pgn' for i in range(source.shared_labels, chunks)]
  return todo


def board_key(record: bytes) -> bytes:
  """A board_value record's board: its FEN's first four fields (pieces, mover, castling, en passant).

  Move counters differ between games that reach one position; the labels do not.

  >>> from searchless.core import records
  >>> board_key(records.encode('board_value', ('8/8/8/8/8/8/8/K1k5 w - - 3 70', (), (), 0.5)))
  b'8/8/8/8/8/8/8/K1k5 w - -'
  """
  length, pos = 0, 0
  for shift in range(0, 35, 7):  # The FEN's length, a varint.
    length |= (record[pos] & 0x7F) << shift
    pos += 1
    if record[pos - 1] < 0x80:
      break
  return b' '.join(record[pos:pos + length].split(b' ')[:4])


def label_folders(shared: pathlib.Path, workdir: pathlib.Path | None = None) -> list[pathlib.Path]:
  """The shared chunks' label folders, then (with `workdir`) the campaign's finished ones, in name order."""
  shared_dirs = sorted(p.parent for p in (shared / 'data' / 'labels').glob('chunk_*/manifest.json'))
  if workdir is None:
    return shared_dirs
  return shared_dirs + sorted(p.parent for p in (workdir / 'labels').glob('*/manifest.json'))


def merge_boards(folders: Sequence[pathlib.Path], out_dir: pathlib.Path, split: str) -> dict[str, Any]:
  """One bag of the distinct boards of `split` in `folders` (first label wins); rebuilt when `folders` change.

  Returns (and keeps in OUT_DIR/SPLIT.json) the bag's path, the folders and the counts.
  """
  from searchless.core import bags
  import bagz
  index = out_dir / f'{split}.json'
  names = [str(f) for f in folders]
  if index.exists() and (done := json.loads(index.read_text()))['folders'] == names:
    return done
  out_dir.mkdir(parents=True, exist_ok=True)
  # A temporary bag of this process's own: two jobs of one campaign (a training run and an A/B arm) may merge at once.
  path, tmp = out_dir / f'{split}_board_value_data.bag', out_dir / f'.{split}_board_value_data.bag.{os.getpid()}.tmp'
  seen: set[bytes] = set()
  read = 0
  start = time.time()
  try:
    with bagz.Writer(str(tmp)) as writer:
      for folder in folders:
        for record in bags.reader(bags.find(str(folder / split), 'board_value')):
          read += 1
          key = board_key(record)
          if key not in seen:
            seen.add(key)
            writer.write(record)
    tmp.replace(path)
  finally:
    tmp.unlink(missing_ok=True)
  done = {'bag': str(path), 'folders': names, 'records_read': read, 'distinct_boards': len(seen),
          'seconds': round(time.time() - start, 1)}
  atomic.write_text(index, json.dumps(done, indent=2) + '\n')
  return done


def train_model(config_name: str, data: str, train_dir: pathlib.Path, seconds: float,
                overrides: Sequence[str] = ()) -> dict[str, Any]:
  """Trains (resuming) `config_name` (with `overrides`) on the bag `data` for `seconds` more; returns its cost."""
  from searchless.core import config as config_lib
  from searchless.training import plot
  from searchless.training import train
  overrides = [*overrides, f'data.train={data}', f'train.max_seconds={seconds}']
  config = config_lib.load(config_name, overrides)
  start, cpu = time.time(), time.process_time()
  state = train.train(config, str(train_dir), overrides=overrides)
  log = [r for r in plot.read_metrics(train_dir) if 'loss' in r]  # A stopped run logs its steps too (`train`).
  return {'step': 'train', 'config': config_name, 'steps': int(state.step), 'wall_seconds': round(time.time() - start, 1),
          'core_hours': round((time.process_time() - cpu) / 3600, 4),
          'action_values_trained': int(sum(r.get('targets', 0) for r in log)),
          'final_train_loss': log[-1]['loss'] if log else None,
          'learning_rate': config.optim.learning_rate, 'ema_decay': config.optim.ema_decay}  # The model card's.


def evaluate_model(model_dir: pathlib.Path, heldout: str, puzzles: pathlib.Path, out: pathlib.Path, *,
                   num_boards: int) -> dict[str, Any]:
  """Held-out metrics (first `num_boards` boards of `heldout`) and the dev puzzles of `model_dir` (a run or an export)."""
  from searchless.evaluation import evaluate
  from searchless.evaluation import metrics as metrics_lib
  from searchless.evaluation import puzzles as puzzle_eval
  start, cpu = time.time(), time.process_time()
  metrics = evaluate.run(str(model_dir), heldout, out / 'heldout', num_boards=num_boards, progress=False)
  solved = puzzle_eval.run(puzzles=str(puzzles), agent=f'checkpoint:{model_dir}', out=out / 'puzzles', progress=False)
  low, high = metrics_lib.wilson(solved['solved'], solved['n'])
  return {'step': 'evaluate', 'heldout_boards': metrics['boards'],
          **{k: metrics[k] for k in ('action_accuracy', 'kendall_tau', 'log_loss') if k in metrics},
          'puzzles_solved': solved['solved'], 'puzzles': solved['n'], 'puzzles_wilson95': [round(low, 4), round(high, 4)],
          'wall_seconds': round(time.time() - start, 1), 'core_hours': round((time.process_time() - cpu) / 3600, 4)}


def run(workdir: str | pathlib.Path, shared: str | pathlib.Path, *, steps: Sequence[str] = DEFAULT_STEPS, workers: int = 2,
        max_chunks: int | None = None, config_name: str = 'campaign', overrides: Sequence[str] = (),
        train_seconds: float = 3 * 3600, heldout_boards: int = 2000, puzzles: str | None = None,
        sources: Sequence[Source] = SOURCES, install: bool = False, model: str | None = None,
        ship_as: str = 'pretrained', games: int = campaign_match.GAMES, keep_dir: str | None = None) -> None:
  """Runs `steps` of the campaign in WORKDIR (see the module docstring).

  Args:
    workdir: the campaign's folder.
    shared: the shared data folder (data/games, data/labels, data/puzzles).
    steps: which of STEPS to run (the games are always written, once).
    workers: annotation worker processes (one engine each).
    max_chunks: label at most this many more chunks (None: all).
    config_name: the training config; `overrides` (key=value) change it.
    train_seconds: this run's training wall-clock.
    heldout_boards: held-out boards evaluated.
    puzzles: the puzzle CSV evaluated (None: SHARED/data/puzzles/lichess_puzzles_dev.csv).
    sources: the game files labelled, in order.
    install: the ship step copies a shipped model into the package.
    model: the adopt step's model (`campaign_model.export_run`); without adopt, evaluate, match and ship act
      on it instead of the campaign's model.
    ship_as: the shipped model the ship step must beat and replaces (`loading.SHIPPED`).
    games: the match step's games against Stockfish 1350.
    keep_dir: where the keep step writes the campaign's model and records, and where a new WORKDIR restores
      them from (`campaign_model.restore`).
  """
  unknown = set(steps) - set(STEPS)
  if unknown:
    raise ValueError(f'unknown step(s) {sorted(unknown)}: expected some of {",".join(STEPS)}')
  if 'adopt' in steps and model is None:
    raise ValueError('the adopt step needs the model: --steps adopt --model DIR')
  if 'match' in steps and games < 1:
    raise ValueError(f'--games must be >= 1 for the match step, got {games}')
  if 'keep' in steps and keep_dir is None:
    raise ValueError('the keep step needs its folder: --steps keep --keep_dir DIR')
  workdir, shared = pathlib.Path(workdir).resolve(), pathlib.Path(shared).resolve()
  kept = pathlib.Path(keep_dir).resolve() if keep_dir is not None else None
  (workdir / 'logs').mkdir(parents=True, exist_ok=True)
  if kept is not None and (restored := campaign_model.restore(workdir, kept)):
    campaign_log.log_run(workdir, restored)
    print(f'[restore] {json.dumps(restored)}', flush=True)
  chunks = write_games(shared, workdir / 'games', sources)
  readme = lambda: campaign_log.write_readme(workdir, shared, config_name, str(kept) if kept else None)
  readme()
  if 'labels' in steps:
    for _ in campaign_labels.label_chunks(chunks, workdir / 'labels', workdir, workers=workers, max_chunks=max_chunks):
      readme()
  train_dir = workdir / 'train'
  puzzle_csv = pathlib.Path(puzzles) if puzzles else shared / 'data' / 'puzzles' / 'lichess_puzzles_dev.csv'
  if 'adopt' in steps and model is not None:  # (Checked above: adopt comes with its model.)
    boards = workdir / 'boards' / 'train.json'
    record = campaign_model.adopt(workdir, pathlib.Path(model).resolve(),
                                  json.loads(boards.read_text())['distinct_boards'] if boards.exists() else None)
    campaign_log.log_run(workdir, record)
    print(f"[adopt] {record['model']}: {record['steps']} steps on {record['device']}", flush=True)
    readme()
  if 'train' in steps:
    folders = label_folders(shared, workdir)
    merged = merge_boards(folders, workdir / 'boards', 'train')
    print(f"[boards] {merged['distinct_boards']:,} distinct train boards of {merged['records_read']:,} records "
          f'in {len(folders)} label folders', flush=True)
    # A new run (no checkpoint yet) starts from the adopted model's parameters.
    start_from = campaign_model.adopted(workdir) if not campaign_model.latest_step(train_dir) else None
    record = train_model(config_name, merged['bag'], train_dir, train_seconds,
                         [*overrides, *([f'train.init_from={start_from}'] if start_from else [])])
    campaign_log.log_run(workdir, {**record, 'distinct_boards': merged['distinct_boards'],
                                   **({'started_from': str(start_from.relative_to(workdir))} if start_from else {})})
    print(f"[train] step {record['steps']}, {record['wall_seconds']:.0f} s", flush=True)
    readme()
  if model is not None and 'adopt' not in steps:  # A side model (e.g. a transformer beside the campaign's graph).
    model_dir, model_name, step = campaign_model.side_model(pathlib.Path(model).resolve())
  else:
    model_dir, model_name, step = campaign_model.current_model(workdir)
  out = workdir / 'eval' / (str(step) if model_name == 'train' else model_dir.name)
  if 'evaluate' in steps:
    heldout = merge_boards(label_folders(shared), workdir / 'boards', 'test')  # Fixed: the curve's points compare.
    record = {**evaluate_model(model_dir, heldout['bag'], puzzle_csv, out, num_boards=heldout_boards),
              'checkpoint_step': step, 'model': model_name}
    campaign_log.log_run(workdir, record)
    with open(workdir / 'curve.jsonl', 'a') as f:
      f.write(json.dumps({**record, **campaign_log.totals(campaign_log.read_runs(workdir))}) + '\n')
    campaign_log.plot_curve(workdir)
    print(f'[evaluate] {json.dumps(record)}', flush=True)
    readme()
  if 'match' in steps:
    openings = campaign_match.named_openings(shared)
    if not openings:
      raise ValueError(f'no named openings (*.tsv) in {shared / "data" / "openings"}: the match step plays from them')
    record = {**campaign_match.match_model(model_dir, out / 'match', openings, games=games, workers=workers),
              'checkpoint_step': step, 'model': model_name}
    campaign_log.log_run(workdir, record)
    print(f'[match] {json.dumps(record)}', flush=True)
    readme()
  if 'ship' in steps:
    from searchless.commands import campaign_ship
    measured = [r for r in campaign_log.read_curve(workdir)
                if r['checkpoint_step'] == step and r.get('model', 'train') == model_name]
    if not measured:
      raise ValueError(f'the campaign\'s model ({model_dir}, step {step}) has no evaluation yet: run --steps evaluate,ship')
    record = campaign_ship.ship(workdir, measured[-1], puzzle_csv, campaign_log.totals(campaign_log.read_runs(workdir)),
                                install=install, model_dir=model_dir, name=ship_as)
    campaign_log.log_run(workdir, record)
    print(f'[ship] {json.dumps(record)}', flush=True)
    readme()
  if 'keep' in steps and kept is not None:  # (Checked above: keep comes with its folder.)
    record = campaign_model.keep(workdir, kept)
    campaign_log.log_run(workdir, record)
    print(f'[keep] {json.dumps(record)}', flush=True)
    readme()


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--workdir', required=True, type=cli.output_dir, help='the campaign folder (e.g. /root/searchless-data/campaign)')
  p.add_argument('--shared', default=str(pretrained.ROOT.parent / 'shared'),
                 help='the shared data folder: data/games, data/labels, data/puzzles, data/openings '
                 '(default: ../shared of the checkout)')
  p.add_argument('--steps', default=','.join(DEFAULT_STEPS), help=f'steps to run, comma-separated, of {",".join(STEPS)}')
  p.add_argument('--install', action='store_true', help='the ship step replaces the package\'s pretrained model')
  p.add_argument('--workers', type=int, default=2,
                 help='annotation worker processes, one engine each, and games played at once (default: 2)')
  p.add_argument('--games', type=int, default=campaign_match.GAMES,
                 help=f'games of the match step against Stockfish 1350 (default: {campaign_match.GAMES})')
  p.add_argument('--max_chunks', type=int, default=None, help='label at most N more chunks in this run (default: all)')
  p.add_argument('--config', default='campaign', help='the model and training config (default: campaign)')
  p.add_argument('--set', nargs='*', default=[], metavar='KEY=VALUE', help='config overrides, e.g. optim.learning_rate=3e-4')
  p.add_argument('--puzzles', default=None, help='puzzle CSV to evaluate on (default: SHARED/data/puzzles/lichess_puzzles_dev.csv)')
  p.add_argument('--train_seconds', type=float, default=3 * 3600, help='training wall-clock of this run (default: 3 h)')
  p.add_argument('--model', default=None, help='the adopt step\'s model (an exported run, e.g. from a GPU); '
                 'without adopt, evaluate, match and ship act on it instead of the campaign\'s model')
  p.add_argument('--ship_as', default='pretrained', choices=['pretrained', 'pretrained-transformer'],
                 help='the shipped model the ship step must beat and replaces (default: pretrained)')
  p.add_argument('--keep_dir', default=None, help='the keep step\'s folder (e.g. campaign_kept/ in the checkout, '
                 'committed); a new --workdir restores the campaign from it')
  p.add_argument('--heldout_boards', type=int, default=2000, help='held-out boards evaluated (default: 2000)')
  return p


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  with errors.one_line_errors():
    run(args.workdir, args.shared, steps=args.steps.split(','), workers=args.workers, max_chunks=args.max_chunks,
        config_name=args.config, overrides=args.set, train_seconds=args.train_seconds,
        heldout_boards=args.heldout_boards, puzzles=args.puzzles, install=args.install, model=args.model,
        ship_as=args.ship_as, games=args.games, keep_dir=args.keep_dir)


if __name__ == '__main__':
  main()
