"""The run program: what runs inside a clone."""
