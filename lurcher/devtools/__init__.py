"""Developer tooling that is not part of the server: what the test suite needs from the system."""
