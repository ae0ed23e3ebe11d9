"""``Notes``: what a request translation lost (warnings) and reshaped (conversions).

Each is kept once, in the order first noted; a warning lists where it happened (the
first few places, then how many more). Only the places shown are kept, and the count:
a long history notes the same warning at hundreds of items, and its notes are copied
with every turn that continues it (``_conversation``'s saved walks).
"""

from __future__ import annotations

_MAX_DETAILS = 5


class _Places:
    """Where a warning happened: the first ``_MAX_DETAILS`` places, and how many in all."""

    __slots__ = ("count", "shown")

    def __init__(self) -> None:
        self.shown: list[str] = []
        self.count = 0

    def add(self, where: str) -> None:
        if len(self.shown) < _MAX_DETAILS:
            self.shown.append(where)
        self.count += 1

    def add_all(self, other: _Places) -> None:
        """``other``'s places, as if noted here after these."""
        self.shown.extend(other.shown[: _MAX_DETAILS - len(self.shown)])
        self.count += other.count


class Notes:
    """Warnings (with where they happened) and conversion labels, each kept once, in order."""

    def __init__(self) -> None:
        self._warnings: dict[str, _Places] = {}
        self._conversions: dict[str, None] = {}

    def warn(self, what: str, where: str | None = None) -> None:
        places = self._warnings.get(what)
        if places is None:
            places = self._warnings[what] = _Places()
        if where is not None:
            places.add(where)

    def convert(self, label: str) -> None:
        self._conversions[label] = None

    def warnings(self) -> list[str]:
        lines = []
        for what, places in self._warnings.items():
            if not places.count:
                lines.append(what)
                continue
            more = places.count - len(places.shown)
            lines.append(f"{what}: {', '.join(places.shown)}" + (f" and {more} more" if more > 0 else ""))
        return lines

    def conversions(self) -> list[str]:
        return list(self._conversions)

    def copy(self) -> Notes:
        copy = Notes()
        copy.extend(self)
        return copy

    def extend(self, other: Notes) -> None:
        """Note everything ``other`` noted, as if it had been noted here, in its order."""
        warnings = self._warnings
        for what, places in other._warnings.items():
            mine = warnings.get(what)
            if mine is None:
                mine = warnings[what] = _Places()
            mine.add_all(places)
        self._conversions.update(other._conversions)
