"""The stand-ins' own behaviour (profiles, refusals, limits), apart from the providers tested against them."""
