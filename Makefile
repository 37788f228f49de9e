# Tandem build. `make` builds build/tandemd, build/tandemctl, build/tandem-witness;
# `make test` runs unit and integration tests on the normal build and again on an
# ASan+UBSan build (build/asan/); `make run` starts the demo cluster.

SHELL := /bin/bash
PREFIX ?= /usr/local
CC ?= cc
SAN ?= 0
COV ?= 0
ifeq ($(SAN),1)
B := build/asan
SANFLAGS := -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all
OPT := -O1
else ifeq ($(COV),1)
B := build/cov
SANFLAGS := --coverage -DTANDEM_COVERAGE
OPT := -O0
else
B := build
SANFLAGS :=
OPT := -O2
endif

# -Wno-format-truncation: snprintf truncation into fixed fields is deliberate
# (names are validated to fit before they are copied).
CFLAGS_BASE := -std=gnu11 -g $(OPT) -Wall -Wextra -Werror -Wshadow -Wpointer-arith \
	-Wstrict-prototypes -Wmissing-prototypes \
	-Wno-format-truncation -D_GNU_SOURCE -MMD -MP
override CFLAGS := $(CFLAGS_BASE) $(SANFLAGS) $(EXTRA_CFLAGS)
LDLIBS := -luring -linih -lssl -lcrypto -llz4 -lzstd -pthread
override LDFLAGS := $(SANFLAGS) $(EXTRA_LDFLAGS)

