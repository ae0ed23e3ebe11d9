"""``Notes``: what a request translation lost (warnings) and reshaped (conversions).

Each is kept once, in the order first noted; a warning lists where it happened (the
first few places, then how many more).
"""

from __future__ import annotations

_MAX_DETAILS = 5


class Notes:
    """Warnings (with where they happened) and conversion labels, each kept once, in order."""

    def __init__(self) -> None:
        self._warnings: dict[str, list[str]] = {}
        self._conversions: dict[str, None] = {}

    def warn(self, what: str, where: str | None = None) -> None:
        details = self._warnings.setdefault(what, [])
        if where is not None:
            details.append(where)

    def convert(self, label: str) -> None:
        self._conversions[label] = None

    def warnings(self) -> list[str]:
        lines = []
        for what, details in self._warnings.items():
            if not details:
                lines.append(what)
                continue
            shown = ", ".join(details[:_MAX_DETAILS])
            more = len(details) - _MAX_DETAILS
            lines.append(f"{what}: {shown}" + (f" and {more} more" if more > 0 else ""))
        return lines

    def conversions(self) -> list[str]:
        return list(self._conversions)

    def copy(self) -> Notes:
        copy = Notes()
        copy.extend(self)
        return copy

    def extend(self, other: Notes) -> None:
        """Note everything ``other`` noted, as if it had been noted here, in its order."""
        for what, details in other._warnings.items():
            self._warnings.setdefault(what, []).extend(details)
        self._conversions.update(other._conversions)
