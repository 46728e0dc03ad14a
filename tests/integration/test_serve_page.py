"""`searchless-serve`'s page in a real headless browser: the system's chromium, driven by Playwright.

Skipped with a reason where no chromium is installed (`make setup` installs Debian's where it can) or Playwright
is missing. The page may fetch from the server alone: every other request is refused and fails the test.
"""

import shutil
import time
import urllib.parse

import chess
import chess.pgn
import io
import pytest

from helpers import write_checkpoint
from serve_process import Served

pytestmark = pytest.mark.slow

SCHOLARS = '[White "A"]\n[Black "B"]\n\n1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0'
BROWSERS = ('chromium', 'chromium-browser', 'google-chrome', 'google-chrome-stable')
# A Lichess game (lichess.org/0mesXSOH) in which the module's model finds inaccuracies, a mistake and a blunder.
MARKED = (
  '1. e3 e5 2. Qf3 d5 3. e4 h5 4. exd5 Qxd5 5. Qxd5 Be6 6. Qxb7 Bd6 7. Qxa8 Ne7 8. Qxb8+ Kd7 9. Qxh8 Bc5 '
  '10. Bb5+ Kd6 11. Qd8+ Bd7 12. Qxd7# 1-0'
)
SIMS = 8


def _chromium() -> str | None:
  return next((path for name in BROWSERS if (path := shutil.which(name))), None)


@pytest.fixture(scope='module')
def served(tmp_path_factory):
  """The module's server: the small random model of the other tests (the same shapes, compiled once), its
  embeddings drawn wider so that its win% differ enough between moves to mark some; MCTS for the search's line."""
  tiny = ('model.embedding_dim=32', 'model.num_layers=2', 'model.num_heads=2', 'model.emb_init_scale=1.0')
  checkpoint = write_checkpoint(tmp_path_factory.mktemp('marked'), overrides=tiny)
  with Served(checkpoint, '--max_batch', '8', '--agent', f'search:{checkpoint},sims={SIMS}') as server:
    server.wait_ready()
    yield server


@pytest.fixture(scope='module')
def browser():
  sync_api = pytest.importorskip('playwright.sync_api', reason='Playwright is not installed (pip install playwright)')
  executable = _chromium()
  if executable is None:
    pytest.skip('no chromium found (Debian: apt-get install chromium; make setup installs it when run as root)')
  with sync_api.sync_playwright() as playwright:
    launched = playwright.chromium.launch(executable_path=executable, args=['--no-sandbox', '--disable-gpu'])
    yield launched
    launched.close()


@pytest.fixture
def page(browser, served):
  context = browser.new_context(viewport={'width': 1200, 'height': 900})
  page = context.new_page()
  elsewhere, failures = [], []

  def route(route):
    if route.request.url.startswith(served.url):
      route.continue_()
    else:
      elsewhere.append(route.request.url)
      route.abort()

  page.route('**/*', route)
  page.on('pageerror', lambda error: failures.append(str(error)))
  # A bad link's 400 is the browser's console error too; the page says it (the link tests read what it says).
  page.on(
    'console',
    lambda message: (
      failures.append(message.text) if message.type == 'error' and 'status of 400' not in message.text else None
    ),
  )
  yield page
  context.close()
  assert elsewhere == [] and failures == []


def _until(page, expression: str, seconds: float = 60) -> None:
  """Waits until `expression` is true in the page. Polled from here: Playwright's own wait evaluates a string in the
  page, which the server's Content-Security-Policy (no eval) refuses, as it should."""
  deadline = time.monotonic() + seconds
  while not page.evaluate(expression):
    assert time.monotonic() < deadline, f'never true: {expression}'
    time.sleep(0.02)


def _settled(page) -> None:
  _until(page, "document.body.dataset.busy === 'false' && document.body.dataset.game === 'done'")


def _rows(page) -> list[tuple[str, str]]:
  return [tuple(row.split('\t')[:2]) for row in page.locator('#moves tbody tr').all_inner_texts()]


