"""The project's vocabulary as data: the Event reasons and conditions it writes, the label, annotation
and taint keys it reads or writes, each with what it means. Imports nothing of the project: the code
keeps its own constants, and tests/unit/docs check that this catalogue and the code name the same
things; the reference pages (docs/reference/events.md, labels.md) are written from it."""
