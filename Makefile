# opvm — one top-level Makefile.
#
#   make                 build build/opvm and the per-folder libraries
#   make check           -Werror build, unit tests, integration tests
#   make check SAN=address,undefined
#   make check-disk      the Debian disk guest's tests (builds it: make images-disk)
#   make check-kernels   introspection on Debian 11's and 13's kernels (downloads them)
#   make bench           benchmarks, one "name: value unit" line each
#   make bench-check     the deterministic benchmarks; fails when a figure misses its target
#   make soak            30 minutes of hostile churn, RSS must stay flat
#   make fuzz            libFuzzer targets, long runs (FUZZ_RUNS=...)
#   make images          bootable test guests (images/)
#   make images-disk     a Debian 12 disk guest with the guest package (images/)
#   make demo            build, make the test image, profile a workload, report
#   make install PREFIX=/usr/local
#   V=1                  verbose
#
# Sources are picked up by folder: lib/*.c, host/*/*.c (host's rooms: cli,
# collect, hoststats, report), vmm/*.c and vmm/*/*.c (its rooms by mechanism), symbols/*.c, events/*.c each become a static
# library; host/cli/opvm.c is the CLI's main(); every
# tests/unit/test-*.c is one cmocka binary linked against all libraries;
# every tests/bench/bench-*.c is one benchmark; every tests/tools/*.c is a
# program for the integration tests; every tests/fuzz/fuzz-*.c is
# one libFuzzer target.  Adding a file needs no Makefile edit.

.DEFAULT_GOAL := all
BUILD   ?= build
PREFIX  ?= /usr/local
CC      ?= cc
SAN     ?=
V       ?= 0

ifeq ($(V),1)
Q :=
else
Q := @
endif

PKGS := libelf libdw capstone jansson libvirt libvirt-qemu zlib libprotobuf-c libdebuginfod \
	ncursesw libmicrohttpd libbpf liblzma
TEST_PKGS := cmocka

PKG_OK := $(shell pkg-config --exists $(PKGS) $(TEST_PKGS) 2>/dev/null && echo yes)
ifneq ($(PKG_OK),yes)
ifeq ($(filter clean help,$(MAKECMDGOALS)),)
$(info opvm: missing build dependencies (pkg-config cannot find:$(foreach p,$(PKGS) $(TEST_PKGS),$(if $(shell pkg-config --exists $(p) 2>/dev/null && echo y),, $(p)))))
$(error install them with: scripts/install-deps.sh (as root, or through sudo))
endif
endif

PKG_CFLAGS := $(shell pkg-config --cflags $(PKGS) 2>/dev/null)
# libvirt and libdebuginfod are loaded when first used (vmm/libvirt/virt-api.c,
# symbols/symres-root.c), not linked: with them every command's start paid
# ~15 ms of dynamic loading (glib, gnutls, icu, krb5, curl...).
DLOPEN_PKGS := libvirt libvirt-qemu libdebuginfod
PKG_LIBS   := $(shell pkg-config --libs $(filter-out $(DLOPEN_PKGS),$(PKGS)) 2>/dev/null)
TEST_CFLAGS := $(shell pkg-config --cflags $(TEST_PKGS) 2>/dev/null)
TEST_LIBS   := $(shell pkg-config --libs $(TEST_PKGS) 2>/dev/null)

WARN := -Wall -Wextra -Wshadow -Wnull-dereference -Wimplicit-fallthrough \
	-Wno-unused-parameter -Werror
CFLAGS ?= -O2 -g
OPVM_VERSION := $(shell cat VERSION)
ALL_CFLAGS := -std=c11 -D_GNU_SOURCE $(WARN) $(CFLAGS) -I. $(PKG_CFLAGS) \
	-DOPVM_VERSION='"$(OPVM_VERSION)"' \
	-MMD -MP -fno-strict-aliasing
LDLIBS := $(PKG_LIBS) -lpthread -lm

