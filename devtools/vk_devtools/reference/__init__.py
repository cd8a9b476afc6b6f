"""Reference pages of the documentation, generated from the code."""
