"""``GrowingSet`` / ``GrowingMap``: what a resumed walk grows shares the saved walk's part and
never changes it; a save merges what was added once it is an eighth of the base."""

from __future__ import annotations

from toolwire.translate._growing import GrowingMap, GrowingSet


def test_a_grown_set_adds_without_changing_what_it_grew_from() -> None:
    saved = GrowingSet()
    for value in ("a", "b"):
        saved.add(value)
    grown = saved.grown()
    grown.add("c")
    grown.add("a")  # there already: nothing changes
    assert ("c" in grown, "c" in saved, "a" in grown, "z" in grown) == (True, False, True, False)
    assert (len(grown), len(saved)) == (3, 2)
    assert sorted(grown) == ["a", "b", "c"]
    again = grown.grown()  # a second request resuming the same saved walk
    again.add("d")
    assert ("d" in grown, len(grown)) == (False, 3)


def test_a_set_settles_into_one_base_once_its_additions_are_an_eighth_of_it() -> None:
    walk = GrowingSet()
    for number in range(31):
        walk.add(f"call_{number}")
    assert walk.settled() is walk  # fewer than 32 added: kept as it is
    walk.add("call_31")
    base = walk.settled()
    assert base is not walk
    assert len(base) == 32 and all(f"call_{number}" in base for number in range(32))
    later = base.grown()
    for number in range(32, 35):  # 3 added to a base of 32: not due
        later.add(f"call_{number}")
    assert later.settled() is later
    for number in range(35, 64):  # 32 added to 32: due
        later.add(f"call_{number}")
    merged = later.settled()
    assert merged is not later and len(merged) == 64 and sorted(merged) == sorted(later)
    assert len(base) == 32  # the base it grew from is unchanged


def test_settling_waits_for_an_eighth_of_a_large_base() -> None:
    walk = GrowingSet()
    for number in range(800):
        walk.add(f"call_{number}")
    base = walk.settled()
    later = base.grown()
    for number in range(800, 899):  # 99 added to 800: under an eighth
        later.add(f"call_{number}")
    assert later.settled() is later
    later.add("call_899")  # 100 added to 800: an eighth
    assert later.settled() is not later


def test_a_grown_map_adds_without_changing_what_it_grew_from() -> None:
    saved: GrowingMap[tuple[int, str]] = GrowingMap()
    assert saved.setdefault("a", (1, "first")) == (1, "first")
    assert saved.setdefault("a", (9, "second")) == (1, "first")  # the first output stays
    grown = saved.grown()
    assert grown.setdefault("a", (9, "again")) == (1, "first")
    assert grown.setdefault("b", (2, "b")) == (2, "b")
    assert (grown["a"], grown["b"], grown.get("b"), grown.get("z"), saved.get("b")) == (
        (1, "first"), (2, "b"), (2, "b"), None, None,
    )
    assert ("b" in grown, "b" in saved, "a" in grown, "z" in grown) == (True, False, True, False)
    assert (len(grown), len(saved), sorted(grown)) == (2, 1, ["a", "b"])


def test_a_map_settles_into_one_base_keeping_every_value() -> None:
    walk: GrowingMap[int] = GrowingMap()
    for number in range(40):
        walk.setdefault(f"call_{number}", number)
    base = walk.settled()
    assert base is not walk and len(base) == 40
    later = base.grown()
    later.setdefault("call_0", 99)  # known: its value stays
    later.setdefault("new", -1)
    assert later.settled() is later
    assert [later[key] for key in ("call_0", "call_39", "new")] == [0, 39, -1]
    assert (later.get("call_0"), later.get("new"), later.get("none")) == (0, -1, None)
    for number in range(40, 72):
        later.setdefault(f"call_{number}", number)
    merged = later.settled()
    assert merged is not later and len(merged) == 73
    assert {key: merged[key] for key in merged} == {**{f"call_{n}": n for n in range(72)}, "new": -1}
    assert "new" not in base
