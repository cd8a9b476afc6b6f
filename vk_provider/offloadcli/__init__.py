"""The migration command line (`kubectl offload ...`, also `vk-provider migrate ...`).

It only reads and writes Offload objects; the controller does the migrating. Kept apart from
`vk_provider.cli` so that parsing, talking to the apiserver and rendering can each be tested alone.
"""
