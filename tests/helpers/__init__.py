"""What the tests share: real Redis, Sentinel and Cluster processes, real API and
worker stacks, golden files, comparisons. Benches import these too."""
