"""Elo ratings from game results, as Rémi Coulom's BayesElo computes them.

Model (BayesElo's CBradleyTerry): White i and Black j with internal ratings
r_i, r_j, White advantage `a` (eloAdvantage, 32.8) and draw parameter `D`
(eloDraw, 97.3); with f(x) = 1 / (1 + 10^(-x/400)) and x = r_i - r_j + a:
P(White wins) = f(x - D), P(Black wins) = f(-x - D), P(draw) = the rest.

Prior (CCondensedResults::AddPrior): every player i adds `prior / 2` virtual
draws, shared among its opponents o in proportion to the games n_io / n_i it
played against each, half with each colour; so two players who only met each
other get `prior` virtual draws between them (default 2: BayesElo's `prior 2`).
The ratings maximise the likelihood of the real plus virtual results (`mm`;
`fit_advantage` / `fit_draw` are `mm 1 1`, here by Nelder-Mead on the profile).

Scale: after `mm`, BayesElo's `ratings` prints ratings and intervals times
EloScale = 4x / (1 + x)^2, x = 10^(-D/400) (0.9255 for D = 97.3), the slope of
the expected score at 0 relative to plain Elo; `scale=False` reports r itself.
Anchors are in the reported units; without any, the mean rating is 0.

Intervals: ± z * sd, z the normal quantile of `confidence`, sd from the inverse
observed information (Hessian of the negative log-likelihood, virtual draws
included) of the ratings relative to the anchors, or with the mean-zero
constraint: BayesElo's `covariance` command, not the `variance` that `mm`
leaves by default (diagonal only: opponents taken as exact), nor `exactdist`.
a and D count as known. With prior=0 a player or group that only won (or only
lost) has no finite rating: ValueError. (Read from bayeselo's C++ source:
CBradleyTerry.cpp, CCondensedResults.cpp, CEloRatingCUI.cpp.)

>>> games = [Game('A', 'B', '1-0')] * 3 + [Game('B', 'A', '1/2-1/2')] * 2 + [Game('B', 'A', '0-1')]
>>> r = fit(games, anchor='B', anchor_elo=1500)
>>> round(r['A'].elo, 1), r['B'].elo, r['B'].plus_minus, r['A'].games, r['A'].draws
(1654.2, 1500.0, 0.0, 6, 2)
>>> print(r.table())
Rank Name   Elo    +    - games score oppo. draws
   1 A     1654  198  198     6   83%  1500   33%
   2 B     1500    0    0     6   17%  1654   33%
>>> round(r.los('A', 'B'), 3), round(fit(games)['A'].elo, 1)
(0.937, 77.1)
>>> round(expected_score(100.0, elo_draw=0.0), 4)
0.6401
"""

from collections.abc import Iterable, Mapping
import dataclasses
import math
import os
from typing import NamedTuple

import chess.pgn
import numpy as np
from scipy import optimize, special, stats
from scipy.sparse import csgraph

from searchless.plumbing import errors

K = math.log(10) / 400  # d/dx of ln(10^(x/400)).
_POINTS = {'1-0': (1, 0, 0), '1/2-1/2': (0, 1, 0), '0-1': (0, 0, 1)}  # (White wins, draws, losses).


class Game(NamedTuple):
  white: str
  black: str
  result: str  # '1-0', '0-1', '1/2-1/2'; '*' is skipped.


class PlayerRating(NamedTuple):
  name: str
  elo: float
  plus_minus: float  # Half-width of the `confidence` interval; 0 for anchors.
  games: int
  score: float  # Points / games.
  draws: int
  oppo: float  # Games-weighted mean rating of the opponents.

  @property
  def lower(self) -> float:
    return self.elo - self.plus_minus

  @property
  def upper(self) -> float:
    return self.elo + self.plus_minus


@dataclasses.dataclass(frozen=True)
class Ratings:
  players: tuple[PlayerRating, ...]  # Ranked, best first.
  covariance: np.ndarray  # [P, P] in reported units, rows in `players` order.
  elo_advantage: float
  elo_draw: float
  scale: float
  confidence: float
  skipped: int  # '*' games.

  def __getitem__(self, name: str) -> PlayerRating:
    return {p.name: p for p in self.players}[name]

  def los(self, a: str, b: str) -> float:
    """Likelihood of superiority: P(a is stronger than b), normal approximation."""
    index = {p.name: k for k, p in enumerate(self.players)}
    i, j = index[a], index[b]
    var = self.covariance[i, i] + self.covariance[j, j] - 2 * self.covariance[i, j]
    return float(stats.norm.cdf((self.players[i].elo - self.players[j].elo) / math.sqrt(max(var, 1e-300))))

  def table(self) -> str:
    """A ranked table like BayesElo's `ratings` command (score and draws in %)."""
    w = max([4] + [len(p.name) for p in self.players])
    lines = [f'Rank {"Name":<{w}}   Elo    +    - games score oppo. draws']
    for k, p in enumerate(self.players, 1):
      lines.append(
        f'{k:4d} {p.name:<{w}} {p.elo:5.0f} {p.plus_minus:4.0f} {p.plus_minus:4.0f} {p.games:5d} '
        f'{100 * p.score:4.0f}% {p.oppo:5.0f} {100 * p.draws / p.games:4.0f}%'
      )
    return '\n'.join(lines)

  def to_dict(self) -> dict:
    return {
      'elo_advantage': self.elo_advantage,
      'elo_draw': self.elo_draw,
      'scale': self.scale,
      'confidence': self.confidence,
      'skipped': self.skipped,
      'players': [p._asdict() | {'lower': p.lower, 'upper': p.upper} for p in self.players],
    }