def _best(served, moves: list[str]) -> dict:
  return served.post('/v1/analyse', {'moves': moves})[2]


def test_play_a_move_see_the_reply_and_the_numbers_change(page, served, tmp_path):
  page.goto(served.url)
  _settled(page)
  start = _best(served, [])
  assert _rows(page) == [(m['san'], f'{100 * m["win"]:.1f}') for m in start['moves']]  # Every move, best first.
  assert page.locator('#model').inner_text() == f'{served_name(served)} (action_value)'
  assert page.locator('#arrows text').count() == 3
  assert page.locator('#evalbar-text').inner_text() == f'{100 * start["value"]:.1f}'

  page.select_option('#side', 'white')
  _settled(page)
  page.click('[data-square="e2"]')
  page.click('[data-square="e4"]')
  _until(page, 'document.querySelectorAll("#game li").length === 2')
  _settled(page)
  reply = _best(served, ['e2e4'])['best']  # The model answers with its best move.
  assert [t.rstrip('?!') for t in page.locator('#game li').all_inner_texts()] == ['1. e4', reply['san']]
  after = _best(served, ['e2e4', reply['uci']])
  assert _rows(page) == [(m['san'], f'{100 * m["win"]:.1f}') for m in after['moves']] != _rows_of(start)
  assert page.evaluate('location.hash') == f'#moves=e2e4%2C{reply["uci"]}&side=white'

  page.click('#takeback')  # The move and the model's reply.
  _settled(page)
  assert page.locator('#game li').count() == 0 and _rows(page) == _rows_of(start)
  page.screenshot(path=str(tmp_path / 'serve-page-play.png'))
  print(f'screenshot: {tmp_path / "serve-page-play.png"}')


def served_name(served) -> str:
  return served.process.args[served.process.args.index('--checkpoint') + 1].rstrip('/').rsplit('/', 1)[-1]


def _rows_of(answer: dict) -> list[tuple[str, str]]:
  return [(m['san'], f'{100 * m["win"]:.1f}') for m in answer['moves']]


def test_paste_a_pgn_see_the_graph_and_step_through(page, served, tmp_path):
  page.goto(served.url)
  _settled(page)
  page.fill('#pgn', SCHOLARS)
  page.click('#pgn-form button')
  _until(page, 'document.querySelectorAll("#game li").length === 7')
  _settled(page)
  points = page.locator('#graph polyline').get_attribute('points').split()
  assert len(points) == 8  # The start and the 7 positions after each move.
  assert points[0].startswith('0.0,') and points[-1] == '600.0,0.0'  # White mated: White's win% is 100.
  assert [t.rstrip('?!') for t in page.locator('#game li span').all_inner_texts()] == [
    'e4',
    'e5',
    'Qh5',
    'Nc6',
    'Bc4',
    'Nf6',
    'Qxf7#',
  ]
  assert page.evaluate('document.body.dataset.ply') == '0'  # The game opens at its start.
  page.keyboard.press('End')
  _until(page, "document.body.dataset.ply === '7'")
  assert page.locator('#model-best').inner_text() == 'Game over: 1-0 (checkmate)'
  assert page.locator('#moves tbody tr').count() == 0
  page.keyboard.press('Home')
  _until(page, "document.body.dataset.ply === '0'")
  page.click('#forward')
  _until(page, "document.body.dataset.ply === '1'")
  assert page.locator('#game li span.current').inner_text().rstrip('?!') == 'e4'
  board = chess.Board()
  board.push_uci('e2e4')
  assert page.locator('#fen').input_value() == board.fen()
  page.screenshot(path=str(tmp_path / 'serve-page-game.png'))
  print(f'screenshot: {tmp_path / "serve-page-game.png"}')


def test_a_link_opens_its_position(page, served):
  page.goto(served.url + '#moves=e2e4,e7e5,g1f3&ply=2')
  _settled(page)
  assert [t.rstrip('?!') for t in page.locator('#game li').all_inner_texts()] == ['1. e4', 'e5', '2. Nf3']
  assert page.locator('#fen').input_value() == 'rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2'
  assert _rows(page) == _rows_of(_best(served, ['e2e4', 'e7e5']))


