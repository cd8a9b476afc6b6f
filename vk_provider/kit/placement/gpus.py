"""GPU type names a pod can write, and the providers' own ids they stand for. Pure, no I/O.

Providers name GPU types their own way (RunPod: "NVIDIA H100 80GB HBM3"); a pod should not have to.
`GPU_TYPE_NAMES` is a small explicit table from short names to provider ids. A name may stand for several
ids (`H100-80GB` is both the SXM and the PCIe H100, which have 80 GB each), and an id may be listed under
a broad name and a narrow one (`H100-80GB` and `H100-SXM`), so a pod can be as precise as it needs.

Names are compared without case and without separators: `h100-80gb`, `H100 80GB` and `H100_80GB` are the
same name. A name the table does not know is compared, the same way, with the provider's id itself, so a
pod may always write a provider's exact id ("NVIDIA GeForce RTX 4090") as well.

| name | RunPod GPU ids |
|---|---|
| `B200` | NVIDIA B200 |
| `H200-141GB`, `H200` | NVIDIA H200 |
| `H100-80GB` | NVIDIA H100 80GB HBM3, NVIDIA H100 PCIe |
| `H100-SXM` | NVIDIA H100 80GB HBM3 |
| `H100-PCIE` | NVIDIA H100 PCIe |
| `H100-NVL` | NVIDIA H100 NVL |
| `A100-80GB` | NVIDIA A100 80GB PCIe, NVIDIA A100-SXM4-80GB |
| `A100-80GB-PCIE` | NVIDIA A100 80GB PCIe |
| `A100-80GB-SXM` | NVIDIA A100-SXM4-80GB |
| `L40S`, `L40`, `L4`, `A40`, `A30` | NVIDIA L40S, NVIDIA L40, NVIDIA L4, NVIDIA A40, NVIDIA A30 |
| `RTX-6000-ADA` | NVIDIA RTX 6000 Ada Generation |
| `RTX-A6000`, `RTX-A5000`, `RTX-A4000` | NVIDIA RTX A6000, NVIDIA RTX A5000, NVIDIA RTX A4000 |
| `RTX-5090`, `RTX-4090`, `RTX-3090` | NVIDIA GeForce RTX 5090, ... 4090, ... 3090 |
| `MI300X` | AMD Instinct MI300X OAM |

RunPod's ids are those of its GPU types reference (docs.runpod.io/references/gpu-types). A provider added
later adds its ids to the rows it offers.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

GPU_TYPE_NAMES: Mapping[str, tuple[str, ...]] = {
    "B200": ("NVIDIA B200",),
    "H200-141GB": ("NVIDIA H200",),
    "H200": ("NVIDIA H200",),
    "H100-80GB": ("NVIDIA H100 80GB HBM3", "NVIDIA H100 PCIe"),
    "H100-SXM": ("NVIDIA H100 80GB HBM3",),
    "H100-PCIE": ("NVIDIA H100 PCIe",),
    "H100-NVL": ("NVIDIA H100 NVL",),
    "A100-80GB": ("NVIDIA A100 80GB PCIe", "NVIDIA A100-SXM4-80GB"),
    "A100-80GB-PCIE": ("NVIDIA A100 80GB PCIe",),
    "A100-80GB-SXM": ("NVIDIA A100-SXM4-80GB",),
    "L40S": ("NVIDIA L40S",),
    "L40": ("NVIDIA L40",),
    "L4": ("NVIDIA L4",),
    "A40": ("NVIDIA A40",),
    "A30": ("NVIDIA A30",),
    "RTX-6000-ADA": ("NVIDIA RTX 6000 Ada Generation",),
    "RTX-A6000": ("NVIDIA RTX A6000",),
    "RTX-A5000": ("NVIDIA RTX A5000",),
    "RTX-A4000": ("NVIDIA RTX A4000",),
    "RTX-5090": ("NVIDIA GeForce RTX 5090",),
    "RTX-4090": ("NVIDIA GeForce RTX 4090",),
    "RTX-3090": ("NVIDIA GeForce RTX 3090",),
    "MI300X": ("AMD Instinct MI300X OAM",),
}

_SEPARATORS = re.compile(r"[^0-9A-Z]")


def gpu_key(name: str) -> str:
    """The form names and ids are compared in: upper case, letters and digits only."""
    return _SEPARATORS.sub("", name.upper())


_IDS_BY_NAME: dict[str, frozenset[str]] = {
    gpu_key(name): frozenset(gpu_key(provider_id) for provider_id in ids)
    for name, ids in GPU_TYPE_NAMES.items()
}
if len(_IDS_BY_NAME) != len(GPU_TYPE_NAMES):  # pragma: no cover - a mistake in the table above
    raise RuntimeError("two names of GPU_TYPE_NAMES compare equal")


def is_known_name(name: str) -> bool:
    return gpu_key(name) in _IDS_BY_NAME


def gpu_type_matches(name: str, provider_gpu_type: str) -> bool:
    """Whether a pod's GPU type `name` accepts the provider's GPU type id `provider_gpu_type`."""
    wanted, offered = gpu_key(name), gpu_key(provider_gpu_type)
    if not wanted:
        return False
    return wanted == offered or offered in _IDS_BY_NAME.get(wanted, frozenset())


def names_for(provider_gpu_type: str) -> tuple[str, ...]:
    """The table's names that stand for a provider's GPU type id, in table order (empty if none)."""
    offered = gpu_key(provider_gpu_type)
    return tuple(name for name in GPU_TYPE_NAMES if offered in _IDS_BY_NAME[gpu_key(name)])
