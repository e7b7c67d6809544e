# sage-sandbox: run SageMath code in a rootless Podman sandbox.
PREFIX ?= /usr/local
BINDIR ?= $(PREFIX)/bin
MANDIR ?= $(PREFIX)/share/man
DATADIR ?= $(PREFIX)/share
USERUNITDIR ?= $(PREFIX)/lib/systemd/user
CC ?= cc
CFLAGS ?= -O2 -g
SCDOC ?= scdoc
BATS ?= bats
PYTHON ?= python3
CLANG ?= clang

# The project's own flags come first and always: a user's CFLAGS, CPPFLAGS
# or LDFLAGS (make CFLAGS=-O3) add to them and never drop the standard or
# the warnings. jansson parses every JSON that comes from outside (MCP
# clients, job lines, the launcher's end frames); nettle hashes the files a
# run brings back (sha256).
WARNINGS = -Wall -Wextra -Wshadow -Wno-unused-parameter
ALL_CFLAGS = -std=c11 $(WARNINGS) $(CFLAGS)
ALL_CPPFLAGS = -D_GNU_SOURCE -I. $(CPPFLAGS)
LIBS = -ljansson -lnettle -lm $(LDLIBS)

# One concern a file (each opens with the line that says which).
SOURCES = frames.c loop.c process.c buffer.c error.c signals.c settings.c podman.c cache.c rootless.c host.c \
	image.c sandbox.c runner.c oneshot.c result.c terminal.c memwatch.c cpugroup.c json.c selftest.c \
	mcp.c embedded.c infiles.c outfiles.c names.c sniff.c base64.c jobs.c batch.c status.c \
	rundir.c request.c buildid.c client.c server.c uidclaim.c
