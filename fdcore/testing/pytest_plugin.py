"""pytest plugin registered by the fdcore distribution (entry point group ``pytest11``)."""
