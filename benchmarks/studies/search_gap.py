"""The search gap: one model played without search and with MCTS at 16 to 1024 simulations (and alpha-beta).

    .venv/bin/python benchmarks/studies/search_gap.py --workdir RUNS/search_gap  # the shipped model, ~1 h on 2 cores

For `--checkpoint` (default: the model shipped in the package) it measures

* the searchless player (``checkpoint:``, 0 simulations), MCTS at ``--sims``
  (``search:CKPT,sims=N``) and alpha-beta at ``--depths`` on the first
  ``--num_puzzles`` dev puzzles (``../shared/data/puzzles/lichess_puzzles_dev.csv``,
  every solution move required): accuracy, by 400-point rating band, and the
  mean time per move;
* a round robin of the searchless player, the MCTS agents and Stockfish at
  UCI_Elo ``--elo`` (``stockfish:nodes=100000,elo=N``, which anchors BayesElo),
  ``--games_per_pair`` games per pair from the named openings
  (``../shared/data/openings/``), both colours: each agent's BayesElo with its
  95% interval and its Elo gain over the searchless player.

Writes WORKDIR/search_gap.json and WORKDIR/search_gap.md; prints the table.
Resumable: finished puzzle runs are kept in the JSON, the tournament continues
from its PGN.
"""

import argparse
import json
import os
import pathlib
import platform
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / 'shared' / 'data'


class Timed:
  """An agent wrapper that counts moves and the time spent choosing them."""

  def __init__(self, agent):
    self.agent, self.name, self.moves, self.seconds = agent, agent.name, 0, 0.0

  def play(self, board):
    start = time.perf_counter()
    move = self.agent.play(board)
    self.seconds += time.perf_counter() - start
    self.moves += 1
    return move

  def close(self):
    self.agent.close()


