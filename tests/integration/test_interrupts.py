"""Ctrl-C: every command ends with one line and exit status 130, and leaves nothing half-written.

Ctrl-C at a terminal sends SIGINT to the whole foreground process group (the command, Beam's workers, the
engines): each test starts the command in a session of its own and signals that group, as a terminal would.
"""

import json
import pathlib
import signal
import sys
import time

import pytest

from searchless import samples

from helpers import signal_when

SAMPLE_GAMES = pathlib.Path(samples.__file__).parent / 'sample_games.pgn'


@pytest.mark.parametrize('command', ['annotate', 'import_labels'])
def test_ctrl_c_in_a_beam_job_is_one_line_and_leaves_no_output_folder(tmp_path, stockfish, lichess_999, command):
  out = tmp_path / 'out'
  started = []

  def ready():  # The output folder is claimed just before the pipeline runs; give Beam's workers a moment.
    if out.exists() and not started:
      started.append(time.monotonic())
    return bool(started) and time.monotonic() - started[0] > 3

  args = {
    'annotate': ['--input', str(SAMPLE_GAMES), '--limit', 'nodes=20000', '--engine_path', stockfish, '--no_progress'],
    'import_labels': [str(lichess_999)] * 20,
  }[command]  # The same games 20 times: a job of some seconds.
  status, stdout, stderr = signal_when(
    [sys.executable, '-m', f'searchless.pipelines.{command}', *args, '--out', str(out)], ready
  )
  assert (status, stdout, stderr) == (130, '', f'interrupted; nothing written to {out}\n')
  assert not out.exists()


def test_ctrl_c_in_training_saves_says_how_to_resume_and_exits_130(tmp_path, compat):
  work = tmp_path / 'run'
  status, stdout, stderr = signal_when(
    [
      sys.executable,
      '-m',
      'searchless.commands.train',
      '--config',
      'tiny',
      '--workdir',
      str(work),
      '--data',
      str(compat / 'action_value_sample.bag'),
      'model.embedding_dim=32',
      'model.num_layers=1',
      'model.num_heads=2',
      'data.batch_size=16',
      'train.log_every=1',
      'train.num_steps=100000',
      'train.ckpt_every=100000',
      'train.compute_dtype=float32',
    ],
    lambda: (work / 'metrics.jsonl').exists(),
  )
  steps = [int(d.name) for d in (work / 'checkpoints').iterdir() if d.name.isdigit()]
  assert len(steps) == 1  # Saved where it stopped.
  assert status == 130, stderr[-3000:]
  assert 'Traceback' not in stderr
  assert stderr.splitlines()[-1] == (
    f'interrupted; checkpoint saved at step {steps[0]}/100000; rerun the same command to resume'
  )
  assert json.loads((work / 'summary.json').read_text())['step'] == steps[0]
  assert stdout == ''


@pytest.mark.engine
@pytest.mark.parametrize('sig', [signal.SIGINT, signal.SIGTERM], ids=['ctrl-c', 'sigterm'])
def test_ctrl_c_in_a_tournament_with_worker_processes_stops_at_once_keeping_every_finished_game(
  tmp_path, stockfish, sig
):
  """The shipped model against Stockfish in two worker processes; Ctrl-C once two games are in: one line, exit 130
  at once, no worker's traceback, the finished games kept, and no process of the command left (workers, engines).
  SIGTERM to the command alone (`kill`, a scheduler) does the same with exit 143: it used to end the command
  alone, its workers playing on and their games lost."""
  import psutil

  from helpers import alive, signal_when
  from searchless.evaluation.tournament import pgn_file

  out = tmp_path / 'match'
  games = out / 'games.pgn'
  argv = [
    *[sys.executable, '-m', 'searchless.commands.tournament', '--gauntlet', '--agent', 'checkpoint:pretrained'],
    *['--agent', 'stockfish:nodes=1,elo=1350', '--make_openings', '10', '--max_plies', '30', '--adjudicate_cp', '0'],
    *['--workers', '2', '--engine_path', stockfish, '--no_progress', '--out', str(out)],
  ]
  seen: dict = {}

  def two_games_in() -> bool:  # Once true, what the signal finds: the command's processes and its games.
    if not (games.exists() and games.read_text().count('[Event ') >= 2):
      return False
    me = psutil.Process()  # The command is a child of this process; its workers and engines are below it.
    seen.update(processes=[p for p in me.children(recursive=True) if p.ppid() != me.pid], kept=games.read_text())
    return True

  # Ctrl-C as a terminal's: the command, its workers and their engines (it used to hang for minutes); SIGTERM as
  # `kill PID`'s: the command alone.
  status, stdout, stderr = signal_when(argv, two_games_in, sig, group=sig == signal.SIGINT, stop=60)
  processes, kept = seen['processes'], seen['kept']
  assert len(processes) >= 4  # The two workers and their engines, at least.
  played = games.read_text()
  assert played.startswith(kept)  # Every game finished before the signal, and nothing cut after them.
  records, dropped = pgn_file.load_games(str(games))
  count = len(records)
  assert (count >= 2, dropped) == (True, 0)
  assert (status, stdout, stderr) == (
    130 if sig == signal.SIGINT else 143,
    '',
    f'interrupted; {count} of 20 games kept in {games}; rerun the same command to play the rest\n',
  )
  deadline = time.monotonic() + 10  # Engines quit when their worker's pipe closes.
  while any(alive(p) for p in processes) and time.monotonic() < deadline:
    time.sleep(0.1)
  assert [p.pid for p in processes if alive(p)] == []
