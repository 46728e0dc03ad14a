import json
import math

import numpy as np
import pytest
from scipy import stats

from searchless.evaluation import elo
from searchless.evaluation.elo import Game

K = math.log(10) / 400
Z95 = stats.norm.ppf(0.975)


def f(x):
  return 1 / (1 + 10 ** (-x / 400))


def direct_nll(r, cells, a, d_elo):
  """-log L written straight from the model; cells: (white, black, wins, draws, losses) of White."""
  total = 0.0
  for white, black, w, d, l in cells:
    x = r[white] - r[black] + a
    p_win, p_loss = f(x - d_elo), f(-x - d_elo)
    total -= w * math.log(p_win) + l * math.log(p_loss) + (d * math.log(1 - p_win - p_loss) if d else 0)
  return total


def numeric_hessian(fun, r, names, h=0.1):
  n = len(names)
  hess = np.zeros((n, n))
  for i in range(n):
    for j in range(n):

      def at(di, dj):
        s = dict(r)
        s[names[i]] += di
        s[names[j]] += dj
        return fun(s)

      hess[i, j] = (at(h, h) - at(h, -h) - at(-h, h) + at(-h, -h)) / (4 * h * h)
  return hess


def games_of(white, black, wins=0, draws=0, losses=0):
  return (
    [Game(white, black, '1-0')] * wins + [Game(white, black, '1/2-1/2')] * draws + [Game(white, black, '0-1')] * losses
  )


def pair_diff_closed_form(w, l, d, d_elo):
  """Two players, no advantage, prior 0: the score equation w(1-p) - l(1-q) + d(q-p) = 0 with
  g = 10^(x/400), t = 10^(D/400), p = g/(g+t), q = 1/(1+tg) is (l+d) g^2 - t(w-l) g - (w+d) = 0."""
  t = 10 ** (d_elo / 400)
  g = (t * (w - l) + math.sqrt(t * t * (w - l) ** 2 + 4 * (l + d) * (w + d))) / (2 * (l + d))
  return 400 * math.log10(g)


def bisect_pair_diff(w, l, d, d_elo):
  """Independent check: bisection on the central-difference slope of the direct likelihood."""
  cells = [('A', 'B', w, d, l)]

  def slope(x):
    return direct_nll({'A': x + 1e-4, 'B': 0.0}, cells, 0, d_elo) - direct_nll(
      {'A': x - 1e-4, 'B': 0.0}, cells, 0, d_elo
    )

  lo, hi = -2000.0, 2000.0
  for _ in range(100):
    mid = (lo + hi) / 2
    lo, hi = (mid, hi) if slope(mid) < 0 else (lo, mid)
  return (lo + hi) / 2


def test_two_players_without_draw_model_is_bradley_terry():
  games = games_of('A', 'B', wins=4, losses=1) + games_of('B', 'A', wins=2, losses=3)  # A: 7 wins, 3 losses.
  r = elo.fit(games, prior=0, elo_advantage=0, elo_draw=0)
  diff = 400 * math.log10(7 / 3)
  assert r.scale == 1.0
  assert r['A'].elo == pytest.approx(diff / 2, abs=1e-6)
  assert r['B'].elo == pytest.approx(-diff / 2, abs=1e-6)


@pytest.mark.parametrize('w,l,d', [(5, 2, 4), (2, 5, 1), (3, 3, 7), (1, 0, 1)])
def test_two_players_with_draw_elo_matches_hand_derivation(w, l, d):
  expected = pair_diff_closed_form(w, l, d, 97.3)
  assert expected == pytest.approx(bisect_pair_diff(w, l, d, 97.3), abs=1e-6)
  if w == l:
    assert expected == pytest.approx(0, abs=1e-9)
  games = games_of('A', 'B', wins=w, draws=d, losses=l)
  r = elo.fit(games, prior=0, elo_advantage=0, scale=False, anchor='B')
  assert r['A'].elo == pytest.approx(expected, abs=1e-6)
  scaled = elo.fit(games, prior=0, elo_advantage=0, anchor='B')  # BayesElo's reported scale.
  assert scaled['A'].elo == pytest.approx(elo.elo_scale(97.3) * expected, abs=1e-6)


