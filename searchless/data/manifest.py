"""The JSON manifest that records how a dataset was made and what it holds."""

import json
import os
import platform
import subprocess
import sys

from apache_beam.io.filesystems import FileSystems
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.runners.runner import PipelineResult

import searchless
from searchless.plumbing import atomic


def code_version() -> dict:
  """The package version and, when run from a git checkout, its commit."""
  version: dict[str, str | bool] = {'searchless': searchless.__version__, 'python': platform.python_version()}
  root = os.path.dirname(os.path.dirname(os.path.abspath(searchless.__file__)))
  try:
    commit = subprocess.run(['git', '-C', root, 'rev-parse', 'HEAD'], capture_output=True, text=True, timeout=5)
    dirty = subprocess.run(
      ['git', '-C', root, 'status', '--porcelain', '--untracked-files=no'], capture_output=True, text=True, timeout=5
    )
    if commit.returncode == 0:
      version['git_commit'] = commit.stdout.strip()
      version['git_dirty'] = bool(dirty.stdout.strip())
  except (OSError, subprocess.SubprocessError):
    pass
  return version


def distributions(result: PipelineResult, namespace: str) -> dict[str, dict]:
  query = result.metrics().query(MetricsFilter().with_namespace(namespace))
  out = {}
  for dist in query['distributions']:
    value = dist.committed if dist.committed is not None else dist.attempted
    if value is not None and value.count:
      out[dist.key.metric.name] = {
        'count': value.count,
        'mean': value.sum / value.count,
        'min': value.min,
        'max': value.max,
      }
  return out


def write(path: str, manifest: dict) -> None:
  """Writes `manifest` to `path` whole or not at all (`atomic`)."""
  atomic.write_text(path, json.dumps(manifest, indent=2, sort_keys=True))


def read(path: str) -> dict:
  with FileSystems.open(path) as f:
    return json.loads(f.read().decode('utf-8'))


def command_line() -> list[str]:
  return list(sys.argv)
