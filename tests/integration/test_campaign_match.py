"""The campaign's match step: its model against a real Stockfish at UCI_Elo 1350, logged and resumable."""

import json

import chess.pgn
import pytest

from searchless.commands import campaign
from searchless.commands import campaign_log
from searchless.commands import campaign_match


def _games(path):
  with open(path) as f:
    return list(iter(lambda: chess.pgn.read_game(f), None))


@pytest.mark.slow
@pytest.mark.engine
def test_the_match_step_plays_stockfish_1350_from_the_named_openings_logs_the_score_and_resumes(
    model_checkpoint, shared_data, stockfish, tmp_path):
  workdir = tmp_path / 'campaign'
  kwargs = dict(steps=['match'], sources=[], model=str(model_checkpoint), games=2, workers=1)
  campaign.run(workdir, shared_data.parent, **kwargs)
  match_dir = workdir / 'eval' / model_checkpoint.name / 'match'
  games = _games(match_dir / 'games.pgn')
  # One opening sampled from the named ones, played with each colour.
  assert sorted((g.headers['White'], g.headers['Black']) for g in games) == [
      ('searchless', 'stockfish-elo1350'), ('stockfish-elo1350', 'searchless')]
  assert [m.uci() for m in games[0].mainline_moves()][:4] == [m.uci() for m in games[1].mainline_moves()][:4]
  first = campaign_log.read_runs(workdir)[-1]
  assert first['opponent'] == 'stockfish:nodes=100000,elo=1350,name=stockfish-elo1350' == campaign_match.opponent()
  # A random 2-layer model loses both; BayesElo puts it below the anchor.
  assert (first['step'], first['games'], first['wins'], first['draws'], first['losses'], first['score']) == (
      'match', 2, 0, 0, 2, 0.0)
  assert first['bayeselo'] < first['bayeselo95'][1] and first['bayeselo95'][0] < first['bayeselo'] < 1350
  assert first['model'] == str(model_checkpoint) and first['core_hours'] > 0
  assert 'matches against Stockfish: ' in (workdir / 'README.md').read_text()
  # A rerun continues from the match's PGN: nothing is played again.
  campaign.run(workdir, shared_data.parent, **kwargs)
  again = campaign_log.read_runs(workdir)[-1]
  keys = ('games', 'wins', 'draws', 'losses', 'score', 'bayeselo', 'bayeselo95')
  assert {k: again[k] for k in keys} == {k: first[k] for k in keys} and len(_games(match_dir / 'games.pgn')) == 2
  assert again['wall_seconds'] < first['wall_seconds']
  with pytest.raises(ValueError, match='--games must be >= 1'):
    campaign.run(workdir, shared_data.parent, **{**kwargs, 'games': 0})
  assert json.loads((match_dir / 'results.json').read_text())['pairs'][0]['games'] == 2
