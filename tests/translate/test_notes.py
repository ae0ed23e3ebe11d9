"""``Notes``: each warning and conversion once, in the order first noted; a warning shows
its first five places and counts the others, however many there were."""

from __future__ import annotations

from toolwire.translate._notes import Notes


def test_warnings_list_their_first_places_and_count_the_rest() -> None:
    notes = Notes()
    notes.warn("tool outputs without a matching call dropped", "input[3]")
    notes.warn("fields dropped")
    for number in range(800):
        notes.warn("encrypted_content not made by toolwire dropped", f"input[{number}]")
    notes.warn("tool outputs without a matching call dropped", "input[9]")
    assert notes.warnings() == [
        "tool outputs without a matching call dropped: input[3], input[9]",
        "fields dropped",
        "encrypted_content not made by toolwire dropped: input[0], input[1], input[2], input[3], input[4] and 795 more",
    ]


def test_exactly_five_places_have_no_more() -> None:
    notes = Notes()
    for number in range(5):
        notes.warn("w", str(number))
    notes.warn("w")  # no place: adds none
    assert notes.warnings() == ["w: 0, 1, 2, 3, 4"]
    notes.warn("w", "5")
    assert notes.warnings() == ["w: 0, 1, 2, 3, 4 and 1 more"]


def test_conversions_are_listed_once_in_order() -> None:
    notes = Notes()
    for label in ("b", "a", "b", "c"):
        notes.convert(label)
    assert notes.conversions() == ["b", "a", "c"]


def test_extending_notes_as_if_noted_after_and_copies_are_apart() -> None:
    first, second = Notes(), Notes()
    for number in range(3):
        first.warn("w", f"first[{number}]")
    for number in range(4):
        second.warn("w", f"second[{number}]")
    second.warn("only second", "x")
    second.convert("c2")
    first.convert("c1")
    copy = first.copy()
    first.extend(second)
    assert first.warnings() == ["w: first[0], first[1], first[2], second[0], second[1] and 2 more", "only second: x"]
    assert first.conversions() == ["c1", "c2"]
    assert copy.warnings() == ["w: first[0], first[1], first[2]"]  # the copy did not change
    assert copy.conversions() == ["c1"]
    copy.warn("w", "copy")
    assert first.warnings()[0].endswith("and 2 more")  # nor does the original with the copy
