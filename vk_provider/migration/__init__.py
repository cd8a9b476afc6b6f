"""Moving an Offload's traffic between home and away: the pure step logic (`plan`) the controller drives."""
