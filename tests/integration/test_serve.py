"""`searchless-serve`: the HTTP API of a real server process on 127.0.0.1 (a free port), with a small model.

One server serves the module's tests (it loads and compiles once); the tests of stopping start their own.
"""

import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time

import chess
import numpy as np
import pytest

from searchless.engines import launch
from searchless.play import player as player_lib
from searchless.play.serve import inputs

from serve_process import Served, concurrently, serve_argv

pytestmark = pytest.mark.slow

KIWIPETE = 'r3k2r/p1ppqpb1/bn2pnp1/3PN3/1p2P3/2N2Q1p/PPPBBPPP/R3K2R w KQkq - 0 1'  # 48 legal moves.
MATED = '7k/6Q1/6K1/8/8/8/8/8 b - - 0 1'
STALEMATE = '7k/5Q2/6K1/8/8/8/8/8 b - - 0 1'
SIMS = 16
JSON = {'Content-Type': 'application/json'}


@pytest.fixture(scope='module')
def served(model_checkpoint):
  """The server of the module: batches of 8 positions at most, 64 queued; MCTS for /v1/play; Stockfish if any."""
  extra = ['--stockfish'] if launch.find_stockfish() else []
  with Served(
    model_checkpoint,
    '--max_batch',
    '8',
    '--max_queue',
    '64',
    '--agent',
    f'search:{model_checkpoint},sims={SIMS}',
    *extra,
  ) as server:
    # Asked before the shapes are compiled (or just after): 503 with Retry-After, else 200; never anything else.
    early = [server.get('/health/ready'), server.post('/v1/analyse', {})]
    server.wait_ready()
    server.early = early
    yield server


@pytest.fixture(scope='module')
def policy(model_checkpoint):
  return player_lib.load_policy(str(model_checkpoint), compute_dtype='float32')


def test_live_at_once_ready_once_every_shape_is_compiled(served):
  (ready_status, ready_headers, ready_body), (analyse_status, analyse_headers, analyse_body) = served.early
  if ready_status == 503:  # Compiling still.
    assert ready_body == {'status': 'compiling'} and ready_headers['retry-after'] == '1'
  else:
    assert ready_status == 200
  if analyse_status == 503:
    assert analyse_body['error'].startswith('the model is compiling its batch shapes')
    assert analyse_headers['retry-after'] == '1'
  else:
    assert analyse_status == 200
  assert served.get('/health/live')[::2] == (200, {'status': 'live'})
  # The per-move model's 9 batch sizes at its one sequence length; the search shares them (the same model).
  assert served.get('/health/ready')[::2] == (200, {'status': 'ready', 'compiled_shapes': 9})
  assert served.lines[1] == 'ready: 9 batch shapes compiled in ' + served.lines[1].split(' in ')[1]
  assert served.metric('searchless_serve_ready') == 1
  # What the process holds for good (JAX, the model: hundreds of thousands of objects) is frozen by the time it
  # says ready: out of the collector's generations, which a full collection no longer walks.
  assert served.metric('searchless_serve_gc_frozen_objects') > 100_000


def test_analyse_answers_every_legal_move_best_first_as_the_policy(served, policy):
  board = chess.Board(KIWIPETE)
  board.push_uci('e1g1')
  status, headers, answer = served.post('/v1/analyse', {'fen': KIWIPETE, 'moves': ['e1g1']})
  assert status == 200 and headers['content-type'] == 'application/json'
  analysis = policy.analyse(board)
  ranked = analysis.ranked()
  assert answer['model'] == served_name(served) and answer['policy'] == 'action_value'
  assert (answer['fen'], answer['side_to_move'], answer['check'], answer['outcome']) == (
    board.fen(),
    'black',
    False,
    None,
  )
  assert [m['uci'] for m in answer['moves']] == [m.uci() for m, _ in ranked]
  assert [m['san'] for m in answer['moves']] == [board.san(m) for m, _ in ranked]
  np.testing.assert_allclose([m['win'] for m in answer['moves']], [s for _, s in ranked], atol=2e-6)
  assert answer['best'] == answer['moves'][0]
  assert answer['value'] == pytest.approx(analysis.value, abs=2e-6)


def served_name(served) -> str:
  return served.process.args[served.process.args.index('--checkpoint') + 1].rstrip('/').rsplit('/', 1)[-1]