def test_elo_scale_and_expected_score():
  x = 10 ** (-97.3 / 400)
  assert elo.elo_scale(97.3) == pytest.approx(4 * x / (1 + x) ** 2, rel=1e-12)
  assert elo.elo_scale(97.3) == pytest.approx(0.9255, abs=1e-4)
  assert elo.expected_score(0.0) == pytest.approx(0.5, abs=1e-12)
  assert elo.expected_score(123.0, elo_draw=0) == pytest.approx(f(123.0), rel=1e-12)
  assert elo.expected_score(-10.0, elo_advantage=10.0) == pytest.approx(0.5, abs=1e-12)
  # The scale makes the slope at 0 that of plain Elo: E'(0) * scale^-1 == f'(0) = K / 4.
  slope = (elo.expected_score(1e-3) - elo.expected_score(-1e-3)) / 2e-3
  assert slope / elo.elo_scale(97.3) == pytest.approx(K / 4, rel=1e-6)


def test_default_prior_is_bayeselo_virtual_draws_and_keeps_all_wins_finite():
  games = games_of('A', 'B', wins=3)
  with pytest.raises(ValueError, match='finite'):
    elo.fit(games, prior=0)
  r = elo.fit(games, elo_advantage=0, scale=False)
  # Each player adds prior/2 = 1 virtual draw: 2 draws between A and B.
  assert r['A'].elo - r['B'].elo == pytest.approx(pair_diff_closed_form(3, 0, 2, 97.3), abs=1e-6)
  assert math.isfinite(r['A'].plus_minus)
  assert (r['A'].games, r['A'].score, r['A'].draws) == (3, 1.0, 0)


def test_prior_spreads_virtual_draws_by_games_per_opponent():
  games = (
    games_of('A', 'B', wins=1)
    + games_of('B', 'A', losses=1)
    + games_of('B', 'C', wins=1, draws=1)
    + games_of('C', 'B', wins=2)
  )
  r = elo.fit(games, scale=False)  # Default prior 2, advantage 32.8.
  # n_A = 2, n_B = 6, n_C = 4. A gives 1 draw to AB; B gives 2/6 to AB and 4/6 to BC; C gives 1 to BC.
  ab, bc = 1 + 1 / 3, 1 + 2 / 3
  cells = [('A', 'B', 1, ab / 2, 0), ('B', 'A', 0, ab / 2, 1), ('B', 'C', 1, 1 + bc / 2, 0), ('C', 'B', 2, bc / 2, 0)]
  ratings = {p: r[p].elo for p in 'ABC'}
  for p in 'ABC':
    up, down = dict(ratings), dict(ratings)
    up[p] += 1e-3
    down[p] -= 1e-3
    assert (direct_nll(up, cells, 32.8, 97.3) - direct_nll(down, cells, 32.8, 97.3)) / 2e-3 == pytest.approx(
      0, abs=1e-8
    )
  wrong = [c[:3] + (1.0 if c[3] else 0,) + c[4:] for c in cells]  # Same code, 1 virtual draw per pair.
  up = dict(ratings, A=ratings['A'] + 1e-3)
  down = dict(ratings, A=ratings['A'] - 1e-3)
  assert abs(direct_nll(up, wrong, 32.8, 97.3) - direct_nll(down, wrong, 32.8, 97.3)) / 2e-3 > 1e-5


def test_mean_zero_default_and_swapping_colours_without_advantage():
  games = (
    games_of('A', 'B', wins=3, draws=2, losses=1)
    + games_of('B', 'C', wins=2, losses=2, draws=1)
    + games_of('C', 'A', wins=1, draws=3)
    + games_of('A', 'D', wins=2, losses=1)
  )
  swapped = [Game(g.black, g.white, {'1-0': '0-1', '0-1': '1-0'}.get(g.result, g.result)) for g in games]
  r, s = elo.fit(games, elo_advantage=0), elo.fit(swapped, elo_advantage=0)
  assert sum(p.elo for p in r.players) == pytest.approx(0, abs=1e-9)
  for p in 'ABCD':
    assert s[p].elo == pytest.approx(r[p].elo, abs=1e-9)
    assert s[p].plus_minus == pytest.approx(r[p].plus_minus, rel=1e-9)
  assert abs(elo.fit(swapped)['A'].elo - elo.fit(games)['A'].elo) > 1  # The advantage does matter.


