"""Generated code for the fairdeck.v1 contract (see proto/). Do not edit."""
