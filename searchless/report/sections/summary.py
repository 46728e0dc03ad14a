"""The "Summary" section: the headline numbers and facts the other sections found, and what is missing."""

from collections.abc import Sequence

from searchless.report.context import Context
from searchless.report.document import Callout, Cards, Facts, Section

HEADLINES = ('Action accuracy', "Kendall's tau-b", 'Puzzle accuracy', 'Match score', 'Elo')
FACTS = ('Engine', 'Data', 'Model', 'Training')


def summary_section(ctx: Context, sections: Sequence[Section]) -> Section:
  """Built after `sections`: their headlines (cards) and facts, and the steps still to run."""
  section = Section('Summary', 'summary')
  cards = [(label, *ctx.headlines[label]) for label in HEADLINES if label in ctx.headlines]
  if cards:
    section.blocks.append(Cards(cards))
  facts = [(label, ctx.facts[label]) for label in FACTS if label in ctx.facts]
  if facts:
    section.blocks.append(Facts(facts))
  incomplete = [f'{s.title} ({s.status})' for s in sections if s.status != 'ok']
  if incomplete:
    section.blocks.append(
      Callout(
        'note',
        'Incomplete: ' + ', '.join(incomplete) + '. Run the missing steps '
        f'(`{ctx.cmds["all"]}` runs or continues everything), then `{ctx.cmds["report"]}`.',
      )
    )
  return section