def main(argv=None) -> None:
  from searchless.data import puzzles as puzzles_lib
  from searchless.evaluation import puzzles as puzzle_eval
  from searchless.evaluation import tournament
  from searchless.play import agents

  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--checkpoint', default='pretrained', help="the model (default: the shipped 'pretrained')")
  p.add_argument('--workdir', required=True, help='outputs: search_gap.json, search_gap.md, match/')
  p.add_argument('--puzzles', default=str(SHARED / 'puzzles' / 'lichess_puzzles_dev.csv'), help='puzzle CSV')
  p.add_argument('--num_puzzles', type=int, default=200, help='the first N puzzles')
  p.add_argument('--sims', default='16,64,256,1024', help='MCTS simulations per move')
  p.add_argument('--depths', default='2,3', help='alpha-beta depths (puzzles only; empty: none)')
  p.add_argument('--openings', nargs='+', default=sorted(str(f) for f in (SHARED / 'openings').glob('*.tsv')))
  p.add_argument('--games_per_pair', type=int, default=8, help='round-robin games per pair')
  p.add_argument('--elo', type=int, default=1350, help='UCI_Elo of the Stockfish anchor (0: none)')
  p.add_argument('--workers', type=int, default=2, help='games in parallel')
  args = p.parse_args(argv)
  workdir = pathlib.Path(args.workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  out_path = workdir / 'search_gap.json'
  out = json.loads(out_path.read_text()) if out_path.exists() else {}
  out.update({'checkpoint': args.checkpoint, 'machine': f'{platform.machine()}, {os.cpu_count()} cores'})
  ckpt = args.checkpoint
  sims = [int(s) for s in args.sims.split(',') if s]
  depths = [int(d) for d in args.depths.split(',') if d]
  specs = {'searchless': f'checkpoint:{ckpt},name=searchless'}
  specs.update({f'mcts-{n}': f'search:{ckpt},sims={n},name=mcts-{n}' for n in sims})
  puzzle_specs = dict(specs)
  puzzle_specs.update({f'alphabeta-{d}': f'search:{ckpt},algo=alphabeta,depth={d},name=alphabeta-{d}' for d in depths})

  puzzles = list(puzzles_lib.read_puzzles(args.puzzles, limit=args.num_puzzles))
  out.setdefault('puzzles', {})
  for name, spec in puzzle_specs.items():
    if name in out['puzzles']:
      continue
    agent = Timed(agents.from_spec(spec))
    start = time.time()
    results = puzzle_eval.evaluate(puzzles, agent, progress=False)
    agent.close()
    bands = puzzle_eval.accuracy_by_band(results, width=400)
    out['puzzles'][name] = {
      'spec': spec,
      'n': len(results),
      'solved': sum(r.solved for r in results),
      'accuracy': puzzle_eval.accuracy(results),
      'seconds': round(time.time() - start, 1),
      'ms_per_move': round(1000 * agent.seconds / max(agent.moves, 1), 2),
      'moves': agent.moves,
      'bands': [b._asdict() for b in bands],
    }
    print(
      f'{name}: {out["puzzles"][name]["solved"]}/{len(results)} puzzles, {out["puzzles"][name]["ms_per_move"]} ms/move',
      flush=True,
    )
    out_path.write_text(json.dumps(out, indent=2) + '\n')

  entrants = list(specs.values())
  if args.elo:
    entrants.append(f'stockfish:nodes=100000,elo={args.elo},name=stockfish-elo{args.elo}')
  results = tournament.run(
    entrants,
    openings=args.openings,
    games_per_pair=args.games_per_pair,
    workers=args.workers,
    out_dir=str(workdir / 'match'),
    progress=False,
  )
  print(tournament.summary(results), flush=True)
  out['match'] = {
    'elo': results['elo'],
    'anchors': results['anchors'],
    'pairs': results['pairs'],
    'games': results['games'],
    'games_file': results['games_file'],
  }
  out_path.write_text(json.dumps(out, indent=2) + '\n')
  (workdir / 'search_gap.md').write_text(markdown(out) + '\n')
  print(markdown(out))


def markdown(out: dict) -> str:
  elo = {r['name']: r for r in (out.get('match', {}).get('elo') or {}).get('players', [])}
  base = elo.get('searchless')
  lines = [
    '| agent | puzzles solved | accuracy | ms per move | BayesElo (95% interval) | vs searchless | games |',
    '| --- | --- | --- | --- | --- | --- | --- |',
  ]
  for name, pz in out['puzzles'].items():
    rating = elo.get(name)
    games = next(
      (sum(p['games'] for p in out['match']['pairs'] if name in (p['a'], p['b'])) for _ in [0] if rating), ''
    )
    elo_text = f'{rating["elo"]:.0f} ({rating["lower"]:.0f} to {rating["upper"]:.0f})' if rating else 'not played'
    gain = f'{rating["elo"] - base["elo"]:+.0f}' if rating and base else ''
    lines.append(
      f'| {name} | {pz["solved"]}/{pz["n"]} | {100 * pz["accuracy"]:.1f}% | {pz["ms_per_move"]:g} | '
      f'{elo_text} | {gain} | {games} |'
    )
  for name, rating in elo.items():
    if name not in out['puzzles']:
      lines.append(
        f'| {name} | | | | {rating["elo"]:.0f} ({rating["lower"]:.0f} to {rating["upper"]:.0f}) | '
        f'{rating["elo"] - base["elo"]:+.0f} | |'
        if base
        else f'| {name} | | | | {rating["elo"]:.0f} | | |'
      )
  bands = sorted({(b['lower'], b['upper']) for pz in out['puzzles'].values() for b in pz['bands']})
  lines += [
    '',
    '| agent | ' + ' | '.join(f'{lo}-{hi - 1}' for lo, hi in bands) + ' |',
    '| --- |' + ' --- |' * len(bands),
  ]
  for name, pz in out['puzzles'].items():
    by = {(b['lower'], b['upper']): b for b in pz['bands']}
    cells = [f'{by[k]["solved"]}/{by[k]["n"]}' if k in by else '' for k in bands]
    lines.append(f'| {name} | ' + ' | '.join(cells) + ' |')
  return '\n'.join(lines)


if __name__ == '__main__':
  main()
