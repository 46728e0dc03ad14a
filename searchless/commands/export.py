"""searchless-export: a checkpoint's weights for other frameworks (safetensors, config, a JAX forward function).

    searchless-export --checkpoint WORKDIR --out DIR [--no_jax_forward]

Writes ``DIR/model.safetensors``, ``DIR/config.json`` and ``DIR/forward.jax``
(`searchless.model.export` says what each holds). ``--checkpoint`` is anything
`loading.load_model` reads (our workdirs, published checkpoints, ``pretrained``).
"""

import argparse
from collections.abc import Sequence

from searchless.plumbing import cli
from searchless.plumbing import errors

errors.require_extra('safetensors', 'export', 'searchless-export')  # Before the imports that need them.
errors.require_extra('flatbuffers', 'export', 'searchless-export')
from searchless.model import export  # noqa: E402
from searchless.model import loading  # noqa: E402


def _parser() -> argparse.ArgumentParser:
  p = cli.ArgumentParser(prog='searchless-export', description=__doc__.split('\n\n')[0])
  p.add_argument(
    '--checkpoint',
    required=True,
    help="workdir, checkpoint or step dir, published model dir, or a name ('pretrained', 'chessbench-9M')",
  )
  p.add_argument('--out', required=True, type=cli.output_dir, help='folder to write (created)')
  p.add_argument('--raw', action='store_true', help='the raw parameters instead of their EMA')
  p.add_argument('--no_jax_forward', action='store_true', help='no forward.jax (weights and config only)')
  return p


def main(argv: Sequence[str] | None = None) -> None:
  args = _parser().parse_args(argv)
  with errors.one_line_errors():
    model_config, params, experiment = loading.load_model(args.checkpoint, ema=not args.raw)
    out = export.export(args.out, model_config, params, experiment, jax_forward=not args.no_jax_forward)
  print(out)


if __name__ == '__main__':
  main()
