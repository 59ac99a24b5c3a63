"""Front ends that move bytes between sockets and the dispatcher; no command logic here."""
