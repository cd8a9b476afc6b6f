"""docs/reference/events.md: every Event reason the project posts and every condition it writes, from
`vk_provider.catalogue.events` (which a test holds to the code's Event and condition calls)."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from vk_devtools.reference import pages, rendering
from vk_provider.catalogue.events import CONDITIONS, EVENTS

MODULE = "vk_devtools.reference.events"


def render() -> str:
    lines = [
        "# Events, reasons and conditions",
        "",
        rendering.generated_note(MODULE, "vk_provider/catalogue/events.py"),
        "",
        "Every Kubernetes Event the project posts, by reason, and every condition it writes with each of "
        "its reasons. `kubectl describe` shows both; `kubectl get events --field-selector reason=<reason>` "
        "finds an Event. `<...>` is a part that varies.",
        "",
        "## Events",
        "",
    ]
    rows = [
        (f"`{event.reason}`", event.type, event.on, event.posted_by, event.meaning)
        for event in sorted(EVENTS, key=lambda event: event.reason.lower())
    ]
    lines += [*rendering.table(("Reason", "Type", "On", "Posted by", "Meaning"), rows), ""]
    lines += ["## Conditions", ""]
    for condition in CONDITIONS:
        lines += [
            f"### `{condition.type}` on {condition.on}",
            "",
            f"{condition.meaning} Written by {condition.written_by}.",
            "",
        ]
        if condition.reasons:
            reasons = [(r.status, f"`{r.reason}`", r.meaning) for r in condition.reasons]
            lines += [*rendering.table(("Status", "Reason", "Meaning"), reasons), ""]
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    return pages.main_of(MODULE, argv)


if __name__ == "__main__":
    sys.exit(main())