def expected_score(elo_diff: float, *, elo_advantage: float = 0.0, elo_draw: float = 97.3) -> float:
  """P(win) + P(draw) / 2 of White at internal rating difference `elo_diff`."""
  x = elo_diff + elo_advantage
  return float(0.5 * (1 + special.expit(K * (x - elo_draw)) - special.expit(K * (-x - elo_draw))))


def elo_scale(elo_draw: float) -> float:
  """BayesElo's EloScale: reported rating = scale * internal rating."""
  x = 10 ** (-elo_draw / 400)
  return 4 * x / (1 + x) ** 2


def results_from_pgn(path: str | os.PathLike) -> list[Game]:
  """(White, Black, Result) of every game of a PGN file, from its headers only."""
  games = []
  with open(path, encoding='utf-8-sig', errors='replace') as f:
    while (headers := chess.pgn.read_headers(f)) is not None:
      games.append(Game(headers.get('White', '?'), headers.get('Black', '?'), headers.get('Result', '*')))
  return games


def _derivs(r, cells, a, d_elo):
  """Negative log-likelihood, its gradient and Hessian in the ratings r."""
  wi, bi, w, d, l = cells
  x = r[wi] - r[bi] + a
  lo, hi = K * (x - d_elo), K * (x + d_elo)
  p, q, not_p, not_q = special.expit(lo), special.expit(-hi), special.expit(-lo), special.expit(hi)
  ll = w @ special.log_expit(lo) + l @ special.log_expit(-hi)
  if d.any():  # log P(draw) = log p + log(1 - q) + log(2 sinh(K D)) - K x.
    ll += d @ (special.log_expit(lo) + special.log_expit(hi) - K * x + math.log(2 * math.sinh(K * d_elo)))
  g = K * (w * not_p - l * not_q + d * (q - p))  # d ll / dx per cell.
  h = K * K * ((w + d) * p * not_p + (l + d) * q * not_q)  # -d2 ll / dx2 per cell.
  n = len(r)
  grad = np.bincount(bi, g, n) - np.bincount(wi, g, n)
  hess = np.zeros((n, n))
  np.add.at(hess, (wi, wi), h)
  np.add.at(hess, (bi, bi), h)
  np.add.at(hess, (wi, bi), -h)
  np.add.at(hess, (bi, wi), -h)
  return -ll, grad, hess


def _newton(cells, basis, offset, a, d_elo, theta):
  """Minimises the NLL over r = offset + basis @ theta (strictly convex there)."""
  nll, grad, hess = _derivs(offset + basis @ theta, cells, a, d_elo)
  for _ in range(500):
    step = np.linalg.solve(basis.T @ hess @ basis, basis.T @ grad)
    t = 1.0  # Backtracking: halve the step until the NLL does not increase.
    while (new := _derivs(offset + basis @ (theta - t * step), cells, a, d_elo))[0] > nll + 1e-12 * abs(nll):
      if (t := t / 2) < 1e-9:
        break
    theta, (nll, grad, hess) = theta - t * step, new
    if np.max(np.abs(t * step), initial=0) < 1e-10:
      return theta, nll, basis.T @ hess @ basis
  raise RuntimeError('Newton iteration did not converge')


