"""The GEMM level: whole matrix multiplies as GPU kernels compute them (schedules as
data, plans, the element arithmetic, the emulator and the torch drop-in)."""
