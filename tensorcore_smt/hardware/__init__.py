"""The hardware campaign: probes, validation and identify run on a real GPU, with what the
silicon returned kept under results/hardware/<gpu>/. Modules: gpu (the machine, SASS),
plan (what is covered), probes, validation (validate with the cuda oracle; recheck),
identify (in process), report, campaign (the run); the commands are cli/hardware.py."""
