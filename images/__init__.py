"""Images: the root file systems, toolchains and task images that sandboxes start from."""
