# The two commands of the README: `make demo` (the main job) and `make test`
# (every test). Each installs what it needs first, and no more: the targets
# depend on setup-PROFILE, and scripts/setup.sh installs that profile's
# packages (docs/setup.md lists them, and why each is needed).
GO       ?= go
BENCHDIR ?= .bench
EXAMPLES := examples/arena

.PHONY: all demo test vet bench bench-mpi bench-rdma conformance setup setup-demo setup-bench setup-test setup-rdma setup-chaos refs refs-mpi refs-tcp refs-shm rounds-shm sweep xpu fuzz chaos

all: test

# make setup installs everything make test needs.
setup: setup-test

setup-demo setup-bench setup-test setup-rdma setup-chaos:
	@bash scripts/setup.sh $(@:setup-%=%)

xpu: setup-demo
	$(GO) build -o bin/xpu ./cmd/xpu

# The main job: what this machine offers, the conformance matrix, a short
# benchmark on the default CPU backend, and the GPU example (which says why
# it skips on a machine without a GPU).
demo: xpu refs
	./bin/xpu info
	./bin/xpu conformance
	./bin/xpu bench --short --ref $(BENCHDIR)
	$(GO) run ./examples/gpu

vet: setup-demo
	$(GO) vet ./...

# test runs every test under the race detector, then the users of
# order.Release again without it: there Release is a plain store
# (internal/order/release_amd64.s), the build that ships; and the race for
# the read role (ADR 52), whose atomics are other instructions under it.
# Off Linux the library builds, with ErrNotSupported where only Linux has
# the means; the vet for darwin keeps its tests building there too.
test: setup-test
	$(GO) vet ./...
	GOOS=darwin $(GO) vet ./...
	$(GO) test -race -timeout 15m ./...
	$(GO) test -count=1 ./internal/order/ ./flight/ ./internal/nodecoll/
	$(GO) test -count=1 -run '^TestRoleHasOneHolder$$' ./backends/procs/
	@bash scripts/setup-mpi.sh
	$(GO) vet -tags mpi ./backends/mpi/...
	$(GO) test -race -tags mpi -timeout 10m ./backends/mpi/...
	$(GO) test -race -tags mpi -timeout 10m -run OpenMPI ./cmd/xpu/
	@bash scripts/setup-mpi.sh --mpich
	XPU_MPI_TEST_RUN='^TestSPMD(OneSided|Conformance)$$' $(GO) test -race -short -tags 'mpi mpich' -timeout 5m -count=1 -run '^(TestRanks|TestExamplePagedCache)$$' ./backends/mpi/
	@for m in $(EXAMPLES); do \
		echo "== $$m (its own module)"; \
		(cd $$m && $(GO) vet ./... && $(GO) test -race -timeout 5m ./...) || exit 1; \
	done

conformance: xpu
	./bin/xpu conformance

# C references built here so ratios are measured in the same run on the
# same machine: OpenMP and memcpy with gcc; the CUDA driver's calls with
# gcc too (cuda_ref loads the driver at run time: it builds without CUDA,
# and prints nothing where no GPU is); the MPI ones with mpicc, run
# under mpirun (their figures land in .out files that xpu bench reads).
refs: setup-demo
	@mkdir -p $(BENCHDIR)
	@for src in internal/tooling/bench/ref/cpu_*.c; do \
		out=$(BENCHDIR)/$$(basename $$src .c); \
		gcc -O3 -march=native -fopenmp -o $$out $$src || exit 1; \
	done
	@gcc -O2 -o $(BENCHDIR)/cuda_ref internal/tooling/bench/ref/cuda_ref.c -ldl

MPIRUN_TCP := mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,tcp --mca btl_tcp_if_include lo

refs-mpi: setup-bench
	@bash scripts/setup-mpi.sh
	@mkdir -p $(BENCHDIR)
	mpicc -O3 -o $(BENCHDIR)/mpi_tcp_ref internal/tooling/bench/ref/tcp_mpi_ref.c
	mpicc -O3 -o $(BENCHDIR)/mpi_sweep_ref internal/tooling/bench/ref/sweep_mpi_ref.c
	$(MPIRUN_TCP) -np 2 $(BENCHDIR)/mpi_tcp_ref >  $(BENCHDIR)/mpi_tcp_ref.out
	$(MPIRUN_TCP) -np 4 $(BENCHDIR)/mpi_tcp_ref >> $(BENCHDIR)/mpi_tcp_ref.out