def test_a_batch_answers_each_position_and_a_finished_game_its_result(served):
  status, _, answer = served.post(
    '/v1/analyse', {'positions': [{'fen': MATED}, {}, {'fen': STALEMATE}, {'fen': KIWIPETE, 'moves': ['a2a3']}]}
  )
  assert status == 200
  mated, start, stalemate, kiwipete = answer['positions']
  assert mated == {
    'fen': MATED,
    'side_to_move': 'black',
    'check': True,
    'outcome': {'result': '1-0', 'winner': 'white', 'termination': 'checkmate'},
    'value': 0.0,
    'best': None,
    'moves': [],
  }
  assert stalemate['outcome'] == {'result': '1/2-1/2', 'winner': None, 'termination': 'stalemate'}
  assert (stalemate['value'], stalemate['moves']) == (0.5, [])
  after_a3 = chess.Board(KIWIPETE)
  after_a3.push_uci('a2a3')
  assert len(start['moves']) == 20 and len(kiwipete['moves']) == after_a3.legal_moves.count() == 44
  status, _, answer = served.post('/v1/analyse', {'fen': MATED})
  assert status == 200 and answer['outcome']['termination'] == 'checkmate' and answer['moves'] == []


def test_concurrent_clients_share_model_calls(served):
  calls_before = served.metric('searchless_serve_batch_size_count')
  positions_before = served.metric('searchless_serve_batch_size_sum')
  clients, each = 16, 3
  boards = [chess.Board(KIWIPETE) for _ in range(clients)]
  for i, board in enumerate(boards):  # A different position per client.
    board.push(list(board.legal_moves)[i])

  def client(board):
    return lambda: [served.post('/v1/analyse', {'fen': board.fen()})[0] for _ in range(each)]

  assert concurrently([client(b) for b in boards]) == [[200] * each] * clients
  positions = served.metric('searchless_serve_batch_size_sum') - positions_before
  assert positions == clients * each  # Every position went through the model once.
  # Then requests that arrive together, whatever the load (on a loaded machine, threads' requests can arrive one
  # at a time and each run alone): sent on open keep-alive connections while the server is stopped (SIGSTOP),
  # all are there to read when it goes on, and they run in full batches of 8.
  bodies = [json.dumps({'fen': board.fen()}).encode() for board in boards]
  connections = [http.client.HTTPConnection(served.host, served.port, timeout=120) for _ in boards]
  for connection, body in zip(connections, bodies):
    connection.request('POST', '/v1/analyse', body=body, headers=JSON)
    assert connection.getresponse().read()
  calls_before = served.metric('searchless_serve_batch_size_count')
  positions_before = served.metric('searchless_serve_batch_size_sum')
  os.kill(served.process.pid, signal.SIGSTOP)
  try:
    for connection, body in zip(connections, bodies):
      connection.request('POST', '/v1/analyse', body=body, headers=JSON)
  finally:
    os.kill(served.process.pid, signal.SIGCONT)
  together = [connection.getresponse().status for connection in connections]
  for connection in connections:
    connection.close()
  assert together == [200] * clients
  calls = served.metric('searchless_serve_batch_size_count') - calls_before
  positions = served.metric('searchless_serve_batch_size_sum') - positions_before
  assert (calls, positions) == (2, clients)  # Two model calls of 8 positions (--max_batch 8).
  assert served.metric('searchless_serve_batch_size_bucket', le='8.0') == served.metric(
    'searchless_serve_batch_size_count'
  )  # --max_batch 8.
  assert served.metric('searchless_serve_compiled_after_ready_total') == 0
  assert served.metric('searchless_serve_requests_total', endpoint='/v1/analyse', status='200') >= clients * each
  assert served.metric('searchless_serve_queue_wait_seconds_count') >= clients * each
  assert served.metric('searchless_serve_request_seconds_count', endpoint='/v1/analyse') >= clients * each
  assert served.metric('searchless_serve_queue_length') == 0
  assert served.metric('searchless_serve_requests_in_flight') == 1  # The scrape itself.


