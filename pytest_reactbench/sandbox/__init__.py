"""Sandboxes: the contract, the local (bubblewrap) and docker backends, image recipes."""
