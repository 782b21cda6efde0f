# tensorcore-smt developer targets. `make install` creates .venv and installs everything.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: invariance profiles tables install test test-slow audit test-torch bench bench-solvers bench-slow results bounds libraries queries docs lint format demo clean hardware hardware-vectors record-profile published

# torch 2.13.0 is the CPU build (a wheel on this project's machines; a plain `torch`
# would fetch a CUDA build of several GB): with MMA-Sim, the independent cross-check runs
# in every `make test`.
install:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test,pysmt]' 'torch==2.13.0' 'mmasim>=2.1'

# two workers (pytest-xdist): the machines have two cores
test:
	$(BIN)/python -m pytest -q -n 2

test-slow:
	$(BIN)/python -m pytest -q -m slow

# Every certified answer (composed U of instructions and GEMM schedules, argued exactness
# B, monotonicity, no-clamp, overflow rows) against what the model attains over its class
# on small formats: the cases covered, refused, not applicable and unsound.
audit:
	$(BIN)/python bench/audit.py --size wide

# The vector interpreter on torch (CPU, and CUDA when present) against numpy, bit for bit,
# on every instruction of every preset. Needs the torch extra (README: "torch").
test-torch:
	@$(BIN)/python -c "import torch" 2>/dev/null || { \
		echo "make test-torch needs torch: $(BIN)/pip install -e '.[torch]' (README: torch)"; exit 2; }
	$(BIN)/python -m pytest -q -m torch tests/test_torch.py tests/test_gemm_torch.py

bench:
	$(BIN)/python bench/bench_api.py --write results
	$(BIN)/python bench/bench_simulate.py
	$(BIN)/python bench/bench_rows.py
	$(BIN)/python bench/bench_validate.py --write results
	$(BIN)/python bench/bench_identify.py
	$(BIN)/python bench/bench_gemm.py --write results
	$(BIN)/python bench/bench_rate.py --write results
	$(BIN)/python bench/bench_wait.py --write results
	$(BIN)/python bench/bench_engine.py --write results
	$(BIN)/python bench/bench_bound.py --write results
	$(BIN)/python bench/bench_replay.py --write results
	$(BIN)/python bench/bench_slow_queries.py --library-only --write results

bench-solvers:
	$(BIN)/python bench/bench_solvers.py

# The property library's queries that took over 30 s (results/*/*.json), run again as
# `tcsmt find` runs them: seconds before and now, with the load average, into
# results/solver_speed.md (about 5 minutes; each query bounded by --timeout); then every
# installed solver alone over the library's Volta queries (what `make bench` runs; each
# run bounded by 10 s, about 10 minutes on a shared machine).
bench-slow:
	$(BIN)/python bench/bench_slow_queries.py --write results

results:
	$(BIN)/python bench/make_results.py
	$(BIN)/python bench/make_results.py --sparse
	$(BIN)/python bench/bench_solvers.py --table4 --write results
	$(BIN)/python bench/make_bounds.py --write results

# Every published model (archs/published.toml) against the preset and the others on each
# instruction they share, proved equal or separated (60 s a question): results/published.md
published:
	$(BIN)/python bench/make_published.py --budget 60

# Certified worst-case normwise errors (tcsmt bound) beside sampled maxima: results/bounds.md.
bounds:
	$(BIN)/python bench/make_bounds.py --write results

# The learnt decision tables of schedules/library from the cuBLASLt heuristic sweeps and the fit
# calls' heuristic fields (about 40 minutes here; each module writes the same files every run).
tables:
	$(BIN)/python -m tensorcore_smt.hardware.half_tree
	$(BIN)/python -m tensorcore_smt.hardware.library_tree
	$(BIN)/python -m tensorcore_smt.hardware.tf32_tree
	$(BIN)/python -m tensorcore_smt.hardware.epilogue_tree
	$(BIN)/python -m tensorcore_smt.hardware.sweep_bands
	$(BIN)/python -m tensorcore_smt.hardware.half_aligned

