"""The hardware campaign: probes, validation and identify run on a real GPU, with what the
silicon returned kept under results/hardware/<gpu>/."""
