"""The dashboard: a local web page to follow clones, answer their questions, message and stop
them, with the same node operations as the CLI."""