def test_anchor_fixes_and_shifts():
  games = games_of('A', 'B', wins=3, draws=2, losses=1) + games_of('C', 'B', wins=1, losses=2, draws=2)
  free = elo.fit(games)
  a = elo.fit(games, anchor='B', anchor_elo=1000)
  b = elo.fit(games, anchor='B', anchor_elo=1100)
  assert a['B'].elo == 1000 and a['B'].plus_minus == 0
  for p in 'ABC':
    assert b[p].elo - a[p].elo == pytest.approx(100, abs=1e-9)
    assert a[p].elo - a['B'].elo == pytest.approx(free[p].elo - free['B'].elo, abs=1e-9)
  assert a['A'].lower == a['A'].elo - a['A'].plus_minus and a['A'].upper == a['A'].elo + a['A'].plus_minus
  with pytest.raises(ValueError, match='ghost'):
    elo.fit(games, anchor='ghost')
  with pytest.raises(ValueError, match='either'):
    elo.fit(games, anchor='A', anchors={'B': 0})


def test_multi_anchor_ladder():
  games = games_of('sf1500', 'sf1350', wins=6, losses=4) + games_of('X', 'sf1350', wins=5, draws=4, losses=2)
  anchors = {'sf1350': 1350.0, 'sf1500': 1500.0}
  r = elo.fit(games, anchors=anchors, prior=0, elo_advantage=0)
  s = elo.elo_scale(97.3)
  x = pair_diff_closed_form(5, 2, 4, 97.3)  # X only met sf1350: the other games do not move it.
  assert (r['sf1350'].elo, r['sf1500'].elo) == (1350.0, 1500.0)
  assert r['sf1350'].plus_minus == r['sf1500'].plus_minus == 0
  assert r['X'].elo == pytest.approx(1350 + s * x, abs=1e-6)
  cells = [('X', 'sf1350', 5, 4, 2)]
  h = numeric_hessian(lambda v: direct_nll(v, cells, 0, 97.3), {'X': x, 'sf1350': 0.0}, ['X'])[0, 0]
  assert r['X'].plus_minus == pytest.approx(Z95 * s / math.sqrt(h), rel=1e-5)
  with pytest.raises(ValueError, match='connected'):
    elo.fit(games + games_of('Y', 'Z', wins=1, losses=1), anchors=anchors)


def test_ci_halves_when_games_are_replicated_four_times():
  games = (
    games_of('A', 'B', wins=3, draws=2, losses=1)
    + games_of('B', 'C', wins=2, losses=1, draws=3)
    + games_of('C', 'A', wins=1, draws=2, losses=1)
  )
  one, four = elo.fit(games, prior=0), elo.fit(games * 4, prior=0)
  for p in 'ABC':
    assert four[p].elo == pytest.approx(one[p].elo, abs=1e-6)
    assert four[p].plus_minus == pytest.approx(one[p].plus_minus / 2, rel=1e-3)
  assert elo.fit(games, prior=0, confidence=0.99)['A'].plus_minus > one['A'].plus_minus


def test_ci_matches_numerically_differentiated_hessian():
  games = (
    games_of('A', 'B', wins=3, draws=2, losses=1)
    + games_of('B', 'A', wins=1, draws=1, losses=2)
    + games_of('B', 'C', wins=2, losses=1, draws=3)
    + games_of('C', 'A', wins=1, draws=2, losses=2)
  )
  cells = [('A', 'B', 3, 2, 1), ('B', 'A', 1, 1, 2), ('B', 'C', 2, 3, 1), ('C', 'A', 1, 2, 2)]
  names = ['A', 'B', 'C']

  def nll(v):
    return direct_nll(v, cells, 32.8, 97.3)

  anchored = elo.fit(games, prior=0, scale=False, anchor='A')
  hess = numeric_hessian(nll, {p: anchored[p].elo for p in names}, names)
  cov = np.linalg.inv(hess[1:, 1:])  # A fixed.
  for k, p in enumerate('BC'):
    assert anchored[p].plus_minus == pytest.approx(Z95 * math.sqrt(cov[k, k]), rel=1e-5)

  centred = elo.fit(games, prior=0, scale=False)
  hess = numeric_hessian(nll, {p: centred[p].elo for p in names}, names)
  basis = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, -1.0]])  # Ratings summing to 0.
  cov = basis @ np.linalg.inv(basis.T @ hess @ basis) @ basis.T
  order = [names.index(p.name) for p in centred.players]
  np.testing.assert_allclose(centred.covariance, cov[np.ix_(order, order)], rtol=1e-5)
  for k, p in enumerate(names):
    assert centred[p].plus_minus == pytest.approx(Z95 * math.sqrt(cov[k, k]), rel=1e-5)
  sd = math.sqrt(cov[0, 0] + cov[1, 1] - 2 * cov[0, 1])
  assert centred.los('A', 'B') == pytest.approx(stats.norm.cdf((centred['A'].elo - centred['B'].elo) / sd), rel=1e-5)


