"""Local stand-ins for GitHub and the model APIs: the demo, the tests and the benchmarks run against them."""
