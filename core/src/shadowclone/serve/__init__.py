"""serve: the daemon that turns requests into running clones and running clones into records."""