def test_a_full_queue_is_answered_503_with_retry_after(served):
  batch = {'positions': [{'fen': KIWIPETE}] * 32}  # 64 fit in the queue: two such requests, three do not.
  results = concurrently([lambda: served.post('/v1/analyse', batch) for _ in range(12)])
  statuses = sorted(status for status, _, _ in results)
  assert set(statuses) == {200, 503} and statuses.count(200) >= 2
  for status, headers, answer in results:
    if status == 503:
      assert headers['retry-after'] == '1'
      assert answer['error'].startswith('the server is busy: ') and 'exceed the limit of 64' in answer['error']
    else:
      assert len(answer['positions']) == 32
  assert served.get('/health/ready')[0] == 200


TOO_MANY = {'positions': [{}] * (inputs.MAX_POSITIONS + 1)}
AFTER_E4 = 'rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1'
MAX = inputs.MAX_POSITIONS
BAD_BODIES = [
  (b'{"fen": ', 400, 'the body is not valid JSON: unexpected end of data: line 1 column 9 (char 8)'),
  (b'["e2e4"]', 400, 'the body must be a JSON object, not array'),
  (b'[' * 5000 + b']' * 5000, 400, 'the body is not valid JSON: depth limit exceeded: line 1 column 1026 (char 1025)'),
  (
    b'{"moves": ["e2e4"], "fen": 1' + b'0' * 400 + b'}',
    400,
    'the body is not valid JSON: number is infinity when parsed as double: line 1 column 28 (char 27)',
  ),
  (b'{"fen": 1' + b'0' * 30 + b'}', 400, 'fen: expected a FEN string, got 1e+30'),
  (
    b'{"fen": "8/8/8/8 w - - 0 1"}',
    400,
    "fen: not a FEN, '8/8/8/8 w - - 0 1' (expected 8 rows in position part of fen: '8/8/8/8')",
  ),
  (
    b'{"fen": "k7/8/8/8/8/8/8/K6K w - - 0 1"}',
    400,
    "fen: illegal position '" + 'k7/8/8/8/8/8/8/K6K w - - 0 1' + "' (too many kings)",
  ),
  (b'{"fen": 5}', 400, 'fen: expected a FEN string, got 5'),
  (b'{"moves": ["e2e4", "e2e4"]}', 400, f"moves[1]: 'e2e4' is not a legal move in {AFTER_E4}"),
  (b'{"moves": ["zz"]}', 400, f"moves[0]: 'zz' is not a legal move in {chess.STARTING_FEN}"),
  (b'{"moves": "e2e4"}', 400, 'moves: expected a list of UCI moves, got "e2e4"'),
  (
    b'{"fen": "8/8/8/8/8/8/8/8 w - - 0 1", "colour": "w"}',
    400,
    'colour: unknown field (expected fen, moves, chess960, positions)',
  ),
  (b'{"positions": [{}], "fen": "y"}', 400, 'positions: give either positions or one position (fen, moves), not both'),
  (b'{"positions": []}', 400, 'positions: expected a non-empty list of positions ({"fen": ..., "moves": [...]})'),
  (
    b'{"positions": [{}, {"moves": ["e7e5"]}]}',
    400,
    f"positions[1].moves[0]: 'e7e5' is not a legal move in {chess.STARTING_FEN}",
  ),
  (b'{"positions": [{"depth": 3}]}', 400, 'positions[0].depth: unknown field (expected fen, moves, chess960)'),
  (json.dumps(TOO_MANY).encode(), 400, f'positions: {MAX + 1} positions, more than the {MAX} allowed in one request'),
  (
    b' ' * (inputs.MAX_BODY_BYTES + 1),
    413,
    f'body: {inputs.MAX_BODY_BYTES + 1} bytes (Content-Length), more than the {inputs.MAX_BODY_BYTES} allowed',
  ),
]


@pytest.mark.parametrize('body, status, error', BAD_BODIES, ids=[e.split(':')[0][:20] for _, _, e in BAD_BODIES])
def test_bad_input_is_a_4xx_json_error_naming_the_field(served, body, status, error):
  assert served.post('/v1/analyse', raw=body)[::2] == (status, {'error': error})


