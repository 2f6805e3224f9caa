"""The benchmarks compare like with like, and their result files carry what a reviewer needs."""
