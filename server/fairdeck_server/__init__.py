"""fairdeck_server: the dealer service (gRPC edge, storage, transparency log)."""
