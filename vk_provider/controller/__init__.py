"""The migration controller: moves each Offload's traffic between home and away, step by step."""
