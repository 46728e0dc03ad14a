import bz2
import gzip
import io

import pytest
import zstandard

from searchless.data import pgn

from searchless.data import streams

GAME = """[Event "Rated Blitz game"]
[Site "https://lichess.org/{site}"]
[WhiteElo "{elo}"]
[BlackElo "1500"]
[TimeControl "{tc}"]
[WhiteTitle "{title}"]

1. e4 e5 2. Nf3 Nc6 3. Bb5 {{ a comment }} ( 3. Bc4 Bc5 ) 3... a6 1-0

"""


def game(site='a', elo=1500, tc='180+0', title='', moves=None):
  text = GAME.format(site=site, elo=elo, tc=tc, title=title)
  if moves is not None:
    text = text.replace('1. e4 e5 2. Nf3 Nc6 3. Bb5 { a comment } ( 3. Bc4 Bc5 ) 3... a6 1-0', moves)
  return text


def parse_all(path, game_filter=pgn.GameFilter()):
  return [pgn.parse_game(raw, game_filter) for raw in pgn.iter_raw_games(str(path))]


def test_mainline_only_and_final_board(tmp_path):
  path = tmp_path / 'g.pgn'
  path.write_text(game())
  (result,) = parse_all(path)
  assert len(result.fens) == 7  # Start + 6 moves; the variation is ignored.
  assert result.fens[-1] == 'r1bqkbnr/1ppp1ppp/p1n5/1B2p3/4P3/5N2/PPPP1PPP/RNBQK2R w KQkq - 0 4'
  assert result.key == 'https://lichess.org/a'


def test_malformed_games_are_counted_by_reason(tmp_path):
  path = tmp_path / 'bad.pgn'
  with open(path, 'wb') as f:
    f.write(game('ok').encode())
    f.write(game('illegal', moves='1. e4 e5 2. Ke3 Nc6 1-0').encode())
    f.write(game('variant').replace('[Event', '[Variant "Chess960"]\n[Event').encode())
    f.write(game('garbage').encode().replace(b'Nf3', b'N\xff\xfef3'))
    f.write(game('nonsense', moves='1. e4 zz9 0-1').encode())
    f.write(b'\n\n\x00\x13garbage line that is not pgn\n\n')
    f.write(game('truncated', moves='1. e4 e5 2. Nf3').encode())
  results = parse_all(path)
  reasons = [r.reason if isinstance(r, pgn.Skip) else 'kept' for r in results]
  assert reasons == ['kept', 'illegal_move', 'variant', 'bad_encoding', 'unparsable', 'unparsable', 'truncated']
  assert results[1].location == f'{path}:10'
  assert 'Ke3' in results[1].detail
  assert results[4].detail == "not PGN movetext: 'zz9'"
  garbage_line = path.read_bytes().split(b'\n').index(b'\x00\x13garbage line that is not pgn') + 1
  assert results[5].location == f'{path}:{garbage_line}'


@pytest.mark.parametrize(
  'suffix, compress',
  [
    ('.pgn.zst', lambda b: zstandard.ZstdCompressor().compress(b)),
    ('.pgn.bz2', bz2.compress),
    ('.pgn.gz', gzip.compress),
  ],
)
def test_compressed_inputs_match_plain(tmp_path, lichess_999, suffix, compress):
  data = lichess_999.read_bytes()[:200_000]
  plain = tmp_path / 'g.pgn'
  plain.write_bytes(data)
  packed = tmp_path / f'g{suffix}'
  packed.write_bytes(compress(data))
  assert b''.join(streams.read_chunks(str(packed))) == data
  assert [r.text for r in pgn.iter_raw_games(str(packed))] == [r.text for r in pgn.iter_raw_games(str(plain))]