def test_a_body_streamed_past_the_limit_is_413(served):
  """Chunked, with no Content-Length: the server counts the bytes as they come, and stops reading at the limit."""
  connection = http.client.HTTPConnection(served.host, served.port, timeout=60)
  chunk = b'{"fen": "' + b' ' * 65536
  connection.putrequest('POST', '/v1/analyse')
  connection.putheader('Content-Type', 'application/json')
  connection.putheader('Transfer-Encoding', 'chunked')
  connection.endheaders()
  try:
    for _ in range(inputs.MAX_BODY_BYTES // len(chunk) + 2):
      connection.send(b'%x\r\n%s\r\n' % (len(chunk), chunk))
    connection.send(b'0\r\n\r\n')
  except (BrokenPipeError, ConnectionResetError):
    pass  # The server answered and closed before the end of the body.
  response = connection.getresponse()
  assert (response.status, json.loads(response.read())) == (
    413,
    {'error': f'body: more than the {inputs.MAX_BODY_BYTES} bytes allowed'},
  )
  connection.close()


def test_a_client_gone_before_its_body_is_counted_499_and_the_server_goes_on(served):
  before = served.metric('searchless_serve_requests_total', endpoint='/v1/analyse', status='499')
  with socket.create_connection((served.host, served.port), timeout=60) as sock:
    sock.sendall(
      b'POST /v1/analyse HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n'
      b'Content-Length: 100\r\n\r\n{"fen": '
    )
  deadline = time.monotonic() + 30
  while served.metric('searchless_serve_requests_total', endpoint='/v1/analyse', status='499') == before:
    assert time.monotonic() < deadline, 'the request of a client gone was never counted'
    time.sleep(0.05)
  assert served.post('/v1/analyse', {})[0] == 200


def test_other_endpoints_methods_and_bodies(served):
  assert served.get('/nowhere')[::2] == (404, {'error': 'GET /nowhere: Not Found'})
  status, headers, answer = served.get('/v1/analyse')
  assert (status, headers['allow'], answer) == (405, 'POST', {'error': 'GET /v1/analyse: Method Not Allowed'})
  before = served.metric('searchless_serve_requests_total', endpoint='/v1/analyse', status='200')
  status, _, answer = served.post('/v1/analyse/', {})  # A trailing slash names the same endpoint.
  assert status == 200 and len(answer['moves']) == 20
  assert served.metric('searchless_serve_requests_total', endpoint='/v1/analyse', status='200') == before + 1
  assert served.post('/v1/play', raw=b'{"movetime_ms": 0}')[::2] == (
    400,
    {'error': f'movetime_ms: expected an integer from 1 to {inputs.MAX_MOVETIME_MS}, got 0'},
  )
  status, _, answer = served.post('/v1/pgn', {'pgn': '1. e4 e5 2. Ke3 *'})
  assert status == 400 and answer['error'].startswith("pgn: illegal san: 'Ke3' in ")
  status, _, game = served.post('/v1/pgn', {'pgn': '[White "A"]\n\n1. e4 e5 2. Qh5 Nc6 3. Bc4 Nf6 4. Qxf7# 1-0'})
  assert status == 200 and game['headers']['White'] == 'A' and game['fen'] == chess.STARTING_FEN
  assert [m['san'] for m in game['moves']] == ['e4', 'e5', 'Qh5', 'Nc6', 'Bc4', 'Nf6', 'Qxf7#']
  status, _, info = served.get('/v1/info')
  assert status == 200 and info['max_batch'] == 8 and info['max_positions'] == inputs.MAX_POSITIONS
  status, headers, page = served.get('/')
  assert status == 200 and headers['content-type'] == 'text/html; charset=utf-8' and b'<html' in page
  status, _, licence = served.get('/page/vendor/cm-chessboard/LICENSE')
  assert status == 200 and licence.startswith(b'MIT License')
  for outside in ('/page/../app.py', '/page/%2e%2e/app.py', '/page/..%2fserver.py'):  # Only the page's own files.
    assert served.request('GET', outside)[0] == 404, outside
  assert served.metric('searchless_serve_requests_total', endpoint='other', status='404') >= 1


def test_play_searches_for_its_movetime_or_its_simulations(served):
  board = chess.Board(KIWIPETE)
  status, _, answer = served.post('/v1/play', {'fen': KIWIPETE})
  assert status == 200, answer
  assert chess.Move.from_uci(answer['move']) in board.legal_moves and answer['san'] == board.san(
    chess.Move.from_uci(answer['move'])
  )
  assert answer['visits'] >= SIMS and answer['depth'] >= 1 and answer['pv'][0] == answer['move']
  assert answer['agent'] == f'search(mcts, {SIMS} sims)' and 0 <= answer['win'] <= 1
  start = time.monotonic()
  status, _, timed = served.post('/v1/play', {'moves': ['e2e4'], 'movetime_ms': 300})
  assert status == 200 and timed['fen'] == 'rnbqkbnr/pppppppp/8/8/4P3/8/PPPP1PPP/RNBQKBNR b KQkq - 0 1'
  assert timed['seconds'] <= 0.3 + 0.25 and time.monotonic() - start < 10
  status, _, over = served.post('/v1/play', {'fen': MATED})
  assert (status, over['move'], over['outcome']['result']) == (200, None, '1-0')


def test_stockfish_beside_the_model(served):
  if launch.find_stockfish() is None:
    pytest.skip('Stockfish not found (apt-get install stockfish, or set SEARCHLESS_STOCKFISH)')
  status, _, answer = served.post('/v1/stockfish', {'fen': '6k1/5ppp/8/8/8/8/5PPP/3R2K1 w - - 0 1'})
  assert status == 200, answer
  assert (answer['move'], answer['san'], answer['win'], answer['score']) == ('d1d8', 'Rd8#', 1.0, {'mate': 1})


def test_sigterm_answers_the_requests_in_flight_then_stops(model_checkpoint):
  # Batches of one position: the 64 positions take 64 model calls to drain (0.5 s on 2 idle cores), so requests are
  # still in flight when all have arrived (batches of 8 drained as fast as they came), well within the 4 s of grace.
  with Served(model_checkpoint, '--max_batch', '1', '--max_queue', '4096') as server:
    server.wait_ready()
    batch = {'positions': [{'fen': KIWIPETE}] * 8}
    sent = []

    def client():
      sent.append(time.monotonic())
      status, _, answer = server.post('/v1/analyse', batch)
      return status, len(answer.get('positions', [])), time.monotonic()

    results: list = []
    threads = [threading.Thread(target=lambda: results.append(client())) for _ in range(8)]
    for thread in threads:
      thread.start()
    queued = lambda: server.metric('searchless_serve_queue_length')
    while queued() + server.metric('searchless_serve_batch_size_sum') < 8 * 8:  # Until every request is in.
      time.sleep(0.01)
    queued_at_term = queued()
    assert queued_at_term > 0  # Some positions wait still: the requests are in flight.
    terminated = time.monotonic()
    status = server.stop(signal.SIGTERM)
    stopped = time.monotonic()
    for thread in threads:
      thread.join(60)
    assert status == 0 and stopped - terminated < 5
    assert [(s, n) for s, n, _ in results] == [(200, 8)] * 8
    assert max(done for _, _, done in results) > terminated  # Some were answered after SIGTERM.
    assert server.lines[-1] == 'stopped (SIGTERM): the requests in flight were answered'
    with pytest.raises(ConnectionRefusedError):
      server.request('GET', '/health/live')


def test_ctrl_c_is_one_line_and_status_130(model_checkpoint):
  with Served(model_checkpoint, '--max_batch', '4') as server:
    server.wait_ready()
    assert server.stop(signal.SIGINT) == 130
    time.sleep(0.2)
    assert server.stderr[-1] == 'interrupted; the requests in flight were answered\n'


def test_a_port_in_use_and_a_missing_checkpoint_are_one_line(model_checkpoint, tmp_path):
  with socket.socket() as taken:
    taken.bind(('127.0.0.1', 0))
    taken.listen()
    port = taken.getsockname()[1]
    argv = serve_argv(model_checkpoint)
    argv[argv.index('--port') + 1] = str(port)
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
  assert (done.returncode, done.stderr) == (
    2,
    f'error: --port {port}: 127.0.0.1:{port} is in use (another server?); pick another port\n',
  )
  done = subprocess.run(serve_argv(tmp_path / 'nothing'), capture_output=True, text=True, timeout=120)
  assert done.returncode == 2 and done.stderr.startswith('error: ') and done.stderr.count('\n') == 1


def test_without_the_serve_extra_the_command_is_one_line_naming_it():
  code = "import sys; sys.modules['starlette'] = None\nfrom searchless.commands import serve\n"
  code += "serve.main(['--checkpoint', 'x'])"
  done = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=120)
  assert (done.returncode, done.stderr) == (
    2,
    "error: searchless-serve needs starlette, which comes with an extra: pip install 'searchless[serve]'\n",
  )
