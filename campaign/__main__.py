"""``python -m campaign``: the strength campaign's steps (`campaign.run`)."""

from campaign import run

run.main()