# Library profiles of the H200 and H100 (profiles/<gpu>-cublas-13.1.json) from the fit calls
# of their library recordings and schedules/library, then their held-out figures and batch
# invariance against the recordings: results/profiles.md (about 3 hours on a loaded 2-core
# machine: 17,000 fit and 9,400 held-out calls per GPU, each replayed once).
# The profiles keep the fit calls' recorded shapes of the planned parts (not the random part:
# its shapes do not recur); every held-out part is checked.
PROFILE_PARTS = --part grid --part llm --part unaligned --part ops --part batch
profiles:
	$(BIN)/python -m tensorcore_smt profile build --from-library h200 $(PROFILE_PARTS)
	$(BIN)/python -m tensorcore_smt profile build --from-library h100 $(PROFILE_PARTS)
	$(BIN)/python bench/make_profiles.py --write results

# Batch invariance by library profile (tcsmt invariance --profile, witnesses re-run): results/invariance.md.
invariance:
	$(BIN)/python bench/make_invariance.py --write results

# Accumulation orders of numpy, torch (CPU) and the H100 recordings: results/libraries.md.
libraries:
	$(BIN)/python bench/make_libraries.py --write results

# SMT-LIB2 exports of the paper's queries (Valpey et al. 2025, Tables 3 and 4) into queries/:
# z3, cvc5 and bitwuzla each read them. Four are committed as examples (tests/test_docs.py
# checks they are what export writes today); the others are regenerated here, not committed.
QUERY_PROPERTIES := carry-bits normalization ordering precision-accumulation precision-product \
	rounding-accumulator rounding-final

queries:
	for p in $(QUERY_PROPERTIES); do $(BIN)/tcsmt export --property $$p --arch volta --out queries || exit $$?; done
	$(BIN)/tcsmt export --property carry-bits --arch ampere --out queries
	$(BIN)/tcsmt export --property carry-bits --arch hopper --out queries
	$(BIN)/tcsmt export volta turing --out queries/differ-volta-vs-turing.smt2

# Rewrite the printed output that README.md and docs/*.md show wherever a command's output
# changed (tests/test_docs.py checks them; put back any "..." elision a page needs).
docs:
	$(BIN)/python tests/test_docs.py --update

# The GEMM study: results/gemm.md and results/gemm/*.png (error against K on every preset,
# Sun et al. section 8 reproduced). Plots need the plot extra: pip install -e '.[plot]'.
study:
	$(BIN)/python bench/study_gemm.py --compare-with results/gemm/study_numpy.json

# The GPU campaign (results/hardware/<gpu>/): probes, SASS, 10^6-row validation, identify.
# Runs where an NVIDIA GPU and nvcc are; exits 2 with one line elsewhere. Uses .venv when
# there is one, else python3 with this checkout on PYTHONPATH (a GPU machine where the core
# dependencies are installed but not this package). Both run `tcsmt hardware ...`.
HWPY := $(if $(wildcard $(BIN)/python),$(BIN)/python,PYTHONPATH=$(CURDIR) $(PY))

hardware:
	$(HWPY) -m tensorcore_smt hardware run

# What torch returns for a fixed plan of GEMM calls on this machine's GPU (docs/hardware.md,
# "Library recordings"): about a minute of H100 time; PROFILE_OUT must be a new folder.
PROFILE_OUT ?= results/hardware/library

record-profile:
	$(HWPY) -m tensorcore_smt profile record --oracle torch:cuda --out $(PROFILE_OUT)

# Property witnesses on every probed instruction (solvers, no GPU): results/hardware/vectors.
hardware-vectors:
	$(HWPY) -m tensorcore_smt hardware vectors

lint:
	$(BIN)/ruff check tensorcore_smt tests bench
	$(BIN)/ruff format --check tensorcore_smt tests bench

format:
	$(BIN)/ruff format tensorcore_smt tests bench
	$(BIN)/ruff check --fix tensorcore_smt tests bench

demo:
	$(BIN)/tcsmt simulate --arch volta --a 0x3c00,0,0,0 --b 0x3c00,0,0,0 --c 0xbf7fffff
	$(BIN)/tcsmt simulate --arch ampere --instr m16n8k8.f32.f16.f16.f32 \
		--a 0x3c00,0,0,0,0,0,0,0 --b 0x3c00,0,0,0,0,0,0,0 --c 0xbf7fffff

clean:
	rm -rf $(VENV) build dist *.egg-info .pytest_cache .hypothesis
