"""``Notes``: what a request translation lost (warnings) and reshaped (conversions).

Each is kept once, in the order first noted; a warning lists where it happened (the
first few places, then how many more). Only the places shown are kept, and the count:
a long history notes the same warning at hundreds of items, and its notes are copied
with every turn that continues it (``_conversation``'s saved walks).
"""

from __future__ import annotations

_MAX_DETAILS = 5


class Notes:
    """Warnings (with where they happened) and conversion labels, each kept once, in order."""

    __slots__ = ("_conversions", "_counts", "_warnings")

    def __init__(self) -> None:
        self._warnings: dict[str, list[str]] = {}  # what -> its first _MAX_DETAILS places
        self._counts: dict[str, int] = {}  # what -> how many places in all
        self._conversions: dict[str, None] = {}

    def warn(self, what: str, where: str | None = None) -> None:
        shown = self._warnings.setdefault(what, [])
        if where is not None:
            if len(shown) < _MAX_DETAILS:
                shown.append(where)
            self._counts[what] = self._counts.get(what, 0) + 1

    def convert(self, label: str) -> None:
        self._conversions[label] = None

    def warnings(self) -> list[str]:
        lines = []
        for what, shown in self._warnings.items():
            if not shown:
                lines.append(what)
                continue
            more = self._counts[what] - len(shown)
            lines.append(f"{what}: {', '.join(shown)}" + (f" and {more} more" if more > 0 else ""))
        return lines

    def conversions(self) -> list[str]:
        return list(self._conversions)

    def copy(self) -> Notes:
        copy = Notes()
        copy.extend(self)
        return copy

    def extend(self, other: Notes) -> None:
        """Note everything ``other`` noted, as if it had been noted here, in its order."""
        warnings, counts = self._warnings, self._counts
        for what, shown in other._warnings.items():
            mine = warnings.setdefault(what, [])
            if shown:
                mine.extend(shown[: _MAX_DETAILS - len(mine)])
                counts[what] = counts.get(what, 0) + other._counts[what]
        self._conversions.update(other._conversions)