LIB_SRC := $(wildcard src/common/*.c src/ev/*.c src/net/*.c src/bs/*.c src/md/*.c \
	src/bm/*.c src/vol/*.c src/nbd/*.c src/ctl/*.c src/config/*.c src/repl/*.c src/scsi/*.c \
	src/iscsi/*.c src/wit/*.c)
LIB_OBJ := $(LIB_SRC:%.c=$(B)/obj/%.o)
UNIT_SRC := $(wildcard tests/unit/test_*.c)
UNIT_BIN := $(UNIT_SRC:tests/unit/%.c=$(B)/tests/%)

BINS := $(B)/tandemd $(B)/tandemctl $(B)/tandem-witness

# deps-check is order-only for objects: it runs first, even with -j, but never
# forces a rebuild.
.PHONY: coverage all deps deps-check test test-one build-tests unit integration fuzz fuzz-build fuzz-run fuzz-long run install clean bench soak soak-load lint model
all: deps-check $(BINS)

# Installs the Debian packages the build and tests need (only when missing).
deps:
	@bash scripts/deps.sh
deps-check:
	@bash scripts/deps.sh --build

$(B)/obj/%.o: %.c | deps-check
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(B)/libtandem.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(B)/tandemd: $(B)/obj/src/daemon/main.o $(B)/libtandem.a
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@
$(B)/tandemctl: $(B)/obj/cli/tandemctl.o $(B)/libtandem.a
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@
$(B)/tandem-witness: $(B)/obj/witness/tandem-witness.o $(B)/libtandem.a
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -o $@

$(B)/tests/%: $(B)/obj/tests/unit/%.o $(B)/libtandem.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $^ $(LDLIBS) -lcmocka -o $@

# Engine tests drive src/repl and src/iscsi without sockets: the net stub is
# linked before the library, so that no symbol of net.o is taken from it.
ENGINE_UNIT := test_repl_engine test_iscsi_engine
ENGINE_SUPPORT := $(B)/obj/tests/unit/support/net_stub.o
$(ENGINE_UNIT:%=$(B)/tests/%): $(B)/tests/%: $(B)/obj/tests/unit/%.o $(ENGINE_SUPPORT) \
		$(B)/libtandem.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(if $(filter test_repl_engine,$*),$(ALLOC_FAULT_LDFLAGS)) \
		$(filter-out %/alloc_fault.o,$^) $(LDLIBS) -lcmocka -o $@
# test_repl_engine's allocation fault loop: the library's allocations go
# through tests/unit/support/alloc_fault.c.
ALLOC_FAULT_LDFLAGS = -Wl,--wrap=malloc,--wrap=calloc,--wrap=realloc,--wrap=posix_memalign \
	-Wl,--wrap=strdup $(B)/obj/tests/unit/support/alloc_fault.o
$(B)/tests/test_repl_engine: $(B)/obj/tests/unit/support/alloc_fault.o
# test_bs and test_md run allocation fault loops of their own.
ALLOC_UNIT := test_bs test_md
$(ALLOC_UNIT:%=$(B)/tests/%): $(B)/tests/%: $(B)/obj/tests/unit/%.o \
		$(B)/obj/tests/unit/support/alloc_fault.o $(B)/libtandem.a
	@mkdir -p $(dir $@)
	$(CC) $(LDFLAGS) $(ALLOC_FAULT_LDFLAGS) $(filter-out %/alloc_fault.o,$^) $(LDLIBS) \
		-lcmocka -o $@

unit: all $(UNIT_BIN)
	@bash tests/run-unit.sh $(B)

integration: all
	@bash tests/run-integration.sh $(B)

# Binaries and unit tests are built in parallel, then the unit tests, then
# the integration tests (tests/run-integration.sh runs those two at a time:
# TANDEM_TEST_JOBS).
NPROC := $(shell nproc 2>/dev/null || echo 1)
build-tests: all $(UNIT_BIN)
test-one:
	@$(MAKE) --no-print-directory -j$(NPROC) build-tests
	@$(MAKE) --no-print-directory unit
	@$(MAKE) --no-print-directory integration

# Both builds, then every fuzz harness for a bounded time; each part prints its
# own summary line, the last line sums them up.
TEST_FUZZ_SECONDS ?= 10
# Static checks (scripts/lint.sh): format of the changed C lines (LINT_BASE, default
# the commit before HEAD), shellcheck, cppcheck, include layering, banned functions.
lint: deps
	@bash scripts/lint.sh

# The model check runs beside the fuzzers (it prints its lines when it ends):
# neither measures time, and together they fill both cores.
test: deps
	@t0=$$(date +%s); \
	 $(MAKE) --no-print-directory test-one SAN=0 > >(tee build-test-plain.log) 2>&1; a=$$?; \
	 $(MAKE) --no-print-directory test-one SAN=1 > >(tee build-test-asan.log) 2>&1; b=$$?; \
	 bash tests/model/run.sh > build-test-model.log 2>&1 & m=$$!; \
	 { $(MAKE) --no-print-directory -j$(NPROC) fuzz-build && \
	   $(MAKE) --no-print-directory fuzz-run FUZZ_SECONDS=$(TEST_FUZZ_SECONDS); } \
		> >(tee build-test-fuzz.log) 2>&1; c=$$?; \
	 wait $$m; d=$$?; cat build-test-model.log; \
	 TEST_T0=$$t0 bash tests/summary.sh build-test-plain.log build-test-asan.log \
		build-test-fuzz.log build-test-model.log; \
	 test $$a -eq 0 -a $$b -eq 0 -a $$c -eq 0 -a $$d -eq 0

# libFuzzer harnesses (clang); `make fuzz-run FUZZ_SECONDS=N` runs each for N s.
# The library is compiled once with coverage instrumentation (fuzzer-no-link)
# and every harness links against it.
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_BIN := $(FUZZ_SRC:tests/fuzz/%.c=build/fuzz/%)
FUZZ_SECONDS ?= 20
FUZZ_CFLAGS := -std=gnu11 -g -O1 -D_GNU_SOURCE
FUZZ_OBJ := $(LIB_SRC:%.c=build/fuzz/obj/%.o)
build/fuzz/obj/%.o: %.c | deps-check
	@mkdir -p $(dir $@)
	clang $(FUZZ_CFLAGS) -MMD -MP -fsanitize=fuzzer-no-link,address,undefined -c $< -o $@
build/fuzz/libtandem-fuzz.a: $(FUZZ_OBJ)
	@rm -f $@
	ar rcs $@ $^
build/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz.h build/fuzz/libtandem-fuzz.a
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer,address,undefined $< build/fuzz/libtandem-fuzz.a \
		$(LDLIBS) -o $@
# Session harnesses drive a real server through the net stub of the engine
# tests, linked before the library so that no symbol of net.o is taken.
FUZZ_SESSION := build/fuzz/fuzz_nbd_session build/fuzz/fuzz_iscsi_session
FUZZ_STUB := build/fuzz/obj/tests/unit/support/net_stub.o
$(FUZZ_SESSION): build/fuzz/%: tests/fuzz/%.c tests/fuzz/fuzz.h tests/fuzz/fuzz_session.h \
		$(FUZZ_STUB) build/fuzz/libtandem-fuzz.a
	clang $(FUZZ_CFLAGS) -fsanitize=fuzzer,address,undefined $< $(FUZZ_STUB) \
		build/fuzz/libtandem-fuzz.a $(LDLIBS) -o $@
fuzz-build: deps-check $(FUZZ_BIN)
fuzz-run: fuzz-build
	@bash tests/run-fuzz.sh $(FUZZ_SECONDS)
# `make fuzz`, the long run: every harness for FUZZ_LONG_SECONDS (130 s each:
# 14 harnesses, 30.3 CPU-minutes), outside `make test`. fuzz-long is its old
# name.
FUZZ_LONG_SECONDS ?= 130
fuzz fuzz-long: fuzz-build
	@bash tests/run-fuzz.sh $(FUZZ_LONG_SECONDS)

run: all
	@bash scripts/run-demo.sh

# bench/iscsi.sh's load generator; needs libiscsi-dev (scripts/deps.sh --bench), which
# is why `all` does not build it. bench/iscsi.sh runs `make build/iscsi-load` itself.
build/iscsi-load: bench/iscsi-load.c | deps-check
	@mkdir -p build
	$(CC) $(CFLAGS) $(LDFLAGS) $< -liscsi -o $@

# bench/pack.sh's tool: the link's compression (src/repl/repl_pack.h) on a file of data.
build/pack-bench: bench/pack-bench.c build/libtandem.a
	$(CC) $(CFLAGS) $(LDFLAGS) $< build/libtandem.a $(LDLIBS) -o $@

bench: all
	@bash scripts/deps.sh --bench
	@bash bench/pack.sh
	@bash bench/nbd.sh
	@bash bench/repl.sh
	@bash bench/resync.sh
	@bash bench/iscsi.sh
	@bash bench/failover.sh
	@bash bench/host-failure.sh
	@bash bench/seed-wan.sh
	@bash bench/latency-rtt.sh

# Line and branch coverage (gcov) of bs, md, bm, vol and repl: the unit tests
# (with the fault loops) and every integration test on a --coverage build in
# build/cov (COVERAGE_TESTS: only those numbers; about 25 minutes for all).
COVERAGE_TESTS ?=
coverage:
	@$(MAKE) --no-print-directory COV=1 -j$(NPROC) all build-tests
	@find build/cov -name '*.gcda' -delete
	@bash tests/run-unit.sh build/cov
	@bash tests/run-integration.sh build/cov $(COVERAGE_TESTS) || true
	@bash scripts/coverage.sh build/cov src/bs src/md src/bm src/vol src/repl

# Random fault schedules on real clusters with a witness (tests/soak): kills,
# freezes, link cuts, disk errors, slow disks and simulated crashes.
# SOAK_SCHEDULES (default 500), SOAK_JOBS clusters side by side (default 2),
# SOAK_SEED (default: from the clock, printed), SOAK_DISK_FAILURE (default
# mixed: on-disk-failure = serve in the first cluster, handover in the second),
# SOAK_REPLICATION (--replication; default mixed: sync in the first cluster,
# async in the second, whose faults strike while the primary is ahead or
# catching up, and whose promotions are checked for a torn write order).
SOAK_SCHEDULES ?= 500
SOAK_JOBS ?= 2
SOAK_DISK_FAILURE ?= mixed
SOAK_REPLICATION ?= mixed
soak: all
	@python3 tests/soak/witness_soak.py --build $(B) --schedules $(SOAK_SCHEDULES) \
		--jobs $(SOAK_JOBS) --disk-failure $(SOAK_DISK_FAILURE) \
		--replication $(SOAK_REPLICATION) $(if $(SOAK_SEED),--seed $(SOAK_SEED))

# Ten minutes of 4 KiB random writes at full speed, the witness 200 ms away:
# no failover, no lease lost (LOAD_SECONDS to change the length).
soak-load: all
	@TANDEM_BUILD=$(B) bash tests/soak/lease-load.sh

install: all
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/man/man8 \
		$(DESTDIR)$(PREFIX)/lib/systemd/system
	install -m 0755 $(BINS) $(DESTDIR)$(PREFIX)/bin/
	install -m 0644 docs/man/*.8 $(DESTDIR)$(PREFIX)/share/man/man8/
	sed 's#@PREFIX@#$(PREFIX)#g' scripts/tandemd@.service > \
		$(DESTDIR)$(PREFIX)/lib/systemd/system/tandemd@.service
	sed 's#@PREFIX@#$(PREFIX)#g' scripts/tandem-witness.service > \
		$(DESTDIR)$(PREFIX)/lib/systemd/system/tandem-witness.service

# The Promela models of the witness protocol and the async stream
# (docs/model/), checked with spin, and the seeded mutants they must reject.
model: deps
	@bash tests/model/run.sh --full

clean:
	rm -rf build build-test-*.log

-include $(LIB_OBJ:.o=.d) $(wildcard $(B)/obj/*/*.d $(B)/obj/*/*/*.d $(B)/obj/*/*/*/*.d \
	build/fuzz/obj/*/*/*.d)
