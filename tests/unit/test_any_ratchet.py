"""A ratchet on `Any` in the core's function signatures (issue 28, item 4): the count
(`python -m bench.any_count`) may fall, never rise. Lower CEILING when a change lowers the count."""

from __future__ import annotations

from bench.any_count import count

CEILING = 141  # 573 before issue 28's typed dependencies


def test_the_core_s_signatures_say_any_no_more_often_than_before():
    per_file = count()
    total = sum(per_file.values())
    assert total <= CEILING, f"{total} annotations say Any (ceiling {CEILING}); most in: {per_file.most_common(5)}"


def test_the_count_sees_through_aliases_and_quotes(tmp_path):
    (tmp_path / "a.py").write_text(
        "from typing import Any\n"
        "Item = dict[str, Any]\n"
        "type Rows = list[Item]\n"
        "def f(x: Item, y: 'Any', z: int) -> Rows: ...\n"
        "def g(*args: Any, **kw: str) -> None: ...\n"
        "class C:\n"
        "    def m(self, v: object) -> dict[str, Any]: ...\n"
    )
    assert count(tmp_path) == {"a.py": 5}
