"""Rolling upgrades (`gpunode upgrade`, `gpunode rollback`): docs/upgrade.md."""
