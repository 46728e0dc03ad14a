"""`searchless-serve`'s page in a real headless browser: the system's chromium, driven by Playwright.

Skipped with a reason where no chromium is installed (`make setup` installs Debian's where it can) or Playwright
is missing. The page may fetch from the server alone: every other request is refused and fails the test.
"""

import shutil
import time

import chess
import pytest

from serve_process import Served

pytestmark = pytest.mark.slow

SCHOLARS = '[White "A"]\n[Black "B"]\n\n1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0'
BROWSERS = ('chromium', 'chromium-browser', 'google-chrome', 'google-chrome-stable')


def _chromium() -> str | None:
  return next((path for name in BROWSERS if (path := shutil.which(name))), None)


@pytest.fixture(scope='module')
def served(model_checkpoint):
  with Served(model_checkpoint, '--max_batch', '8') as server:
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
  page.on('console', lambda message: failures.append(message.text) if message.type == 'error' else None)
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
  assert page.locator('#game li').all_inner_texts() == ['1. e4', reply['san']]
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
  assert page.locator('#game li').all_inner_texts() == ['1. e4', 'e5', '2. Nf3']
  assert page.locator('#fen').input_value() == 'rnbqkbnr/pppp1ppp/8/4p3/4P3/8/PPPP1PPP/RNBQKBNR w KQkq - 0 2'
  assert _rows(page) == _rows_of(_best(served, ['e2e4', 'e7e5']))
