"""Checks of the printed kernel source against its IR (what is compiled is what is verified)."""
