"""Sandboxes: the contract and what every backend shares, at this root; each backend's
own code in its folder (local/: bubblewrap; docker/: the engine, the pool of engines
and the image registry client)."""
