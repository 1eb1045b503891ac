"""Local stand-ins for GitHub and the model APIs, for the demo, the tests and the benchmarks."""