# The TCP communicator with one process per rank, started by xpu run: 2
# ranks (with a plain Go TCP ping-pong between the same processes beside
# it) and 4, over TCP links (XPU_LINKS=tcp: ranks on one machine would
# otherwise link through shared memory). Its figures land where xpu bench
# --ref reads them; the binary goes to a subdirectory, which xpu bench does
# not run as a reference.
refs-tcp: xpu
	@mkdir -p $(BENCHDIR)/procs
	$(GO) build -o $(BENCHDIR)/procs/tcpbench ./internal/tooling/tcpbench
	@rm -f $(BENCHDIR)/tcp_procs.out
	XPU_LINKS=tcp ./bin/xpu run -n 2 -- $(BENCHDIR)/procs/tcpbench -o $(BENCHDIR)/tcp_procs.out
	XPU_LINKS=tcp ./bin/xpu run -n 4 -- $(BENCHDIR)/procs/tcpbench -o $(BENCHDIR)/tcp_procs.out

# The communicator's shared-memory links (ranks on one machine, default
# links) against Open MPI's shared-memory transport (vader) and against a
# C spin ring between two processes, the floor, which also measures the
# ceiling of single copies with process_vm_readv by one and two threads
# (internal/tooling/bench/ref/shm_ring_ref.c): three .out files that xpu bench
# --ref reads. The ring
# and tcpbench go to $(BENCHDIR)/procs, which xpu bench does not run; the
# MPI reference is named mpi_*, which it skips.
MPIRUN_SHM := mpirun --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,vader

refs-shm: xpu
	@bash scripts/setup-mpi.sh
	@mkdir -p $(BENCHDIR)/procs
	gcc -O3 -pthread -o $(BENCHDIR)/procs/shm_ring_ref internal/tooling/bench/ref/shm_ring_ref.c
	$(BENCHDIR)/procs/shm_ring_ref > $(BENCHDIR)/shm_ring_ref.out
	mpicc -O3 -o $(BENCHDIR)/mpi_shm_ref internal/tooling/bench/ref/tcp_mpi_ref.c
	$(MPIRUN_SHM) -np 2 $(BENCHDIR)/mpi_shm_ref vader >  $(BENCHDIR)/mpi_shm_ref.out
	$(MPIRUN_SHM) -np 4 $(BENCHDIR)/mpi_shm_ref vader >> $(BENCHDIR)/mpi_shm_ref.out
	$(GO) build -o $(BENCHDIR)/procs/tcpbench ./internal/tooling/tcpbench
	@rm -f $(BENCHDIR)/shm_procs.out
	./bin/xpu run -n 2 -- $(BENCHDIR)/procs/tcpbench -o $(BENCHDIR)/shm_procs.out
	./bin/xpu run -n 4 -- $(BENCHDIR)/procs/tcpbench -o $(BENCHDIR)/shm_procs.out

# The same comparisons in interleaved rounds (two ranks): each round runs
# Open MPI's reference, the C ring and tcpbench back to back into a
# directory of its own, and xpu bench rounds reports the median and the
# worst round of each ratio; a goal is met when it holds in every round.
# ROUNDS_ONLY narrows tcpbench's cases (a regular expression: '^(put|get)',
# 'pingpong'), ROUNDS sets their number, and ROUNDS_NP4=1 adds the
# four-rank cases (Open MPI and tcpbench again with 4 ranks) to each round.
# ROUNDS_NOREC=1 runs tcpbench once more in each round with the flight
# recorder off (XPU_FLIGHT_SIZE=0), for its share ("shm-norec", ADR 49).
# ROUNDS_BIND=1 runs tcpbench once more with its ranks bound (xpu run
# --bind, "shm-bound"), and with ROUNDS_NP4 Open MPI's four ranks bound too
# ("vader-bound"; its two are bound by default), ADR 51.
ROUNDS ?= 10
ROUNDS_ONLY ?=
ROUNDS_NP4 ?=
ROUNDS_NOREC ?=
ROUNDS_BIND ?=
rounds-shm: xpu
	@bash scripts/setup-mpi.sh
	@mkdir -p $(BENCHDIR)/procs
	gcc -O3 -pthread -o $(BENCHDIR)/procs/shm_ring_ref internal/tooling/bench/ref/shm_ring_ref.c
	mpicc -O3 -o $(BENCHDIR)/mpi_shm_ref internal/tooling/bench/ref/tcp_mpi_ref.c
	$(GO) build -o $(BENCHDIR)/procs/tcpbench ./internal/tooling/tcpbench
	@rm -rf $(BENCHDIR)/rounds-shm
	@for i in $$(seq -w 1 $(ROUNDS)); do \
		d=$(BENCHDIR)/rounds-shm/$$i; mkdir -p $$d; echo "round $$i of $(ROUNDS)"; \
		$(MPIRUN_SHM) -np 2 $(BENCHDIR)/mpi_shm_ref vader > $$d/mpi_shm_ref.out || exit 1; \
		$(BENCHDIR)/procs/shm_ring_ref > $$d/shm_ring_ref.out || exit 1; \
		./bin/xpu run -n 2 -- $(BENCHDIR)/procs/tcpbench -only '$(ROUNDS_ONLY)' -o $$d/shm_procs.out || exit 1; \
		if [ -n "$(ROUNDS_NOREC)" ]; then \
			XPU_FLIGHT_SIZE=0 ./bin/xpu run -n 2 -- $(BENCHDIR)/procs/tcpbench -only '$(ROUNDS_ONLY)' -o $$d/shm_procs.out || exit 1; \
		fi; \
		if [ -n "$(ROUNDS_BIND)" ]; then \
			./bin/xpu run --bind -n 2 -- $(BENCHDIR)/procs/tcpbench -label bound -only '$(ROUNDS_ONLY)' -o $$d/shm_procs.out || exit 1; \
		fi; \
		if [ -n "$(ROUNDS_NP4)" ]; then \
			$(MPIRUN_SHM) -np 4 $(BENCHDIR)/mpi_shm_ref vader >> $$d/mpi_shm_ref.out || exit 1; \
			./bin/xpu run -n 4 -- $(BENCHDIR)/procs/tcpbench -only '$(ROUNDS_ONLY)' -o $$d/shm_procs.out || exit 1; \
			if [ -n "$(ROUNDS_NOREC)" ]; then \
				XPU_FLIGHT_SIZE=0 ./bin/xpu run -n 4 -- $(BENCHDIR)/procs/tcpbench -only '$(ROUNDS_ONLY)' -o $$d/shm_procs.out || exit 1; \
			fi; \
			if [ -n "$(ROUNDS_BIND)" ]; then \
				$(MPIRUN_SHM) --bind-to core:overload-allowed -np 4 $(BENCHDIR)/mpi_shm_ref vader-bound >> $$d/mpi_shm_ref.out || exit 1; \
				./bin/xpu run --bind -n 4 -- $(BENCHDIR)/procs/tcpbench -label bound -only '$(ROUNDS_ONLY)' -o $$d/shm_procs.out || exit 1; \
			fi; \
		fi; \
	done
	./bin/xpu bench rounds $(BENCHDIR)/rounds-shm

