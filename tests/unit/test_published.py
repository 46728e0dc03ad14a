"""The published files' catalogue (`searchless.core.published`) and the names of the published checkpoints."""

import pytest

from searchless.core import published
from searchless.model import loading


def test_each_target_names_the_reference_scripts_files():
  urls = lambda *args, **kw: [r.url for r in published.remotes(*args, **kw)]
  bucket = 'https://storage.googleapis.com/searchless_chess'
  assert urls('chessbench-checkpoints') == [
    f'{bucket}/checkpoints/{m}.zip' for m in ('9M', '9M_state_value', '9M_behavioral_cloning', '136M', '270M')
  ]
  assert urls('chessbench-data') == [
    f'{bucket}/data/puzzles.csv',
    f'{bucket}/data/eco_openings.pgn',
    f'{bucket}/data/test/action_value_data.bag',
    f'{bucket}/data/test/behavioral_cloning_data.bag',
    f'{bucket}/data/test/state_value_data.bag',
  ]
  train = urls('chessbench-data', ['train'])
  assert len(train) == 2148 and train[-1] == f'{bucket}/data/train/action_value-02147-of-02148_data.bag'
  assert urls('chessbench-data', ['train'], shards='3') == train[:3]
  assert urls('chessbench-data', ['train'], shards='10-11,0') == [train[0], train[10], train[11]]
  [games] = published.remotes('lichess-games', ['2024-01'])
  assert games.url == 'https://database.lichess.org/standard/lichess_db_standard_rated_2024-01.pgn.zst'
  assert games.checksums == 'https://database.lichess.org/standard/sha256sums.txt'
  assert str(games.path) == 'lichess/standard/lichess_db_standard_rated_2024-01.pgn.zst'
  assert urls('lichess-evals') == ['https://database.lichess.org/lichess_db_eval.jsonl.zst']
  [model] = published.remotes('chessbench-checkpoints', ['9M'])
  assert (str(model.path), str(model.final), model.unpack) == (
    'chessbench/checkpoints/9M.zip',
    'chessbench/checkpoints/9M',
    True,
  )


@pytest.mark.parametrize(
  'args, kwargs, message',
  [
    (('chessbench-checkpoints', ['27M']), {}, "unknown item(s) ['27M']"),
    (('chessbench-data', ['test']), {'shards': '5'}, '--shards chooses the shards of the chessbench-data item train'),
    (('chessbench-data', ['train']), {'shards': '0-2148'}, '0-2148 is not a range within 0-2147'),
    (('chessbench-data', ['train']), {'shards': '0'}, 'a count from 1 to 2148'),
    (('chessbench-data', ['train']), {'shards': 'a-b'}, 'expected a count N, or ranges'),
    (('lichess-games', []), {}, 'name the months to fetch'),
    (('lichess-games', ['2024-13']), {}, "['2024-13'] are not months YYYY-MM"),
    (('lichess-puzzles', ['x']), {}, 'takes no items'),
    (('lichess', []), {}, "unknown target 'lichess'"),
  ],
)
def test_a_wrong_choice_is_one_line(args, kwargs, message):
  with pytest.raises(ValueError, match=None) as error:
    published.remotes(*args, **kwargs)
  assert message in str(error.value) and '\n' not in str(error.value)


def test_a_mirror_keeps_the_path_and_must_be_http():
  url = 'https://database.lichess.org/standard/sha256sums.txt'
  assert (
    published.mirrored(url, 'https://mirror.example/base/') == 'https://mirror.example/base/standard/sha256sums.txt'
  )
  assert published.mirrored(url, None) == url
  with pytest.raises(ValueError, match="--base_url 'mirror' is not an http"):
    published.mirrored(url, 'mirror')


def test_the_data_folder_follows_the_environment(monkeypatch, tmp_path):
  monkeypatch.setenv(published.DATA_ENV, str(tmp_path / 'data'))
  assert published.data_root() == tmp_path / 'data'
  monkeypatch.delenv(published.DATA_ENV)
  monkeypatch.setenv('XDG_CACHE_HOME', str(tmp_path / 'cache'))
  assert published.data_root() == tmp_path / 'cache' / 'searchless'


def test_a_name_not_downloaded_says_how_to_get_it(monkeypatch, tmp_path):
  monkeypatch.setenv(published.DATA_ENV, str(tmp_path))
  with pytest.raises(FileNotFoundError) as error:
    loading.resolve('chessbench-270M')
  assert str(error.value) == (
    f'chessbench-270M is not downloaded (no {tmp_path}/chessbench/checkpoints/270M): run'
    ' `searchless-download chessbench-checkpoints 270M` (it looks in $SEARCHLESS_DATA, else ~/.cache/searchless)'
  )
  assert loading.model_folder('chessbench-9M') == tmp_path / 'chessbench' / 'checkpoints' / '9M'
  assert [loading.is_name(n) for n in ('chessbench-270M', 'chessbench-1B', 'pretrained')] == [True, False, True]
  assert [
    loading.trained_policy(n, None) for n in ('chessbench-9M', 'chessbench-9M_state_value', 'x/9M_state_value')
  ] == [
    'action_value',
    'state_value',
    'state_value',
  ]
  assert loading.trained_policy('runs/x', None) is None


def test_an_item_named_twice_is_one_file_and_a_checkpoint_is_there_once_loadable(tmp_path):
  assert published.remotes('chessbench-checkpoints', ['9M', '9M']) == published.remotes(
    'chessbench-checkpoints', ['9M']
  )
  model = tmp_path / '9M'
  assert not published.holds_checkpoint(model)
  (model / '6400000' / 'params_ema').mkdir(parents=True)  # What an unpack that stopped half-way can leave.
  assert not published.holds_checkpoint(model)
  (model / '6400000' / 'params_ema' / '_CHECKPOINT_METADATA').write_text('{}')
  assert published.holds_checkpoint(model)