def _uci(pgn: str) -> list[str]:
  return [m.uci() for m in chess.pgn.read_game(io.StringIO(pgn)).mainline_moves()]


def _ply(page) -> int:
  return int(page.evaluate('document.body.dataset.ply'))


def _press(page, key: str, ply: int) -> None:
  page.keyboard.press(key)
  _until(page, f"document.body.dataset.ply === '{ply}' && document.body.dataset.busy === 'false'")


def test_a_pasted_game_is_reviewed_and_its_keys_jump_between_the_marks(page, served, tmp_path):
  page.goto(served.url)
  _settled(page)
  page.fill('#pgn', MARKED)
  page.click('#pgn-form button')
  _until(page, 'document.querySelectorAll("#game li").length === 23')
  _until(page, "document.querySelector('#summary').textContent.includes('accuracy')")
  _settled(page)
  review = served.post('/v1/review', {'moves': _uci(MARKED)})[2]
  marks = [m['mark'] for m in review['moves']]
  assert {'inaccuracy', 'mistake', 'blunder'} <= set(marks)  # The game shows every key at work.
  # The page's marks are the review's (searchless.play.review, as searchless-review's).
  assert [page.locator(f'#game span[data-ply="{i + 1}"]').get_attribute('class').split() for i in range(23)] == [
    [m] if m else [] for m in marks
  ]
  signs = {'inaccuracy': '?!', 'mistake': '?', 'blunder': '??', None: ''}
  assert page.locator('#game li span').all_inner_texts() == [m['san'] + signs[m['mark']] for m in review['moves']]
  for color in ('white', 'black'):
    p = review['players'][color]
    words = [
      f'{p[n]} {n if p[n] == 1 else plural}'
      for n, plural in (('blunder', 'blunders'), ('mistake', 'mistakes'), ('inaccuracy', 'inaccuracies'))
    ]
    said = f'{color.capitalize()}: {p["accuracy"]:.1f}% accuracy, {", ".join(words)}.'
    assert page.locator(f'#summary-{color}').inner_text() == said

  first = {name: marks.index(name) + 1 for name in ('inaccuracy', 'mistake', 'blunder')}
  last = {name: len(marks) - marks[::-1].index(name) for name in ('inaccuracy', 'mistake', 'blunder')}
  assert _ply(page) == 0
  _press(page, 'i', first['inaccuracy'])
  _press(page, 'b', first['blunder'])
  after = [i + 1 for i, m in enumerate(marks) if m == 'inaccuracy' and i + 1 > first['blunder']]
  _press(page, 'i', after[0])  # The next one from where the board is.
  _press(page, 'Shift+M', last['mistake'] if last['mistake'] < after[0] else 0)
  page.keyboard.press('End')
  _until(page, "document.body.dataset.ply === '23'")
  _press(page, 'Shift+I', last['inaccuracy'])
  _press(page, 'Shift+B', last['blunder'])
  page.keyboard.press('b')  # No blunder after the last one: the board stays.
  page.keyboard.press('m')
  _until(page, "document.body.dataset.busy === 'false'")
  assert _ply(page) == (first['mistake'] if first['mistake'] > last['blunder'] else last['blunder'])

  assert page.locator('#help').is_hidden()
  page.keyboard.press('?')
  assert page.locator('#help').is_visible() and 'the next, the previous blunder' in page.locator('#help').inner_text()
  page.screenshot(path=str(tmp_path / 'serve-page-review.png'))
  print(f'screenshot: {tmp_path / "serve-page-review.png"}')
  page.keyboard.press('Escape')
  assert page.locator('#help').is_hidden()


