"""How strong a model plays: puzzles by rating band, matches against Stockfish, STS, action accuracy.

    .venv/bin/python benchmarks/pretrained_strength.py --workdir RUNS/strength       # the shipped model, ~20 min
    .venv/bin/python benchmarks/pretrained_strength.py --checkpoint runs/pretrained/export --workdir runs/pretrained \\
        --reference RUNS/frontier/reference/board_value_data.bag

Measures `--checkpoint` (default: the model shipped in the package) on

* the dev puzzles (``../shared/data/puzzles/lichess_puzzles_dev.csv``): accuracy
  overall and by 200-point rating band, every solution move required;
* gauntlets of ``--games`` games against Stockfish at UCI_Elo 1350, 1500 and
  1800 (``stockfish:nodes=100000,elo=N``: ~0.1 s a move here, and a node limit
  plays the same whatever the machine's load; the ladder anchors BayesElo), openings
  sampled from the named openings (``../shared/data/openings/``), both colours;
  the model's BayesElo with its 95% interval;
* STS1 (``../shared/data/epd/sts01_undermine.epd``): positions solved and points;
* action accuracy and Kendall tau-b against a deep reference (``--reference``,
  e.g. the label-cost frontier's reference boards).

Writes WORKDIR/strength.json and WORKDIR/strength.md (the model card's table);
prints the table. Resumable: the matches continue from their PGN.
"""

import argparse
import json
import os
import pathlib
import platform
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / 'shared' / 'data'
ELOS = (1350, 1500, 1800)


def main(argv=None) -> None:
  from searchless.evaluation import epd, evaluate, metrics, puzzles as puzzle_eval
  from searchless.play import player as player_lib
  from searchless.data import puzzles as puzzles_lib
  from searchless.evaluation import tournament
  from searchless.commands import campaign_match

  p = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  p.add_argument('--checkpoint', default='pretrained', help="checkpoint to measure (default: the shipped 'pretrained')")
  p.add_argument('--workdir', required=True, help='outputs: strength.json, strength.md, match/, puzzles')
  p.add_argument('--puzzles', default=str(SHARED / 'puzzles' / 'lichess_puzzles_dev.csv'), help='puzzle CSV')
  p.add_argument('--sts', default=str(SHARED / 'epd' / 'sts01_undermine.epd'), help='EPD suite')
  p.add_argument('--openings', nargs='+', default=[str(f) for f in campaign_match.named_openings(SHARED.parent)])
  p.add_argument('--games', type=int, default=20, help='games against each Stockfish level')
  p.add_argument('--elos', default=','.join(map(str, ELOS)), help='UCI_Elo levels of the Stockfish opponents')
  p.add_argument('--stockfish_limit', default=campaign_match.OPPONENT_LIMIT,
                 help=f'search limit of the Stockfish opponents (default: {campaign_match.OPPONENT_LIMIT})')
  p.add_argument('--workers', type=int, default=2, help='games in parallel')
  p.add_argument('--reference', default=None, help='board_value or action_value records with deep labels')
  args = p.parse_args(argv)
  workdir = pathlib.Path(args.workdir)
  workdir.mkdir(parents=True, exist_ok=True)
  out_path = workdir / 'strength.json'
  out = json.loads(out_path.read_text()) if out_path.exists() else {}
  out.update({'checkpoint': args.checkpoint, 'machine': f'{platform.machine()}, {os.cpu_count()} cores'})
  player = player_lib.Player.load(args.checkpoint, compute_dtype='float32', name='searchless')
  player.policy.warm_up()

  if 'puzzles' not in out:
    puzzles = list(puzzles_lib.read_puzzles(args.puzzles))
    start = time.time()
    results = puzzle_eval.evaluate(puzzles, player, progress=False)
    bands = puzzle_eval.accuracy_by_band(results)
    out['puzzles'] = {'path': args.puzzles, 'n': len(results), 'solved': sum(r.solved for r in results),
                      'accuracy': puzzle_eval.accuracy(results), 'seconds': round(time.time() - start, 1),
                      'bands': [b._asdict() for b in bands]}
    print(puzzle_eval.band_table(bands), flush=True)
  if 'sts' not in out:
    suite = epd.evaluate_suite(args.sts, player, progress=False)
    out['sts'] = suite.summary()
    out['sts'].pop('themes', None)
  if args.reference and 'reference' not in out:
    boards, _, _ = evaluate.load_boards(args.reference)
    summary = metrics.summarise([r['metrics'] for r in evaluate.evaluate(player.policy, boards, progress=False)])
    out['reference'] = {'path': args.reference, 'boards': len(boards), 'action_accuracy': summary['action_accuracy'],
                        'kendall_tau_b': summary['kendall_tau']}
  out_path.write_text(json.dumps(out, indent=2) + '\n')

  spec = f'checkpoint:{args.checkpoint},name=searchless'
  opponents = [f'stockfish:{args.stockfish_limit},elo={e},name=stockfish-elo{e}' for e in args.elos.split(',')]
  results = tournament.run([spec, *opponents], gauntlet=True, openings=args.openings, games_per_pair=args.games,
                           workers=args.workers, out_dir=str(workdir / 'match'), progress=False)
  print(tournament.summary(results), flush=True)
  out['match'] = {'pairs': results['pairs'], 'elo': results['elo'], 'anchors': results['anchors'],
                  'stockfish_limit': args.stockfish_limit, 'games_file': results['games_file']}
  out_path.write_text(json.dumps(out, indent=2) + '\n')
  (workdir / 'strength.md').write_text(markdown(out) + '\n')
  print(markdown(out))


def markdown(out: dict) -> str:
  pz = out['puzzles']
  lines = [f"- Dev puzzles (`lichess_puzzles_dev.csv`, every move of the solution): "
           f"**{100 * pz['accuracy']:.1f}%** ({pz['solved']}/{pz['n']}).", '',
           '  | rating | puzzles | solved | accuracy |', '  | --- | --- | --- | --- |']
  lines += [f"  | {b['lower']}-{b['upper'] - 1} | {b['n']} | {b['solved']} | {100 * b['accuracy']:.1f}% |"
            for b in pz['bands']]
  lines.append('')
  for pair in out['match']['pairs']:
    lines.append(f"- Against {pair['b']} (`{out['match']['stockfish_limit']}` per move): "
                 f"+{pair['a_wins']} ={pair['draws']} -{pair['b_wins']} "
                 f"({pair['a_wins'] + pair['draws'] / 2:g}/{pair['games']}, {100 * pair['a_score']:.1f}%).")
  elo = out['match'].get('elo')
  if elo:
    rating = next(r for r in elo['players'] if r['name'] == 'searchless')
    lines.append(f"- BayesElo (anchored on the Stockfish levels' UCI_Elo): **{rating['elo']:.0f}** "
                 f"({100 * elo['confidence']:g}% interval {rating['lower']:.0f} to {rating['upper']:.0f}).")
  sts = out['sts']
  lines.append(f"- STS1 (undermining, {sts['n']} positions): {sts['solved']} best moves, "
               f"{sts['points']}/{sts['max_points']} points.")
  if 'reference' in out:
    ref = out['reference']
    lines.append(f"- Against a deep reference ({ref['boards']} held-out boards): action accuracy "
                 f"{ref['action_accuracy']:.3f}, Kendall tau-b {ref['kendall_tau_b']:.3f}.")
  return '\n'.join(lines)


if __name__ == '__main__':
  main()
