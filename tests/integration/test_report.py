"""The run report: exact headline numbers, figures, calibration bins, missing and broken steps, valid HTML."""

import collections
import csv
import html.parser
import io
import json
import math
import pathlib
import re
import shutil

import chess
import pytest
from PIL import Image

from searchless.commands import analyse_game as analyse_command
from searchless.commands import report as report_command
from searchless.core import artefacts
from searchless import configs
from searchless.core import config as config_lib
from searchless.data import puzzles as puzzles_lib
from searchless.evaluation import elo as elo_lib
from searchless.evaluation import openings as openings_lib
from searchless.evaluation import puzzles as puzzle_eval
from searchless.evaluation import tournament
from searchless.report import build as report
from searchless.report import context as report_context
from searchless.report import figures
from searchless.report import sample_game
from searchless.report.sections import training as training_section

PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
MODEL, OPPONENT = 'searchless', 'sf1350'

# --- Synthetic artefacts in the exact formats the commands write ------------------------------------


def write_manifest(run_dir: pathlib.Path) -> None:
  """data/manifest.json as searchless.pipelines.annotate writes it."""
  manifest = artefacts.AnnotationManifest(
    **{
      'code': {'searchless': '0.1.0', 'python': '3.11.7'},
      'command': ['searchless.pipelines.annotate', '--input', 'games.pgn', '--out', str(run_dir / 'data')],
      'inputs': {'train': ['games.pgn']},
      'output_dir': str(run_dir / 'data'),
      'engine': {
        'deadline_s': 30.0,
        'hash_mb': 16,
        'id': [{'author': 'the Stockfish developers', 'name': 'Stockfish 15.1'}],
        'limit': 'nodes=5000',
        'max_attempts': 3,
        'mode': 'multipv',
        'path': '/usr/games/stockfish',
        'state_value': 'best_move',
        'threads': 1,
      },
      'games': {
        'read': 23,
        'kept': 20,
        'skipped': {'illegal_move': 2, 'variant': 1},
        'corrupt_input_files': 0,
        'filters': {
          'min_elo': None,
          'max_elo': None,
          'speeds': '',
          'exclude_bots': False,
          'max_games_per_file': None,
          'sample_games': None,
        },
      },
      'split': {
        'test_fraction': 0.1,
        'by': 'hash of game',
        'dedup_by': 'fen',
        'drop_test_overlap': False,
        'test_boards_in_train': 3,
        'test_boards_in_train_fraction': 0.025,
      },
      'splits': {
        'train': {
          'boards_seen': 60,
          'boards': 50,
          'boards_annotated': 50,
          'boards_failed': 0,
          'terminal_boards': 1,
          'action_values': 1280,
        },
        'test': {
          'boards_seen': 125,
          'boards': 120,
          'boards_annotated': 120,
          'boards_failed': 0,
          'terminal_boards': 0,
          'action_values': 3456,
        },
      },
      'engine_restarts': 0,
      'outputs': {},
      'timings': {'wall_seconds': 31.5, 'ms_per_board': {'count': 170, 'mean': 11.25, 'min': 4, 'max': 149}},
    }
  )
  manifest.write(run_dir / 'data' / 'manifest.json')


TRAIN_OVERRIDES = ['data.batch_size=32', 'train.num_steps=20']
TINY_PARAMS = (
  402_624  # `model.num_params` of the tiny config's model (test_training_reads_buckets_and_size_from_the_run).
)


def write_training(run_dir: pathlib.Path, overrides: tuple[str, ...] = (), num_params: int = TINY_PARAMS) -> None:
  """train/config.json (the resolved config), train/metrics.jsonl and train/summary.json as
  searchless.training.train writes them."""
  train = run_dir / 'train'
  (train / 'checkpoints').mkdir(parents=True, exist_ok=True)
  config = configs.load('tiny', TRAIN_OVERRIDES + list(overrides))
  (train / 'config.json').write_text(config_lib.to_json(config))
  artefacts.TrainingSummary(
    step=20,
    num_steps=config.train.num_steps,
    complete=True,
    num_params=num_params,
    num_return_buckets=config.num_return_buckets,
    policy=config.policy,
    batch_size=config.data.batch_size,
    overrides=TRAIN_OVERRIDES + list(overrides),
    wall_seconds=6.5,
  ).write(train / 'summary.json')
  records = [
    {
      'step': 10,
      'loss': 4.9,
      'grad_norm': 2.0,
      'examples_per_s': 100.0,
      'tokens_per_s': 7900.0,
      'devices': 1,
      'processes': 1,
      'mfu': 0.1,
    },
    {'step': 10, 'eval_loss': 4.95, 'eval_action_accuracy': 0.05, 'eval_boards': 117},
    {
      'step': 20,
      'loss': 4.6,
      'grad_norm': 1.5,
      'examples_per_s': 200.0,
      'tokens_per_s': 15800.0,
      'devices': 1,
      'processes': 1,
      'mfu': 0.2,
    },
    {'step': 20, 'eval_loss': 4.7, 'eval_action_accuracy': 0.0625, 'eval_boards': 117},
  ]
  (train / 'metrics.jsonl').write_text(''.join(json.dumps(r) + '\n' for r in records))