def test_the_search_line_of_the_position_in_san(page, served):
  with page.expect_response(lambda response: response.url.endswith('/v1/play')) as played:
    page.goto(served.url + '#moves=e2e4')
  answer = played.value.json()  # The search the page asked for (MCTS keeps its tree: a rerun sees further).
  _until(page, "document.querySelector('#pv') && document.querySelector('#pv').textContent !== ''")
  _settled(page)
  assert page.locator('#pv').inner_text() == answer['pv_san']
  board = chess.Board()
  board.push_uci('e2e4')
  line = []
  for word in answer['pv_san'].replace('1...', '1... ').split():
    if not word[0].isdigit():  # SAN of the line's moves, each legal where it stands.
      line.append(board.push_san(word).uci())
  assert line == answer['pv'] and line[0] == answer['move'] and answer['visits'] > 0
  said = page.locator('#play-best').inner_text()
  assert said.startswith(f'search(mcts, {SIMS} sims): {answer["san"]} ')
  assert f'depth {answer["depth"]}, {answer["visits"]} visits' in said


def _error(page) -> str:
  return page.locator('#error').inner_text()


def _link(page, served, fragment: str) -> None:
  page.goto(served.url + '#' + fragment)
  _settled(page)


def test_a_bad_link_says_why_and_keeps_the_game_on_screen(page, served):
  _link(page, served, 'moves=e2e5')
  assert _error(page).startswith("the link's game: moves[0]: 'e2e5' is not a legal move in ")
  assert page.locator('#game li').count() == 0 and page.locator('#fen').input_value() == chess.STARTING_FEN

  page.goto('about:blank')
  _link(page, served, 'fen=' + urllib.parse.quote('<script>alert(1)</script>'))
  assert _error(page).startswith("the link's game: fen: not a FEN, '<script>alert(1)</script>'")
  assert page.locator('#fen').input_value() == chess.STARTING_FEN

  page.goto('about:blank')
  _link(page, served, 'garbage')
  assert _error(page) == 'the link: "garbage" is not a link\'s field (fen, moves, ply, side)'

  page.goto('about:blank')
  _link(page, served, 'moves=e2e4,e7e5&ply=abc')  # Both moves, the board at the last, the message; keys work.
  assert [t.rstrip('?!') for t in page.locator('#game li').all_inner_texts()] == ['1. e4', 'e5'] and _ply(page) == 2
  assert _error(page) == 'the link: ply=abc is not a move number: showing the last move'
  _press(page, 'ArrowLeft', 1)
  assert page.evaluate('location.hash') == '#moves=e2e4%2Ce7e5&ply=1'

  page.evaluate("location.hash = '#moves=e2e5'")  # In the open tab: the message, and the game stays.
  _until(page, "document.querySelector('#error').textContent.includes('e2e5')")
  _settled(page)
  assert [t.rstrip('?!') for t in page.locator('#game li').all_inner_texts()] == ['1. e4', 'e5'] and _ply(page) == 1

  page.evaluate("location.hash = '#moves=e2e4,e7e5&ply=9'")  # A ply past the game: its last move.
  _until(page, "document.body.dataset.ply === '2'")


def test_edits_of_ply_and_side_in_an_open_tab_are_followed_and_castling_is_san(page, served):
  _link(page, served, 'moves=e2e4,e7e5,g1f3&ply=3')
  page.evaluate("location.hash = '#moves=e2e4,e7e5,g1f3&ply=1'")
  _until(page, "document.body.dataset.ply === '1'")
  page.evaluate("location.hash = '#moves=e2e4,e7e5,g1f3&ply=1&side=black'")
  _until(page, "document.querySelector('#side').value === 'black'")
  _settled(page)
  assert _ply(page) == 1 and page.locator('#game li').count() == 3

  castle = 'r3k2r/8/8/8/8/8/8/R3K2R w KQkq - 0 1'
  page.goto('about:blank')
  _link(page, served, f'fen={urllib.parse.quote(castle)}&moves=e1h1')  # Castling as the king takes its rook.
  assert [t.rstrip('?!') for t in page.locator('#game li').all_inner_texts()] == ['1. O-O'] and _error(page) == ''
  assert 'moves=e1g1' in page.evaluate('location.hash')