bench: xpu refs refs-mpi refs-tcp refs-shm sweep
	./bin/xpu bench --ref $(BENCHDIR)

# Size sweeps, OSU-style (docs/results/sweep.md): every communicator
# available here at 2 and 4 ranks, and the host transfer path, from 8 B to
# 64 MiB, beside Open MPI's curves measured in the same run. The tables,
# the JSON document (for xpu bench compare) and the charts (PNG and SVG)
# land in $(SWEEPDIR).
SWEEPDIR ?= docs/results/sweep

sweep: xpu refs-mpi
	@mkdir -p $(SWEEPDIR)
	./bin/xpu bench sweep --ref $(BENCHDIR) -n 2,4 -o $(SWEEPDIR)/sweep.json --plot $(SWEEPDIR) > $(SWEEPDIR)/tables.txt
	@cat $(SWEEPDIR)/tables.txt

# The MPI backend against the same operations in C on the same MPI, in one
# mpirun (docs/results/mpi.md). --bind-to none: bound to one core (Open
# MPI's default for 2 ranks) Go runs with GOMAXPROCS=1, which doubles the
# latency of small messages; unbound, each rank sees every core.
bench-mpi: setup-bench
	@bash scripts/setup-mpi.sh
	@mkdir -p $(BENCHDIR)/procs
	$(GO) build -tags mpi -o $(BENCHDIR)/procs/mpibench ./internal/tooling/mpibench
	mpirun --allow-run-as-root --oversubscribe -np 2 --bind-to none $(BENCHDIR)/procs/mpibench

# Every fuzz target of the module in turn, FUZZTIME each (default 30s):
# scripts/fuzz.sh says which settings it reads (FUZZ, FUZZKEEP, ...).
fuzz: setup-demo
	@GO=$(GO) bash scripts/fuzz.sh

# The chaos run (docs/results/chaos.md): CHAOS_N repetitions (default 100) of
# a 4-rank job struck by a killed, frozen or cut rank or a killed launcher;
# it prints hangs, wrong results, orphans and leftovers, and fails on any.
# Not part of make test, which runs a short version (go test ./internal/tooling/chaos).
chaos: setup-chaos
	@GO=$(GO) bash scripts/chaos.sh

# The rdma backend against perftest in one boot of the soft-RoCE guest of
# internal/tooling/rdmavm (docs/results/rdma.md): 5 rounds of perftest's
# references and the Go benchmarks, medians and ratios. Not part of make
# test, which runs no benchmark.
bench-rdma: setup-rdma
	XPU_RDMA_BENCH=1 $(GO) test -count=1 -run '^TestGuest(Procs)?Bench$$' -v -timeout 60m ./backends/rdma/