# Two boards of (predicted, Stockfish) win probabilities; with 20 bins every pair has a bin of its own.
BOARDS = [
  ('7k/8/8/8/8/8/8/K6R w - - 0 1', ['h1h8', 'a1a2', 'a1b1'], [0.81, 0.33, 0.12], [0.9, 0.4, 0.1]),
  ('7k/8/8/8/8/8/8/K7 w - - 0 1', ['a1a2', 'a1b1'], [0.52, 0.58], [0.5, 0.7]),
]


def write_eval(run_dir: pathlib.Path) -> None:
  """eval/metrics.json and eval/boards.jsonl as searchless.evaluation.evaluate writes them."""
  directory = run_dir / 'eval'
  directory.mkdir(parents=True, exist_ok=True)
  summary = artefacts.EvaluationMetrics(
    **{
      'action_accuracy': 0.41875,
      'kendall_tau': 0.30512,
      'kendall_tau_reference_argsort': 0.2,
      'log_loss': 6.5678,
      'l2_win_prob': 0.05198,
      'entropy': 6.557,
      'boards': 117,
      'kendall_tau_boards': 114,
      'dropped_boards': 2,
      'policy': 'action_value',
      'checkpoint': str(run_dir / 'train'),
      'data': str(run_dir / 'data' / 'test' / 'action_value_data.bag'),
      'seconds': 7.83,
    }
  )
  summary.write(directory / 'metrics.json')
  with open(directory / 'boards.jsonl', 'w') as f:
    for fen, moves, predicted, stockfish in BOARDS:
      metrics = {
        'log_loss': 5.0,
        'l2_win_prob': 0.01,
        'entropy': 6.0,
        'action_accuracy': 1.0,
        'kendall_tau': None,
        'kendall_tau_reference_argsort': 1.0,
      }
      f.write(
        json.dumps(
          {
            'fen': fen,
            'metrics': metrics,
            'moves': moves,
            'stockfish': stockfish,
            'predicted': predicted,
            'value': None,
          }
        )
        + '\n'
      )


PUZZLES = [  # (id, rating, solved)
  ('p1', 1050, 1),
  ('p2', 1100, 1),
  ('p3', 1150, 0),
  ('p4', 1190, 0),
  ('p5', 1000, 0),
  ('p6', 1400, 1),
  ('p7', 1450, 0),
  ('p8', 1599, 0),
]


