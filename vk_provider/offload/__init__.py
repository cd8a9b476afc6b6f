"""The Offload: one home for the custom resource every part of vk-provider reads or writes.

`names` holds its API names and the labels and annotations that tie its objects together (including
the pod annotations the node writes and the router reads); `spec` reads its spec with the CRD's
defaults; `status` is its status as a typed value with the phase sets; `plan` is the pure step logic
of a migration. The controller, the router, the CLI and the node import these; none defines any of it.
"""
