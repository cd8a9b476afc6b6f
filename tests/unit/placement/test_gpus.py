"""GPU type names across providers: the table, and comparison without case or separators."""

from __future__ import annotations

import pytest

from vk_devtools.standins.runpod.catalog import DEFAULT_GPU_TYPES
from vk_provider.kit.placement import GPU_TYPE_NAMES, gpu_type_matches, names_for
from vk_provider.kit.placement.gpus import gpu_key, is_known_name


def test_every_name_accepts_each_of_its_ids_and_is_known() -> None:
    for name, ids in GPU_TYPE_NAMES.items():
        assert is_known_name(name)
        for provider_id in ids:
            assert gpu_type_matches(name, provider_id), (name, provider_id)
            assert name in names_for(provider_id)


def test_names_compare_without_case_or_separators() -> None:
    for written in ("H100-80GB", "h100-80gb", "H100 80GB", "h100_80GB", " H100-80GB "):
        assert gpu_type_matches(written, "NVIDIA H100 80GB HBM3")
    assert gpu_type_matches("rtx4090", "NVIDIA GeForce RTX 4090")


def test_a_broad_name_covers_its_variants_and_a_narrow_one_only_its_own() -> None:
    assert gpu_type_matches("H100-80GB", "NVIDIA H100 PCIe")
    assert gpu_type_matches("H100-80GB", "NVIDIA H100 80GB HBM3")
    assert not gpu_type_matches("H100-80GB", "NVIDIA H100 NVL")  # 94 GB
    assert gpu_type_matches("H100-SXM", "NVIDIA H100 80GB HBM3")
    assert not gpu_type_matches("H100-SXM", "NVIDIA H100 PCIe")
    assert names_for("NVIDIA H100 80GB HBM3") == ("H100-80GB", "H100-SXM")


@pytest.mark.parametrize(
    ("name", "provider_id"),
    [
        ("L4", "NVIDIA L40"),
        ("L4", "NVIDIA L40S"),
        ("L40", "NVIDIA L40S"),
        ("A100-80GB", "NVIDIA A100 40GB PCIe"),
        ("H200", "NVIDIA H100 80GB HBM3"),
        ("RTX-4090", "NVIDIA GeForce RTX 4080"),
    ],
)
def test_similar_names_do_not_match(name: str, provider_id: str) -> None:
    assert not gpu_type_matches(name, provider_id)


def test_a_providers_own_id_can_be_written_as_is() -> None:
    assert gpu_type_matches("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090")
    assert gpu_type_matches("nvidia geforce rtx 4090", "NVIDIA GeForce RTX 4090")
    assert gpu_type_matches("Some Future GPU", "SOME-FUTURE-GPU")  # unknown names compare with the id
    assert not is_known_name("Some Future GPU")
    assert names_for("Some Future GPU") == ()


def test_a_name_without_letters_or_digits_matches_nothing() -> None:
    assert not gpu_type_matches("--", "--")


def test_the_names_of_the_table_are_distinct() -> None:
    keys = [gpu_key(name) for name in GPU_TYPE_NAMES]
    assert len(set(keys)) == len(keys)


def test_the_runpod_stand_in_offers_only_named_types() -> None:
    # The chain's tests place by name on the stand-in's catalog: each of its ids must have a name.
    for gpu in DEFAULT_GPU_TYPES:
        assert names_for(gpu.id), gpu.id