def fit(
  games: Iterable[Game],
  *,
  anchor: str | None = None,
  anchor_elo: float = 0.0,
  anchors: Mapping[str, float] | None = None,
  prior: float = 2.0,
  elo_advantage: float = 32.8,
  elo_draw: float = 97.3,
  confidence: float = 0.95,
  scale: bool = True,
  fit_advantage: bool = False,
  fit_draw: bool = False,
) -> Ratings:
  """BayesElo ratings (see the module docstring); mean 0 unless anchored.

  Raises ValueError when an anchor never played, when some players are not
  connected to the others (or, with anchors, to an anchor), or when the maximum
  is not finite: with prior=0 a player (or group) that only won or only lost.
  """
  if anchor is not None and anchors is not None:
    raise ValueError('give either anchor or anchors, not both')
  if prior < 0:
    raise ValueError(f'prior must be >= 0, not {prior}')
  fixed = dict(anchors or ({anchor: anchor_elo} if anchor is not None else {}))
  names: list[str] = []
  index: dict[str, int] = {}
  counts: dict[tuple[int, int], np.ndarray] = {}
  skipped = 0
  for g in games:
    if g.result == '*':
      skipped += 1
      continue
    if g.result not in _POINTS or g.white == g.black:
      raise errors.BadInput(f'unknown result or self-play: {g}')
    for name in (g.white, g.black):
      if name not in index:
        index[name] = len(names)
        names.append(name)
    cell = counts.setdefault((index[g.white], index[g.black]), np.zeros(3))
    cell += _POINTS[g.result]
  if missing := sorted(set(fixed) - set(index)):
    raise errors.BadInput(f'anchor(s) with no games: {missing}')
  n = len(names)
  if n == 0:
    raise errors.BadInput('no finished games')
  true = {k: v.copy() for k, v in counts.items()}
  pair_games = np.zeros((n, n))
  for (i, j), c in true.items():
    pair_games[i, j] += c.sum()
    pair_games[j, i] += c.sum()
  for i in range(n):  # CCondensedResults::AddPrior.
    for o in np.flatnonzero(pair_games[i]).tolist():
      virtual = prior * 0.25 * pair_games[i, o] / pair_games[i].sum()
      for key in ((i, o), (o, i)):
        counts.setdefault(key, np.zeros(3))[1] += virtual
  keys = sorted(counts)
  c = np.array([counts[k] for k in keys])
  cells = (np.array([k[0] for k in keys]), np.array([k[1] for k in keys]), c[:, 0], c[:, 1], c[:, 2])
  if elo_draw <= 0 and c[:, 1].any():
    raise errors.BadInput('elo_draw must be > 0 when there are draws (real or virtual)')
  _check_finite(c, keys, n, [index[k] for k in fixed], names)

  fixed_idx = np.array([index[k] for k in fixed], int)
  free = np.setdiff1d(np.arange(n), fixed_idx)
  basis = np.eye(n)[:, free] if len(fixed) else np.vstack([np.eye(n - 1), -np.ones((1, n - 1))])
  start = float(np.mean(list(fixed.values()))) if fixed else 0.0
  state = {'theta': None}

  def solve(a, d_elo):
    s = elo_scale(d_elo) if scale else 1.0
    offset = np.zeros(n)
    offset[fixed_idx] = np.array(list(fixed.values()), float) / s
    theta0 = state['theta'] if state['theta'] is not None else np.full(basis.shape[1], start / s if fixed else 0.0)
    state['theta'], nll, hess = _newton(cells, basis, offset, a, d_elo, theta0)
    return offset + basis @ state['theta'], nll, hess, s

  if fit_advantage or fit_draw:
    which = [fit_advantage, fit_draw]
    x0 = np.array([elo_advantage, elo_draw])

    def profile(v):
      x = x0.copy()
      x[which] = v
      return solve(*x)[1]

    bounds = [(-1000, 1000), (1e-3, 1000)]
    res = optimize.minimize(
      profile,
      x0[which],
      method='Nelder-Mead',
      bounds=[b for b, f in zip(bounds, which) if f],
      options={'xatol': 1e-8, 'fatol': 1e-13, 'maxiter': 10000},
    )
    x0[which] = res.x
    elo_advantage, elo_draw = map(float, x0)
  r, _, hess, s = solve(elo_advantage, elo_draw)
  cov = s * s * basis @ np.linalg.inv(hess) @ basis.T
  z = stats.norm.ppf(0.5 + confidence / 2)
  elo = s * r
  for i, v in zip(fixed_idx, fixed.values()):
    elo[i] = v  # Exactly, not v / s * s.
  t = np.array([true.get(k, np.zeros(3)) for k in keys])
  wins = np.bincount(cells[0], t[:, 0], n) + np.bincount(cells[1], t[:, 2], n)
  draws = np.bincount(cells[0], t[:, 1], n) + np.bincount(cells[1], t[:, 1], n)
  played = pair_games.sum(1)
  oppo = pair_games @ elo / played
  order = sorted(range(n), key=lambda i: -elo[i])
  players = tuple(
    PlayerRating(
      names[i],
      float(elo[i]),
      float(z * math.sqrt(max(cov[i, i], 0.0))),
      int(played[i]),
      float((wins[i] + draws[i] / 2) / played[i]),
      int(draws[i]),
      float(oppo[i]),
    )
    for i in order
  )
  return Ratings(players, cov[np.ix_(order, order)], elo_advantage, elo_draw, s, confidence, skipped)


def _check_finite(c, keys, n, fixed, names):
  """Strong connectivity of 'scored at least a draw against', the anchors tied together."""
  adj = np.zeros((n, n))
  for (i, j), (w, d, l) in zip(keys, c):
    adj[i, j] += w + d  # White i scored against Black j.
    adj[j, i] += l + d
  if fixed:
    adj[fixed[0], fixed[1:]] = adj[fixed[1:], fixed[0]] = 1
  for kind, problem in (
    ('weak', f'players not connected to the others{" or an anchor" if fixed else ""}'),
    (
      'strong',
      'no finite maximum-likelihood ratings (use prior > 0): players who only won or only lost against the others',
    ),
  ):
    count, label = csgraph.connected_components(adj, connection=kind)
    if count > 1:
      ref = label[fixed[0] if fixed else 0]
      raise errors.BadInput(f'{problem}: {sorted(names[i] for i in range(n) if label[i] != ref)}')
