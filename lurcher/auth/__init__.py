"""Authentication and authorisation: password hashing, sessions, permission checks."""