ifneq ($(SAN),)
ALL_CFLAGS += -fsanitize=$(SAN) -fno-omit-frame-pointer -fno-sanitize-recover=all
LDFLAGS += -fsanitize=$(SAN)
# Sanitized objects live apart so a plain build is never mixed with them.
BUILD := $(BUILD)/san
# ASan wraps libtirpc's xdrmem_create() only when libtirpc is there at start:
# a libvirt loaded later crashes in it.  Sanitized builds link libvirt.
LDLIBS += $(shell pkg-config --libs libvirt libvirt-qemu 2>/dev/null)
endif

LIBDIRS := lib host vmm unwind symbols events
define lib_template
$(1)_SRCS := $$(filter-out host/cli/opvm.c,$$(wildcard $(1)/*.c $(1)/*/*.c))
$(1)_OBJS := $$(patsubst %.c,$$(BUILD)/%.o,$$($(1)_SRCS))
# ar keeps members by base name: two rooms' sampler.c would replace each other.
$(1)_DUPS := $$(shell printf '%s\n' $$(notdir $$($(1)_SRCS)) | sort | uniq -d)
$$(if $$($(1)_DUPS),$$(error $(1)/: two sources named $$($(1)_DUPS): the archive keeps one; give each a name of its own))
$$(BUILD)/lib$(1).a: $$($(1)_OBJS)
	@mkdir -p $$(dir $$@)
	$$(if $$(Q),@echo "  AR      $$@")
	$$(Q)rm -f $$@ && ar rcs $$@ $$^
endef
$(foreach d,$(LIBDIRS),$(eval $(call lib_template,$(d))))

# host depends on vmm, symbols and events; everything depends on lib (the
# floor).  Users come before what they use, each library once: nothing below
# host/ calls back up into it (tests/integration/layering.sh).
LIBS := $(BUILD)/libhost.a $(BUILD)/libvmm.a $(BUILD)/libunwind.a \
	$(BUILD)/libsymbols.a $(BUILD)/libevents.a $(BUILD)/liblib.a

