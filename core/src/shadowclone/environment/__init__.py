"""Per-repository environments: what a repository declares its clones need, and the image
made from it."""