CORE_OBJECTS = $(SOURCES:.c=.o)
OBJECTS = sage-sandbox.o $(CORE_OBJECTS)
HEADERS = $(SOURCES:.c=.h)
# Compiled in: what runs is what was tested, and no file can go missing.
EMBEDDED = seccomp.json launcher-bundle.py checks.py mcp-tools.json
LAUNCHER = $(wildcard launcher/*.py)
MANPAGES = man/sage-sandbox.1 man/sage-sandbox.5 man/sage-sandbox-mcp.7
UNIT_TESTS = tests/unit tests/unit-loop tests/unit-sandbox tests/unit-memwatch
FUZZ_TARGETS = fuzz-frames fuzz-jobs fuzz-jsonrpc fuzz-settings fuzz-request
FUZZ_SECONDS ?= 600

all: sage-sandbox $(MANPAGES)

# --build-id: the server serves only clients of its own build (buildid.c).
sage-sandbox: $(OBJECTS)
	$(CC) $(ALL_CFLAGS) -Wl,--build-id=sha1 $(LDFLAGS) -o $@ $(OBJECTS) $(LIBS)

%.o: %.c $(HEADERS)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -c -o $@ $<

# The launcher's modules, joined into the one program podman is given.
launcher-bundle.py: $(LAUNCHER)
	$(PYTHON) launcher/bundle.py $(LAUNCHER) > $@.tmp && mv -f $@.tmp $@

# Each file a C string. Written to a temporary file and renamed: a failing
# step never leaves a partial embedded.c that make would take for up to date.
embedded.c: $(EMBEDDED)
	for f in $(EMBEDDED); do \
		printf 'const char embedded_%s[] =\n' "$$(printf %s "$$f" | tr .- __)"; \
		sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' -e 's/?/\\?/g' -e 's/^/\t"/' -e 's/$$/\\n"/' "$$f" || exit 1; \
		printf '\t"";\n'; \
	done > $@.tmp && mv -f $@.tmp $@

man/%: man/%.scd
	$(SCDOC) < $< > $@

# ---- tests -----------------------------------------------------------------

# The C units (pure helpers; the loop and processes on /bin/sh children;
# the sandbox and the runner on tests/fake-podman, a Python podman),
# the launcher's modules without Sage, the seccomp profile regenerated:
# no podman, no image, under a minute.
tests/%: tests/%.c $(CORE_OBJECTS) $(HEADERS)
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) $(LDFLAGS) -o $@ $< $(CORE_OBJECTS) $(LIBS)

check-unit: sage-sandbox $(UNIT_TESTS)
	./tests/unit
	./tests/unit-loop
	./tests/unit-sandbox
	./tests/unit-memwatch
	./tests/unit-cli.sh
	$(PYTHON) -m unittest discover -s tests/launcher -t . -q
	$(PYTHON) tests/unit-checks.py
	./tests/seccomp-regenerates.sh

# Everything: the units, then the real sage-sandbox against the real image
# under rootless podman, as the unprivileged account (./setup.sh check).
# The front ends' tests (FRONT_END_TESTS: the event loop's users) run once,
# against the sanitizer build (tests/sanitize.sh), the rest against the
# plain one, which meets the front ends' in CI's core passes (under podman
# 5, and on the other image); then each fuzz target for CHECK_FUZZ_SECONDS.
CHECK_FUZZ_SECONDS = 10
FRONT_END_TESTS = tests/070-core.bats tests/090-mcp.bats tests/130-batch.bats \
	tests/150-reuse.bats tests/160-serve.bats
check: check-unit lmstudio/node_modules
	$(BATS) --timing $(filter-out $(FRONT_END_TESTS),$(sort $(wildcard tests/*.bats)))
	tests/sanitize.sh $(FRONT_END_TESTS)
	node --test tests/mcp-sdk.test.mjs
	cd lmstudio && npm test
	$(MAKE) fuzz FUZZ_SECONDS=$(CHECK_FUZZ_SECONDS)

# The LM Studio plugin's dependencies, exactly as locked.
lmstudio/node_modules: lmstudio/package.json lmstudio/package-lock.json
	cd lmstudio && npm ci --no-audit --no-fund
	touch $@

# The suite's core, which runs on the other image too (./setup.sh core
# --sage 9.5, in CI): self-test, the Sage corpus and its fidelity, shown
# output, batch, sessions through MCP, the server, the reuse probes and
# warm calls against cold runs. SAGE_SANDBOX_IMAGE names the image. Tests
# tagged any-sage are left out: what they prove is the host side's (signals,
# deadlines, the watchdog, resuming, the server's protocol), the same
# whichever Sage the image holds, and make check ran them.
CORE_TESTS = tests/040-sage.bats tests/045-fidelity.bats tests/090-mcp.bats \
	tests/130-batch.bats tests/150-reuse.bats tests/160-serve.bats tests/170-display.bats \
	tests/180-warm.bats
check-core: sage-sandbox
	$(BATS) --timing -f 'verifies every property' tests/050-status.bats
	$(BATS) --timing --filter-tags '!any-sage' $(CORE_TESTS)

# ---- sanitizers and fuzzing -------------------------------------------------

# sage-sandbox built with AddressSanitizer and UndefinedBehaviorSanitizer,
# in build-sanitize/: make check runs the front ends' tests against it
# (tests/sanitize.sh). Any finding aborts the process.
SANITIZE = -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer \
	-DLOOP_STRICT
sanitize: build-sanitize/sage-sandbox

build-sanitize/%.o: %.c $(HEADERS)
	@mkdir -p build-sanitize
	$(CC) $(ALL_CPPFLAGS) $(ALL_CFLAGS) -O1 -g $(SANITIZE) -c -o $@ $<

build-sanitize/sage-sandbox: $(addprefix build-sanitize/,$(OBJECTS))
	$(CC) $(ALL_CFLAGS) $(SANITIZE) -Wl,--build-id=sha1 $(LDFLAGS) -o $@ $^ $(LIBS)

# libFuzzer targets (clang) on the parsers that take untrusted bytes, each
# started from its seed corpus in tests/fuzz/corpus/. make fuzz runs each
# for FUZZ_SECONDS; ./setup.sh check runs them for a fixed short while.
# Frames are at most 64 bytes there: its inputs (4 KiB) then fill the
# frame reader, edge cases and all.
FUZZ_FLAGS = -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -g -O1 \
	-DFRAME_MAX=64
build-fuzz/%.o: %.c $(HEADERS)
	@mkdir -p build-fuzz
	$(CLANG) $(ALL_CPPFLAGS) -std=c11 -Wall -g -O1 -fsanitize=fuzzer-no-link,address,undefined \
		-DFRAME_MAX=64 -DLOOP_STRICT -c -o $@ $<

build-fuzz/fuzz-%: tests/fuzz/fuzz-%.c $(addprefix build-fuzz/,$(CORE_OBJECTS)) $(HEADERS)
	$(CLANG) $(ALL_CPPFLAGS) -std=c11 $(FUZZ_FLAGS) -o $@ $< \
		$(addprefix build-fuzz/,$(CORE_OBJECTS)) $(LIBS)

fuzz-build: $(addprefix build-fuzz/,$(FUZZ_TARGETS))

fuzz: fuzz-build
	tests/fuzz/run.sh $(FUZZ_SECONDS) $(FUZZ_TARGETS)

# ---- install -------------------------------------------------------------------

install: all
	mkdir -p $(DESTDIR)$(BINDIR) $(DESTDIR)$(MANDIR)/man1 $(DESTDIR)$(MANDIR)/man5 \
		$(DESTDIR)$(MANDIR)/man7 $(DESTDIR)$(DATADIR)/sage-sandbox
	cp -f sage-sandbox $(DESTDIR)$(BINDIR)/sage-sandbox
	chmod 755 $(DESTDIR)$(BINDIR)/sage-sandbox
	cp -f man/sage-sandbox.1 $(DESTDIR)$(MANDIR)/man1/sage-sandbox.1
	cp -f man/sage-sandbox.5 $(DESTDIR)$(MANDIR)/man5/sage-sandbox.5
	cp -f man/sage-sandbox-mcp.7 $(DESTDIR)$(MANDIR)/man7/sage-sandbox-mcp.7
	cp -f seccomp.json $(DESTDIR)$(DATADIR)/sage-sandbox/seccomp.json
	mkdir -p $(DESTDIR)$(USERUNITDIR)
	cp -f systemd/sage-sandbox.socket $(DESTDIR)$(USERUNITDIR)/sage-sandbox.socket
	sed 's|@BINDIR@|$(BINDIR)|' systemd/sage-sandbox.service > $(DESTDIR)$(USERUNITDIR)/sage-sandbox.service

# Everything install put in place, its own directory included; the shared
# ones (bin, man1) stay.
uninstall:
	rm -f $(DESTDIR)$(BINDIR)/sage-sandbox $(DESTDIR)$(MANDIR)/man1/sage-sandbox.1 \
		$(DESTDIR)$(MANDIR)/man5/sage-sandbox.5 $(DESTDIR)$(MANDIR)/man7/sage-sandbox-mcp.7 \
		$(DESTDIR)$(DATADIR)/sage-sandbox/seccomp.json \
		$(DESTDIR)$(USERUNITDIR)/sage-sandbox.socket $(DESTDIR)$(USERUNITDIR)/sage-sandbox.service
	if [ -d $(DESTDIR)$(DATADIR)/sage-sandbox ]; then rmdir $(DESTDIR)$(DATADIR)/sage-sandbox; fi

clean:
	rm -f sage-sandbox $(OBJECTS) embedded.c embedded.c.tmp launcher-bundle.py \
		launcher-bundle.py.tmp $(UNIT_TESTS) $(MANPAGES)
	rm -rf build-sanitize build-fuzz lmstudio/dist

.PHONY: all check check-core check-unit sanitize fuzz fuzz-build install uninstall clean