PROTO_SRCS := $(wildcard host/report/*.proto)

.PHONY: all check check-unit check-integration check-disk check-kernels bench bench-check fuzz images demo install soak \
	clean kmod guest-deb images-disk man help
all: $(BUILD)/opvm

$(BUILD)/%.o: %.c
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  CC      $<")
	$(Q)$(CC) $(ALL_CFLAGS) -c -o $@ $<

$(BUILD)/opvm: $(BUILD)/host/cli/opvm.o $(LIBS)
	$(if $(Q),@echo "  LD      $@")
	$(Q)$(CC) $(LDFLAGS) -o $@ $^ $(LDLIBS)

# ---- unit tests -----------------------------------------------------------
UNIT_SRCS := $(wildcard tests/unit/test-*.c)
UNIT_BINS := $(patsubst tests/unit/%.c,$(BUILD)/tests/%,$(UNIT_SRCS))

$(BUILD)/tests/test-%: tests/unit/test-%.c $(LIBS)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  TEST    $@")
	$(Q)$(CC) $(ALL_CFLAGS) $(TEST_CFLAGS) $(LDFLAGS) -o $@ $< $(LIBS) \
		$(LDLIBS) $(TEST_LIBS)

# The DWARF unwinder's test and benchmark unwind their own stack through
# libc's qsort: without frame pointers, so only CFI leads back to main.
# private: the libraries they depend on keep their own flags.
$(BUILD)/tests/test-unwind-dwarf $(BUILD)/bench/bench-unwind-dwarf: \
	private ALL_CFLAGS += -fomit-frame-pointer

# ---- benchmarks -----------------------------------------------------------
BENCH_SRCS := $(wildcard tests/bench/bench-*.c)
BENCH_BINS := $(patsubst tests/bench/%.c,$(BUILD)/bench/%,$(BENCH_SRCS))

$(BUILD)/bench/bench-%: tests/bench/bench-%.c $(LIBS)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  BENCH   $@")
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(LIBS) $(LDLIBS)

# ---- test tools (programs the integration tests run) ---------------------
TOOL_SRCS := $(wildcard tests/tools/*.c)
TOOL_BINS := $(patsubst tests/tools/%.c,$(BUILD)/tests/tools/%,$(TOOL_SRCS))

$(BUILD)/tests/tools/%: tests/tools/%.c $(LIBS)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  TOOL    $@")
	$(Q)$(CC) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(LIBS) $(LDLIBS)

# ---- fuzz targets (clang + libFuzzer + ASan, own object tree) --------------
FUZZ_SRCS := $(wildcard tests/fuzz/fuzz-*.c)
FUZZ_BINS := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/%,$(FUZZ_SRCS))
FUZZ_CC   ?= clang
FUZZ_LIB_SRCS := $(foreach d,$(LIBDIRS),$($(d)_SRCS))
# Library objects are instrumented once (fuzzer-no-link) and shared by every
# target, so adding a target costs one compile, not one per library file.
FUZZ_LIB_OBJS := $(patsubst %.c,$(BUILD)/fuzzobj/%.o,$(FUZZ_LIB_SRCS))
FUZZ_SAN := address,undefined
FUZZ_CFLAGS := -std=c11 -D_GNU_SOURCE -g -O1 -I. $(PKG_CFLAGS) \
	-fno-omit-frame-pointer -DOPVM_FUZZING
FUZZ_RUNS ?= 10000000
FUZZ_CHECK_SECONDS ?= 10

# Kept: make would otherwise delete them as intermediates after each link.
.SECONDARY: $(FUZZ_LIB_OBJS)

$(BUILD)/fuzzobj/%.o: %.c
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  FUZZCC  $<")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer-no-link,$(FUZZ_SAN) \
		-MMD -MP -c -o $@ $<

$(BUILD)/fuzz/fuzz-%: tests/fuzz/fuzz-%.c $(FUZZ_LIB_OBJS)
	@mkdir -p $(dir $@)
	$(if $(Q),@echo "  FUZZ    $@")
	$(Q)$(FUZZ_CC) $(FUZZ_CFLAGS) -fsanitize=fuzzer,$(FUZZ_SAN) -o $@ $< \
		$(FUZZ_LIB_OBJS) $(LDLIBS)

# ---- guest side ------------------------------------------------------------
# >>> images (guest-kmod/, images/) ------------------------------------------
images:
	$(Q)$(MAKE) -C images BUILD=$(abspath $(BUILD))/images
kmod:
	$(Q)$(MAKE) -C guest-kmod OUT=$(abspath $(BUILD))/kmod
guest-deb:
	$(Q)$(MAKE) -C guest-kmod OUT=$(abspath $(BUILD))/kmod deb
# A Debian 12 disk guest with systemd and the guest package (images/mkdisk.sh)
images-disk:
	$(Q)$(MAKE) -C images disk DISK_OUT=$(abspath $(BUILD))/images-disk
# <<< images ------------------------------------------------------------------
# >>> kvm synthetic guests (tests/guests/) -----------------------------------
KVM_GUESTS := $(BUILD)/tests/guests/guest.elf $(BUILD)/tests/guests/guest-virtio.elf \
	$(BUILD)/tests/guests/guest-perf.elf $(BUILD)/tests/guests/guest-python.elf \
	$(BUILD)/tests/guests/guest-python-bench.elf \
	$(BUILD)/tests/guests/guest-mb.bin
$(KVM_GUESTS): $(wildcard tests/guests/*.c tests/guests/*.S tests/guests/*.ld) \
		tests/guests/Makefile guest-kmod/opvm_proto.h
	$(Q)$(MAKE) -s -C tests/guests O=$(abspath $(BUILD))/tests/guests
guests: $(KVM_GUESTS)
check check-unit check-integration bench: $(KVM_GUESTS)
.PHONY: guests
# <<< kvm synthetic guests ---------------------------------------------------

# ---- top-level targets -----------------------------------------------------
# The test image first: integration tests that boot it would otherwise say
# SKIP on a fresh checkout until some later test happened to build it.
check: $(BUILD)/opvm $(UNIT_BINS) $(FUZZ_BINS) $(TOOL_BINS) images
	$(Q)BUILD=$(BUILD) FUZZ_SECONDS=$(FUZZ_CHECK_SECONDS) tests/run-tests.sh

# The units that drive the CLI need the binary beside them, or they SKIP.
check-unit: $(BUILD)/opvm $(UNIT_BINS)
	$(Q)BUILD=$(BUILD) tests/run-tests.sh --unit

# The Debian disk guest's tests (tests/integration/disk-guest-*.sh): they
# build it if needed (make images-disk) and boot systemd under TCG.
check-disk: $(BUILD)/opvm $(TOOL_BINS) images
	$(Q)BUILD=$(BUILD) OPVM_DISK_TESTS=1 tests/run-tests.sh --integration disk-guest

# Introspection on other Debian releases' kernels (tests/integration/
# kernels-*.sh): downloads bullseye's 5.10 and trixie's 6.12 once (cached
# under $(BUILD)/kernels) and boots the test image's workloads with each.
check-kernels: $(BUILD)/opvm images
	$(Q)BUILD=$(BUILD) OPVM_KERNEL_TESTS=1 INT_TIMEOUT=$${INT_TIMEOUT:-1800} \
		tests/run-tests.sh --integration kernels-

check-integration: $(BUILD)/opvm $(TOOL_BINS) images
	$(Q)BUILD=$(BUILD) tests/run-tests.sh --integration

bench: $(BUILD)/opvm $(BENCH_BINS)
	$(Q)BUILD=$(BUILD) tests/run-bench.sh

# The deterministic (QEMU -icount) benchmarks only; fails when one of their
# figures misses its target.
bench-check: $(BUILD)/opvm images
	$(Q)BUILD=$(BUILD) tests/run-bench.sh --check

fuzz: $(FUZZ_BINS)
	$(Q)for f in $(FUZZ_BINS); do \
		n=$$(basename $$f); mkdir -p $(BUILD)/fuzz/corpus-$$n; \
		echo "fuzz: $$n, $(FUZZ_RUNS) runs"; \
		$$f -runs=$(FUZZ_RUNS) -print_final_stats=1 \
			$(BUILD)/fuzz/corpus-$$n tests/fuzz/corpus/$${n#fuzz-} \
			|| exit 1; \
	done

# make soak: SOAK_MINUTES (default 30) of hostile churn against a real
# guest; opvm's RSS must stay flat (tests/soak.sh).  Not part of check.
soak: $(BUILD)/opvm
	$(Q)BUILD=$(BUILD) tests/soak.sh

demo: $(BUILD)/opvm images
	$(Q)tests/demo.sh $(BUILD)

man: $(BUILD)/opvm
	$(Q)scripts/mkman.sh $(BUILD)/opvm $(BUILD)/man

install: $(BUILD)/opvm man
	install -d $(DESTDIR)$(PREFIX)/bin $(DESTDIR)$(PREFIX)/share/opvm/events
	install -m 755 $(BUILD)/opvm $(DESTDIR)$(PREFIX)/bin/opvm
	cp -r events/data/. $(DESTDIR)$(PREFIX)/share/opvm/events/
	install -d $(DESTDIR)$(PREFIX)/share/bash-completion/completions
	install -m 644 scripts/opvm-completion.bash \
		$(DESTDIR)$(PREFIX)/share/bash-completion/completions/opvm
	install -d $(DESTDIR)$(PREFIX)/share/man/man1
	install -m 644 $(BUILD)/man/*.1 $(DESTDIR)$(PREFIX)/share/man/man1/

clean:
	rm -rf build
	-$(MAKE) -C guest-kmod clean >/dev/null 2>&1

help:
	@sed -n '2,16p' Makefile

-include $(shell find $(BUILD) -type d -name 'images-disk*' -prune -o -name '*.d' -type f -print 2>/dev/null)