def write_puzzles(run_dir: pathlib.Path, mined: bool = True) -> None:
  """puzzles/puzzles.csv (Lichess columns), results.csv and summary.json as evaluation.puzzles writes them."""
  directory = run_dir / 'puzzles'
  directory.mkdir(parents=True, exist_ok=True)
  themes = 'mined mateIn1' if mined else 'mateIn1 short'
  with open(directory / 'puzzles.csv', 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(puzzles_lib.LICHESS_COLUMNS)
    for pid, rating, _ in PUZZLES:
      writer.writerow(
        [pid, '6k1/1p3ppp/8/8/8/8/5PPP/R2R2K1 b - - 0 1', 'b7b6 d1d8', rating, 80, 90, 100, themes, '', '']
      )
  with open(directory / 'results.csv', 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(puzzle_eval.RESULT_COLUMNS)
    for pid, rating, solved in PUZZLES:
      writer.writerow(
        [pid, rating, solved, 'd1d8' if solved else 'd1d7', 'd1d8', '' if solved else 1, 'b7b6 d1d8', themes]
      )
  results = [puzzle_eval.PuzzleResult(pid, rating, bool(solved), (), None, ()) for pid, rating, solved in PUZZLES]
  bands = puzzle_eval.accuracy_by_band(results)
  solved = sum(r.solved for r in results)
  artefacts.PuzzleSummary(
    agent=MODEL,
    agent_spec=f'checkpoint:{run_dir}/train,name={MODEL}',
    puzzles=str(directory / 'puzzles.csv'),
    n=len(results),
    solved=solved,
    accuracy=solved / len(results),
    band_width=200,
    bands=[b._asdict() for b in bands],
    seconds=1.5,
  ).write(directory / 'summary.json')


class Scripted:
  """An agent playing fixed UCI moves."""

  def __init__(self, name: str, *moves: str):
    self.name, self.moves = name, list(moves)

  def play(self, board: chess.Board) -> chess.Move:
    return chess.Move.from_uci(self.moves.pop(0))

  def close(self) -> None:
    pass


def _game(
  round_number: int, white: Scripted, black: Scripted, opening: openings_lib.Opening, max_plies: int = 40
) -> str:
  game = tournament.play_game(
    white,
    black,
    opening,
    adjudication=tournament.Adjudication(max_plies=max_plies, eval=False),
    round_number=round_number,
    date='2026.01.01',
  )
  return str(game)


def write_match(run_dir: pathlib.Path) -> list[str]:
  """match/games.pgn and match/results.json as searchless.evaluation.tournament writes them; returns the PGN texts.

  The model: round 1 wins (scholar's mate, 7 plies), round 2 draws (threefold repetition), round 3 loses
  (fool's mate as White), round 4 wins (fool's mate as Black): +2 =1 -1, 2.5/4.
  """
  directory = run_dir / 'match'
  directory.mkdir(parents=True, exist_ok=True)
  e4e5 = openings_lib.Opening('1. e4 e5', '', ('e2e4', 'e7e5'))
  f3 = openings_lib.Opening('1. f3', '', ('f2f3',))
  start = openings_lib.Opening('start', chess.STARTING_FEN)
  texts = [
    _game(1, Scripted(MODEL, 'f1c4', 'd1h5', 'h5f7'), Scripted(OPPONENT, 'b8c6', 'g8f6'), e4e5),
    _game(2, Scripted(OPPONENT, 'g1f3', 'f3g1', 'g1f3', 'f3g1'), Scripted(MODEL, 'g8f6', 'f6g8', 'g8f6', 'f6g8'), e4e5),
    _game(3, Scripted(MODEL, 'f2f3', 'g2g4'), Scripted(OPPONENT, 'e7e5', 'd8h4'), start),
    _game(4, Scripted(OPPONENT, 'g2g4'), Scripted(MODEL, 'e7e5', 'd8h4'), f3),
  ]
  (directory / 'games.pgn').write_text(''.join(t + '\n\n' for t in texts))
  Record = collections.namedtuple('Record', 'white black result termination reason')
  records = []
  for text in texts:
    game = chess.pgn.read_game(io.StringIO(text))
    h = game.headers
    records.append(Record(h['White'], h['Black'], h['Result'], h['Termination'], game.end().comment))
  ratings = elo_lib.fit([elo_lib.Game(r.white, r.black, r.result) for r in records], anchors={OPPONENT: 1350.0})
  results = artefacts.MatchResults(
    **{
      'games_file': str(directory / 'games.pgn'),
      'games': 4,
      'played_this_run': 4,
      'workers': 1,
      'wall_seconds': 12.2,
      'games_per_minute': 19.67,
      'agents': [
        {'name': MODEL, 'spec': f'checkpoint:{run_dir}/train,name={MODEL}', 'elo': None},
        {'name': OPPONENT, 'spec': f'stockfish:nodes=1000,elo=1350,name={OPPONENT}', 'elo': 1350},
      ],
      'adjudication': {
        'max_plies': 40,
        'claim_draws': True,
        'eval': True,
        'eval_engine': None,
        'eval_limit': 'time=0.01',
        'win_cp': 1300,
        'draw_cp': None,
        'draw_plies': 10,
        'draw_after_move': 40,
      },
      'scores': {MODEL: {'points': 2.5, 'games': 4}, OPPONENT: {'points': 1.5, 'games': 4}},
      'pairs': tournament.pair_results(records, [MODEL, OPPONENT]),
      'terminations': {'normal': 4},
      'endings': dict(collections.Counter(r.reason for r in records)),
      'anchors': {OPPONENT: 1350.0},
      'elo': ratings.to_dict(),
      'elo_table': ratings.table(),
      'elo_error': None,
    }
  )
  results.write(directory / 'results.json')
  return texts


def write_all(run_dir: pathlib.Path) -> None:
  write_manifest(run_dir)
  write_training(run_dir)
  write_eval(run_dir)
  write_puzzles(run_dir)
  write_match(run_dir)
  sample_game.analyse(run_dir, stockfish_nodes=0, use_model=False)  # searchless-analyse-game --no_model.


class TagChecker(html.parser.HTMLParser):
  """Every non-void element closed, in order."""

  VOID = {'meta', 'img', 'br', 'hr', 'link', 'input', 'source', 'col', 'wbr', 'area', 'base'}

  def __init__(self):
    super().__init__()
    self.stack, self.errors, self.count = [], [], collections.Counter()
    self.images = []

  def handle_starttag(self, tag, attrs):
    self.count[tag] += 1
    if tag == 'img':
      self.images.append(dict(attrs)['src'])
    if tag not in self.VOID:
      self.stack.append(tag)

  def handle_endtag(self, tag):
    if not self.stack or self.stack[-1] != tag:
      self.errors.append(f'</{tag}> closes {self.stack[-1:]} at {self.getpos()}')
    else:
      self.stack.pop()


def check_html(text: str) -> TagChecker:
  checker = TagChecker()
  checker.feed(text)
  checker.close()
  assert not checker.errors, checker.errors[:5]
  assert checker.stack == [], checker.stack
  return checker


def section(md: str, title: str) -> str:
  """The Markdown of one section, without its heading."""
  return md.split(f'## {title}\n\n')[1].split('\n<a id=')[0].split('\n---\n')[0]


def valid_png(path: pathlib.Path) -> bool:
  with open(path, 'rb') as f:
    if f.read(8) != PNG_SIGNATURE:
      return False
  with Image.open(path) as image:
    image.verify()
    return image.format == 'PNG' and image.size[0] > 100


# --- Tests --------------------------------------------------------------------------------------------


def test_calibration_bins_by_hand():
  bins = figures.calibration_bins([0.05, 0.15, 0.12, 0.95, 1.0, 0.55], [0.0, 0.2, 0.4, 1.0, 0.8, 0.5], num_bins=4)
  assert [(b.lower, b.upper, b.count) for b in bins] == [(0.0, 0.25, 3), (0.25, 0.5, 0), (0.5, 0.75, 1), (0.75, 1.0, 2)]
  assert bins[0].mean_predicted == pytest.approx(0.32 / 3) and bins[0].mean_stockfish == pytest.approx(0.2)
  assert math.isnan(bins[1].mean_predicted) and math.isnan(bins[1].mean_stockfish)
  assert (bins[2].mean_predicted, bins[2].mean_stockfish) == pytest.approx((0.55, 0.5))
  assert (bins[3].mean_predicted, bins[3].mean_stockfish) == pytest.approx((0.975, 0.9))  # 1.0 is in the last bin.
  # (3 * |0.1067 - 0.2| + 1 * 0.05 + 2 * 0.075) / 6 = 0.48 / 6.
  assert figures.calibration_error(bins) == pytest.approx(0.08)
  with pytest.raises(ValueError, match='differ in shape'):
    figures.calibration_bins([0.1], [0.1, 0.2])


def test_training_time_from_throughput():
  records = [
    {'step': 10, 'examples_per_s': 100.0},
    {'step': 20, 'examples_per_s': 200.0},
    {'step': 20, 'eval_loss': 1.0},
  ]
  assert training_section.training_wall_seconds(records, batch_size=32) == pytest.approx(10 * 32 / 100 + 10 * 32 / 200)


def test_full_report_has_exact_numbers_figures_and_valid_html(tmp_path, capsys):
  run_dir = tmp_path / 'run'
  write_all(run_dir)
  report_command.main(['--run_dir', str(run_dir), '--no_model', '--stockfish_nodes', '0'])  # Flags now ignored.
  out = capsys.readouterr().out.strip().splitlines()
  out_dir = run_dir / 'report'
  assert out[-1] == str(out_dir / 'report.html')
  md = (out_dir / 'report.md').read_text()
  page = (out_dir / 'report.html').read_text()

  # Summary: headline numbers, formatted.
  ratings = artefacts.MatchResults.read(run_dir / 'match' / 'results.json').elo['players']
  model = next(p for p in ratings if p['name'] == MODEL)
  elo_text = f'{model["elo"]:.0f} ± {model["plus_minus"]:.0f}'
  summary = section(md, 'Summary')
  for line in (
    '| Action accuracy | **41.9%** (117 test boards) |',
    "| Kendall's tau-b | **0.305** (argsort variant 0.200) |",
    '| Puzzle accuracy | **37.5%** (3/8 puzzles (mined)) |',
    '| Match score | **2.5/4** (62.5% vs sf1350) |',
    f'| Elo | **{elo_text}** (95% interval; anchor sf1350=1350) |',
    '- **Engine:** Stockfish 15.1, `--mode multipv --limit nodes=5000` (per board)',
    '- **Data:** 20 games → 50 train boards (1,280 action-values), 120 test boards (3,456)',
    '- **Model:** action_value transformer, 4 layers × d=64, 402,624 (0.40M) parameters',
    '- **Training:** 20 steps × batch 32 (640 examples, 0.50 epochs), ≈ 4.8 s',
  ):
    assert line in summary, line
  assert 'Incomplete' not in summary
  for label, value in (
    ('Action accuracy', '41.9%'),
    ('Kendall&#x27;s tau-b', '0.305'),
    ('Puzzle accuracy', '37.5%'),
    ('Match score', '2.5/4'),
    ('Elo', elo_text),
  ):
    assert f'<div class="label">{label}</div><div class="value">{value}</div>' in page

  # Dataset.
  assert '| train | 60 | 50 | 1,280 | 1 | 0 |' in md and '| test | 125 | 120 | 3,456 | 0 | 0 |' in md
  assert '| `illegal_move` | 2 | an illegal or ambiguous move in the game text |' in md
  assert '**Test-in-train overlap:** 3 test boards also in train (2.5%); kept, as the paper did' in md
  assert (
    '- **Search:** `--mode multipv` (one MultiPV search per board scores every legal move), '
    '`--limit nodes=5000` per board' in md
  )
  # Training.
  assert '- **Steps:** 20 of 20 = 640 examples, 0.50 epochs' in md
  assert '- **Wall time:** ≈ 4.8 s (from the logged throughput: steps and evaluations, not start-up)' in md
  assert '| eval action accuracy | 6.2% | step 20 (best 6.2% at step 20; 117 boards) |' in md
  # Test-set metrics, with the calibration bins of the two boards.
  assert '| Action accuracy | 41.9% |' in md and "| Kendall's tau-b | 0.305 |" in md
  assert "| Kendall's tau (reference argsort variant) | 0.200 |" in md and 'tau-b on the values' in md
  assert '| L2 win prob. | 0.0520 |' in md and '(114 boards)' in md
  for row in (
    '| 0.10–0.15 | 1 | 0.120 | 0.100 |',
    '| 0.30–0.35 | 1 | 0.330 | 0.400 |',
    '| 0.50–0.55 | 1 | 0.520 | 0.500 |',
    '| 0.55–0.60 | 1 | 0.580 | 0.700 |',
    '| 0.80–0.85 | 1 | 0.810 | 0.900 |',
  ):
    assert row in md
  assert 'Expected calibration error (count-weighted |gap|): **0.064**' in md  # (.02 + .07 + .02 + .12 + .09) / 5.
  # Puzzles.
  assert '**37.5%** of 8 puzzles solved (3/8)' in md and 'Themes contain `mined`' in md
  assert '| 1000–1199 | 5 | 2 | 40.0% |' in md and '| 1400–1599 | 3 | 1 | 33.3% |' in md
  # Match, from the model's side.
  assert '| searchless | sf1350 | 4 | 2 | 1 | 1 | 2.5/4 | 62.5% |' in md
  assert f'| **searchless** | {model["elo"]:.0f} | ± {model["plus_minus"]:.0f} |' in md
  assert '| sf1350 | 1350 | fixed (anchor) |' in md and 'anchored to `sf1350` = 1350' in md
  assert '| checkmate | 3 |' in md and '| threefold repetition | 1 |' in md
  # The sample game: the model's longest win (round 1, 7 plies), book moves in italics, model moves bold.
  game = section(md, 'A sample game')
  assert 'Round 1: **searchless** (White) vs **sf1350** (Black), **1-0** after 7 plies' in game
  assert "Chosen as the model's longest win." in game
  assert '| 1 | *e4* | *e5* |' in game and '| 2 | **Bc4** | Nc6 |' in game and '| 4 | **Qxf7#** |  |' in game
  assert '![Final position (1-0): ' in game and '](sample_game_final.svg)' in game
  # Play it: this run's paths.
  assert f'searchless-uci --checkpoint {run_dir}/train' in md

  # Figures: valid PNGs next to the reports, linked relatively in Markdown, embedded in the HTML.
  for name in ('training.png', 'calibration.png', 'puzzles_by_rating.png', 'ratings.png'):
    assert valid_png(out_dir / name), name
    assert f']({name})' in md
  assert not (out_dir / 'sample_game.png').exists()  # No model and no Stockfish: no win-probability curve.
  assert (out_dir / 'sample_game_final.svg').read_text().startswith('<svg')
  checker = check_html(page)
  assert len(checker.images) == 4 and all(src.startswith('data:image/png;base64,') for src in checker.images)
  assert checker.count['section'] == 8 and checker.count['h2'] == 8 and checker.count['svg'] == 1
  assert '<title>searchless run report</title>' in page and 'not run' not in page


def test_missing_steps_say_not_run_with_their_command(tmp_path):
  run_dir = tmp_path / 'empty'
  run_dir.mkdir()
  path = report.build(run_dir).html
  md = (run_dir / 'report' / 'report.md').read_text()
  d = str(run_dir)
  expected = {
    'Dataset': (f'`{d}/data/manifest.json` is missing', f'searchless-annotate --input GAMES.pgn --out {d}/data'),
    'Training': (
      f'`{d}/train/config.json` is missing',
      f"searchless-train --config CONFIG --workdir {d}/train --data '{d}/data/train/action_value*' "
      f"--eval_data '{d}/data/test/action_value*'",
    ),
    'Test-set metrics': (
      f'`{d}/eval/metrics.json` is missing',
      f'searchless-evaluate --checkpoint {d}/train --data {d}/data/test --out {d}/eval',
    ),
    'Puzzles': (
      f'`{d}/puzzles/summary.json` is missing',
      f'searchless-mine-puzzles --games TEST_GAMES.pgn --out {d}/puzzles/puzzles.csv\n'
      f'searchless-puzzles --puzzles {d}/puzzles/puzzles.csv --agent checkpoint:{d}/train,name=searchless '
      f'--out {d}/puzzles',
    ),
    'Match': (
      f'`{d}/match/results.json` is missing',
      f'searchless-tournament --agent checkpoint:{d}/train,name=searchless --agent OPPONENT --out {d}/match',
    ),
    'A sample game': (f'`{d}/match/games.pgn` is missing or empty', 'searchless-tournament --agent'),
    'Play it': (f'`{d}/train/checkpoints` is missing', 'searchless-train --config'),
  }
  for title, (why, command) in expected.items():
    text = section(md, title)
    assert text.startswith('> **Not run.** '), title
    assert why in text and f'```sh\n{command}' in text, (title, text)
    assert f'python -m searchless.commands.demo --run_dir {d}' in text
  assert 'Incomplete: Dataset (not run), Training (not run), Test-set metrics (not run), Puzzles (not run), ' in md
  page = path.read_text()
  check_html(page)
  assert page.count('<span class="badge not-run">not run</span>') == 7
  assert not list((run_dir / 'report').glob('*.png'))


def test_partial_run_and_a_broken_artefact(tmp_path):
  run_dir = tmp_path / 'run'
  write_manifest(run_dir)
  write_training(run_dir)
  write_puzzles(run_dir, mined=False)
  (run_dir / 'puzzles' / 'summary.json').unlink()  # Mined, not yet solved: only the solving command is needed.
  write_eval(run_dir)
  boards = run_dir / 'eval' / 'boards.jsonl'
  boards.write_text(boards.read_text()[:50])  # Cut short.
  report.build(run_dir)
  md = (run_dir / 'report' / 'report.md').read_text()
  metrics = section(md, 'Test-set metrics')
  assert metrics.startswith('> **Error.** This section could not be built: JSONDecodeError')
  puzzles = section(md, 'Puzzles')
  assert '```sh\nsearchless-puzzles --puzzles' in puzzles and 'searchless-mine-puzzles' not in puzzles
  assert '| Action accuracy |' not in md and '- **Training:** 20 steps × batch 32' in md
  assert 'Incomplete: Test-set metrics (error), Puzzles (not run), Match (not run), A sample game (not run).' in md
  assert valid_png(run_dir / 'report' / 'training.png')
  check_html((run_dir / 'report' / 'report.html').read_text())


def test_pick_game_prefers_the_longest_win():
  games = [
    chess.pgn.read_game(io.StringIO(t))
    for t in (
      '[White "m"]\n[Black "o"]\n[Result "0-1"]\n\n1. e4 e5 2. Nf3 Nc6 3. Bc4 Nf6 0-1',
      '[White "o"]\n[Black "m"]\n[Result "0-1"]\n\n1. f3 e5 2. g4 Qh4# 0-1',
      '[White "m"]\n[Black "o"]\n[Result "1-0"]\n\n1. e4 e5 1-0',
    )
  ]
  assert sample_game.pick_game(games, {'m'}) is games[1]
  assert sample_game.pick_game(games[:1] + games[2:], {'m'}) is games[2]
  assert sample_game.pick_game(games[:1], {'m'}) is games[0]
  assert sample_game.pick_game(games, {'nobody'}) is games[0]


def test_training_reads_buckets_and_size_from_the_run(tmp_path):
  """The bucket count and the parameter count are the run's (train/summary.json), never assumed or re-derived."""
  import jax

  from searchless.model import network
  from searchless.model.config import ModelConfig

  config = configs.load('tiny')
  shapes = jax.eval_shape(lambda: network.init_params(ModelConfig.from_config(config)))
  assert network.num_params(shapes) == TINY_PARAMS  # The fixtures' summary.json tells the truth.
  run_dir = tmp_path / 'run'
  write_training(run_dir, overrides=('num_return_buckets=32',), num_params=12_345)
  md = section(report.build(run_dir).markdown.read_text(), 'Training')
  assert '32 value buckets' in md and '- **Parameters:** 12,345 (0.01M)' in md
  assert 'ln 32 = 3.47 is a uniform guess over the 32 value buckets' in md
  (run_dir / 'train' / 'summary.json').unlink()  # Not finished once yet: the config's buckets, no size.
  md = section(report.build(run_dir).markdown.read_text(), 'Training')
  assert '32 value buckets' in md and '- **Parameters:** n/a' in md and '- **Steps:** 20 of 20 = 640 examples' in md


def test_sample_game_with_the_models_view(tmp_path, model_checkpoint):
  run_dir = tmp_path / 'run'
  write_match(run_dir)
  shutil.copytree(model_checkpoint, run_dir / 'train')
  analyse_command.main(['--run_dir', str(run_dir), '--stockfish_nodes', '0'])
  report.build(run_dir)
  md = (run_dir / 'report' / 'report.md').read_text()
  game = section(md, 'A sample game')
  # The model's three moves (Bc4, Qh5, Qxf7#) carry its predicted win probability; the book and the opponent's none.
  for move in ('Bc4', 'Qh5', 'Qxf7#'):
    assert re.search(rf'\*\*{move}\*\* \(model \d+%( \[[^\]]+\])?\)', game), move
  assert game.count('(model ') == 3 and '| 1 | *e4* | *e5* |' in game
  assert valid_png(run_dir / 'report' / 'sample_game.png')
  assert '![win probability over the game](sample_game.png)' in game
  check_html((run_dir / 'report' / 'report.html').read_text())


@pytest.mark.engine
def test_sample_game_with_stockfish(tmp_path, stockfish):
  run_dir = tmp_path / 'run'
  write_match(run_dir)
  sample_game.analyse(run_dir, use_model=False, stockfish_nodes=500)
  report.build(run_dir)
  game = section((run_dir / 'report' / 'report.md').read_text(), 'A sample game')
  assert '| 4 | **Qxf7#** (SF 100%) |  |' in game  # Checkmate: decided by the rules, not searched.
  assert game.count('(SF ') == 3 and '(500 nodes per position)' in game
  assert valid_png(run_dir / 'report' / 'sample_game.png')


def test_the_report_runs_neither_model_nor_engine_for_the_sample_game(tmp_path):
  run_dir = tmp_path / 'run'
  write_match(run_dir)
  game = section(report.build(run_dir).markdown.read_text(), 'A sample game')
  assert game.startswith('> **Not run.** No sample game analysed: ')
  assert f'```sh\nsearchless-analyse-game --run_dir {run_dir}\n```' in game
  path = sample_game.analyse(run_dir, stockfish_nodes=0, use_model=False)
  assert path == run_dir / 'report' / 'sample_game.json'
  analysis = sample_game.SampleGame.read(path)
  assert (analysis.model_color, analysis.book_plies, [p['san'] for p in analysis.plies]) == (
    'white',
    2,
    ['e4', 'e5', 'Bc4', 'Nc6', 'Qh5', 'Nf6', 'Qxf7#'],
  )
  assert "Chosen as the model's longest win." in section(report.build(run_dir).markdown.read_text(), 'A sample game')


def test_an_artefact_of_another_format_ends_the_report_with_one_line(tmp_path, capsys):
  run_dir = tmp_path / 'run'
  write_eval(run_dir)
  old = run_dir / 'eval' / 'metrics.json'
  old.write_text(json.dumps({'action_accuracy': 0.5}))  # Written before artefacts had a format.
  with pytest.raises(SystemExit) as exit:
    report_command.main(['--run_dir', str(run_dir)])
  assert exit.value.code == 2
  assert capsys.readouterr().err == f'error: {old}: not a searchless-evaluate file (no "format" field)\n'
  with pytest.raises(SystemExit):
    analyse_command.main(['--run_dir', str(run_dir)])  # No match yet.
  assert capsys.readouterr().err.startswith(f'error: no games to analyse: {run_dir}/match/games.pgn is missing')


def test_not_run_sections_show_the_commands_the_demo_recorded(tmp_path):
  run_dir = tmp_path / 'run'
  run_dir.mkdir()
  recorded = 'searchless-annotate --input games.pgn --out run/data --limit nodes=777'
  (run_dir / 'commands.json').write_text(json.dumps({'annotate': recorded}))
  assert report_context.commands(run_dir)['annotate'] == recorded
  report.build(run_dir)
  assert f'```sh\n{recorded}' in section((run_dir / 'report' / 'report.md').read_text(), 'Dataset')


def test_the_fresh_model_beside_the_pretrained_one(tmp_path):
  run_dir = tmp_path / 'run'
  for name, accuracy, tau in (('eval', 0.25, 0.3), ('eval_pretrained', 0.5, 0.6)):
    artefacts.EvaluationMetrics(
      action_accuracy=accuracy,
      kendall_tau=tau,
      kendall_tau_reference_argsort=None,
      log_loss=None,
      l2_win_prob=None,
      entropy=None,
      boards=10,
      kendall_tau_boards=10,
      dropped_boards=0,
      policy='action_value',
      checkpoint=name,
      data='test',
      seconds=1.0,
    ).write(run_dir / name / 'metrics.json')
  for name, solved in (('puzzles', 3), ('puzzles_pretrained', 7)):
    artefacts.PuzzleSummary(
      agent=name,
      agent_spec='',
      puzzles='p.csv',
      n=10,
      solved=solved,
      accuracy=solved / 10,
      band_width=200,
      bands=[],
      seconds=1.0,
    ).write(run_dir / name / 'summary.json')
  pair = lambda a, b, aw, d, bw: {'a': a, 'b': b, 'games': aw + d + bw, 'a_wins': aw, 'draws': d, 'b_wins': bw}
  artefacts.MatchResults(
    games_file='games.pgn',
    games=12,
    played_this_run=12,
    workers=1,
    wall_seconds=1.0,
    games_per_minute=None,
    agents=[
      {'name': 'searchless', 'spec': f'checkpoint:{run_dir}/train,name=searchless'},
      {'name': 'pretrained', 'spec': 'checkpoint:pretrained,name=pretrained'},
      {'name': 'sf', 'spec': 'stockfish:nodes=50,name=sf'},
    ],
    adjudication={},
    scores={},
    pairs=[
      pair('searchless', 'pretrained', 0, 1, 3),
      pair('searchless', 'sf', 1, 0, 3),
      pair('pretrained', 'sf', 2, 2, 0),
    ],
    terminations={},
    endings={},
    anchors={},
    elo=None,
    elo_table=None,
    elo_error=None,
  ).write(run_dir / 'match' / 'results.json')
  md = section(report.build(run_dir).markdown.read_text(), 'Beside the pretrained model')
  for row in (
    '| Action accuracy (test boards) | 25.0% | 50.0% |',
    "| Kendall's tau-b | 0.300 | 0.600 |",
    '| Puzzles solved | 30.0% (3/10) | 70.0% (7/10) |',
    '| Against `sf` | +1 =0 -3 (25.0%) | +2 =2 -0 (75.0%) |',
    '| Head to head | +0 =1 -3 | +3 =1 -0 |',
  ):
    assert row in md, row