def test_fit_advantage_and_draw_elo_closed_form():
  # Both players have the same results as White: ratings equal, and (p_win, p_loss) of White
  # are the observed frequencies, so a - D = 400 log10(p/(1-p)) and -a - D = 400 log10(q/(1-q)).
  games = games_of('A', 'B', wins=5, draws=4, losses=3) + games_of('B', 'A', wins=5, draws=4, losses=3)
  r = elo.fit(games, prior=0, fit_advantage=True, fit_draw=True)
  u, v = 400 * math.log10(5 / 7), 400 * math.log10(3 / 9)
  assert r.elo_advantage == pytest.approx((u - v) / 2, abs=1e-4)
  assert r.elo_draw == pytest.approx(-(u + v) / 2, abs=1e-4)
  assert r.scale == pytest.approx(elo.elo_scale(r.elo_draw), rel=1e-12)
  assert r['A'].elo == pytest.approx(0, abs=1e-6)


def test_star_games_are_skipped_and_bad_input_rejected():
  games = games_of('A', 'B', wins=3, draws=2, losses=1)
  r = elo.fit(games + [Game('A', 'B', '*'), Game('A', 'Ghost', '*')])
  assert r.skipped == 2 and [p.name for p in r.players] == ['A', 'B']
  assert r['A'].elo == elo.fit(games)['A'].elo and r['A'].games == 6
  with pytest.raises(ValueError, match='unknown result'):
    elo.fit(games + [Game('A', 'B', '2-0')])
  with pytest.raises(ValueError, match='self-play'):
    elo.fit(games + [Game('A', 'A', '1-0')])
  with pytest.raises(ValueError, match='no finished games'):
    elo.fit([Game('A', 'B', '*')])
  with pytest.raises(ValueError, match='elo_draw'):
    elo.fit(games, elo_draw=0)


def test_far_anchors_converge():
  games = games_of('a', 'b', wins=3) + games_of('b', 'c', wins=2) + games_of('c', 'a', draws=1)
  r = elo.fit(games, anchors={'a': 3000, 'c': -3000}, prior=0, elo_advantage=0, scale=False)
  # b maximises 3 log f(3000 - b - D) + 2 log f(b + 3000 - D), far in both tails (a regression
  # test for lost precision in 1 - p): 3 / (1 + 10^((3000 - b - D)/400)) = 2 / (1 + 10^((b + 3000 - D)/400)),
  # so b ~ -200 log10(3/2).
  b = r['b'].elo
  lhs = 3 / (1 + 10 ** ((3000 - b - 97.3) / 400))
  rhs = 2 / (1 + 10 ** ((b + 3000 - 97.3) / 400))
  assert lhs == pytest.approx(rhs, rel=1e-6)
  assert b == pytest.approx(-200 * math.log10(3 / 2), abs=1e-3)


def test_results_from_pgn(tmp_path):
  path = tmp_path / 'games.pgn'
  path.write_text(
    '[White "nn"]\n[Black "sf1350"]\n[Result "1-0"]\n\n1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0\n\n'
    '[White "sf1350"]\n[Black "nn"]\n[Result "1/2-1/2"]\n\n1. d4 1/2-1/2\n\n'
    '[White "nn"]\n[Black "sf1500"]\n[Result "*"]\n\n*\n'
  )
  assert elo.results_from_pgn(path) == [
    Game('nn', 'sf1350', '1-0'),
    Game('sf1350', 'nn', '1/2-1/2'),
    Game('nn', 'sf1500', '*'),
  ]


def test_table_and_to_dict():
  games = games_of('Strong', 'Mid', wins=4, losses=1) + games_of('Mid', 'Weak', wins=4, losses=1, draws=1)
  r = elo.fit(games)
  lines = r.table().splitlines()
  assert lines[0].split() == ['Rank', 'Name', 'Elo', '+', '-', 'games', 'score', 'oppo.', 'draws']
  assert [line.split()[:2] for line in lines[1:]] == [['1', 'Strong'], ['2', 'Mid'], ['3', 'Weak']]
  assert lines[2].split()[5:] == ['11', '50%', f'{(5 * r["Strong"].elo + 6 * r["Weak"].elo) / 11:.0f}', '9%']
  d = json.loads(json.dumps(r.to_dict()))
  with pytest.raises(KeyError):
    r['nobody']
  assert [p['name'] for p in d['players']] == ['Strong', 'Mid', 'Weak']
  assert d['players'][1]['games'] == 11 and d['players'][1]['draws'] == 1 and d['elo_draw'] == 97.3
