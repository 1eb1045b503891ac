"""Notifications: telling the owner that a clone asks, pauses, waits, ends or cannot launch."""
