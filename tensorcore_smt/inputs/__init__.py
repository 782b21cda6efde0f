"""Input classes: the one language in which a class of inputs is stated and read.

A class is a conjunction of constraints (`Constraint`, kinds in `ConstraintKind`) on the
inputs a0.., b0.., c of one output element. Every reader of a class takes its meaning
from here:

- operands.py: the input names (a3, c, a3_2) and their operand groups;
- kinds.py: the constraint kinds and their families (class-wide, fixing to +0);
- constraints.py: a constraint as data, the inputs it restricts, the option that sets it,
  and the format it is stated in;
- parse.py: constraints from the command line (`--where`, `--fix`, `--integer`, ...);
- symbolic.py: each kind's meaning as a term on any bit-vector interpreter (the SMT
  queries, smt/);
- concrete.py: each kind's meaning as a numpy mask over bit patterns (the samplers and
  the audit, certify/ and bench/);
- grid.py: the fixed-point grid that holds every input, product and sum of a class (the
  error queries' exact reference);
- implications.py: what a class implies for the composed bounds (normal operands, rho,
  largest magnitudes, the class of a running accumulator, a GEMM element's class).

The symbolic and concrete meanings are written independently and tested to agree on
every kind (tests/test_input_classes.py).
"""
