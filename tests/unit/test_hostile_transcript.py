"""TL4: no text inside a tool result, a tool input or a reply can pose as the person. Every case of
the hostile corpus goes through the extraction call and a summary fold (the offline model reads
the JSON Lines transcript as a model is told to): its marker reaches no fact and no summary line,
and the person's own fact said in the same turn is still extracted."""

from __future__ import annotations

import pytest

from tests.hostile import DEV, HELD_OUT, load, through_the_prompts


# the held-out part was written after the design and first run at its end; both guard it since
@pytest.mark.parametrize("case", load(DEV) + load(HELD_OUT), ids=lambda c: f"{c['id']}-{c['kind']}")
def test_a_hostile_text_reaches_no_fact_and_no_summary_and_the_persons_fact_is_kept(case):
    reached = through_the_prompts(case)
    assert reached.where == [] and reached.own_fact