def test_multi_frame_zstd_streams(tmp_path, lichess_999):
  data = lichess_999.read_bytes()[:300_000]
  out = io.BytesIO()
  writer = zstandard.ZstdCompressor().stream_writer(out, closefd=False)
  writer.write(data[:100_000])
  writer.flush(zstandard.FLUSH_FRAME)
  writer.write(data[100_000:])
  writer.close()
  path = tmp_path / 'g.pgn.zst'
  path.write_bytes(out.getvalue())
  assert b''.join(streams.read_chunks(str(path))) == data


@pytest.mark.parametrize(
  'suffix, compress',
  [
    ('.pgn.zst', lambda b: zstandard.ZstdCompressor().compress(b)),
    ('.pgn.bz2', bz2.compress),
  ],
)
def test_truncated_compressed_file_is_an_error_naming_it(tmp_path, lichess_999, suffix, compress):
  packed = compress(lichess_999.read_bytes()[:300_000])
  path = tmp_path / f'cut{suffix}'
  path.write_bytes(packed[: len(packed) // 2])
  with pytest.raises(streams.CorruptInputError, match=f'{path}.*truncated'):
    list(pgn.iter_raw_games(str(path)))


def test_filters(tmp_path):
  path = tmp_path / 'f.pgn'
  path.write_text(game('a', elo=1000) + game('b', elo=2000) + game('c', tc='60+0') + game('d', title='BOT'))
  assert [getattr(r, 'reason', 'kept') for r in parse_all(path, pgn.GameFilter(min_elo=1200))] == [
    'filtered_elo',
    'kept',
    'kept',
    'kept',
  ]
  assert [getattr(r, 'reason', 'kept') for r in parse_all(path, pgn.GameFilter(max_elo=1800))] == [
    'kept',
    'filtered_elo',
    'kept',
    'kept',
  ]
  assert [getattr(r, 'reason', 'kept') for r in parse_all(path, pgn.GameFilter(speeds=('blitz',)))] == [
    'kept',
    'kept',
    'filtered_speed',
    'kept',
  ]
  assert [getattr(r, 'reason', 'kept') for r in parse_all(path, pgn.GameFilter(exclude_bots=True))] == [
    'kept',
    'kept',
    'kept',
    'filtered_bot',
  ]


def test_games_without_site_get_a_text_hash(tmp_path):
  path = tmp_path / 'g.pgn'
  path.write_text('[Event "x"]\n\n1. d4 d5 1/2-1/2\n')
  (result,) = parse_all(path)
  assert result.key.startswith('sha1:') and len(result.key) == 45
  assert len(result.fens) == 3


def test_missing_file_is_named(tmp_path):
  with pytest.raises(Exception, match='nope.pgn'):
    list(pgn.iter_raw_games(str(tmp_path / 'nope.pgn')))


def test_a_cut_after_complete_frames_keeps_every_complete_game_and_counts_the_cut_one(tmp_path):
  """Six games, one zstd frame each, then half of a seventh frame: 6 games kept, the 7th read and skipped."""
  frames = [zstandard.ZstdCompressor().compress(game(site=f's{i}').encode()) for i in range(7)]
  path = tmp_path / 'cut.pgn.zst'
  path.write_bytes(b''.join(frames[:6]) + frames[6][: len(frames[6]) // 2])
  read = []
  with pytest.raises(streams.CorruptInputError, match=f'{path}: zstd stream is truncated'):
    for raw in pgn.iter_raw_games(str(path)):
      read.append(raw)
  parsed = [pgn.parse_game(raw) for raw in read]
  assert [g.key for g in parsed if isinstance(g, pgn.Game)] == [f'https://lichess.org/s{i}' for i in range(6)]
  assert [(s.reason, s.location) for s in parsed if isinstance(s, pgn.Skip)] in (
    [],
    [('truncated', f'{path}:{6 * 9 + 1}')],
  )  # The cut frame's text, if any decompressed, is counted.


def test_byte_order_marks_blank_lines_and_moves_after_the_result(tmp_path):
  one = game(site='a')
  two_blank_lines = game(site='b').replace('"\n\n1. e4', '"\n\n\n1. e4')
  after_result = game(site='c', moves='1. e4 e5 1-0 2. Nf3 Nc6')
  path = tmp_path / 'g.pgn'
  path.write_text('\ufeff' + one + '\ufeff' + two_blank_lines + after_result, encoding='utf-8')
  parsed = parse_all(path)
  assert len(parsed) == 3
  assert [g.key for g in parsed[:2]] == ['https://lichess.org/a', 'https://lichess.org/b']
  assert parsed[0].fens == parsed[1].fens and len(parsed[0].fens) == 7  # The same 6 plies.
  assert [type(g).__name__ for g in parse_all(path, pgn.GameFilter(min_elo=1500))[:2]] == [
    'Game',
    'Game',
  ]  # Tags intact.
  assert (parsed[2].reason, parsed[2].detail) == ('unparsable', 'moves after the result token')


def test_boards_past_move_999_are_made_tokenizable_by_clamping_their_counters(tmp_path):
  start = 'r3k3/8/8/8/8/8/8/R3K3 w - - 140 999'
  path = tmp_path / 'long.pgn'
  path.write_text(f'[Event "long"]\n[SetUp "1"]\n[FEN "{start}"]\n\n999. Ra2 Ra7 1000. Ra1 Ra8 *\n\n')
  [parsed] = parse_all(path)
  assert parsed.fens == (
    start,
    'r3k3/8/8/8/8/8/R7/4K3 b - - 141 999',
    '4k3/r7/8/8/8/8/R7/4K3 w - - 142 999',
    '4k3/r7/8/8/8/8/8/R3K3 b - - 143 999',
    'r3k3/8/8/8/8/8/8/R3K3 w - - 144 999',
  )
  from searchless.core import tokenizer

  assert all(len(tokenizer.tokenize(fen)) == 77 for fen in parsed.fens)
  assert (
    tokenizer.tokenize('r3k3/8/8/8/8/8/8/R3K3 w - - 1000 1001')
    == tokenizer.tokenize('r3k3/8/8/8/8/8/8/R3K3 w - - 999 999')
  ).all()


def test_a_directory_as_input_is_an_error_saying_what_to_pass(tmp_path):
  with pytest.raises(
    IsADirectoryError,
    match=f"^--input '{tmp_path}' is a directory: pass its files, e.g. --input '{tmp_path}/\\*.pgn.zst'$",
  ):
    streams.match_files([str(tmp_path)])


@pytest.mark.parametrize(
  'tags,movetext,detail',
  [
    (
      '[FEN "4k3/8/8/8/8/8/8/K3K3 w - - 0 1"]\n[SetUp "1"]\n',
      '1. Ka2 *',
      "'4k3/8/8/8/8/8/8/K3K3 w - - 0 1': too many kings",
    ),
    ('[FEN "4k3/8/8/8/8/8/4Q3/4K3 w - - 0 1"]\n', '1. Qe7+ *', "'4k3/8/8/8/8/8/4Q3/4K3 w - - 0 1': opposite check"),
    (
      '[FEN "bqnbrkrn/pppppppp/8/8/8/8/PPPPPPPP/BQNBRKRN w GEge - 0 1"]\n',
      '1. e4 *',
      "'bqnbrkrn/pppppppp/8/8/8/8/PPPPPPPP/BQNBRKRN w KQkq - 0 1': Chess960 castling rights without a Variant tag",
    ),
    ('', '1. e4 -- 2. d4 *', 'a null move at ply 2'),
    ('', '1. e4 e5 2. Z0 Nc6 *', 'a null move at ply 3'),
  ],
)
def test_illegal_start_positions_and_null_moves_are_skips_with_a_reason(tags, movetext, detail):
  skip = pgn.parse_game(pgn.RawGame('x.pgn', 7, f'{tags}[Result "*"]\n\n{movetext}\n'))
  assert isinstance(skip, pgn.Skip) and skip.location == 'x.pgn:7' and skip.detail == detail
  assert skip.reason == ('null_move' if 'null' in detail else 'illegal_position') and skip.reason in pgn.SKIP_REASONS
