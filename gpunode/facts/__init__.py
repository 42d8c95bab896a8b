"""Facts: what each host has, gathered in one round trip (`gather`, `model`)."""
